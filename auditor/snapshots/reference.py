"""Snapshot by reference: pin bytes that already live in versioned storage instead of copying them.

Each entry records where its bytes are (``source``: ``{"uri": "s3://bucket/key",
"version_id": ...}``, or ``{"uri": "file:///abs/path"}`` for a Delta table on
disk) next to their size and BLAKE3 hash, so verification re-reads and
re-hashes the pinned version and reports it *lost* when it is gone. Only the
manifest goes into the snapshot store.

    create_reference_snapshot(uri, store, *, progress=None) -> SnapshotInfo
        # uri = s3://bucket/prefix in a bucket with versioning enabled; every current object version is pinned
    hash_sources(sources, progress=None) -> list[tuple[int, str] | str]     # (size, hex), or why the bytes are lost
    measure_sources(entries, progress=None) -> list[tuple[int, str] | str]
    fetch_sources(entries, dest_root, progress=None) -> list[Problem]       # download; lost ones come back as problems
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import blake3

from auditor.errors import BadInput, UnsafePath
from auditor.snapshots.hashing import ProgressFn, hash_paths
from auditor.snapshots.layout import Problem, SnapshotInfo, StoreLike, as_store, put_manifest
from auditor.snapshots.manifest import Entry, Manifest, check_entry_path
from auditor.storage.s3 import S3Store

_THREADS = 16
_CHUNK = 8 << 20


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key); keys are kept raw (no URL decoding: S3 keys may hold '?' and '#')."""
    if not uri.startswith("s3://"):
        raise BadInput(f"{uri!r} is not an s3:// URI", hint="use s3://bucket/prefix")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise BadInput(f"{uri!r} names no bucket", hint="use s3://bucket/prefix")
    return bucket, key


def _local(uri: str) -> str:
    return uri[len("file://") :]


def _gone(bucket: str, key: str, version: str | None) -> str:
    where = f"s3://{bucket}/{key}" + (f" version {version}" if version else "")
    return f"{where} is gone (deleted, or hidden by a delete marker)"


def _buckets(sources: Sequence[Mapping[str, str]]) -> dict[str, S3Store]:
    """One store per bucket the sources name, made before any thread reads through it."""
    names = {split_s3(s["uri"])[0] for s in sources if s.get("uri", "").startswith("s3://")}
    return {name: S3Store(name) for name in sorted(names)}


def _s3_hash(stores: Mapping[str, S3Store], source: Mapping[str, str]) -> tuple[int, str] | str:
    bucket, key = split_s3(source["uri"])
    version = source.get("version_id")
    chunks = stores[bucket].stream_version(key, version, chunk_size=_CHUNK)
    if chunks is None:
        return _gone(bucket, key, version)
    hasher = blake3.blake3()
    size = 0
    for chunk in chunks:
        hasher.update(chunk)
        size += len(chunk)
    return size, hasher.hexdigest()


def hash_sources(sources: Sequence[Mapping[str, str]], progress: ProgressFn | None = None) -> list[tuple[int, str] | str]:
    """(size, hex BLAKE3) of each source's bytes, or a sentence saying why they are lost."""
    for source in sources:
        if not source.get("uri", "").startswith(("file://", "s3://")):
            raise BadInput(f"source {source.get('uri')!r} uses a scheme snapshots cannot read", hint="use s3:// or file://")
    results: list[tuple[int, str] | str] = [""] * len(sources)
    files = [i for i, s in enumerate(sources) if s["uri"].startswith("file://")]
    present = [i for i in files if os.path.isfile(_local(sources[i]["uri"]))]
    for i in set(files) - set(present):
        results[i] = f"{_local(sources[i]['uri'])} no longer exists (vacuumed or deleted?)"
    for i, measured in zip(present, hash_paths([_local(sources[i]["uri"]) for i in present], progress=progress), strict=True):
        results[i] = measured
    remote = [i for i, s in enumerate(sources) if s["uri"].startswith("s3://")]
    stores = _buckets(sources)
    with ThreadPoolExecutor(_THREADS) as pool:
        for done, (i, measured) in enumerate(zip(remote, pool.map(lambda i: _s3_hash(stores, sources[i]), remote), strict=True), 1):
            results[i] = measured
            if progress is not None and (done % 16 == 0 or done == len(remote)):
                progress("hashing", done, len(remote))
    return results


def measure_sources(entries: Sequence[Entry], progress: ProgressFn | None = None) -> list[tuple[int, str] | str]:
    """``hash_sources`` over manifest entries, in their order."""
    return hash_sources([e.source or {} for e in entries], progress)


def _fetch_remote(uri: str, target: Path) -> str | None:
    """Copy a content-addressed object (a DVC remote's) to ``target``; why it is lost, or None. The caller verifies it."""
    if uri.startswith("file://"):
        try:
            shutil.copyfile(_local(uri), target)
            return None
        except FileNotFoundError:
            return f"neither the local cache nor the remote holds it ({_local(uri)} does not exist)"
    if not uri.startswith("s3://"):
        return f"its remote {uri} is neither a local path nor S3: fetch it with dvc fetch first"
    bucket, key = split_s3(uri)
    chunks = S3Store(bucket, "").stream_version(key, None, chunk_size=_CHUNK)
    if chunks is None:
        return f"neither the local cache nor the remote holds it ({uri} does not exist)"
    with open(target, "xb") as out:
        for chunk in chunks:
            out.write(chunk)
    return None


def _fetch_one(stores: Mapping[str, S3Store], entry: Entry, target: Path) -> Problem | None:
    source = entry.source or {}
    lost = None
    if source["uri"].startswith("file://"):
        try:
            shutil.copyfile(_local(source["uri"]), target)
        except FileNotFoundError:
            lost = f"{_local(source['uri'])} no longer exists (vacuumed or deleted?)"
            if source.get("remote"):  # another host: the object from the DVC remote the snapshot recorded
                lost = _fetch_remote(source["remote"], target)
    else:
        bucket, key = split_s3(source["uri"])
        version = source.get("version_id")
        chunks = stores[bucket].stream_version(key, version, chunk_size=_CHUNK)
        if chunks is None:
            lost = _gone(bucket, key, version)
        else:
            try:
                with open(target, "xb") as out:
                    for chunk in chunks:
                        out.write(chunk)
            except BaseException:
                target.unlink(missing_ok=True)
                raise
    return None if lost is None else Problem("lost", entry.path, expected=f"blake3:{entry.hash}", detail=lost)


def fetch_sources(entries: Sequence[Entry], dest_root: Path, progress: ProgressFn | None = None) -> list[Problem]:
    """Copy or download each entry's source to ``dest_root/<path>`` (folders exist); lost ones are returned."""
    if not entries:
        return []
    stores = _buckets([e.source or {} for e in entries])
    problems: list[Problem] = []
    with ThreadPoolExecutor(_THREADS) as pool:
        results = pool.map(lambda e: _fetch_one(stores, e, dest_root / e.path), entries)
        for done, problem in enumerate(results, 1):
            if problem is not None:
                problems.append(problem)
            if progress is not None and (done % 16 == 0 or done == len(entries)):
                progress("fetching", done, len(entries))
    return problems


def create_reference_snapshot(uri: str, store: StoreLike, *, progress: ProgressFn | None = None) -> SnapshotInfo:
    """Pin every current object version under ``s3://bucket/prefix`` by version id and content hash.

    Nothing is copied: only the manifest is written to ``store``. Verification
    later re-reads each pinned version and reports it lost once it is deleted.
    """
    bucket, prefix = split_s3(uri)
    prefix = prefix.strip("/")
    base = f"{prefix}/" if prefix else ""
    origin_store = S3Store(bucket, prefix)
    status = origin_store.versioning_status()
    if status != "Enabled":
        raise BadInput(
            f"bucket {bucket!r} does not have versioning enabled (status: {status or 'never enabled'})",
            hint="a reference is only immutable with object versions: enable versioning, or snapshot a copy",
        )
    versions = [v for v in origin_store.list_versions() if v.is_latest]
    if not versions:
        raise BadInput(f"no objects under s3://{bucket}/{base}", hint="check the bucket and prefix")
    entries: list[Entry] = []
    sources: list[dict[str, str]] = []
    pending: list[tuple[str, int]] = []
    for version in versions:
        rel = version.key
        key = base + rel
        if rel.endswith("/") and version.size == 0:
            if rel.strip("/"):
                entries.append(Entry(path=check_entry_path(rel.rstrip("/")), type="dir"))
            continue
        try:
            check_entry_path(rel)
        except UnsafePath as exc:
            raise UnsafePath(f"s3://{bucket}/{key}: {exc}", hint="rename the object; its key cannot be a path") from None
        if version.version_id is None:
            raise BadInput(f"s3://{bucket}/{key} has no version id (written before versioning was enabled)")
        sources.append({"uri": f"s3://{bucket}/{key}", "version_id": version.version_id})
        pending.append((rel, version.size))
    for (rel, listed), source, measured in zip(pending, sources, hash_sources(sources, progress), strict=True):
        if isinstance(measured, str) or measured[0] != listed:
            raise BadInput(f"{source['uri']} changed or vanished while it was pinned", hint="try again")
        entries.append(Entry(path=rel, size=measured[0], hash=measured[1], source=source))
    origin = {"uri": f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"}
    manifest = Manifest.build(entries, kind="s3-reference", origin=origin)
    blob = as_store(store)
    snapshot_id = put_manifest(manifest, blob)
    return SnapshotInfo(snapshot_id, len(manifest.files), manifest.total_bytes, 0, manifest.kind, blob.uri)
