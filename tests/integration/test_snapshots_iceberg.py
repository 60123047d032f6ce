"""Iceberg snapshots on a real pyiceberg SQL catalog (SQLite): recorded, verified, guarded, and caught when lost or altered.

``expire_snapshots`` here is pyiceberg's own (``table.maintenance.expire_snapshots()``,
0.10+); it drops snapshots from the metadata and honours tags and branches.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.errors import BadInput, NotFound, SnapshotCorrupt
from auditor.snapshots import load_manifest, materialize, verify_snapshot
from auditor.snapshots.iceberg import create_iceberg_snapshot, guard_tag

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyiceberg", reason="the iceberg extra is not installed")
from pyiceberg.catalog import load_catalog  # noqa: E402


@pytest.fixture()
def catalog(tmp_path):
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/warehouse"}
    cat = load_catalog("audit", **props)
    cat.create_namespace("shop")
    return cat, props


@pytest.fixture()
def table(catalog):
    """Two snapshots: the first holds rows 1-3, the second appends row 4."""
    cat, _ = catalog
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    tbl = cat.create_table("shop.orders", schema=schema)
    tbl.append(pa.table({"id": [1, 2, 3], "region": ["eu", "eu", "us"]}, schema=schema))
    tbl.append(pa.table({"id": [4], "region": ["us"]}, schema=schema))
    return tbl


def _first(tbl) -> int:
    return min(tbl.snapshots(), key=lambda s: s.sequence_number).snapshot_id


def _expire_everything_older_than_now(cat) -> None:
    tbl = cat.load_table("shop.orders")
    tbl.maintenance.expire_snapshots().older_than(datetime.now(UTC) + timedelta(seconds=1)).commit()


def _pin(catalog, tmp_path, snapshot_id, **kw):
    _, props = catalog
    return create_iceberg_snapshot("shop.orders", tmp_path / "store", catalog="audit", catalog_properties=props, snapshot_id=snapshot_id, **kw)


def test_a_snapshot_is_recorded_with_its_data_files_and_verifies(catalog, table, tmp_path):
    first = _first(table)
    info = _pin(catalog, tmp_path, first)
    manifest = load_manifest(info.id, tmp_path / "store")
    assert manifest.kind == "iceberg" and info.new_objects == 0
    assert manifest.origin["table"] == "shop.orders" and manifest.origin["snapshot_id"] == first
    assert len(manifest.files) == 1  # the first snapshot has one data file; the second snapshot's file is not in it
    assert all(e.path.startswith("data/") and e.path.endswith(".parquet") and len(e.hash) == 64 for e in manifest.files)
    assert verify_snapshot(info.id, tmp_path / "store") == []
    dest = materialize(info.id, tmp_path / "store", tmp_path / "dest")
    import pyarrow.parquet as pq

    assert sorted(pq.read_table(dest / "data")["id"].to_pylist()) == [1, 2, 3]  # the pinned rows, not the current ones
    # pinning the same snapshot again is the same snapshot, and the tag is not duplicated or moved
    assert _pin(catalog, tmp_path, first).id == info.id


def test_the_guard_tags_the_snapshot_so_pyicebergs_expire_snapshots_keeps_it(capsys, catalog, table, tmp_path):
    cat, _ = catalog
    first = _first(table)
    info = _pin(catalog, tmp_path, first)
    tbl = cat.load_table("shop.orders")
    assert tbl.metadata.refs[guard_tag(first)].snapshot_id == first
    with pytest.raises(ValueError, match="protected"):
        tbl.maintenance.expire_snapshots().by_id(first).commit()
    _expire_everything_older_than_now(cat)
    assert cat.load_table("shop.orders").metadata.snapshot_by_id(first) is not None  # still there
    assert verify_snapshot(info.id, tmp_path / "store") == []
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "verify", info.id, "--store", str(tmp_path / "store")])
    assert exited.value.code == 0


def test_a_snapshot_expired_behind_the_guards_back_is_reported_lost_naming_table_and_id(capsys, catalog, table, tmp_path):
    cat, _ = catalog
    first = _first(table)
    info = _pin(catalog, tmp_path, first)
    cat.load_table("shop.orders").manage_snapshots().remove_tag(guard_tag(first)).commit()
    unguarded = verify_snapshot(info.id, tmp_path / "store")
    assert [p.kind for p in unguarded] == ["unguarded"] and guard_tag(first) in unguarded[0].detail
    _expire_everything_older_than_now(cat)  # the data files are still on disk: only the metadata forgot them
    problems = verify_snapshot(info.id, tmp_path / "store")
    assert [p.kind for p in problems] == ["lost"]
    assert problems[0].path == f"shop.orders@{first}" and "shop.orders" in problems[0].detail and str(first) in problems[0].detail
    with pytest.raises(SnapshotCorrupt, match=str(first)):
        materialize(info.id, tmp_path / "store", tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "verify", info.id, "--store", str(tmp_path / "store")])
    assert exited.value.code == 1 and f"shop.orders@{first}: lost" in capsys.readouterr().err


def test_a_snapshot_expired_before_the_guard_could_tag_it_is_refused_as_lost(catalog, table, tmp_path):
    cat, _ = catalog
    first = _first(table)
    _expire_everything_older_than_now(cat)
    with pytest.raises(NotFound, match=rf"shop.orders snapshot {first} is no longer in the table"):
        _pin(catalog, tmp_path, first)
    assert guard_tag(first) not in cat.load_table("shop.orders").metadata.refs


def test_a_flipped_byte_in_a_data_file_is_caught(capsys, catalog, table, tmp_path):
    info = _pin(catalog, tmp_path, _first(table))
    entry = load_manifest(info.id, tmp_path / "store").files[0]
    data_file = Path(entry.source["uri"][len("file://") :])
    raw = bytearray(data_file.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data_file.write_bytes(bytes(raw))
    problems = verify_snapshot(info.id, tmp_path / "store")
    assert [(p.kind, p.path) for p in problems] == [("changed", entry.path)]
    with pytest.raises(SnapshotCorrupt, match=entry.path):
        materialize(info.id, tmp_path / "store", tmp_path / "dest")
    # and a file altered before pinning is refused: its size or hash no longer match what Iceberg committed
    data_file.write_bytes(bytes(raw[:-10]))
    with pytest.raises(BadInput, match="Iceberg recorded"):
        _pin(catalog, tmp_path, _first(table))


def test_the_cli_pins_an_iceberg_snapshot_and_no_secret_reaches_the_manifest(capsys, catalog, table, tmp_path, monkeypatch):
    cat, props = catalog
    first = _first(table)
    monkeypatch.setenv("PYICEBERG_CATALOG__AUDIT__S3__SECRET_ACCESS_KEY", "hunter2-secret")
    with pytest.raises(SystemExit) as exited:
        main([
            "snapshot", "create", "shop.orders", "--iceberg", "--catalog", "audit", "--catalog-uri", props["uri"],
            "--warehouse", props["warehouse"], "--snapshot-id", str(first), "--store", str(tmp_path / "store"),
        ])  # fmt: skip
    out = capsys.readouterr()
    assert exited.value.code == 0, out.err
    snapshot = out.out.strip()
    manifest = load_manifest(snapshot, tmp_path / "store")
    assert manifest.origin["catalog_properties"] == props
    assert b"hunter2" not in manifest.to_bytes()


def test_a_password_in_the_catalog_uri_is_not_recorded():
    from auditor.snapshots.iceberg import recorded_properties

    props = recorded_properties({"uri": "postgresql://alice:s3cret@db:5432/cat", "type": "sql", "credential": "tok"})
    assert props == {"uri": "postgresql://alice@db:5432/cat", "type": "sql"}


# -- the same guard for Delta, as far as the format allows -------------------------------------------------------------
def test_the_delta_guard_reads_retention_and_warns_once_the_pinned_version_is_not_the_latest(capsys, tmp_path):
    """Delta has no per-version tag: the guard can only say until when vacuum leaves the pinned files alone."""
    deltalake = pytest.importorskip("deltalake")
    from auditor.snapshots.delta import delta_retention, parse_interval

    path = tmp_path / "delta"
    deltalake.write_deltalake(path, pa.table({"id": [1, 2]}))
    assert delta_retention(path, 0).safe_until is None  # the latest version: nothing of it was removed yet
    deltalake.write_deltalake(path, pa.table({"id": [3]}), mode="overwrite")
    first_after = next(h for h in deltalake.DeltaTable(path).history() if h["version"] == 1)["timestamp"]
    guard = delta_retention(path, 0)
    assert guard.file_retention == timedelta(days=7) and guard.log_retention == timedelta(days=30)  # protocol defaults
    assert guard.safe_until == datetime.fromtimestamp(first_after / 1000, tz=UTC) + timedelta(days=7)
    assert "safe from vacuum only until" in guard.warning()
    assert "may already be vacuumed" in guard.warning(now=guard.safe_until + timedelta(seconds=1))
    deltalake.DeltaTable(path).alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 365 days"})
    assert delta_retention(path, 0).file_retention == timedelta(days=365)
    assert parse_interval("interval 2 hours") == timedelta(hours=2)
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "create", str(path), "--delta", "--table-version", "0", "--store", str(tmp_path / "store")])
    assert exited.value.code == 0 and "Delta cannot protect one version" in capsys.readouterr().err
