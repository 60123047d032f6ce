"""Acceptance (issue 27, point 2): publishing and anchoring are one unit, on a real MLflow (SQLite).

A refused or interrupted anchor used to leave a half-made audit run that every retry reused as it was:
its ledger entry was never anchored. Now a retry completes the same run (params, metrics, tags,
artifacts, status), names MLflow refuses are made safe up front, and a changed anchor is a finding.
"""

from __future__ import annotations

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
