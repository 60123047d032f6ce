"""Acceptance (issue 27, point 2): publishing and anchoring are one unit, on a real MLflow (SQLite).

A refused or interrupted anchor used to leave a half-made audit run that every retry reused as it was:
its ledger entry was never anchored. Now a retry completes the same run (params, metrics, tags,
artifacts, status), names MLflow refuses are made safe up front, and a changed anchor is a finding.
"""

from __future__ import annotations

import json
import logging
import re

import pytest

from auditor.errors import Findings
from auditor.registry.mlflow import MlflowRegistry
from auditor.tags import TAG_RUN_IDENTITY

pytestmark = pytest.mark.slow

PARAMS = {"repro.ledger.seq": "3", "repro.ledger.head": "sha256:" + "ab" * 32}


@pytest.fixture
def registry(tmp_path, _mlflow_sqlite_template):
    import shutil

    db = tmp_path / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, db)
    return MlflowRegistry(f"sqlite:///{db}")


def _log(registry, **over):
    args = {"experiment": "audits", "identity": "churn_v1_2026-01-01", "name": "audit churn v1", "params": PARAMS,
            "tags": {"repro.verdict": "REPRODUCED_BITWISE"}, "metrics": {"rebuilt.acc@top1": 0.9, "rebuilt.a//b": 1.0},
            "artifacts": {"report.html": b"<html></html>"}}
    return registry.log_run(**{**args, **over})


def test_a_half_made_anchor_run_is_completed_by_the_retry(registry):
    # the state a refused anchor left: the run exists with its identity, nothing else, still RUNNING
    experiment = registry.client.create_experiment("audits")
    half = registry.client.create_run(experiment, tags={TAG_RUN_IDENTITY: "churn_v1_2026-01-01"}).info.run_id
    assert _log(registry) == half
    run = registry.client.get_run(half)
    assert {k: run.data.params[k] for k in PARAMS} == PARAMS
    assert run.info.status == "FINISHED"
    assert set(run.data.metrics) == {"rebuilt.acc_top1", "rebuilt.a/b"}  # names MLflow refuses, made safe
    assert [f.path for f in registry.client.list_artifacts(half)] == ["report.html"]
    assert registry.find_runs(experiment="audits", params={"repro.ledger.seq": "3"})[0].run_id == half
    assert _log(registry) == half  # idempotent: nothing logged twice


def test_an_anchor_with_other_values_is_a_finding_not_overwritten(registry):
    _log(registry)
    with pytest.raises(Findings, match="repro.ledger.head"):
        _log(registry, params={**PARAMS, "repro.ledger.head": "sha256:" + "cd" * 32})


# -- end to end: an audit published into a real MLflow that refuses its anchor once ------------------------------------

def mlflow_world(tmp_path, template, **env):
    """A real MLflow (SQLite, copied from the session's template) holding ``versions`` versions of model m, each with
    the same complete record and weights, and audit settings over it (``env`` added). The rebuilds are the fake
    runner of tests/unit/test_audit_outcomes.py: what is tested is publishing and anchoring, not training."""
    import hashlib
    import shutil

    from auditor.lineage.record import Artifact, Outputs
    from auditor.settings import Settings
    from tests.fixtures.mlflow import seed_version
    from tests.fixtures.records import complete_record
    from tests.unit.test_audit_outcomes import METRICS, _weights

    db = tmp_path / "mlflow" / "mlflow.db"
    db.parent.mkdir(parents=True)
    shutil.copyfile(template, db)
    uri = f"sqlite:///{db}"
    weights = _weights()
    record = complete_record(outputs=Outputs(metrics=dict(METRICS), artifacts=[
        Artifact(name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))
    ]))
    versions = [seed_version(uri, "m", record, weights=weights) for _ in range(2)]
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
                                  "MLFLOW_TRACKING_URI": uri, **env})
    return settings, [f"models:/m/{v}" for v in versions]


def test_mlflow_refusing_the_anchor_once_then_a_rerun_completes_it_and_verify_passes(tmp_path, _mlflow_sqlite_template,
                                                                                     capsys, monkeypatch, caplog):
    """Acceptance 3: the audits experiment is deleted (MLflow then refuses every run in it: INVALID_STATE), so the
    report is published and its anchor refused: exit 3 (infrastructure, retry), not 2. Restored, the same audit
    re-run completes the anchor; evidence verify passes; the exit codes are the table's (auditor.errors.EXIT_CODES)."""
    from mlflow import MlflowClient

    from auditor.cli import main
    from auditor.errors import EXIT_CODES, InfrastructureError, Meaning, exit_code
    from auditor.outcomes import Verdict
    from auditor.settings import get_settings
    from auditor.steps import AuditOptions
    from tests.integration.test_insider_tamper import session

    settings, refs = mlflow_world(tmp_path, _mlflow_sqlite_template)
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    experiment = MlflowRegistry(settings.tracking_uri)._experiment(settings.audit_experiment, create=True)  # as publishing makes it
    client.delete_experiment(experiment)
    options = AuditOptions(date="2026-09-01", audit_run="cli", runner="process")
    first = session(settings).audit(refs[0], options)
    assert isinstance(first.publish_failure, InfrastructureError), first.publish_failure
    assert "not anchored in MLflow" in str(first.publish_failure) and "re-run the same audit" in first.publish_failure.hint
    assert exit_code(first.publish_failure) == EXIT_CODES[Meaning.INFRASTRUCTURE] == 3
    for key, value in {"MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_REPORTS": settings.reports,
                       "REPRO_HOME": str(settings.home)}.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    with pytest.raises(SystemExit) as done:
        main(["evidence", "verify", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert done.value.code == EXIT_CODES[Meaning.FINDINGS] == 1
    assert "no anchor outside the reports folder names this ledger" in doc["problems"][0]["message"]

    client.restore_experiment(experiment)
    caplog.clear()  # the first audit's own "publish … to …" is not this one's
    with caplog.at_level(logging.INFO, logger="auditor.steps.publish"):
        again = session(settings).audit(refs[0], options)
    assert again.publish_failure is None and again.skipped  # the stored evidence, finished: not audited twice
    said = [r.getMessage() for r in caplog.records if r.name == "auditor.steps.publish"]
    # issue 40: the second audit of the day says the day's audit is already published, never "publish … to …"
    assert any("is already published in" in line for line in said), said
    assert not any(re.match(r"publish \S+: [A-Z_]+ to ", line) for line in said), said
    assert exit_code(again.result.verdict.value) == EXIT_CODES[Verdict.REPRODUCED_BITWISE.value] == 0
    runs = client.search_runs([experiment])
    assert len(runs) == 1 and runs[0].data.params["repro.ledger.seq"] == "0" and runs[0].info.status == "FINISHED"
    # the audits experiment keeps its artifacts beside the database, never in ./mlruns of the folder that ran first
    assert client.get_experiment(experiment).artifact_location == (tmp_path / "mlflow" / "artifacts").as_uri()
    assert runs[0].info.artifact_uri.startswith((tmp_path / "mlflow" / "artifacts").as_uri())
    with pytest.raises(SystemExit) as done:
        main(["evidence", "verify", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and doc["ok"] and doc["anchors"] == 1, doc
    get_settings.cache_clear()


def test_a_calibration_whose_run_was_refused_after_its_ledger_entry_is_anchored_by_the_next_calibration(
        tmp_path, _mlflow_sqlite_template):
    """The calibration crash window: its evidence and ledger entry are published, then MLflow refuses its run (the
    audits experiment deleted). A new calibration is a new entry, so the next one completes the earlier run first
    (same identity, same params and file); evidence verify then passes, both anchors (MLflow's, the second) whole."""
    from mlflow import MlflowClient

    from auditor.errors import ReproError
    from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor
    from auditor.report.verify import verify
    from auditor.steps import Session
    from auditor.steps.calibrate import log_calibration_run
    from auditor.storage import open_store

    settings, refs = mlflow_world(tmp_path, _mlflow_sqlite_template)
    registry = MlflowRegistry(settings.tracking_uri)
    info = registry.resolve(refs[0])
    experiment = registry._experiment(settings.audit_experiment, create=True)
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    client.delete_experiment(experiment)

    def calibration(at: str) -> Calibration:
        floor = SameSeedFloor(runs=[FloorRun(seed=7, weights_sha256="a")] * 2, bit_identical=True, max_abs=0.0, rel_l2=0.0)
        return Calibration(calibrated_at=at, same_seed=floor, seed_varied=[FloorRun(seed=s) for s in range(3)])

    with pytest.raises(ReproError):
        log_calibration_run(Session(settings, registry=registry), info, calibration("2026-09-01T00:00:00Z"))
    store = open_store(settings.reports)
    assert not verify(store, anchors=Session(settings).ledger_anchors(settings.reports)).ok  # entry 0: no MLflow run

    client.restore_experiment(experiment)
    log_calibration_run(Session(settings, registry=registry), info, calibration("2026-09-02T00:00:00Z"))
    runs = client.search_runs([experiment])
    assert sorted(r.data.params["repro.ledger.seq"] for r in runs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" and r.data.params["repro.reruns"] == "3" for r in runs)
    checked = verify(store, anchors=Session(settings).ledger_anchors(settings.reports))
    assert checked.ok, [str(p) for p in checked.problems]
    assert set(checked.anchor_sources.values()) == {2}
