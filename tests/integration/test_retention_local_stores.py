"""``retention check`` on a world configured like the demo exits 0 with no phantom row (issue 39, build point 6;
acceptance 4), and the same local stores still fail it once the settings ask for write-once stores.

The world is the embedded default's shape: a snapshot in a local folder store, the reports and ledger in a local
folder, ``REPRO_REQUIRE_OBJECT_LOCK`` unset. A production version recorded by the SDK and audited; a version
registered with plain MLflow (no run record) and audited; a calibration and a key rotation in the ledger. Seen on
the demo: every local store counted as "at risk" and the plain version's record as "lost" (it never had one), so
the check exited 1 on a registry with nothing lost.
"""

from __future__ import annotations

import contextlib
import io
import json
import uuid

import pytest

from auditor.cli import main
from auditor.lineage.record import DataRef
from auditor.registry.memory import MemoryRegistry
from auditor.report import ledger
from auditor.report.calibrations import KIND
from auditor.steps.retention import AT_RISK, LOST, at_risk, declared
from auditor.storage import open_store
from auditor.tags import TAG_AUDIT_AT
from tests.fixtures.records import complete_record

MODEL = "credit-scorer"
WHEN = "2026-12-05T03:17:37Z"


def _audited(store, version: str, verdict: str) -> None:
    key = f"{MODEL}_v{version}_2026-12-05_{version * 12}.html"
    ledger.append(store, {"audit": {"model": MODEL, "version": version, "audit_id": "2026-12-05"}, "date": WHEN,
                          "report": {"key": key}, "verdict": verdict}, identity=key.removesuffix(".html"))


@pytest.fixture()
def demo_like(tmp_path, monkeypatch):
    from auditor.snapshots import create_snapshot

    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("x,y\n1,0\n2,1\n")
    snapshots = tmp_path / "snapshots"
    pinned = DataRef(kind="snapshot", uri=str(snapshots), version=create_snapshot(data, snapshots).id)
    uri = f"memory://retention-demo-like-{uuid.uuid4().hex[:8]}"
    registry = MemoryRegistry.named(uri)
    registry.register_record(MODEL, complete_record(data={"train": pinned}), weights=b"w", aliases=("champion",),
                             tags={TAG_AUDIT_AT: WHEN})
    registry.register_record(MODEL, None, tags={TAG_AUDIT_AT: WHEN})  # plain MLflow: no record, audited all the same
    reports = tmp_path / "reports"
    store = open_store(str(reports))
    ledger.append(store, {"kind": KIND, "calibration": {"model": MODEL, "version": "1", "sha256": "sha256:" + "0" * 64,
                                                         "calibrated_at": WHEN}, "date": WHEN}, identity=f"{MODEL}_v1_calibration")
    ledger.append(store, {"kind": "key_rotation", "date": WHEN}, identity="key-rotation-1")
    _audited(store, "1", "REPRODUCED_BITWISE")
    _audited(store, "2", "NOT_REPRODUCIBLE")
    for name in ("REPRO_REQUIRE_OBJECT_LOCK", "REPRO_SNAPSHOT_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REPRO_HOME", str(tmp_path / "home"))
    yield {"uri": uri, "reports": str(reports), "snapshots": str(snapshots)}
    MemoryRegistry.forget(uri)
    from auditor.settings import get_settings

    get_settings.cache_clear()


def _check(world: dict) -> tuple[int, dict]:
    from auditor.settings import get_settings

    get_settings.cache_clear()  # the command reads the environment of this test, not an earlier one's
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main(["retention", "check", "--json", "--tracking-uri", world["uri"], "--reports", world["reports"]])
    return exited.value.code, json.loads(out.getvalue())


def test_the_demos_local_stores_are_said_not_counted_and_no_row_is_a_phantom(demo_like):
    code, report = _check(demo_like)
    assert code == 0, report
    assert [(r["model"], r["version"]) for r in report["versions"]] == [(MODEL, "1"), (MODEL, "2")]  # production first
    assert all(r["model"] not in (None, "None") and r["version"] not in (None, "None") for r in report["versions"])
    assert not at_risk(report) and report["red"] == []
    items = {(r["version"], i["input"]): i for r in report["versions"] for i in r["items"]}
    train = items[("1", "data.train (directory)")]
    assert train["status"] == AT_RISK and "outside a write-once store" in train["detail"]  # still said, with its fix
    assert "REPRO_REQUIRE_OBJECT_LOCK is false" in train["declared"] and "Object Lock" in train["fix"]
    assert items[("1", "report")]["declared"] and items[("2", "report")]["declared"]
    assert len(declared(report)) == 3


def test_a_version_registered_without_a_record_lost_none(demo_like):
    _, report = _check(demo_like)
    plain = next(r for r in report["versions"] if r["version"] == "2")
    assert all(i["status"] != LOST for i in plain["items"]) and [i["input"] for i in plain["items"]] == ["report"]
    assert "registered without a run record" in plain["note"] and "none can be kept or lost" in plain["note"]


def test_the_same_local_stores_fail_the_check_once_the_settings_ask_for_write_once_stores(demo_like, monkeypatch):
    monkeypatch.setenv("REPRO_REQUIRE_OBJECT_LOCK", "true")
    code, report = _check(demo_like)
    assert code == 1
    assert not declared(report) and len(at_risk(report)) == 3
    assert {i["input"] for i in at_risk(report)} == {"data.train (directory)", "report"}
