"""Delta Lake tables pinned at a version, with the content hash of every data file.

A Delta version still *opens* after ``vacuum`` has deleted its files, and a
flipped byte in a parquet file is read back as wrong data more often than it
raises (FACTS.md). So the snapshot records each data file of the version with
its BLAKE3 hash, and verification re-reads and re-hashes them: a vacuumed
version is reported *lost*, a flipped byte *changed*. Only the manifest goes
into the snapshot store; materialising copies the version's data files
(table-relative paths, readable as a parquet dataset).

    create_delta_snapshot(table_uri, store, *, version=None, storage_options=None, progress=None) -> SnapshotInfo
    delta_retention(table_uri, version, *, storage_options=None, now=None) -> DeltaRetention   # the guard's reading

What Delta cannot do, unlike Iceberg's tags: protect one version. The protocol
has no per-version reference; ``vacuum`` deletes every file that was *removed*
(by an overwrite, delete, optimize...) more than ``delta.deletedFileRetentionDuration``
ago (default 7 days), whatever still needs it, and ``vacuum(enforce_retention_duration=False)``
skips even that; log entries older than ``delta.logRetentionDuration`` (default
30 days) are cleaned at checkpoints, after which the version no longer opens
(the manifest still names its files, so the snapshot stays readable until vacuum).
So the Delta guard can only *read* the retention and say by when the pinned
version must be verified: its files are safe from an enforcing vacuum until at
least the commit after it plus the file retention (``DeltaRetention.safe_until``;
``None`` while the pinned version is the latest). Raising the table's retention
(``table.alter.set_table_properties({"delta.deletedFileRetentionDuration": "interval 365 days"})``)
is the only lever, and it is table-wide.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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


_DEFAULT_FILE_RETENTION = "interval 1 weeks"  # the Delta protocol's defaults
_DEFAULT_LOG_RETENTION = "interval 30 days"
_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}


def parse_interval(text: str) -> timedelta:
    """Delta's ``interval <n> <unit>`` (``interval 7 days``) as a timedelta."""
    match = re.fullmatch(r"\s*(?:interval\s+)?(\d+)\s+(second|minute|hour|day|week)s?\s*", text.lower())
    if match is None:
        raise BadInput(f"retention {text!r} is not 'interval <n> <seconds|minutes|hours|days|weeks>'")
    return timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


@dataclass(frozen=True)
class DeltaRetention:
    """How long a pinned Delta version's files are safe from an enforcing ``vacuum``."""

    table: str
    version: int
    file_retention: timedelta
    log_retention: timedelta
    safe_until: datetime | None  # None: the pinned version is the latest, nothing of it was removed yet

    def warning(self, now: datetime | None = None) -> str | None:
        """A sentence for the user when the version is no longer the latest, else None."""
        if self.safe_until is None:
            return None
        now = now or datetime.now(UTC)
        when = self.safe_until.strftime("%Y-%m-%d %H:%M UTC")
        state = "may already be vacuumed" if self.safe_until <= now else f"are safe from vacuum only until {when}"
        return (
            f"Delta cannot protect one version: files of {self.table} version {self.version} {state} "
            f"(delta.deletedFileRetentionDuration = {self.file_retention.days} days; vacuum with "
            "enforce_retention_duration=False ignores even that). Audit before then, or raise the table's retention."
        )


def delta_retention(
    table_uri: str | Path,
    version: int,
    *,
    storage_options: Mapping[str, str] | None = None,
) -> DeltaRetention:
    """Read the table's retention settings and when ``version``'s files may first be vacuumed."""
    root = table_root(table_uri)
    table = _open(str(table_uri), root, None, _storage_options(root, storage_options))
    config = table.metadata().configuration or {}
    files = parse_interval(config.get("delta.deletedFileRetentionDuration") or _DEFAULT_FILE_RETENTION)
    logs = parse_interval(config.get("delta.logRetentionDuration") or _DEFAULT_LOG_RETENTION)
    later = [h for h in table.history() if h.get("version", -1) > version]
    safe_until = None
    if later:
        # Only commits after the pinned version can remove its files: none is vacuumable before the first one + retention.
        first = min(later, key=lambda h: h["version"])
        safe_until = datetime.fromtimestamp(first["timestamp"] / 1000, tz=UTC) + files
    return DeltaRetention(str(table_uri), version, files, logs, safe_until)
