"""A Delta table pinned at a version: verifies, then reports the version lost after vacuum (a real deltalake table)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from auditor.cli import main
from auditor.errors import NotFound, SnapshotCorrupt
from auditor.snapshots import load_manifest, materialize, verify_snapshot
from auditor.snapshots.delta import create_delta_snapshot

deltalake = pytest.importorskip("deltalake", reason="the delta extra is not installed")


@pytest.fixture()
def table(tmp_path) -> Path:
    """Version 0: 3 rows in two partitions; version 1: overwritten with other rows."""
    path = tmp_path / "customers"
    first = pd.DataFrame({"id": [1, 2, 3], "region": ["eu", "eu", "us"], "spend": [10.5, 20.0, 7.25]})
    deltalake.write_deltalake(path, first, partition_by=["region"])
    deltalake.write_deltalake(path, pd.DataFrame({"id": [9], "region": ["eu"], "spend": [1.0]}), mode="overwrite")
    return path


def _vacuum(path: Path) -> list[str]:
    return deltalake.DeltaTable(path).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)


def test_a_pinned_version_records_every_data_file_with_its_hash(table, tmp_path):
    info = create_delta_snapshot(table, tmp_path / "store", version=0)
    manifest = load_manifest(info.id, tmp_path / "store")
    assert manifest.kind == "delta" and manifest.origin["version"] == 0
    assert {e.path.split("/")[0] for e in manifest.files} == {"region=eu", "region=us"}
    assert all(e.source["uri"].startswith("file://") and len(e.hash) == 64 for e in manifest.files)
    assert info.new_objects == 0  # by reference: only the manifest is stored


def test_the_pinned_version_verifies_and_materialises_as_its_own_rows(table, tmp_path):
    store = tmp_path / "store"
    info = create_delta_snapshot(table, store, version=0)
    assert verify_snapshot(info.id, store) == []
    dest = materialize(info.id, store, tmp_path / "dest")
    rows = pd.read_parquet(dest / "region=eu").sort_values("id")
    assert rows["id"].tolist() == [1, 2]


def test_after_vacuum_the_version_still_opens_but_the_snapshot_is_reported_lost(capsys, table, tmp_path):
    store = tmp_path / "store"
    info = create_delta_snapshot(table, store, version=0)
    assert _vacuum(table)  # removes version 0's files
    deltalake.DeltaTable(table, version=0)  # the trap: it still opens
    problems = verify_snapshot(info.id, store)
    assert problems and {p.kind for p in problems} == {"lost"}
    assert {p.path for p in problems} == {e.path for e in load_manifest(info.id, store).files}
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "verify", info.id, "--store", str(store)])
    assert exited.value.code == 1 and "lost" in capsys.readouterr().err
    dest = tmp_path / "dest"
    with pytest.raises(SnapshotCorrupt, match="lost"):
        materialize(info.id, store, dest)
    assert not dest.exists()


def test_a_flipped_byte_in_a_data_file_is_reported_changed(table, tmp_path):
    store = tmp_path / "store"
    info = create_delta_snapshot(table, store)  # latest version: one file
    [entry] = load_manifest(info.id, store).files
    data_file = table / entry.path
    data = bytearray(data_file.read_bytes())
    data[len(data) // 2] ^= 0x10
    data_file.write_bytes(bytes(data))
    [problem] = verify_snapshot(info.id, store)
    assert (problem.path, problem.kind) == (entry.path, "changed")


def test_pinning_a_version_that_is_already_vacuumed_is_refused(table, tmp_path):
    _vacuum(table)
    with pytest.raises(NotFound, match="incomplete"):
        create_delta_snapshot(table, tmp_path / "store", version=0)


def test_the_cli_pins_a_delta_version(capsys, table, tmp_path):
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "create", str(table), "--delta", "--table-version", "0", "--store", str(tmp_path / "s")])
    assert exited.value.code == 0
    snapshot = capsys.readouterr().out.strip()
    assert load_manifest(snapshot, tmp_path / "s").origin["version"] == 0


def test_a_delta_table_on_s3_is_pinned_and_reported_lost_when_its_file_goes(s3_bucket, s3_endpoint, tmp_path):
    import boto3

    writer = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    deltalake.write_deltalake(f"s3://{s3_bucket}/events", pd.DataFrame({"n": [1, 2, 3]}), storage_options=writer)
    store = tmp_path / "store"
    info = create_delta_snapshot(f"s3://{s3_bucket}/events", store)  # endpoint taken from AWS_ENDPOINT_URL
    [entry] = load_manifest(info.id, store).files
    assert entry.source["uri"] == f"s3://{s3_bucket}/events/{entry.path}"
    assert verify_snapshot(info.id, store) == []
    boto3.client("s3").delete_object(Bucket=s3_bucket, Key=f"events/{entry.path}")
    [problem] = verify_snapshot(info.id, store)
    assert (problem.path, problem.kind) == (entry.path, "lost")
