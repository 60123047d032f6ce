"""What changed in a snapshot's files that failed verification, where both versions of a file are at hand.

    describe_problems(snapshot_id, store, problems, *, path=None) -> {file path: sentences}
        # the tabular files (``tabular_diff.TABULAR``) among ``problems`` that changed or were truncated, and
        # whose registered and current bytes could both be read: what changed in each ("12 rows added", ...)
    problems_text(snapshot_id, store, problems, *, limit=10) -> str
        # the problems in one line for a finding: a described file by what changed in it, any other by its hashes

Where the two versions are. A snapshot's objects are keyed by the BLAKE3 of their bytes and repro-audit never
overwrites one, so an object that fails verification was overwritten behind the store's back: the store now
holds the current bytes under the registered hash. The registered bytes are then at hand only where the store
keeps an object's earlier versions (an S3 bucket with versioning: the earlier version whose bytes hash to the key
is the registered one). A local or in-memory store keeps none, and its files keep their hashes. With ``path``
(a folder or file compared with the manifest, as ``verify_snapshot(..., path=)`` does) it is the other way round:
the store's object, if intact, holds the registered bytes and the file under ``path`` the current ones. Files
pinned by reference (S3 prefixes, Delta, Iceberg, DVC) are not looked into: their bytes are not the store's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from auditor.errors import ReproError
from auditor.snapshots.hashing import hash_bytes
from auditor.snapshots.layout import Problem, StoreLike, as_store, object_key
from auditor.snapshots.manifest import Entry
from auditor.snapshots.store import load_manifest
from auditor.snapshots.tabular_diff import MAX_BYTES, describe_change, is_tabular, not_loaded
from auditor.storage import BlobStore

_DESCRIBED = ("changed", "truncated")  # the problems whose file still has bytes to compare

Versions = tuple[bytes | Path, bytes | Path]


def describe_problems(
    snapshot_id: str, store: StoreLike, problems: Sequence[Problem], *, path: str | Path | None = None
) -> dict[str, list[str]]:
    """``{file path: sentences}`` for each changed tabular file whose registered and current bytes are at hand.

    Never raises for a store or file it cannot read: that file is left out (its finding keeps its hashes).
    """
    wanted = [p for p in problems if isinstance(p, Problem) and p.kind in _DESCRIBED and is_tabular(p.path)]
    if not wanted:
        return {}
    try:
        blob = as_store(store)
        manifest = load_manifest(snapshot_id, blob)
    except ReproError:
        return {}
    entries = {e.path: e for e in manifest.files}
    out: dict[str, list[str]] = {}
    for problem in wanted:
        entry = entries.get(problem.path)
        if entry is None or not entry.hash or entry.source is not None:
            continue
        try:
            found = _versions(blob, entry, _current_file(path, entry, manifest.kind)) if path is not None else _overwritten(blob, entry)
        except (ReproError, OSError):
            continue
        sentences = found if isinstance(found, list) or found is None else describe_change(*found, entry.path)
        if sentences:
            out[problem.path] = sentences
    return out


def problems_text(snapshot_id: str, store: StoreLike | None, problems: Sequence[Problem], *, limit: int = 10) -> str:
    """The first ``limit`` problems in one line: a described file by what changed in it, any other as verification
    names it (its hashes); then how many more there are."""
    shown = list(problems[:limit])
    described = describe_problems(snapshot_id, store, shown) if store is not None else {}
    texts = [f"{p.path} {p.kind}: {', '.join(described[p.path])}" if getattr(p, "path", None) in described else str(p)
             for p in shown]
    more = f"; … and {len(problems) - limit} more" if len(problems) > limit else ""
    return "; ".join(texts) + more


def _current_file(path: str | Path, entry: Entry, kind: str) -> Path:
    """The file under ``path`` that stands for ``entry`` (``path`` itself for a snapshot of one file)."""
    root = Path(path)
    return root if kind == "file" and root.is_file() else root / entry.path


def _versions(blob: BlobStore, entry: Entry, current: Path) -> Versions | list[str] | None:
    """The store's intact object (the registered bytes) and the file on disk (the current ones)."""
    if not current.is_file():
        return None
    if max(entry.size or 0, current.stat().st_size) > MAX_BYTES:
        return not_loaded(max(entry.size or 0, current.stat().st_size))
    key = object_key(entry.hash or "")
    local = blob.local_path(key)
    registered = local.read_bytes() if local is not None else blob.read(key)
    return (registered, current) if hash_bytes(registered) == entry.hash else None


def _overwritten(blob: BlobStore, entry: Entry) -> Versions | list[str] | None:
    """The registered bytes from an earlier version of the overwritten object, and its current bytes; None
    when the store keeps no earlier version (a local or in-memory store) or none hashes to the key."""
    list_versions = getattr(blob, "list_versions", None)  # S3Store's; a store that keeps no versions has none
    if list_versions is None:
        return None
    key = object_key(entry.hash or "")
    versions = [v for v in list_versions(key) if v.key == key]
    latest = next((v for v in versions if v.is_latest), None)
    if latest is None:
        return None
    if max(entry.size or 0, latest.size) > MAX_BYTES:
        return not_loaded(max(entry.size or 0, latest.size))
    for version in versions:
        if version.is_latest or version.version_id is None or version.size != entry.size:
            continue
        data = blob.read_version(key, version.version_id)  # type: ignore[attr-defined]
        if data is not None and hash_bytes(data) == entry.hash:
            return data, blob.read(key)
    return None


__all__ = ["describe_problems", "problems_text"]
