"""The snapshot layer works the same on every blob store: memory, local and S3 (moto on loopback)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from auditor.errors import SnapshotCorrupt
from auditor.snapshots import create_snapshot, load_manifest, materialize, verify_snapshot
from auditor.snapshots.store import object_key
from auditor.storage import BlobStore, open_store
from auditor.storage.local import LocalStore
from auditor.storage.memory import MemoryStore


@pytest.fixture(params=["memory", "local", "s3"])
def store(request, tmp_path) -> BlobStore:
    if request.param == "memory":
        return open_store(f"memory://snapshots-{uuid.uuid4().hex}")
    if request.param == "local":
        return open_store(tmp_path / "store")
    return open_store(f"s3://{request.getfixturevalue('s3_bucket')}/snapshots")


def _delete(store: BlobStore, key: str) -> None:
    """Remove one object behind the store's back (the interface has no delete: stores are append-only)."""
    if isinstance(store, MemoryStore):
        store._objects.pop(key)
    elif isinstance(store, LocalStore):
        store.local_path(key).unlink()
    else:
        store.client.delete_object(Bucket=store.bucket, Key=store.object_key(key))


@pytest.fixture()
def source(tmp_path) -> Path:
    root = tmp_path / "source"
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / "nested" / "deeper" / "weights.bin").write_bytes(os.urandom(3 << 20))
    (root / "a.txt").write_text("alpha")
    (root / "same-as-a.txt").write_text("alpha")
    (root / "nothing").write_bytes(b"")
    (root / "hollow").mkdir()
    (root / "alias").symlink_to("nested/deeper/weights.bin")
    return root


def test_a_snapshot_round_trips_through_the_store(store, source, tmp_path):
    info = create_snapshot(source, store)
    assert (info.files, info.new_objects) == (4, 3)
    assert info.bytes == (3 << 20) + 10
    assert verify_snapshot(info.id, store) == []
    dest = materialize(info.id, store, tmp_path / "dest")
    for name in ["a.txt", "same-as-a.txt", "nothing", "nested/deeper/weights.bin"]:
        assert (dest / name).read_bytes() == (source / name).read_bytes()
    assert os.readlink(dest / "alias") == "nested/deeper/weights.bin"
    assert (dest / "hollow").is_dir()
    assert verify_snapshot(info.id, store, path=dest) == []


def test_a_missing_object_is_named_and_materialize_leaves_nothing(store, source, tmp_path):
    info = create_snapshot(source, store)
    entry = {e.path: e for e in load_manifest(info.id, store).entries}["a.txt"]
    _delete(store, object_key(entry.hash))
    problems = verify_snapshot(info.id, store)
    assert sorted((p.path, p.kind) for p in problems) == [("a.txt", "missing"), ("same-as-a.txt", "missing")]
    dest = tmp_path / "dest"
    with pytest.raises(SnapshotCorrupt, match="a.txt"):
        materialize(info.id, store, dest)
    assert not dest.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".dest")] == []


def test_a_changed_object_is_named_with_both_hashes(store, source):
    info = create_snapshot(source, store)
    entry = {e.path: e for e in load_manifest(info.id, store).entries}["nested/deeper/weights.bin"]
    key = object_key(entry.hash)
    if isinstance(store, LocalStore):
        store.local_path(key).chmod(0o644)
    data = bytearray(store.read(key))
    data[12345] ^= 0xFF
    store.write(key, bytes(data), overwrite=True)
    [problem] = verify_snapshot(info.id, store)
    assert (problem.path, problem.kind, problem.expected) == ("nested/deeper/weights.bin", "changed", f"blake3:{entry.hash}")
    assert problem.actual.startswith("blake3:") and problem.actual != problem.expected


def test_a_second_snapshot_stores_only_the_changed_file(store, tmp_path):
    source = tmp_path / "rows"
    source.mkdir()
    for n in range(200):
        (source / f"{n:03d}").write_text(str(n))
    first = create_snapshot(source, store)
    (source / "100").write_text("changed")
    second = create_snapshot(source, store)
    assert (first.new_objects, second.new_objects) == (200, 1)
    assert len(list(store.list("objects/"))) == 201
