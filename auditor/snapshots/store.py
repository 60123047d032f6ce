"""Snapshots on a blob store: create, load, verify and materialise. One layout for every backend.

The layout (``layout.py``; backends never see it, they store bytes under keys)::

    objects/<hex[:2]>/<hex[2:]>   file contents keyed by BLAKE3, shared by every snapshot in the store
    manifests/<hex>.json          the canonical manifest whose BLAKE3 is <hex> (the id is "blake3:<hex>")

Objects are written before the manifest, each as a conditional create, so a
manifest is never visible before its bytes, and nothing is ever overwritten.

    create_snapshot(src_dir, store, *, progress=None) -> SnapshotInfo(id, files, bytes, new_objects, kind, store)
    load_manifest(snapshot_id, store) -> Manifest               # SnapshotCorrupt if the manifest was edited
    verify_snapshot(snapshot_id, store, *, path=None, raise_on_problem=False, progress=None) -> list[Problem]
        # path=None: re-hash the store's bytes (and ask an Iceberg table whether the snapshot is still there);
        # path=DIR: compare DIR with the manifest (missing/extra/changed); path=FILE for a snapshot of one file
    materialize(snapshot_id, store, dest, *, link=True, progress=None) -> Path
        # DEST complete and verified, or absent; SnapshotCorrupt / UnsafePath / NotFound otherwise

``store`` is a ``BlobStore`` or a URI for ``open_store`` (a path, ``file://``,
``memory://NAME``, ``s3://bucket/prefix``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from auditor.errors import BadInput, MalformedRecord, NotFound, SnapshotCorrupt
from auditor.settings import SNAPSHOT_STORE
from auditor.snapshots.hashing import ProgressFn, hash_bytes, hash_file, hash_paths
from auditor.snapshots.layout import (
    MANIFESTS,
    OBJECTS,
    Problem,
    SnapshotInfo,
    StoreLike,
    as_store,
    manifest_key,
    object_key,
    put_manifest,
)
from auditor.snapshots.manifest import Entry, Manifest, build_manifest, scan_directory, single_file
from auditor.snapshots.reference import fetch_sources, measure_sources
from auditor.storage import BlobStore

_IN_MEMORY_LIMIT = 32 << 20  # one file read whole while creating
_REMOTE_READ_LIMIT = 8 << 20  # per thread while verifying a remote store; bigger objects go through a temp file
_REMOTE_THREADS = 16


def _mismatch(entry: Entry, size: int, digest: str, where: str) -> Problem | None:
    if digest == entry.hash and size == entry.size:
        return None
    kind = "truncated" if size < (entry.size or 0) else "changed"
    return Problem(
        kind,
        entry.path,
        expected=f"blake3:{entry.hash}",
        actual=f"blake3:{digest}",
        detail=f"{where} has {size} bytes, the manifest says {entry.size}",
    )


def _read_verified(path: Path, entry: Entry) -> bytes:
    data = path.read_bytes()
    if hash_bytes(data) != entry.hash:
        raise BadInput(f"{path} changed while the snapshot was taken", hint="snapshot data nobody is writing to")
    return data


def _stage_verified(path: Path, entry: Entry, folder: str) -> Path:
    # Copy while hashing, so the bytes stored are the bytes whose hash is the key.
    import blake3

    staged = Path(folder) / entry.hash  # type: ignore[operator]
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    buf = bytearray(8 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as src, open(staged, "xb") as out:
        while n := src.readinto(buf):
            hasher.update(view[:n])
            out.write(view[:n])
    if hasher.hexdigest() != entry.hash:
        raise BadInput(f"{path} changed while the snapshot was taken", hint="snapshot data nobody is writing to")
    return staged


def _store_objects(root: Path, manifest: Manifest, store: BlobStore, progress: ProgressFn | None) -> int:
    """Write every object the store lacks; returns how many were new."""
    first: dict[str, Entry] = {}
    for entry in manifest.files:
        first.setdefault(entry.hash or "", entry)
    todo = list(first.values())
    local = _is_local(store)

    def put(entry: Entry, staging: str) -> bool:
        key = object_key(entry.hash or "")
        if store.exists(key):
            return False
        source = root / entry.path
        if (entry.size or 0) <= _IN_MEMORY_LIMIT:
            return store.write(key, _read_verified(source, entry))
        staged = _stage_verified(source, entry, staging)
        try:
            return store.write(key, staged)
        finally:
            staged.unlink(missing_ok=True)

    new = 0
    with tempfile.TemporaryDirectory(prefix="repro-stage-") as staging:
        if local:
            results: Iterable[bool] = (put(e, staging) for e in todo)
        else:
            pool = ThreadPoolExecutor(_REMOTE_THREADS)
            results = pool.map(lambda e: put(e, staging), todo)
        try:
            for done, created in enumerate(results, 1):
                new += created
                if progress is not None and (done % 32 == 0 or done == len(todo)):
                    progress("storing", done, len(todo))
        finally:
            if not local:
                pool.shutdown(cancel_futures=True)
    return new


def create_snapshot(src_dir: str | Path, store: StoreLike, *, progress: ProgressFn | None = None) -> SnapshotInfo:
    """Snapshot the directory (or single file) ``src_dir`` into ``store``; only objects the store lacks are written.

    A single file makes a snapshot of kind "file"; it materialises, like every
    snapshot, as a folder: one holding that file under its own name.
    """
    blob = as_store(store)
    root = Path(src_dir)
    manifest = build_manifest(root, progress=progress)
    new = _store_objects(root.parent if manifest.kind == "file" else root, manifest, blob, progress)
    snapshot_id = put_manifest(manifest, blob)
    return SnapshotInfo(snapshot_id, len(manifest.files), manifest.total_bytes, new, manifest.kind, blob.uri)


def load_manifest(snapshot_id: str, store: StoreLike) -> Manifest:
    """The snapshot's manifest, after checking that its bytes still hash to the id."""
    blob = as_store(store)
    key = manifest_key(snapshot_id)
    try:
        data = blob.read(key)
    except NotFound:
        raise NotFound(
            f"snapshot {snapshot_id} is not in {blob.uri}",
            hint=f"check --store / {SNAPSHOT_STORE.name}, or create it with `repro-audit snapshot create`",
        ) from None
    actual = f"blake3:{hash_bytes(data)}"
    if actual != snapshot_id:
        problem = Problem("manifest", key, expected=snapshot_id, actual=actual, detail="the stored manifest was edited")
        raise SnapshotCorrupt(snapshot_id, [problem])
    manifest = Manifest.from_bytes(data, where=f"{blob.uri}/{key}")
    if manifest.to_bytes() != data:
        # One byte string per manifest: JSON tricks (duplicate keys, odd spacing) cannot hide behind a valid id.
        raise MalformedRecord(f"{blob.uri}/{key} is not in canonical form", hint="manifests are written by repro-audit only")
    return manifest


def _measure_objects(digests: Sequence[str], store: BlobStore, sizes: dict[str, int], progress: ProgressFn | None):
    """(size, hex) of each stored object by digest; None where the object is missing."""
    measured: dict[str, tuple[int, str] | None] = {}
    if _is_local(store):
        paths = {d: store.local_path(object_key(d)) for d in digests}
        present = [d for d in digests if paths[d] is not None and paths[d].is_file()]  # type: ignore[union-attr]
        hashed = hash_paths([paths[d] for d in present], progress=progress, stage="verifying")  # type: ignore[misc]
        measured = {d: None for d in digests}
        measured.update(zip(present, hashed, strict=True))
        return measured

    def one(digest: str) -> tuple[int, str] | None:
        key = object_key(digest)
        try:
            if sizes.get(digest, 0) <= _REMOTE_READ_LIMIT:
                data = store.read(key)
                return len(data), hash_bytes(data)
            with tempfile.TemporaryDirectory(prefix="repro-verify-") as tmp:
                store.download(key, Path(tmp) / "object")
                return hash_file(Path(tmp) / "object")
        except NotFound:
            return None

    with ThreadPoolExecutor(_REMOTE_THREADS) as pool:
        for done, (digest, result) in enumerate(zip(digests, pool.map(one, digests), strict=True), 1):
            measured[digest] = result
            if progress is not None and (done % 16 == 0 or done == len(digests)):
                progress("verifying", done, len(digests))
    return measured


def _origin_problems(manifest: Manifest, *, check_guard: bool) -> list[Problem]:
    """What the data source itself says about the pinned version (an expired Iceberg snapshot is lost)."""
    if manifest.kind == "iceberg":
        from auditor.snapshots.iceberg import origin_problems

        return origin_problems(manifest, check_guard=check_guard)
    return []


def _check_store(manifest: Manifest, store: BlobStore, progress: ProgressFn | None) -> list[Problem]:
    problems: list[Problem] = _origin_problems(manifest, check_guard=True)
    referenced = [e for e in manifest.files if e.source is not None]
    for entry, result in zip(referenced, measure_sources(referenced, progress), strict=True):
        if isinstance(result, str):
            problems.append(Problem("lost", entry.path, expected=f"blake3:{entry.hash}", detail=result))
        else:
            problems.extend(p for p in [_mismatch(entry, *result, entry.source["uri"])] if p)  # type: ignore[index]
    stored = [e for e in manifest.files if e.source is None]
    sizes = {e.hash or "": e.size or 0 for e in stored}
    measured = _measure_objects(sorted(sizes), store, sizes, progress)
    for entry in stored:
        key = object_key(entry.hash or "")
        result = measured[entry.hash or ""]
        if result is None:
            problems.append(
                Problem("missing", entry.path, expected=f"blake3:{entry.hash}", detail=f"{key} is not in {store.uri}")
            )
        elif problem := _mismatch(entry, *result, key):
            problems.append(problem)
    return sorted(problems, key=lambda p: p.path)


def _check_tree(manifest: Manifest, root: Path, progress: ProgressFn | None) -> list[Problem]:
    expected = {e.path: e for e in manifest.entries}
    found = {e.path: e for e in scan_directory(root, strict=False)}
    both = [p for p in expected if p in found and expected[p].type == "file" and found[p].type == "file"]
    hashed = dict(zip(both, hash_paths([root / p for p in both], progress=progress, stage="verifying"), strict=True))
    problems: list[Problem] = []
    for path in sorted(expected.keys() | found.keys()):
        want, have = expected.get(path), found.get(path)
        if want is not None and want.type == "dir" and (root / path).is_dir() and not (root / path).is_symlink():
            continue  # an empty dir that gained files: the files are reported, the dir is there
        if want is None:
            if have.type == "dir" and any(p.startswith(path + "/") for p in expected):  # type: ignore[union-attr]
                continue
            problems.append(Problem("extra", path, detail=f"a {have.type} that is not in the manifest"))  # type: ignore[union-attr]
        elif have is None:
            problems.append(Problem("missing", path, expected=f"blake3:{want.hash}" if want.hash else want.type))
        elif want.type != have.type:
            problems.append(Problem("changed", path, expected=want.type, actual=have.type, detail="the entry type changed"))
        elif want.type == "symlink" and want.target != have.target:
            problems.append(Problem("changed", path, expected=want.target, actual=have.target, detail="the link target changed"))
        elif want.type == "file" and (problem := _mismatch(want, *hashed[path], str(root / path))):
            problems.append(problem)
    return problems


def verify_snapshot(
    snapshot_id: str,
    store: StoreLike,
    *,
    path: str | Path | None = None,
    raise_on_problem: bool = False,
    progress: ProgressFn | None = None,
) -> list[Problem]:
    """Re-hash every byte and list each problem; ``path`` compares a directory instead of the store.

    With ``raise_on_problem`` a non-empty list is raised as ``SnapshotCorrupt``.
    """
    blob = as_store(store)
    try:
        manifest = load_manifest(snapshot_id, blob)
    except SnapshotCorrupt as exc:
        problems = list(exc.problems)
    else:
        if path is None:
            problems = _check_store(manifest, blob, progress)
        elif manifest.kind == "file" and single_file(path):
            entry = manifest.files[0]
            problems = [p for p in [_mismatch(entry, *hash_file(path), str(path))] if p]
        else:
            problems = _check_tree(manifest, Path(path), progress)
    if problems and raise_on_problem:
        raise SnapshotCorrupt(snapshot_id, problems)
    return problems


def _check_dest(dest: Path) -> None:
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise BadInput(f"{dest} exists and is not an empty directory", hint="materialise into a new path")


def _is_local(store: BlobStore) -> bool:
    return store.local_path(object_key("0" * 64)) is not None


def _place_stored(entries: list[Entry], store: BlobStore, tmp: Path, link: bool, progress: ProgressFn | None) -> list[Problem]:
    """Link, copy or download each object into ``tmp``; the missing ones come back as problems."""
    local = _is_local(store)
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.hash or "", []).append(entry)

    def place(group: list[Entry]) -> list[Problem]:
        key = object_key(group[0].hash or "")
        try:
            if local:
                source = store.local_path(key)
                if source is None or not source.is_file():
                    raise NotFound(key)
                for entry in group:
                    _link_or_copy(source, tmp / entry.path, link)
            else:
                store.download(key, tmp / group[0].path)
                for entry in group[1:]:
                    shutil.copyfile(tmp / group[0].path, tmp / entry.path)
        except NotFound:
            detail = f"{key} is not in {store.uri}"
            return [Problem("missing", e.path, expected=f"blake3:{e.hash}", detail=detail) for e in group]
        return []

    problems: list[Problem] = []
    with ThreadPoolExecutor(1 if local else _REMOTE_THREADS) as pool:
        for done, found in enumerate(pool.map(place, groups.values()), 1):
            problems.extend(found)
            if progress is not None and (done % 32 == 0 or done == len(groups)):
                progress("fetching", done, len(groups))
    return problems


def _link_or_copy(source: Path, target: Path, link: bool) -> None:
    if link:
        try:
            os.link(source, target)
            return
        except OSError:
            pass  # another filesystem, or hard links refused: copy instead
    shutil.copyfile(source, target)


def materialize(
    snapshot_id: str,
    store: StoreLike,
    dest: str | Path,
    *,
    link: bool = True,
    progress: ProgressFn | None = None,
) -> Path:
    """Write the snapshot's tree to ``dest`` (new or empty), verified, or leave nothing there.

    Files are hard links to a local store's objects when ``link`` (and the
    filesystem allows it), copies otherwise, or downloads from a remote store
    or the recorded sources. Every file is hashed in place before the tree,
    built in a hidden folder beside ``dest``, is renamed into place.
    """
    blob = as_store(store)
    manifest = load_manifest(snapshot_id, blob)  # validates every path and link before anything is written
    target = Path(dest)
    _check_dest(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        for entry in manifest.entries:
            folder = tmp / entry.path if entry.type == "dir" else (tmp / entry.path).parent
            folder.mkdir(parents=True, exist_ok=True)
        files = manifest.files
        stored = [e for e in files if e.source is None]
        problems = _origin_problems(manifest, check_guard=False)  # bytes of an expired snapshot are not served
        problems += _place_stored(stored, blob, tmp, link, progress)
        problems += fetch_sources([e for e in files if e.source is not None], tmp, progress)
        absent = {p.path for p in problems}
        present = [e for e in files if e.path not in absent]
        hashed = hash_paths([tmp / e.path for e in present], progress=progress, stage="verifying")
        for entry, (size, digest) in zip(present, hashed, strict=True):
            if problem := _mismatch(entry, size, digest, f"the copy of {entry.path}"):
                problems.append(problem)
        if problems:
            raise SnapshotCorrupt(snapshot_id, sorted(problems, key=lambda p: p.path))
        # Links last, so no file above was ever written through one.
        for entry in manifest.entries:
            if entry.type == "symlink":
                os.symlink(entry.target or "", tmp / entry.path)
        tmp.chmod(0o755)
        try:
            os.rename(tmp, target)
        except OSError as exc:
            raise BadInput(f"cannot move the snapshot into {target}: {exc.strerror}", hint="use a new path") from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


__all__ = [
    "MANIFESTS",
    "OBJECTS",
    "Problem",
    "SnapshotInfo",
    "as_store",
    "create_snapshot",
    "load_manifest",
    "manifest_key",
    "materialize",
    "object_key",
    "put_manifest",
    "verify_snapshot",
]
