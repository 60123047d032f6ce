"""The layout every kind of snapshot writes into a blob store, and the records snapshot operations return.

    objects/<hex[:2]>/<hex[2:]>   file contents keyed by BLAKE3, shared by every snapshot in the store
    manifests/<hex>.json          the canonical manifest whose BLAKE3 is <hex> (the id is "blake3:<hex>")

It sits below ``store`` (directory snapshots: create, verify, materialise) and
``reference``/``delta`` (snapshots by reference), which all write manifests the
same way, so none of them imports another to reach it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from auditor.errors import ObjectConflict
from auditor.snapshots.manifest import Manifest, check_snapshot_id
from auditor.storage import BlobStore, open_store

OBJECTS = "objects/"
MANIFESTS = "manifests/"

StoreLike = BlobStore | str | Path


def object_key(digest: str) -> str:
    """The store key of the object whose BLAKE3 hex digest is ``digest``."""
    return f"{OBJECTS}{digest[:2]}/{digest[2:]}"


def manifest_key(snapshot_id: str) -> str:
    """The store key of a snapshot's manifest."""
    return f"{MANIFESTS}{check_snapshot_id(snapshot_id).split(':', 1)[1]}.json"


def as_store(store: StoreLike) -> BlobStore:
    """A ``BlobStore`` as given, or the one a URI or path names."""
    return store if isinstance(store, BlobStore) else open_store(store)


@dataclass(frozen=True)
class SnapshotInfo:
    """What ``create_snapshot`` made: its id, size, and how many objects the store had to take."""

    id: str
    files: int
    bytes: int
    new_objects: int
    kind: str = "directory"
    store: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Problem:
    """One verification failure: ``kind`` is missing, extra, changed, truncated, lost, manifest, or unguarded
    (an Iceberg snapshot whose retention tag is gone: its bytes are fine, but nothing stops an expiry)."""

    kind: str
    path: str
    expected: str | None = None
    actual: str | None = None
    detail: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: {self.kind}"
        if self.expected is not None or self.actual is not None:
            text += f" (expected {self.expected or 'nothing'}, found {self.actual or 'nothing'})"
        return f"{text}; {self.detail}" if self.detail else text

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def put_manifest(manifest: Manifest, store: StoreLike) -> str:
    """Store ``manifest`` (conditional create) and return its id; its objects must be stored already."""
    blob = as_store(store)
    data = manifest.to_bytes()
    snapshot_id = manifest.id
    key = manifest_key(snapshot_id)
    if not blob.write(key, data) and blob.read(key) != data:
        raise ObjectConflict(
            f"{key} in {blob.uri} already exists with other bytes",
            hint=f"run `repro-audit snapshot verify {snapshot_id}`: the stored manifest was altered",
        )
    return snapshot_id


__all__ = [
    "MANIFESTS",
    "OBJECTS",
    "Problem",
    "SnapshotInfo",
    "StoreLike",
    "as_store",
    "manifest_key",
    "object_key",
    "put_manifest",
]
