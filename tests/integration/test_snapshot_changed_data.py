"""Issue 40, acceptance 4: a snapshot's CSV overwritten after registration; the audit's ``data.changed`` finding
says what changed in it ("columns reordered", "12 rows added", "37 values changed in column x").

The world is the audit's own path, cheaply: a snapshot in a store, a run record pointing at it, the object
overwritten behind the store's back, then the audit's data step (``auditor.rebuild.workspace``) fails verification
and ``_Audit.failed`` turns the failure into the finding that the report's data row shows. Both versions of the
file are at hand on a versioned S3 bucket (its earlier version is the registered bytes); a local store keeps no
earlier version, so its file keeps its hashes. Every other file keeps its hashes in both.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from auditor.errors import SnapshotCorrupt  # noqa: E402
from auditor.lineage.record import DataRef, RunRecord  # noqa: E402
from auditor.rebuild.workspace import _materialise_data  # noqa: E402
from auditor.snapshots import create_snapshot, load_manifest, verify_snapshot  # noqa: E402
from auditor.snapshots.changed import describe_problems  # noqa: E402
from auditor.snapshots.store import object_key  # noqa: E402
from auditor.steps.audit_record import _Audit  # noqa: E402
from auditor.storage import BlobStore, open_store  # noqa: E402
from auditor.storage.local import LocalStore  # noqa: E402

WHAT_CHANGED = "customers.csv changed: columns reordered, 12 rows added, 37 values changed in column x"


def _customers() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"id": range(500), "x": rng.normal(size=500).round(5), "income": rng.integers(1, 9, 500) * 1000,
                         "segment": list("ABCDE") * 100})


def _edited(frame: pd.DataFrame) -> bytes:
    """The CSV as someone rewrote it: columns in another order, 37 values of x moved, 12 rows appended."""
    edited = frame.copy()
    edited.loc[200:236, "x"] += 0.25
    edited = pd.concat([edited, frame.iloc[:12].assign(id=range(500, 512))])
    return edited[["segment", "id", "income", "x"]].to_csv(index=False).encode()


@pytest.fixture()
def dataset(tmp_path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    (root / "customers.csv").write_bytes(_customers().to_csv(index=False).encode())
    (root / "weights.bin").write_bytes(bytes(range(256)) * 8)
    return root


def _overwrite(store: BlobStore, snapshot_id: str, path: str, data: bytes) -> None:
    """Overwrite one stored file in place, as a partition rewritten behind the store's back would be."""
    entry = {e.path: e for e in load_manifest(snapshot_id, store).files}[path]
    key = object_key(entry.hash)
    if isinstance(store, LocalStore):
        store.local_path(key).chmod(0o644)
    store.write(key, data, overwrite=True)


def _audit_after_overwrite(store: BlobStore, dataset: Path, tmp_path: Path) -> _Audit:
    """Register a record on a snapshot of ``dataset``, overwrite two of its files, run the audit's data step."""
    snapshot = create_snapshot(dataset, store).id
    record = RunRecord(data={"customers": DataRef(kind="snapshot", uri=store.uri, version=snapshot)})
    _overwrite(store, snapshot, "customers.csv", _edited(_customers()))
    _overwrite(store, snapshot, "weights.bin", bytes(range(255, -1, -1)) * 8)
    audit = _Audit(session=None, info=None, runner=None, tmp=tmp_path, progress=lambda *_: None, record=record)
    with pytest.raises(SnapshotCorrupt) as caught:
        _materialise_data(record, tmp_path / "workspace-data")  # what the audit's workspace does first
    audit.failed(caught.value)
    return audit


def test_a_changed_csv_on_a_versioned_s3_store_says_what_changed(s3_bucket, dataset, tmp_path):
    store = open_store(f"s3://{s3_bucket}/snapshots")
    audit = _audit_after_overwrite(store, dataset, tmp_path)
    [finding] = audit.findings
    assert (finding.code, finding.path, finding.severity) == ("data.changed", "data.customers", "blocking")
    assert WHAT_CHANGED in finding.message
    assert re.search(r"weights\.bin: changed \(expected blake3:[0-9a-f]{64}, found blake3:[0-9a-f]{64}\)", finding.message)
    assert audit.unrecoverable and "customers.csv" in audit.unrecoverable
    html = _report_html(finding)
    assert WHAT_CHANGED in html and "weights.bin: changed (expected blake3:" in html


def test_a_local_store_keeps_no_earlier_version_so_the_csv_keeps_its_hashes(dataset, tmp_path):
    audit = _audit_after_overwrite(open_store(tmp_path / "store"), dataset, tmp_path)
    [finding] = audit.findings
    assert "rows added" not in finding.message
    assert re.search(r"customers\.csv: changed \(expected blake3:[0-9a-f]{64}, found blake3:", finding.message)


def test_a_folder_compared_with_its_snapshot_says_what_changed_in_it(dataset, tmp_path):
    """``verify_snapshot(path=)``: the store's intact objects are the registered bytes, the folder the current ones."""
    store = open_store(tmp_path / "store")
    snapshot = create_snapshot(dataset, store).id
    (dataset / "customers.csv").write_bytes(_edited(_customers()))
    problems = verify_snapshot(snapshot, store, path=dataset)
    assert [(p.path, p.kind) for p in problems] == [("customers.csv", "changed")]
    assert describe_problems(snapshot, store, problems, path=dataset) == {
        "customers.csv": ["columns reordered", "12 rows added", "37 values changed in column x"]}
    assert describe_problems(snapshot, store, problems) == {}  # without the folder, a local store has no second version


def _report_html(finding) -> str:
    """The report of an audit that failed on this finding, as text: the data row is where the finding shows."""
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.settings import Settings
    from tests.fixtures.judged import judged_audit

    html = render_report(build_evidence(judged_audit(findings=[finding]), settings=Settings()))
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))
