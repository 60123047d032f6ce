"""Issue 27, build 6: an MLflow admin alone cannot roll back the ledger.

MLflow's anchors are params of the audit runs; whoever administers MLflow can purge a run for good
(``mlflow gc``) and then delete the newest ledger entry with nothing left to say so. A second anchor
(by default the write-once folder ``$REPRO_HOME/anchors``; ``REPRO_LEDGER_ANCHOR``: a shared write-once
folder, or an S3 bucket with Object Lock) holds one object per ledger head; ``evidence verify`` checks each
anchor source on its own and says which ones it checked.

Real parts: MLflow on SQLite and its own ``mlflow gc``, the ledger, the CLI, moto's S3 server with
Object Lock. The rebuilds are the fake runner (tests/unit/test_audit_outcomes.py): what is tested is
the evidence, not training.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from auditor.report import ledger
from auditor.steps import AuditOptions
from auditor.storage import open_store
from tests.integration.test_anchor_repair import mlflow_world
from tests.integration.test_insider_tamper import session

pytestmark = pytest.mark.slow


def _locked_bucket(endpoint: str, name: str) -> str:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    client.put_object_lock_configuration(Bucket=name, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}}})
    return f"s3://{name}/anchors"


def _verify(monkeypatch, capsys, settings, *, second: str | None) -> tuple[int, dict]:
    from auditor.cli import main
    from auditor.settings import get_settings

    env = {"MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_REPORTS": settings.reports, "REPRO_HOME": str(settings.home)}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if second:  # a store, or "off"; None: the default folder under REPRO_HOME
        monkeypatch.setenv("REPRO_LEDGER_ANCHOR", second)
    else:
        monkeypatch.delenv("REPRO_LEDGER_ANCHOR", raising=False)
    get_settings.cache_clear()
    with pytest.raises(SystemExit) as done:
        main(["evidence", "verify", "--json"])
    get_settings.cache_clear()
    return done.value.code, json.loads(capsys.readouterr().out)


def test_purging_the_anchor_run_and_rolling_back_the_newest_entry_is_caught_by_the_second_anchor(
        tmp_path, _mlflow_sqlite_template, monkeypatch, capsys):
    """With default settings: the second anchor is the write-once folder under REPRO_HOME, outside MLflow and the
    reports folder; its files are created once and left read-only."""
    from mlflow import MlflowClient

    settings, refs = mlflow_world(tmp_path, _mlflow_sqlite_template)
    second = str(settings.home / "anchors")
    for ref, date in zip(refs, ["2026-10-01", "2026-10-02"], strict=True):
        outcome = session(settings).audit(ref, AuditOptions(date=date, audit_run="cli", runner="process"))
        assert outcome.publish_failure is None, outcome.publish_failure
    written = sorted(p for p in (settings.home / "anchors").rglob("*.json"))
    assert len(written) == 4 and all(p.stat().st_mode & 0o222 == 0 for p in written)  # by location and by id, read-only
    code, doc = _verify(monkeypatch, capsys, settings, second=None)
    assert code == 0 and doc["ok"], doc
    sources = doc["anchor_sources"]
    assert len(sources) == 2 and set(sources.values()) == {2}
    assert any(second in name and "the default" in name for name in sources), sources

    # the MLflow admin: delete and purge the newest audit's run (its anchor), then roll the ledger back by one entry
    client = MlflowClient(tracking_uri=settings.tracking_uri)
    experiment = client.get_experiment_by_name(settings.audit_experiment).experiment_id
    newest = [r for r in client.search_runs([experiment]) if r.data.params.get("repro.ledger.seq") == "1"]
    assert len(newest) == 1
    client.delete_run(newest[0].info.run_id)
    gc = subprocess.run([sys.executable, "-m", "mlflow", "gc", "--backend-store-uri", settings.tracking_uri,
                         "--run-ids", newest[0].info.run_id], capture_output=True, text=True, check=False)
    assert gc.returncode == 0, gc.stderr[-2000:]
    assert [r for r in client.search_runs([experiment], run_view_type=3) if r.info.run_id == newest[0].info.run_id] == []
    store = open_store(settings.reports)
    entry = ledger.entries(store)[1]
    root = store.local_path(ledger.LEDGER_FILE).parent
    for part in ("report", "evidence"):
        (root / entry[part]["key"]).unlink()
    (root / ledger.entry_key(1)).unlink()
    from auditor.report.publish import refresh

    refresh(store)  # ledger.jsonl and index.html rewritten from the one entry left: the folder is consistent again

    # MLflow alone no longer knows: with the second anchor off, the rollback verifies clean (the gap this closes)
    code, doc = _verify(monkeypatch, capsys, settings, second="off")
    assert code == 0 and doc["ok"] and list(doc["anchor_sources"]) == [f"MLflow experiment {settings.audit_experiment!r}"], doc
    # with the default settings: verify fails, naming the second anchor
    code, doc = _verify(monkeypatch, capsys, settings, second=None)
    assert code == 1 and not doc["ok"], doc
    text = "\n".join(p["message"] for p in doc["problems"])
    assert f"entry 1 is anchored in the second anchor {second}" in text and "rolled back" in text, text
    assert len(doc["anchor_sources"]) == 2


def test_an_anchor_that_disagrees_with_the_ledger_stops_the_publish_and_a_rechained_ledger_is_caught(
        tmp_path, _mlflow_sqlite_template, monkeypatch, capsys):
    """The insider with the reports folder re-chains the ledger after an edit: the second anchor (and MLflow's)
    hold the old heads; anchors are found by the ledger's id as well as its location, so moving the folder does not
    lose them."""
    import shutil

    from auditor.report.anchors import ledger_id
    from tests.integration.test_insider_tamper import _rechain

    second = str(tmp_path / "anchors")
    settings, refs = mlflow_world(tmp_path, _mlflow_sqlite_template, REPRO_LEDGER_ANCHOR=second)
    for ref, date in zip(refs, ["2026-10-03", "2026-10-04"], strict=True):
        assert session(settings).audit(ref, AuditOptions(date=date, audit_run="cli", runner="process")).publish_failure is None
    store = open_store(settings.reports)
    lid = ledger_id(store)
    assert lid == ledger.entries(store)[0]["hash"]
    # "migrated": the folder copied to a new location; anchors follow the ledger's id
    moved = tmp_path / "moved-reports"
    shutil.copytree(settings.reports, moved)
    from dataclasses import replace

    code, doc = _verify(monkeypatch, capsys, replace(settings, reports=str(moved)), second=second)
    assert code == 0 and doc["ok"] and set(doc["anchor_sources"].values()) == {2}, doc
    # re-chained in the new location: both anchor sources name the re-chained entry
    entries = ledger.entries(open_store(str(moved)))
    entries[1] = {**entries[1], "verdict": "REPRODUCED_BITWISE", "metrics": {}}
    _rechain(open_store(str(moved)), entries)
    code, doc = _verify(monkeypatch, capsys, replace(settings, reports=str(moved)), second=second)
    text = "\n".join(p["message"] for p in doc["problems"])
    assert code == 1 and "re-chained" in text and "the second anchor" in text and "MLflow run" in text, text


def test_on_an_object_lock_bucket_the_anchors_are_write_once_and_verify_names_the_bucket(
        tmp_path, _mlflow_sqlite_template, monkeypatch, capsys, s3_endpoint):
    import boto3

    second = _locked_bucket(s3_endpoint, "anchors-locked")
    settings, refs = mlflow_world(tmp_path, _mlflow_sqlite_template, REPRO_LEDGER_ANCHOR=second, REPRO_LOCK_RETENTION_DAYS="1")
    outcome = session(settings).audit(refs[0], AuditOptions(date="2026-10-05", audit_run="cli", runner="process"))
    assert outcome.publish_failure is None, outcome.publish_failure
    code, doc = _verify(monkeypatch, capsys, settings, second=second)
    assert code == 0 and doc["ok"], doc
    assert {name: n for name, n in doc["anchor_sources"].items() if "s3://anchors-locked/anchors" in name} != {}
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    versions = client.list_object_versions(Bucket="anchors-locked", Prefix="anchors/")["Versions"]
    assert len(versions) == 2  # one object by location, one by ledger id
    with pytest.raises(client.exceptions.ClientError):  # the lock refuses deleting the anchored version
        client.delete_object(Bucket="anchors-locked", Key=versions[0]["Key"], VersionId=versions[0]["VersionId"])
