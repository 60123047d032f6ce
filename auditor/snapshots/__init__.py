"""Content-addressed, immutable, verified data snapshots on any blob store.

The public API (signatures in ``store``, ``reference`` and ``delta``)::

    from auditor.snapshots import create_snapshot, verify_snapshot, materialize, load_manifest

    info = create_snapshot("data/", "s3://bucket/snapshots")      # SnapshotInfo(id="blake3:…", files, bytes, new_objects)
    create_snapshot("data/train.csv", store)                       # one file (kind "file"); materialises as DEST/train.csv
    problems = verify_snapshot(info.id, store)                     # [] or [Problem(kind, path, expected, actual, detail)]
    verify_snapshot(info.id, store, raise_on_problem=True)         # raises SnapshotCorrupt naming every path
    verify_snapshot(info.id, store, path="somewhere/")             # compare a directory with the manifest
    materialize(info.id, store, "work/data")                       # verified tree at DEST, or nothing there
    load_manifest(info.id, store)                                  # Manifest, checked against its id
    build_manifest("data/")                                        # fingerprint only (no store)
    create_reference_snapshot("s3://bucket/prefix", store)         # pin object versions without copying
    create_delta_snapshot("path/to/table", store, version=3)       # pin a Delta table version
    create_iceberg_snapshot("ns.table", store, catalog="prod", snapshot_id=123)   # pin + tag an Iceberg snapshot
    create_dvc_snapshot("repo/", "data", store, rev="v1.2")         # pin DVC-tracked data by its cache objects

A record's data ref for a snapshot is ``DataRef(kind="snapshot", uri=<store URI>, version=<id>)``,
whatever the source: every kind is a manifest in the store, verified and materialised the same way.
"""

from __future__ import annotations

from typing import Any

from auditor.snapshots.hashing import ProgressFn
from auditor.snapshots.manifest import Entry, Manifest, build_manifest, check_snapshot_id
from auditor.snapshots.store import (
    Problem,
    SnapshotInfo,
    create_snapshot,
    load_manifest,
    materialize,
    verify_snapshot,
)

_LAZY = {
    "create_reference_snapshot": "auditor.snapshots.reference",
    "create_delta_snapshot": "auditor.snapshots.delta",
    "create_iceberg_snapshot": "auditor.snapshots.iceberg",
    "create_dvc_snapshot": "auditor.snapshots.dvc",
}

__all__ = [
    "Entry",
    "Manifest",
    "Problem",
    "ProgressFn",
    "SnapshotInfo",
    "build_manifest",
    "check_snapshot_id",
    "create_delta_snapshot",
    "create_dvc_snapshot",
    "create_iceberg_snapshot",
    "create_reference_snapshot",
    "create_snapshot",
    "load_manifest",
    "materialize",
    "verify_snapshot",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'auditor.snapshots' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
