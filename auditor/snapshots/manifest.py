"""The snapshot manifest: what a directory holds, in canonical form, and path safety.

A manifest lists every entry of a tree with its ``/``-separated relative path:
files with size and BLAKE3 hash, empty directories, and symlinks with their
(relative, in-tree) target. Special files are refused, never dropped. Entries
sort by path; the snapshot id is ``blake3:<hex>`` of the manifest's canonical
JSON, so the same bytes under the same names always give the same id, wherever
and whenever they were read. Entries of by-reference and Delta snapshots also
carry a ``source`` (``{"uri": ..., "version_id": ...}``) where their bytes live.

    build_manifest(root, progress=None) -> Manifest      # the fingerprint of a directory (or of one file: kind "file")
    Manifest.from_bytes(data, expected_id=None) -> Manifest  # parse + validate (paths checked here)
    manifest.id, manifest.to_bytes(), manifest.files, manifest.total_bytes
    check_snapshot_id(text) -> str
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.canonical import canonical_json
from auditor.digests import SNAPSHOT_ID, SNAPSHOT_ID_HELP
from auditor.errors import BadInput, MalformedRecord, NotFound, UnsafePath
from auditor.snapshots.hashing import ALGORITHM, ProgressFn, hash_bytes, hash_paths

FORMAT = "repro-audit.snapshot/1"
KINDS = ("directory", "file", "s3-reference", "delta", "iceberg", "dvc")
#: where each by-reference kind's sources must lie: the origin field naming that root
_SOURCE_ROOTS = {"s3-reference": "uri", "delta": "table", "iceberg": "location", "dvc": "cache"}
ENTRY_TYPES = ("file", "dir", "symlink")
_HEX = re.compile(r"^[0-9a-f]{64}$")  # a content hash (BLAKE3, bare hex)
_MAX_LINK_HOPS = 40


def check_snapshot_id(text: str) -> str:
    """Return ``text`` if it is a snapshot id (``blake3:`` and 64 lowercase hex digits)."""
    if not isinstance(text, str) or not SNAPSHOT_ID.fullmatch(text):
        raise BadInput(f"{text!r} is not a snapshot id", hint=f"ids look like {SNAPSHOT_ID_HELP}")
    return text


_SUSPECT = re.compile(r"(?:^|/)\.{0,2}(?:/|$)|^[A-Za-z]:|[\\\x00]")


def check_entry_path(path: Any) -> str:
    """Return ``path`` if it is a safe relative ``/``-path, else raise ``UnsafePath`` naming it."""
    if isinstance(path, str) and path and not _SUSPECT.search(path):
        return path  # the common case, in one regex: no empty/'.'/'..' segment, drive, backslash or NUL
    if not isinstance(path, str) or not path:
        raise UnsafePath(f"manifest entry path {path!r} is empty or not a string")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise UnsafePath(f"manifest entry {path!r} is an absolute path", hint="entries must be relative to the snapshot")
    if "\\" in path or "\x00" in path:
        raise UnsafePath(f"manifest entry {path!r} contains a backslash or NUL")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise UnsafePath(f"manifest entry {path!r} has an empty, '.' or '..' segment", hint="'..' could escape DEST")
    return path


def _link_escapes(link: str, target: str, links: Mapping[str, str]) -> bool:
    """Whether ``target``, read from ``link``'s folder, leaves the tree, following the tree's own links.

    The tree that materialisation builds holds only manifest entries, so
    resolving against them is exact: no filesystem is consulted.
    """
    if not target or target.startswith("/") or "\\" in target or "\x00" in target or re.match(r"^[A-Za-z]:", target):
        return True
    stack = link.split("/")[:-1]
    pending = target.split("/")
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return True
            stack.pop()
            continue
        stack.append(part)
        nested = links.get("/".join(stack))
        if nested is not None:
            hops += 1
            if hops > _MAX_LINK_HOPS or nested.startswith("/") or re.match(r"^[A-Za-z]:", nested):
                return True
            stack.pop()
            pending = nested.split("/") + pending
    return False


@dataclass(frozen=True)
class Entry:
    """One manifest entry: a file (size, hash), an empty directory, or a symlink (target)."""

    path: str
    type: str = "file"
    size: int | None = None
    hash: str | None = None
    target: str | None = None
    source: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "type": self.type}
        if self.type == "file":
            out["size"] = self.size
            out["hash"] = self.hash
        if self.target is not None:
            out["target"] = self.target
        if self.source is not None:
            out["source"] = dict(self.source)
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> Entry:
        if not isinstance(data, dict):
            raise MalformedRecord(f"{where}: an entry is a JSON object, got {type(data).__name__}")
        kind = data.get("type", "file")
        if kind not in ENTRY_TYPES:
            raise MalformedRecord(f"{where}: entry type {kind!r} is not one of {', '.join(ENTRY_TYPES)}")
        path = check_entry_path(data.get("path"))
        unknown = set(data) - {"path", "type", "size", "hash", "target", "source"}
        if unknown:
            raise MalformedRecord(f"{where} ({path}): unknown field(s) {', '.join(sorted(unknown))}")
        size, digest, target, source = data.get("size"), data.get("hash"), data.get("target"), data.get("source")
        if kind == "file":
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise MalformedRecord(f"{where} ({path}): size {size!r} is not a non-negative integer")
            if not isinstance(digest, str) or not _HEX.match(digest):
                raise MalformedRecord(f"{where} ({path}): hash {digest!r} is not 64 lowercase hex digits")
        elif size is not None or digest is not None:
            raise MalformedRecord(f"{where} ({path}): a {kind} entry has no size or hash")
        if (kind == "symlink") != isinstance(target, str):
            raise MalformedRecord(f"{where} ({path}): only a symlink entry has a target, and it must have one")
        if source is not None:
            if kind != "file" or not isinstance(source, dict) or not isinstance(source.get("uri"), str):
                raise MalformedRecord(f"{where} ({path}): source must be {{'uri': ..., 'version_id': ...}} on a file")
            if not all(isinstance(v, str) for v in source.values()):
                raise MalformedRecord(f"{where} ({path}): source values must be strings")
        return cls(path=path, type=kind, size=size, hash=digest, target=target, source=source)


def _validate_tree(entries: Iterable[Entry]) -> None:
    """Refuse duplicates, entries under a file or link, and links whose target leaves the tree."""
    by_path: dict[str, Entry] = {}
    for entry in entries:
        check_entry_path(entry.path)
        if entry.path in by_path:
            raise MalformedRecord(f"manifest lists {entry.path!r} twice")
        by_path[entry.path] = entry
    links = {p: e.target or "" for p, e in by_path.items() if e.type == "symlink"}
    leaves = {p: e for p, e in by_path.items() if e.type != "dir"}
    for path in by_path:
        cut = path.find("/")
        while cut != -1:
            parent = leaves.get(path[:cut])
            if parent is not None:
                raise UnsafePath(f"manifest entry {path!r} lies under the {parent.type} {parent.path!r}")
            cut = path.find("/", cut + 1)
    for path, target in links.items():
        if _link_escapes(path, target, links):
            raise UnsafePath(
                f"manifest symlink {path!r} -> {target!r} points outside the snapshot",
                hint="links must be relative and stay inside the tree",
            )


def source_root(kind: str, origin: Mapping[str, Any]) -> str | None:
    """The URI every ``source`` of a by-reference manifest must lie under (None: no sources allowed)."""
    field_name = _SOURCE_ROOTS.get(kind)
    root = origin.get(field_name) if field_name else None
    return root.rstrip("/") + "/" if isinstance(root, str) and root else None


def _validate_sources(entries: Iterable[Entry], kind: str, origin: Mapping[str, Any]) -> None:
    """Sources may only point under the origin, so a crafted manifest cannot fetch arbitrary files or objects."""
    root = source_root(kind, origin)
    for entry in entries:
        if entry.source is None:
            if root is not None and entry.type == "file":
                raise MalformedRecord(f"manifest entry {entry.path!r} of a {kind} snapshot has no source")
            continue
        uri = entry.source.get("uri", "")
        if root is None:
            raise MalformedRecord(f"manifest entry {entry.path!r}: a {kind} snapshot holds its bytes, not sources")
        if not uri.startswith(root) or any(p in ("", ".", "..") for p in uri[len(root) :].split("/")):
            raise UnsafePath(f"manifest entry {entry.path!r}: source {uri!r} is not under {root!r}")
        remote, remote_root = entry.source.get("remote"), origin.get("remote")
        if remote is not None and (not isinstance(remote_root, str) or not remote.startswith(remote_root.rstrip("/") + "/")
                                   or any(p in ("", ".", "..") for p in remote[len(remote_root.rstrip("/")) + 1 :].split("/"))):
            raise UnsafePath(f"manifest entry {entry.path!r}: remote {remote!r} is not under the recorded remote {remote_root!r}")
        if kind == "s3-reference" and not entry.source.get("version_id"):
            raise MalformedRecord(f"manifest entry {entry.path!r}: a by-reference source needs its version_id")


@dataclass(frozen=True)
class Manifest:
    """A validated, canonically ordered manifest; ``id`` is the hash of ``to_bytes()``."""

    entries: tuple[Entry, ...]
    kind: str = "directory"
    origin: Mapping[str, Any] = field(default_factory=dict)
    algorithm: str = ALGORITHM

    @classmethod
    def build(cls, entries: Iterable[Entry], kind: str = "directory", origin: Mapping[str, Any] | None = None) -> Manifest:
        """Sort and validate ``entries`` (path order: code points, the same as UTF-8 byte order)."""
        ordered = tuple(sorted(entries, key=lambda e: e.path))
        if kind not in KINDS:
            raise MalformedRecord(f"manifest kind {kind!r} is not one of {', '.join(KINDS)}")
        origin = dict(origin or {})
        if kind == "file" and (len(ordered) != 1 or ordered[0].type != "file" or "/" in ordered[0].path):
            raise MalformedRecord("a manifest of kind 'file' lists exactly one file at its top level")
        _validate_tree(ordered)
        _validate_sources(ordered, kind, origin)
        return cls(entries=ordered, kind=kind, origin=origin)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "algorithm": self.algorithm,
            "kind": self.kind,
            "origin": dict(self.origin),
            "entries": [e.to_json() for e in self.entries],
        }

    def to_bytes(self) -> bytes:
        """The canonical JSON bytes the id is the hash of (computed once)."""
        cached = self.__dict__.get("_bytes")
        if cached is None:
            # Entries hold only str and int, so canonical_json's walk for NaN/Infinity would find nothing
            # (allow_nan=False still refuses any); this is the same call it ends in, and a test holds them equal.
            canonical_json(dict(self.origin))
            cached = json.dumps(
                self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode("utf-8")
            object.__setattr__(self, "_bytes", cached)
        return cached

    @property
    def id(self) -> str:
        return f"{ALGORITHM}:{hash_bytes(self.to_bytes())}"

    @property
    def files(self) -> list[Entry]:
        return [e for e in self.entries if e.type == "file"]

    @property
    def total_bytes(self) -> int:
        return sum(e.size or 0 for e in self.files)

    @classmethod
    def from_bytes(cls, data: bytes, *, where: str = "manifest") -> Manifest:
        """Parse and validate manifest bytes; ``MalformedRecord``/``UnsafePath`` name the entry at fault."""
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MalformedRecord(f"{where} is not valid JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise MalformedRecord(f"{where} is not a JSON object")
        if doc.get("format") != FORMAT:
            raise MalformedRecord(f"{where}: format {doc.get('format')!r} is not {FORMAT!r}", hint="upgrade repro-audit")
        if doc.get("algorithm") != ALGORITHM:
            raise MalformedRecord(f"{where}: hash algorithm {doc.get('algorithm')!r} is not supported (only blake3)")
        entries = doc.get("entries")
        if not isinstance(entries, list):
            raise MalformedRecord(f"{where}: 'entries' is not a list")
        origin = doc.get("origin", {})
        if not isinstance(origin, dict):
            raise MalformedRecord(f"{where}: 'origin' is not an object")
        parsed = [Entry.from_json(item, f"{where} entry {i}") for i, item in enumerate(entries)]
        return cls.build(parsed, kind=doc.get("kind", "directory"), origin=origin)


def _display(path: str) -> str:
    return path.encode("utf-8", "backslashreplace").decode("utf-8")


def _scan(root: str | Path, strict: bool) -> tuple[list[tuple[str, str]], list[Entry]]:
    """(files as (relative, full) paths, every other entry) under ``root``."""
    base = Path(root)
    if not base.exists():
        raise NotFound(f"{base} does not exist")
    if not base.is_dir():
        raise BadInput(f"{base} is not a directory", hint="snapshot a directory")
    real_root = os.path.realpath(base)
    files: list[tuple[str, str]] = []
    others: list[Entry] = []
    stack: list[tuple[str, str]] = [(os.fspath(base), "")]
    while stack:
        folder, rel = stack.pop()
        children = 0
        with os.scandir(folder) as it:
            for item in it:
                children += 1
                name = f"{rel}/{item.name}" if rel else item.name
                if not name.isascii():
                    try:
                        name.encode("utf-8")
                    except UnicodeEncodeError:
                        if strict:
                            raise BadInput(f"{_display(item.path)}: the name is not UTF-8") from None
                        name = _display(name)
                if item.is_file(follow_symlinks=False):
                    files.append((name, item.path))
                elif item.is_dir(follow_symlinks=False):
                    stack.append((item.path, name))
                elif item.is_symlink():
                    target = os.readlink(item.path)
                    real = os.path.realpath(item.path)
                    inside = real == real_root or real.startswith(real_root + os.sep)
                    if strict and (os.path.isabs(target) or not inside):
                        raise UnsafePath(
                            f"{item.path} is a symlink to {target!r}, outside {base}",
                            hint="copy the data into the tree, or make the link relative and inside it",
                        )
                    others.append(Entry(path=name, type="symlink", target=target))
                else:
                    mode = item.stat(follow_symlinks=False).st_mode
                    if strict:
                        raise BadInput(
                            f"{item.path} is a special file ({stat.filemode(mode)}); snapshots hold files, dirs and links",
                            hint="remove it or snapshot a folder without it",
                        )
                    others.append(Entry(path=name, type="special", target=stat.filemode(mode)))
        if children == 0 and rel:
            others.append(Entry(path=rel, type="dir"))
    return files, others


def scan_directory(root: str | Path, *, strict: bool = True) -> list[Entry]:
    """Every entry under ``root`` without hashes: files (size/hash unset), empty dirs, symlinks.

    ``strict`` refuses symlinks that leave the tree, special files and names
    that are not UTF-8 (what ``create`` needs); otherwise they are returned as
    entries (special files as type "special") so that ``verify --path`` can report them.
    """
    files, others = _scan(root, strict)
    return [Entry(path=rel) for rel, _ in files] + others


def single_file(path: str | Path) -> bool:
    """Whether ``path`` names one regular file (a snapshot of kind "file"); a symlink is refused."""
    base = Path(path)
    if base.is_symlink():
        raise UnsafePath(f"{base} is a symlink", hint=f"snapshot the file it points to ({os.path.realpath(base)})")
    return base.is_file()


def build_manifest(root: str | Path, *, progress: ProgressFn | None = None) -> Manifest:
    """Scan and hash ``root`` (a directory, or one file): the fingerprint whose ``id`` names the snapshot.

    One file gives a manifest of kind "file" with one entry, named as the file is.
    """
    if single_file(root):
        name = Path(root).name
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput(f"{_display(os.fspath(root))}: the name is not UTF-8") from None
        [(size, digest)] = hash_paths([root], progress=progress)
        return Manifest.build([Entry(name, "file", size, digest)], kind="file")
    files, others = _scan(root, strict=True)
    hashed = hash_paths([full for _, full in files], progress=progress)
    entries = [Entry(rel, "file", size, digest) for (rel, _), (size, digest) in zip(files, hashed, strict=True)]
    return Manifest.build(entries + others)
