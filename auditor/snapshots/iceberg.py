"""Iceberg table snapshots pinned by id, with the content hash of every data file and a retention guard.

An Iceberg snapshot is only as durable as the table's retention: ``expire_snapshots``
drops unreferenced snapshots from the metadata (and engines then delete their
files as orphans). So recording a snapshot also **tags** it
(``repro-audit-<snapshot id>``, with ``max_ref_age_ms`` at its maximum so a
table-wide ``history.expire.max-ref-age-ms`` cannot age the tag out either):
every ``expire_snapshots`` that honours refs (pyiceberg's does, and so do
Spark's and Java's) skips a tagged snapshot. A snapshot that was expired before
the guard could tag it is refused, and one expired later (its tag removed
behind the guard's back) is reported *lost*, naming the table and the snapshot id.

The manifest lists each data file of the snapshot by URI with its BLAKE3 (and the
size Iceberg recorded for it, checked while pinning), so verification re-reads
and re-hashes them and a flipped byte is *changed*. Only the manifest goes into
the snapshot store; materialising copies the data files (table-relative paths,
readable as a parquet dataset). Snapshots with delete files are refused: a plain
parquet read of the data files would not apply them (compact the table first).

    create_iceberg_snapshot(table, store, *, catalog="default", catalog_properties=None,
                            snapshot_id=None, guard=True, progress=None) -> SnapshotInfo
    guard_tag(snapshot_id) -> str                        # the tag name the guard uses
    origin_problems(manifest, *, check_guard=True) -> list[Problem]   # expired (lost) / untagged (unguarded)

The catalog is recorded by name and its non-secret properties (``type``, ``uri``
with any password removed, ``warehouse``); credentials come, at verification
time as at training time, from pyiceberg's own configuration
(``PYICEBERG_CATALOG__<NAME>__*`` or ``.pyiceberg.yaml``). They never reach the manifest.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from auditor.errors import BadInput, InfrastructureError, NotFound
from auditor.snapshots.hashing import ProgressFn
from auditor.snapshots.layout import Problem, SnapshotInfo, StoreLike, as_store, put_manifest
from auditor.snapshots.manifest import Entry, Manifest, check_entry_path
from auditor.snapshots.reference import hash_sources

KIND = "iceberg"
TAG_PREFIX = "repro-audit-"
_FOREVER_MS = 2**63 - 1  # Iceberg's own "never" for max-ref-age-ms
_RECORDED_PROPERTIES = ("type", "uri", "warehouse")


def guard_tag(snapshot_id: int) -> str:
    """The name of the tag that keeps ``snapshot_id`` from being expired."""
    return f"{TAG_PREFIX}{int(snapshot_id)}"


def _without_password(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def recorded_properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    """The catalog properties a manifest may hold: no credentials, no password in a URI."""
    out = {k: str(v) for k, v in (properties or {}).items() if k in _RECORDED_PROPERTIES}
    if "uri" in out:
        out["uri"] = _without_password(out["uri"])
    return out


def _load_catalog(name: str, properties: Mapping[str, str]) -> Any:
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError as exc:
        raise BadInput("Iceberg snapshots need pyiceberg", hint="pip install 'repro-audit[iceberg]'") from exc
    try:
        return load_catalog(name, **dict(properties))
    except Exception as exc:  # pyiceberg raises ValueError, NotInstalledError, sqlalchemy errors, ...
        raise InfrastructureError(
            f"cannot open Iceberg catalog {name!r} ({', '.join(f'{k}={v}' for k, v in sorted(properties.items())) or 'from its config'}): {exc}",
            hint="check the catalog's PYICEBERG_CATALOG__<NAME>__* settings or .pyiceberg.yaml",
        ) from exc


def _load_table(catalog: Any, table: str) -> Any:
    try:
        return catalog.load_table(table)
    except Exception as exc:  # NoSuchTableError, NoSuchNamespaceError, ...
        raise NotFound(f"Iceberg table {table!r} is not in catalog {catalog.name!r}: {exc}", hint="check the table identifier") from exc


def _expired(table: str, snapshot_id: int) -> str:
    return (
        f"Iceberg table {table} snapshot {snapshot_id} is no longer in the table's metadata "
        "(expired, or never existed): its data files are unprotected orphans"
    )


def _tag(tbl: Any, table: str, snapshot_id: int) -> None:
    name = guard_tag(snapshot_id)
    ref = tbl.metadata.refs.get(name)
    if ref is not None:
        if ref.snapshot_id != snapshot_id:
            raise BadInput(
                f"Iceberg table {table}: tag {name!r} points at snapshot {ref.snapshot_id}, not {snapshot_id}",
                hint=f"someone moved the guard's tag; remove it (manage_snapshots().remove_tag({name!r})) and snapshot again",
            )
        return
    try:
        tbl.manage_snapshots().create_tag(snapshot_id, name, max_ref_age_ms=_FOREVER_MS).commit()
    except ValueError as exc:  # the commit re-reads the metadata: the snapshot was expired meanwhile
        raise NotFound(_expired(table, snapshot_id), hint="it was expired before the guard could tag it; pin a live snapshot") from exc


def create_iceberg_snapshot(
    table: str,
    store: StoreLike,
    *,
    catalog: str = "default",
    catalog_properties: Mapping[str, str] | None = None,
    snapshot_id: int | None = None,
    guard: bool = True,
    progress: ProgressFn | None = None,
) -> SnapshotInfo:
    """Pin Iceberg ``table`` at ``snapshot_id`` (current when None): tag it, and hash every data file."""
    props = dict(catalog_properties or {})
    cat = _load_catalog(catalog, props)
    tbl = _load_table(cat, table)
    snapshot_id = _live_snapshot_id(tbl, table, snapshot_id)
    if guard:
        _tag(tbl, table, snapshot_id)  # before hashing: from here on no honest expire can drop it
        tbl = tbl.refresh()
    root = _table_root(tbl)
    paths, sources, sizes = _data_files(tbl, table, snapshot_id, root)
    entries = _hashed_entries(table, snapshot_id, paths, sources, sizes, progress)
    origin = {
        "catalog": catalog,
        "catalog_properties": recorded_properties(props),
        "table": table,
        "location": root,
        "snapshot_id": snapshot_id,
        "guard": guard_tag(snapshot_id) if guard else None,
    }
    manifest = Manifest.build(entries, kind=KIND, origin=origin)
    blob = as_store(store)
    sid = put_manifest(manifest, blob)
    return SnapshotInfo(sid, len(manifest.files), manifest.total_bytes, 0, manifest.kind, blob.uri)


def _live_snapshot_id(tbl: Any, table: str, snapshot_id: int | None) -> int:
    """``snapshot_id`` (the current snapshot when None), checked to be still in the table's metadata."""
    if snapshot_id is None:
        current = tbl.current_snapshot()
        if current is None:
            raise BadInput(f"Iceberg table {table} has no snapshot yet", hint="write data to it first")
        snapshot_id = current.snapshot_id
    if tbl.metadata.snapshot_by_id(snapshot_id) is None:
        raise NotFound(_expired(table, snapshot_id), hint="pin a snapshot the table still has (table.snapshots())")
    return snapshot_id


def _table_root(tbl: Any) -> str:
    """The table's location as a URI without a trailing slash (a bare path becomes ``file://``)."""
    root = tbl.metadata.location.rstrip("/")
    if "://" not in root:
        root = "file://" + os.path.abspath(root)
    return root


def _data_files(tbl: Any, table: str, snapshot_id: int, root: str) -> tuple[list[str], list[dict[str, str]], list[int]]:
    """(table-relative paths, sources, recorded sizes) of the snapshot's data files; refuses delete files
    and data files outside the table location."""
    sources: list[dict[str, str]] = []
    paths: list[str] = []
    sizes: list[int] = []
    for task in tbl.scan(snapshot_id=snapshot_id).plan_files():
        if task.delete_files:
            raise BadInput(
                f"Iceberg table {table} snapshot {snapshot_id} has delete files; the data files alone are not its rows",
                hint="compact the table (rewrite without deletes) and pin the new snapshot",
            )
        uri = task.file.file_path
        full = uri if "://" in uri else "file://" + os.path.abspath(uri)
        if not full.startswith(root + "/"):
            raise BadInput(f"data file {uri} of {table} lies outside the table location {root}", hint="write.data.path outside the table is not supported")
        paths.append(check_entry_path(full[len(root) + 1 :]))
        sources.append({"uri": full})
        sizes.append(task.file.file_size_in_bytes)
    return paths, sources, sizes


def _hashed_entries(table: str, snapshot_id: int, paths: list[str], sources: list[dict[str, str]], sizes: list[int],
                    progress: ProgressFn | None) -> list[Entry]:
    """Hash every data file into a manifest entry, checking each size against the one Iceberg recorded."""
    entries = []
    for path, source, size, measured in zip(paths, sources, sizes, hash_sources(sources, progress), strict=True):
        if isinstance(measured, str):
            raise NotFound(f"Iceberg table {table} snapshot {snapshot_id} is already incomplete: {measured}")
        if measured[0] != size:
            raise BadInput(
                f"{source['uri']} has {measured[0]} bytes but Iceberg recorded {size} for it in snapshot {snapshot_id}",
                hint="the data file was altered after it was committed; restore it before pinning",
            )
        entries.append(Entry(path=path, size=measured[0], hash=measured[1], source=source))
    return entries


def origin_problems(manifest: Manifest, *, check_guard: bool = True) -> list[Problem]:
    """Whether the recorded Iceberg snapshot is still in its table, and (``check_guard``) still tagged."""
    origin = manifest.origin
    table, snapshot_id = str(origin.get("table")), int(origin.get("snapshot_id", -1))
    where = f"{table}@{snapshot_id}"
    tbl = _load_table(_load_catalog(str(origin.get("catalog", "default")), origin.get("catalog_properties") or {}), table)
    if tbl.metadata.snapshot_by_id(snapshot_id) is None:
        return [Problem("lost", where, expected=f"snapshot {snapshot_id}", detail=_expired(table, snapshot_id))]
    tag = origin.get("guard")
    if check_guard and tag:
        ref = tbl.metadata.refs.get(tag)
        if ref is None or ref.snapshot_id != snapshot_id:
            found = "gone" if ref is None else f"moved to snapshot {ref.snapshot_id}"
            return [
                Problem(
                    "unguarded",
                    where,
                    expected=f"tag {tag}",
                    detail=f"the retention guard's tag {tag!r} on {table} is {found}: an expire_snapshots can now remove "
                    f"snapshot {snapshot_id}; re-tag it: repro-audit snapshot create --iceberg {table} --snapshot-id {snapshot_id}",
                )
            ]
    return []


#: Iceberg's defaults for ``expire_snapshots`` when the table sets none (``history.expire.*``)
_DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 86_400_000
_MAX_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"


def snapshot_expiry(manifest: Manifest) -> tuple[int | None, bool]:
    """When an ``expire_snapshots`` honouring the table's ``history.expire.max-snapshot-age-ms`` (default 5 days) may
    first drop the pinned snapshot, in ms since the epoch (None: it is gone already), and whether it is still the
    table's current snapshot (kept while it is). Read for ``retention check``; tags and branches are not weighed here
    (``origin_problems`` says whether the guard's tag still holds it)."""
    origin = manifest.origin
    table, snapshot_id = str(origin.get("table")), int(origin.get("snapshot_id", -1))
    tbl = _load_table(_load_catalog(str(origin.get("catalog", "default")), origin.get("catalog_properties") or {}), table)
    snapshot = tbl.metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        return None, False
    max_age = int((tbl.properties or {}).get(_MAX_AGE_PROPERTY) or _DEFAULT_MAX_SNAPSHOT_AGE_MS)
    return snapshot.timestamp_ms + max_age, tbl.metadata.current_snapshot_id == snapshot_id


__all__ = ["KIND", "TAG_PREFIX", "create_iceberg_snapshot", "guard_tag", "origin_problems", "recorded_properties",
           "snapshot_expiry"]
