"""Delta Lake tables pinned at a version, with the content hash of every data file.

A Delta version still *opens* after ``vacuum`` has deleted its files, and a
flipped byte in a parquet file is read back as wrong data more often than it
raises (FACTS.md). So the snapshot records each data file of the version with
its BLAKE3 hash, and verification re-reads and re-hashes them: a vacuumed
version is reported *lost*, a flipped byte *changed*. Only the manifest goes
into the snapshot store; materialising copies the version's data files
(table-relative paths, readable as a parquet dataset).

    create_delta_snapshot(table_uri, store, *, version=None, storage_options=None, progress=None) -> SnapshotInfo
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from auditor.errors import BadInput, NotFound
from auditor.snapshots.hashing import ProgressFn
from auditor.snapshots.layout import SnapshotInfo, StoreLike, as_store, put_manifest
from auditor.snapshots.manifest import Entry, Manifest, check_entry_path
from auditor.snapshots.reference import hash_sources


def table_root(table_uri: str | Path) -> str:
    """The table's location as sources spell it: ``file:///abs/path`` or ``s3://bucket/prefix``."""
    text = str(table_uri)
    if text.startswith("file://"):
        text = text[len("file://") :]
    if "://" in text:
        return text.rstrip("/")
    return "file://" + os.path.abspath(text)


def _storage_options(root: str, given: Mapping[str, str] | None) -> dict[str, str] | None:
    if given is not None:
        return dict(given)
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if root.startswith("s3://") and endpoint:
        # deltalake's object store refuses plain http unless told; boto3 users expect the endpoint to just work.
        return {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": str(endpoint.startswith("http://")).lower()}
    return None


def _open(table_uri: str, root: str, version: int | None, options: dict[str, str] | None) -> Any:
    try:
        from deltalake import DeltaTable
    except ImportError as exc:
        raise BadInput("Delta snapshots need the deltalake package", hint="pip install 'repro-audit[delta]'") from exc
    location = root[len("file://") :] if root.startswith("file://") else root
    try:
        return DeltaTable(location, version=version, storage_options=options)
    except Exception as exc:  # deltalake raises its own hierarchy (TableNotFoundError, DeltaError, OSError)
        what = f"Delta table {table_uri}" + (f" at version {version}" if version is not None else "")
        raise NotFound(f"cannot open {what}: {exc}", hint="check the path and that the version exists") from exc


def create_delta_snapshot(
    table_uri: str | Path,
    store: StoreLike,
    *,
    version: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    progress: ProgressFn | None = None,
) -> SnapshotInfo:
    """Pin ``table_uri`` at ``version`` (latest when None): every data file by URI and BLAKE3."""
    root = table_root(table_uri)
    table = _open(str(table_uri), root, version, _storage_options(root, storage_options))
    pinned = table.version()
    sources: list[dict[str, str]] = []
    paths: list[str] = []
    for uri in table.file_uris():
        full = uri if "://" in uri else "file://" + os.path.abspath(uri)
        if not full.startswith(root + "/"):
            raise BadInput(f"data file {uri} of {table_uri} lies outside the table", hint="shallow clones are not supported")
        paths.append(check_entry_path(full[len(root) + 1 :]))
        sources.append({"uri": full})
    entries = []
    for path, source, measured in zip(paths, sources, hash_sources(sources, progress), strict=True):
        if isinstance(measured, str):
            raise NotFound(f"Delta table {table_uri} version {pinned} is already incomplete: {measured}")
        entries.append(Entry(path=path, size=measured[0], hash=measured[1], source=source))
    manifest = Manifest.build(entries, kind="delta", origin={"table": root, "version": pinned})
    blob = as_store(store)
    snapshot_id = put_manifest(manifest, blob)
    return SnapshotInfo(snapshot_id, len(manifest.files), manifest.total_bytes, 0, manifest.kind, blob.uri)
