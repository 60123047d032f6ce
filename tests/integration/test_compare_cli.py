"""``repro-audit compare`` end to end in-process: exit codes per gate, ``--json``, and thresholds MLflow accepts.

Stubbed, and why: the rebuild's runner and workspace are the fakes of tests/unit/test_compare.py (a
per-version quality plus a seed-driven noise), handed in through a stand-in for the public
``auditor.steps.Session`` (the command opens its own session), because this test is about the command,
not about training. The registry is the real in-memory twin, opened from ``MLFLOW_TRACKING_URI``;
calibration, the judge and the reports store are real.
"""

from __future__ import annotations

import hashlib
import importlib
import json

import pytest

import auditor.steps
from auditor.lineage.record import Artifact, Outputs
from auditor.registry.memory import MemoryRegistry
from auditor.settings import get_settings
from tests.fixtures.records import complete_record
from tests.unit.test_compare import QUALITY, SeedRunner, _weights, prepare


@pytest.fixture()
def cli_world(tmp_path, monkeypatch):
    registry = MemoryRegistry.named(f"memory://compare-cli-{tmp_path.name}")
    refs = {}
    for i, variant in enumerate(QUALITY):
        base, weights = complete_record(), _weights(QUALITY[variant])
        record = base.model_copy(update={
            "seeds": base.seeds.model_copy(update={"seed": 100 + i}),
            "outputs": Outputs(metrics={"auc": QUALITY[variant]}, artifacts=[Artifact(
                name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(),
                size=len(weights))])})
        refs[variant] = registry.register_record("m", record, weights=weights).ref
    registry.set_alias("m", "champion", refs["incumbent"].rsplit("/", 1)[1])
    for key, value in {"MLFLOW_TRACKING_URI": registry.uri, "REPRO_HOME": str(tmp_path / "home"),
                       "REPRO_REPORTS": str(tmp_path / "reports")}.items():
        monkeypatch.setenv(key, value)
    real = auditor.steps.Session

    class StandIn(real):
        def __init__(self, settings, **kwargs):
            kwargs.setdefault("runner", SeedRunner())
            kwargs.setdefault("prepare", prepare)
            super().__init__(settings, **kwargs)

    monkeypatch.setattr(auditor.steps, "Session", StandIn)
    get_settings.cache_clear()  # the command resolves the settings once per process: this test's environment
    importlib.import_module("auditor.cli.compare")  # registers the command (until _COMMAND_MODULES lists it)

    yield refs, tmp_path
    MemoryRegistry.forget(registry.uri)
    get_settings.cache_clear()


def _run(capsys, *args: str) -> tuple[int, str]:
    from auditor.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["compare", *args])
    return stopped.value.code, capsys.readouterr().out


@pytest.mark.parametrize(("variant", "code", "words"), [("better", 0, "improvement beyond seed noise"),
                                                        ("twin", 1, "within seed noise"), ("worse", 1, "worse")])
def test_the_exit_code_is_the_gate(cli_world, capsys, variant, code, words):
    refs, _ = cli_world
    got, out = _run(capsys, refs[variant], "models:/m@champion", "--reruns", "5")
    assert got == code, out
    assert f"{refs[variant]} vs {refs['incumbent']}: {words}" in out


def test_json_gives_the_comparison_and_thresholds_mlflow_builds(cli_world, capsys):
    from mlflow.models import MetricThreshold

    refs, tmp = cli_world
    code, out = _run(capsys, refs["better"], "models:/m@champion", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["gate"] == "beyond_noise" and doc["exit_code"] == 0
    assert 0.0 <= doc["metrics"][0]["p_better"] <= 1.0 and doc["metrics"][0]["low"] > 0
    stored = json.loads((tmp / "reports" / doc["published"]["thresholds"].split("/reports/", 1)[1]).read_text())
    assert stored == doc["thresholds"]
    built = {name: MetricThreshold(**kwargs) for name, kwargs in stored.items()}
    assert built["auc"].greater_is_better is True and built["auc"].min_absolute_change > 0


def test_a_malformed_ref_is_a_usage_error(cli_world, capsys):
    code, _ = _run(capsys, "m/2", "models:/m@champion")
    assert code == 2
