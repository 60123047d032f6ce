"""The packages of the environment: every installed distribution, local ones pinned by content, the lock file.

Failures are recorded as data (a local package's ``error``), never raised.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditor import git
from auditor.digests import hasher, sha256_digest, sha256_file, sha256_hex, spelled
from auditor.git import GitFailed
from auditor.lineage.gather.code import own_excludes
from auditor.lineage.record import LocalPackage
from auditor.lineage.redact import redact_text

LOCK_FILES = ("uv.lock", "poetry.lock", "Pipfile.lock", "pdm.lock", "conda-lock.yml", "requirements.lock", "requirements.txt")


def installed_packages() -> dict[str, str]:
    """Every installed distribution as normalised name -> exact version (importlib.metadata).

    Name and version come from the ``name-version.dist-info`` folder when there
    is one (what pip and uv write), which skips parsing 300 METADATA files.
    """
    packages: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        folder = getattr(dist, "_path", None)
        stem = folder.name[: -len(".dist-info")] if folder is not None and folder.name.endswith(".dist-info") else ""
        name, _, version = stem.partition("-")
        if not (name and version and "-" not in version):
            name, version = dist.metadata.get("Name") or "", dist.version
        if name:
            packages[re.sub(r"[-_.]+", "-", name).lower()] = version
    return dict(sorted(packages.items()))


#: a local package's source tree larger than this is recorded without a digest (and says why)
MAX_TREE_FILES = 20_000
MAX_TREE_BYTES = 1 << 30
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", "node_modules",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache", *("mlruns", "mlartifacts", ".repro")})


def _normal_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def local_packages(env: Mapping[str, str] | None = None) -> dict[str, LocalPackage]:
    """Distributions installed from a local folder (``direct_url.json`` with a ``file://`` URL), pinned by content.

    An editable install serves whatever its source folder holds, so that folder is digested (its git
    commit and dirty flag too, when it is in a repository). A local install copied into
    site-packages is digested by its installed files (the hashes in its ``RECORD``); the source
    folder's commit is noted when it still exists. Failures are recorded as data, never raised.
    """
    import json
    from urllib.parse import unquote, urlparse

    found: dict[str, LocalPackage] = {}
    for dist in importlib.metadata.distributions():
        folder = getattr(dist, "_path", None)
        if folder is None:
            continue
        direct = Path(folder) / "direct_url.json"
        try:
            info = json.loads(direct.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue  # installed from an index: its version names it
        except (OSError, ValueError):
            continue
        url = info.get("url", "") if isinstance(info, dict) else ""
        if not url.startswith("file://"):
            continue  # VCS and remote archive URLs carry their own immutable ids
        name = _normal_name(dist.metadata.get("Name") or Path(folder).name.split("-")[0])
        source = Path(unquote(urlparse(url).path))
        editable = bool((info.get("dir_info") or {}).get("editable"))
        found[name] = _local_package(dist, source, editable, env)
    return dict(sorted(found.items()))


def _local_package(dist: Any, source: Path, editable: bool, env: Mapping[str, str] | None) -> LocalPackage:
    facts: dict[str, Any] = {"version": dist.version or "", "path": redact_text(str(source)), "editable": editable}
    errors: list[str] = []
    commit, dirty, git_files = _source_git(source, env)
    facts["commit"], facts["dirty"] = commit, dirty
    try:
        if editable:  # what runs is the source folder, as it is now
            if not source.is_dir():
                raise OSError(f"source folder {source} does not exist")
            files = git_files if git_files is not None else _walk(source)
            facts["tree_digest"], facts["files"] = _tree_digest(source, files)
        else:  # what runs is the copy in site-packages
            facts["tree_digest"], facts["files"] = _installed_digest(dist)
    except (OSError, ValueError) as exc:
        errors.append(str(exc))
    if errors:
        facts["error"] = redact_text("; ".join(errors))
    return LocalPackage(**facts)


def _source_git(source: Path, env: Mapping[str, str] | None) -> tuple[str | None, bool | None, list[str] | None]:
    """HEAD, dirty flag and the non-ignored files under ``source`` when it lies in a git work tree."""
    if not source.is_dir() or not git.available():
        return None, None, None
    try:
        top = Path(git.output(["rev-parse", "--show-toplevel"], source).strip())
        commit = git.output(["rev-parse", "--verify", "HEAD^{commit}"], top).strip()
    except GitFailed:
        return None, None, None
    excludes = own_excludes(top, source, env)
    status = git.output(["status", "--porcelain", "--untracked-files=all", "--", ".", *excludes], source)
    listed = git.output(["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".", *excludes], source)
    files = sorted({p for p in listed.split("\0") if p and (source / p).is_file()})
    return commit, bool(status.strip()), files


def _walk(source: Path) -> list[str]:
    files: list[str] = []
    for root, dirs, names in os.walk(source):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in names:
            if not name.endswith((".pyc", ".pyo")):
                files.append(Path(root, name).relative_to(source).as_posix())
        if len(files) > MAX_TREE_FILES:
            break
    return sorted(files)


def _tree_digest(source: Path, files: Sequence[str]) -> tuple[str, int]:
    if len(files) > MAX_TREE_FILES:
        raise ValueError(f"{source} holds more than {MAX_TREE_FILES} files: not digested")
    total = hasher()
    size = 0
    for rel in files:
        data = (source / rel).read_bytes()
        size += len(data)
        if size > MAX_TREE_BYTES:
            raise ValueError(f"{source} holds more than {MAX_TREE_BYTES >> 20} MiB: not digested")
        total.update(f"{rel}\0{sha256_hex(data)}\n".encode("utf-8", "surrogateescape"))
    return spelled(total.hexdigest()), len(files)


def _installed_digest(dist: Any) -> tuple[str, int]:
    """A local non-editable install: the installed files as its RECORD hashes them."""
    entries = sorted(f"{f.as_posix()}\0{f.hash.value}" for f in (dist.files or []) if f.hash is not None)
    if not entries:
        raise ValueError("its RECORD lists no hashed files")
    return sha256_digest("\n".join(entries).encode("utf-8", "surrogateescape")), len(entries)


def _lock_file(search: Sequence[Path]) -> tuple[str | None, str | None]:
    for folder in search:
        for name in LOCK_FILES:
            path = folder / name
            if path.is_file():
                if name == "requirements.txt" and not _fully_pinned(path):
                    continue  # unpinned requirements are a wish, not a lock
                return name, sha256_file(path)
    return None, None


def _fully_pinned(path: Path) -> bool:
    lines = [ln.split("#")[0].strip() for ln in path.read_text(errors="replace").splitlines()]
    reqs = [ln for ln in lines if ln and not ln.startswith("-")]
    return bool(reqs) and all("==" in ln for ln in reqs)
