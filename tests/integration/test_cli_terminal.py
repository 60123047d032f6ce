"""The terminal as good as the page (issue 40, build point 6; acceptance 5).

A red verdict reads as words and rounded figures and ends with one next step; ``--help`` shows placeholders
(``MODEL_REF``), never Python types (``<bool>``, ``{model_ref}``); a table piped with no ``COLUMNS`` fits 80 columns;
a mistyped model name, version or alias gets "did you mean" from the registry (real MLflow on SQLite), at the cost
of a listing only when the lookup failed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.judge.result import MetricResult, TierResult, Verdict
from auditor.lineage.findings import Finding
from tests.fixtures.audits import _band, make_audit
from tests.fixtures.mlflow import seed_version

CLI = [str(Path(sys.executable).with_name("repro-audit"))]
#: a float printed with more than 6 significant digits (``1.7532749938964844``, ``0.740234375``)
UNROUNDED = re.compile(r"(?<![\w.])\d+\.\d{7,}|(?<![\w.])0\.0*[1-9]\d{6,}")
#: a Python type tag or a lower-case placeholder in --help
TYPE_TAG = re.compile(r"<(bool|str|int|float|path|int range|float range|list\[[^\]]*\]|[a-z]+\|[a-z|]+)>")


def red_audit():
    """An audit that was not reproduced, carrying every value the terminal once printed raw: unrounded floats, a
    metric with no band (None), booleans, a summary with a line break, a blocking finding with its fix."""
    audit = make_audit(Verdict.NOT_REPRODUCIBLE)
    metrics = [
        MetricResult(name="log_loss", registered=1.7532749938964844, rebuilt=[1.7498329877853394], band=None, inside=None),
        MetricResult(name="accuracy", registered=0.740234375, rebuilt=[0.703125], band=_band("accuracy", 0.7312, 0.7501),
                     inside=False, distance=0.028075),
    ]
    tiers = {**audit.tiers, "statistical": TierResult(name="statistical", status="fail",
                                                      summary="accuracy outside its band\nlog_loss has no band")}
    findings = [
        Finding(code="traced.env_changed", path="traced.env.LR_SCALE", severity="blocking",
                message="environment variable LR_SCALE was set in training and unset in the rebuild",
                hint="pass it through the config (a config key or key=value) instead of the environment"),
        *audit.findings,
    ]
    return audit.model_copy(update={"metrics": metrics, "tiers": tiers, "findings": findings})


SNAPSHOT = """\
NOT_REPRODUCIBLE  models:/churn/3  (audit audit-0001)
┏━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ tier        ┃ status ┃ summary                   ┃
┡━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ lineage     │ fail   │ 2 blocking findings       │
│ statistical │ fail   │ accuracy outside its band │
│             │        │ log_loss has no band      │
└─────────────┴────────┴───────────────────────────┘
┏━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┓
┃ metric   ┃ registered ┃ rebuilt ┃             band ┃ inside     ┃
┡━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━┩
│ log_loss │      1.753 │    1.75 │          no band │ not judged │
│ accuracy │     0.7402 │  0.7031 │ [0.7312, 0.7501] │ no         │
└──────────┴────────────┴─────────┴──────────────────┴────────────┘
cause: environment variable LR_SCALE was set in training and unset in the rebuild (and 2 more blocking finding(s): see the report)
report: /srv/reports/churn_v3_2026-03-02_abc.html
next: pass it through the config (a config key or key=value) instead of the environment
"""


def test_a_red_verdict_reads_as_words_and_rounded_figures_and_ends_with_a_next_step(capsys, monkeypatch):
    from auditor.cli.verdict import print_audit

    monkeypatch.setenv("COLUMNS", "80")
    print_audit(red_audit(), "/srv/reports/churn_v3_2026-03-02_abc.html")
    out = capsys.readouterr().out
    assert "None" not in out and "True" not in out and "False" not in out and "<U+" not in out
    assert not UNROUNDED.search(out), UNROUNDED.search(out)
    assert out.splitlines()[-1].startswith("next: ")
    assert out == SNAPSHOT, out


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The console script piped, as a script or a CI step runs it: no terminal, no COLUMNS."""
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "REPRO_HOME": str(cwd / "home"), "REPRO_REPORTS": str(cwd / "reports")}
    if "PYTHONPATH" in os.environ:  # a checkout other than the installed one (a worktree)
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(CLI + argv, capture_output=True, text=True, cwd=cwd, env={**base, **env}, timeout=300)


def test_a_real_red_verdict_piped_fits_80_columns_and_ends_with_the_top_findings_fix(sqlite_tracking_uri, tmp_path):
    seed_version(sqlite_tracking_uri, "plain", None)  # no record: NOT_REPRODUCIBLE without a rebuild
    proc = _run(["audit", "models:/plain/1", "--no-publish"], tmp_path, MLFLOW_TRACKING_URI=sqlite_tracking_uri)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("NOT_REPRODUCIBLE  models:/plain/1")
    assert "None" not in proc.stdout and not UNROUNDED.search(proc.stdout)
    table = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80, "\n".join(table)  # was as wide as its longest summary
    assert any(line.startswith("cause: ") and "without a run record" in line for line in lines), proc.stdout
    assert lines[-1] == "next: register versions through auditor.track(...) and auditor.register_model(run, name)"
    narrow = _run(["audit", "models:/plain/1", "--no-publish"], tmp_path, MLFLOW_TRACKING_URI=sqlite_tracking_uri, COLUMNS="60")
    assert max(len(line) for line in narrow.stdout.splitlines() if line[:1] in "┏┃┡│└") <= 60, narrow.stdout


def _help_pages():
    import typer

    from auditor.cli import _load_commands, app

    _load_commands()

    def walk(command, path):
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    return list(walk(typer.main.get_command(app), []))


@pytest.mark.parametrize("path", _help_pages(), ids=lambda p: " ".join(p) or "repro-audit")
def test_help_shows_placeholders_never_python_types(path, capsys):
    from auditor.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0, out
    assert not TYPE_TAG.search(out), f"{' '.join(path)}: {TYPE_TAG.search(out)}\n{out}"
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    assert not re.search(r"\{\w+\}", usage), usage  # typer's {model_ref}
    if path in (["audit"], ["rebuild"], ["calibrate"], ["lineage", "show"]):
        assert usage.rstrip().endswith("[OPTIONS] MODEL_REF"), usage


def test_a_mistyped_name_version_or_alias_gets_did_you_mean_from_the_registry(sqlite_tracking_uri, tmp_path):
    seed_version(sqlite_tracking_uri, "churn-model", None)
    seed_version(sqlite_tracking_uri, "churn-model", None, aliases=["champion"])
    seed_version(sqlite_tracking_uri, "fraud", None)
    env = {"MLFLOW_TRACKING_URI": sqlite_tracking_uri}
    cases = {
        ("lineage", "show", "models:/churn-modle/2"): "did you mean models:/churn-model/2?",
        ("lineage", "show", "models:/Churn-Model@champion"): "did you mean models:/churn-model@champion?",
        ("lineage", "show", "models:/churn-model/9"): "did you mean models:/churn-model/2 or models:/churn-model@champion? "
                                                       "'churn-model' has version(s) 1, 2",
        ("lineage", "show", "models:/churn-model@champoin"): "did you mean models:/churn-model@champion?",
        ("audit", "models:/frau/1", "--no-publish"): "did you mean models:/fraud/1?",
        ("lineage", "show", "models:/zzz/1"): "no registered model is named like 'zzz'; registered: churn-model, fraud",
    }
    for argv, expected in cases.items():
        proc = _run(list(argv), tmp_path, **env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert expected in proc.stderr and "Traceback" not in proc.stderr, f"{argv}: {proc.stderr}"
    as_json = _run(["lineage", "show", "models:/churn-modle/1", "--json"], tmp_path, **env)
    doc = json.loads(as_json.stdout)
    assert doc["exit_code"] == 2 and doc["hint"] == "did you mean models:/churn-model/1?", doc
    assert "models:/churn-modle/1" in doc["error"]


def test_did_you_mean_lists_only_after_a_failed_lookup(sqlite_tracking_uri):
    from mlflow import MlflowClient

    from auditor.cli.suggest import did_you_mean
    from auditor.errors import NotFound
    from auditor.registry.mlflow import MlflowRegistry
    from tests.fixtures.counting import CountingClient

    seed_version(sqlite_tracking_uri, "churn", None)
    client = CountingClient(MlflowClient(tracking_uri=sqlite_tracking_uri))
    registry = MlflowRegistry(sqlite_tracking_uri, client=client)
    with did_you_mean(lambda: registry, "models:/churn/1"):
        registry.resolve("models:/churn/1")
    assert not {"search_registered_models", "search_model_versions"} & set(client.calls), client.calls
    with pytest.raises(NotFound, match=r"did you mean models:/churn/1\?"), did_you_mean(lambda: registry, "models:/chrun/1"):
        registry.resolve("models:/chrun/1")
    assert client.calls["search_registered_models"] == 1 and client.calls["search_model_versions"] == 0, client.calls


def test_a_not_found_about_something_else_passes_through_unchanged(sqlite_tracking_uri):
    from auditor.cli.suggest import did_you_mean
    from auditor.errors import NotFound
    from auditor.registry import open_registry

    seed_version(sqlite_tracking_uri, "churn", None)
    registry = open_registry(sqlite_tracking_uri)
    original = NotFound("run 123 has no artifact model/x")
    with pytest.raises(NotFound) as caught, did_you_mean(lambda: registry, "models:/churn/1"):
        raise original
    assert caught.value is original and caught.value.hint is None
