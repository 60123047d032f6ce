"""Adoption and audit read one lineage rule for a version the SDK recorded (issue 39, build point 6; acceptance 4).

Seen on the demo: ``adopt --assess-only`` called every SDK-recorded version LINEAGE_INSUFFICIENT (it classified
MLflow's metadata, which says nothing of a snapshot id or a clean tree) while their audits said "lineage complete".
Real parts: MLflow on SQLite, versions laid out as ``auditor.track`` + ``auditor.register_model`` leave them
(``seed_version``), a snapshot in a local store, the audit through the one door (``Session.audit``, not published).
"""

from __future__ import annotations

import pytest

from auditor.errors import BadInput
from auditor.lineage.record import DataRef
from auditor.settings import Settings
from auditor.steps import Session
from auditor.steps.options import AuditOptions
from tests.fixtures.mlflow import seed_version
from tests.fixtures.records import complete_record

PINNED, MISSING = "pinned", "missing"


@pytest.fixture()
def world(sqlite_tracking_uri, tmp_path):
    from auditor.snapshots import create_snapshot

    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("x,y\n1,0\n2,1\n")
    store = tmp_path / "snapshots"
    snapshot = create_snapshot(data, store).id
    pinned = DataRef(kind="snapshot", uri=str(store), version=snapshot, split={"test_fraction": 0.2, "seed": 7})
    complete = complete_record(data={"train": pinned})
    blocked = complete_record(data={"train": pinned.model_copy(update={"version": "latest"})})  # a mutable version
    refs = {
        "complete": f"models:/sdk/{seed_version(sqlite_tracking_uri, 'sdk', complete, weights=b'w')}",
        "blocked": f"models:/sdk/{seed_version(sqlite_tracking_uri, 'sdk', blocked, weights=b'w')}",
        "plain": f"models:/plain/{seed_version(sqlite_tracking_uri, 'plain', None)}",
    }
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": sqlite_tracking_uri, "REPRO_HOME": str(tmp_path / "home"),
                                  "REPRO_REPORTS": str(tmp_path / "reports")})
    return Session(settings), refs


def _rows(session: Session) -> dict[str, dict]:
    return {r["ref"]: r for r in session.adopt_all().rows}


def _blocking(findings) -> set[str]:
    return {f["code"] if isinstance(f, dict) else f.code for f in findings
            if (f["severity"] if isinstance(f, dict) else f.severity) == "blocking"}


def test_a_recorded_version_with_a_blocked_lineage_gets_the_audits_verdict_and_findings(world):
    session, refs = world
    row = _rows(session)[refs["blocked"]]
    audited = session.audit(refs["blocked"], AuditOptions(publish=False, date="2026-12-05")).result
    assert row["recorded"] and row["verdict"] == audited.verdict.value == "NOT_REPRODUCIBLE"
    assert audited.tiers["lineage"].status == "fail" and row["lineage"] == "blocked"
    assert _blocking(row["findings"]) == _blocking(audited.findings) == {"data.mutable_version"}
    assert row["classes"]["data"] != PINNED and row["classes"]["code"] == PINNED


def test_a_recorded_version_with_a_complete_lineage_is_never_lineage_insufficient(world):
    session, refs = world
    row = _rows(session)[refs["complete"]]
    audited = session.audit(refs["complete"], AuditOptions(publish=False, date="2026-12-05")).result
    assert audited.tiers["lineage"].status == "pass"  # whatever the rebuild then says, the lineage is complete
    assert row["recorded"] and row["lineage"] == "complete" and row["verdict"] is None
    assert set(row["classes"].values()) == {PINNED}
    assert not _blocking(row["findings"])


def test_a_plain_version_keeps_the_adoption_rules_and_the_one_version_verbs_refuse_a_recorded_one(world):
    session, refs = world
    plain = _rows(session)[refs["plain"]]
    assert not plain["recorded"] and plain["verdict"] == "LINEAGE_INSUFFICIENT" and plain["classes"]["data"] == MISSING
    for verb in (session.adopt, session.adopt_rebuild):
        with pytest.raises(BadInput, match="recorded by the SDK") as refused:
            verb(refs["complete"], publish=False)
        assert f"repro-audit audit {refs['complete']}" in refused.value.hint
    assert session.adopt(refs["plain"], publish=False).result.verdict.value == "LINEAGE_INSUFFICIENT"


def test_the_cli_sweep_exits_by_the_rows_verdicts_and_names_the_recorded_versions(world, tmp_path):
    import json
    import subprocess
    import sys

    session, refs = world
    env = {"MLFLOW_TRACKING_URI": session.settings.tracking_uri, "REPRO_HOME": str(tmp_path / "home"),
           "REPRO_REPORTS": str(tmp_path / "reports"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "auditor", "adopt", "--assess-only", "--json", "--models", "sdk"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr[-2000:]  # the blocked version: NOT_REPRODUCIBLE, as its audit says
    assert {r["ref"]: r["verdict"] for r in out["rows"]} == {refs["complete"]: None, refs["blocked"]: "NOT_REPRODUCIBLE"}
    text = subprocess.run([sys.executable, "-m", "auditor", "adopt", "--assess-only", "--models", "sdk/1"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert text.returncode == 0, text.stdout + text.stderr  # only the complete one: nothing to fail on
    assert f"{refs['complete']}: its record passes the lineage gate" in text.stdout
