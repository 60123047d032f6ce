"""Issue 39, acceptance 3: a pickle registered under a flavour's name is NOT_REPRODUCIBLE naming the format.

One world for the module (MLflow on SQLite, the default snapshot store, a git repository holding
``examples/tabular``): a tiny model is trained by the example script through the SDK and registered, then an
insider replaces the registered artifact in the run's artifact folder with a pickle under the flavour's own file
name, whose payload would create a marker file when unpickled. ``repro-audit audit`` must exit 1 with
NOT_REPRODUCIBLE and "unsafe format: pickle" (never ERROR, which the nightly retries every night), and the payload
must never run: not in the auditor, not in a rebuild.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

pytest.importorskip("skops")
pytest.importorskip("lightgbm")

from auditor.tags import RECORD_ARTIFACT  # noqa: E402
from auditor.uris import run_artifact_path  # noqa: E402
from tests.fixtures.gitrepo import init_repo  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tabular"


class Payload:
    """Unpickling it runs ``touch MARKER``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plain(marker: Path) -> bytes:
    return pickle.dumps({"model": Payload(marker)}, protocol=4)  # what pickle.dump / joblib.dump write


def compressed(marker: Path) -> bytes:
    return zlib.compress(pickle.dumps(Payload(marker), protocol=2))  # as joblib.dump(..., compress=3) writes it


#: variant -> (train.py overrides, the flavour's file name as the record names it, the pickle put there); the run keeps
#: the file as model/model.safetensors and the audit downloads it under the flavour's name: three names in all
CASES = {
    "scorecard": (["model=scorecard"], "model.skops", plain),
    "lightgbm": (["model=lightgbm", "n_estimators=3"], "model.lightgbm.txt", compressed),
}


class World:
    """The project and its registry; each variant is trained and registered on first use."""

    def __init__(self, root: Path) -> None:
        from auditor.demo import base_env

        files = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
        self.root = root
        self.project = init_repo(root / "project", {**files, ".gitignore": ".repro/\nmlruns/\n__pycache__/\n"})
        self.env = {**os.environ, **base_env(root)}
        self.env.pop("REPRO_TORCH_THREADS", None)

    def registered(self, key: str) -> tuple[str, Path]:
        """Train ``key`` and register it: (its model ref, its artifact file in the run's artifact folder)."""
        from mlflow import MlflowClient

        import auditor

        done = subprocess.run([sys.executable, "train.py", *CASES[key][0]], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        uri = self.env["MLFLOW_TRACKING_URI"]
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("tabular")
        run = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)[0]
        version = auditor.register_model(run.info.run_id, f"pickled-{key}", tracking_uri=uri)
        folder = Path(client.get_run(run.info.run_id).info.artifact_uri.removeprefix("file://"))
        record = json.loads((folder / RECORD_ARTIFACT).read_text())
        (artifact,) = record["outputs"]["artifacts"]
        assert artifact["name"] == CASES[key][1], artifact  # the flavour's file, kept in the run where the record says
        return f"models:/pickled-{key}/{version}", folder / run_artifact_path(artifact["uri"])


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("pickle-world"))


@pytest.mark.parametrize("key", list(CASES))
def test_a_pickle_registered_under_a_flavours_name_is_not_reproducible_and_never_runs(world, key, tmp_path):
    ref, artifact = world.registered(key)
    marker = tmp_path / "payload-ran"
    artifact.write_bytes(CASES[key][2](marker))  # the insider's swap: the run's artifact, under its own name
    assert not marker.exists()

    done = subprocess.run([sys.executable, "-m", "auditor", "audit", ref, "--date", "2026-12-01", "--json"], cwd=world.root,
                          env=world.env, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]
    printed = json.loads(done.stdout)
    result = printed["result"]
    assert result["verdict"] == "NOT_REPRODUCIBLE", output[-4000:]
    assert "unsafe format: pickle" in result["error"] and CASES[key][1] in result["error"], result["error"]
    assert "run.save_model" in result["error"], result["error"]  # and the fix
    assert not marker.exists(), "the pickle's payload ran"
    assert "unsafe format: pickle" in Path(printed["report"]).read_text(encoding="utf-8")  # the published report says it


def torch_saved(marker: Path) -> bytes:
    torch = pytest.importorskip("torch")
    import io

    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(3), "payload": Payload(marker)}, buffer)  # a zip holding data.pkl
    return buffer.getvalue()


def text_protocol(marker: Path) -> bytes:
    return pickle.dumps(Payload(marker), protocol=0)


@pytest.mark.parametrize(("flavor", "name", "pickled"), [(None, "model.safetensors", torch_saved), ("sklearn", "model.skops", plain),
                                                         ("lightgbm", "model.lightgbm.txt", compressed),
                                                         ("xgboost", "model.xgboost.zip", text_protocol)])
def test_a_pickle_registered_with_a_record_that_vouches_for_it_is_not_reproducible_never_an_error(tmp_path, flavor, name, pickled):
    """The record's sha256 is the pickle's own (registered by another tool, or by an SDK that pickled): artifact
    its sha256 matches, so only the sniff stands between the file and an ERROR the nightly would retry every night;
    artifact recovery fails naming the format.
    The in-memory registry and the fake runner of tests/unit/test_audit_outcomes.py: what is tested is the verdict."""
    import hashlib

    from auditor.lineage.record import Artifact, Outputs
    from auditor.registry.memory import MemoryRegistry
    from auditor.settings import Settings
    from auditor.steps import AuditOptions, Session
    from tests.fixtures.records import complete_record
    from tests.unit.test_audit_outcomes import METRICS, FakeRunner, faithful, fake_prepare

    marker = tmp_path / "payload-ran"
    data = pickled(marker)
    registry = MemoryRegistry.named(f"memory://pickled-{tmp_path.name}")
    record = complete_record(outputs=Outputs(metrics=dict(METRICS), artifacts=[Artifact(
        name=name, uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(data).hexdigest(), size=len(data), flavor=flavor)]))
    info = registry.register_record("m", record, weights=data)
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
                                  "MLFLOW_TRACKING_URI": registry.uri})
    runner = FakeRunner(faithful)
    try:
        result = Session(settings, runner=runner, prepare=fake_prepare).audit(info.ref, AuditOptions(date="2026-12-02", publish=False)).result
    finally:
        MemoryRegistry.forget(registry.uri)
    recovery = result.tiers["artifact_recovery"]  # the record vouches for the bytes; the sniff refuses what they are
    assert recovery.status == "fail" and "unsafe format: pickle" in recovery.summary, recovery
    assert result.verdict.value == "NOT_REPRODUCIBLE", (result.verdict, result.error)
    assert "unsafe format: pickle" in result.error and name in result.error, result.error
    assert runner.specs == [], "the pickle was handed to a rebuild"
    assert not marker.exists()
