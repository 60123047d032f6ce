"""DVC-tracked data pinned at a git revision, through DVC's own API, verified by re-hash.

DVC records every tracked file by the MD5 of its content (in ``.dvc`` files and
``dvc.lock``, and in the ``.dir`` listing of a tracked folder), and keeps the
bytes in its content-addressed cache (``.dvc/cache/files/md5/<2>/<30>``). The
cache object is the immutable part, the workspace copy is not (``dvc checkout``
rewrites it). So the snapshot resolves ``path`` at ``rev`` with ``dvc.repo.Repo.ls``
to DVC's recorded MD5s, finds each object in the local cache, checks that the
object still has that MD5 (a corrupted cache is refused) and records it with its
BLAKE3. Verification re-hashes the cache objects: a changed byte is *changed*,
an object removed by ``dvc gc`` is *lost*. Only the manifest goes into the
snapshot store; materialising copies the objects under their tracked names.

    create_dvc_snapshot(repo, path, store, *, rev="HEAD", progress=None) -> SnapshotInfo

``repo`` is a local git+DVC repository; objects that are only in a DVC remote
must be fetched first (``dvc fetch --rev REV PATH``). The repository's default remote is recorded
(``origin["remote"]``, its objects' root, and each object's URI there as ``source["remote"]``), so another host without
this cache (a GPU worker) materialises the snapshot from the remote, verified by BLAKE3 as always.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import blake3

from auditor.errors import BadInput, NotFound
from auditor.snapshots.hashing import ProgressFn
from auditor.snapshots.layout import SnapshotInfo, StoreLike, as_store, put_manifest
from auditor.snapshots.manifest import Entry, Manifest, check_entry_path

KIND = "dvc"
_CHUNK = 4 << 20


def _repo_api():
    try:
        from dvc.repo import Repo
    except ImportError as exc:
        raise BadInput("DVC snapshots need the dvc package", hint="pip install 'dvc>=3.50'") from exc
    return Repo


def _md5_and_blake3(path: str) -> tuple[int, str, str]:
    md5 = hashlib.md5(usedforsecurity=False)
    b3 = blake3.blake3()
    size = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(_CHUNK):
            md5.update(chunk)
            b3.update(chunk)
            size += len(chunk)
    return size, md5.hexdigest(), b3.hexdigest()


def create_dvc_snapshot(
    repo: str | Path,
    path: str,
    store: StoreLike,
    *,
    rev: str = "HEAD",
    progress: ProgressFn | None = None,
) -> SnapshotInfo:
    """Pin DVC-tracked ``path`` (a file or folder) of local repository ``repo`` at git revision ``rev``."""
    Repo = _repo_api()
    root = Path(repo).resolve()
    rel = path.strip("/")
    try:
        with Repo(os.fspath(root)) as opened:
            commit = opened.scm.resolve_rev(rev)
            cache = opened.cache.local
            cache_dir = os.path.abspath(cache.path)
            listing = Repo.ls(os.fspath(root), rel, rev=commit, recursive=True, dvc_only=True)
            objects = [(item, cache.oid_to_path(item["md5"])) for item in listing if item.get("md5")]
            remote = _remote(opened)
    except Exception as exc:  # dvc raises NotDvcRepoError, RevError, PathMissingError, SCMError...
        if isinstance(exc, (BadInput, NotFound)):
            raise
        raise NotFound(f"cannot resolve DVC path {rel!r} of {root} at {rev!r}: {exc}", hint="check the repository, revision and path") from exc
    untracked = [item["path"] for item in listing if not item.get("md5") and not item.get("isdir")]
    if untracked or not objects:
        raise BadInput(
            f"{rel!r} of {root} at {rev} is not tracked by DVC" + (f" ({', '.join(untracked[:3])} have no DVC hash)" if untracked else ""),
            hint="name a path DVC tracks (dvc add PATH; git commit the .dvc file)",
        )
    entries: list[Entry] = []
    for done, (item, object_path) in enumerate(objects, 1):
        name = item["path"]  # relative to a tracked folder; a tracked file's own name
        if not os.path.isfile(object_path):
            raise NotFound(
                f"{rel}/{item['path']} (md5 {item['md5']}) of {root} at {commit[:12]} is not in the DVC cache {cache_dir}",
                hint=f"fetch it first: dvc fetch --rev {commit} {rel}",
            )
        size, md5, digest = _md5_and_blake3(object_path)
        if md5 != item["md5"]:
            raise BadInput(
                f"the DVC cache object {object_path} for {rel}/{item['path']} has md5 {md5}, DVC recorded {item['md5']}",
                hint="the cache is corrupted: remove the object and dvc fetch/pull it again",
            )
        source = {"uri": "file://" + os.path.abspath(object_path), "md5": md5}
        if remote is not None:  # where another host (a GPU worker without this cache) fetches the object
            source["remote"] = remote[1](md5)
        entries.append(Entry(path=check_entry_path(name), size=size, hash=digest, source=source))
        if progress is not None and (done % 64 == 0 or done == len(objects)):
            progress("hashing", done, len(objects))
    origin = {"repo": "file://" + os.fspath(root), "rev": commit, "path": rel, "cache": "file://" + cache_dir}
    if remote is not None:
        origin["remote_name"], origin["remote"] = remote[0]
    manifest = Manifest.build(entries, kind=KIND, origin=origin)
    blob = as_store(store)
    sid = put_manifest(manifest, blob)
    return SnapshotInfo(sid, len(manifest.files), manifest.total_bytes, 0, manifest.kind, blob.uri)


def _remote(opened):
    """The repository's default DVC remote: (its name and URL, the URI of an object by md5), or None when it has none.

    DVC 3 keeps objects in a remote as ``<url>/files/md5/<2>/<30>``; only local-path and S3 remotes are fetched
    by the materialiser (``auditor.snapshots.reference.fetch_sources``), others are recorded and named when lost.
    """
    name = (opened.config.get("core") or {}).get("remote")
    if not name:
        return None
    odb = opened.cloud.get_remote_odb(name)
    scheme = {"local": "file://", "s3": "s3://"}.get(odb.fs.protocol, f"{odb.fs.protocol}://")

    def uri(path: str) -> str:
        return scheme + (os.path.abspath(path) if scheme == "file://" else path)

    return (name, uri(odb.path)), lambda md5: uri(odb.oid_to_path(md5))


__all__ = ["KIND", "create_dvc_snapshot"]
