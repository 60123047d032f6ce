"""A blob store in a local directory: ``file:///abs/dir`` or a plain path.

Writes go to a temporary file under ``<root>/.tmp`` and are then hard-linked
into place, because ``os.link`` fails when the name exists: that is the local
twin of S3's conditional create, atomic and race-free between processes.
Objects are left read-only so that a hard-linked copy handed to a training
script is not edited by accident (root ignores the bit; verification re-hashes).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlparse

from auditor.errors import BadInput, NotFound, ObjectConflict, UnsafePath
from auditor.storage.base import BlobStore

_TMP = ".tmp"


class LocalStore(BlobStore):
    """Objects as files under ``root``, one file per key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.uri = str(root)

    @property
    def identity(self) -> str:
        """``file:///absolute/path``: ``reports``, ``./reports`` and its absolute path are one store."""
        return self.root.resolve().as_uri()

    @classmethod
    def from_uri(cls, uri: str) -> LocalStore:
        if "://" not in uri:
            return cls(Path(uri))
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise BadInput(f"{uri!r} names a remote host", hint="use file:///absolute/path or a plain path")
        return cls(Path(unquote(parsed.path)))

    def _path(self, key: str) -> Path:
        """The file of a checked key; the staging folder is not a key."""
        if key.split("/", 1)[0] == _TMP:
            raise UnsafePath(f"store key {key!r} uses the reserved {_TMP!r} folder of a local store")
        return self.root / key

    def _write(self, key: str, data: bytes | Path, overwrite: bool) -> bool:
        final = self._path(key)
        if not overwrite and final.exists():
            return False
        staging = self.root / _TMP
        staging.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=staging, prefix="w-")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                if isinstance(data, Path):
                    with open(data, "rb") as src:
                        shutil.copyfileobj(src, out, 8 << 20)
                else:
                    out.write(data)
            tmp.chmod(0o444)
            final.parent.mkdir(parents=True, exist_ok=True)
            if overwrite:
                os.replace(tmp, final)
                return True
            try:
                os.link(tmp, final)
            except FileExistsError:
                return False
            return True
        except NotADirectoryError as exc:
            raise ObjectConflict(f"cannot write {key!r} in {self.root}: a parent of it is an object") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def _read(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFound(f"no object {key!r} in {self.root}") from None

    def _download(self, key: str, out: IO[bytes]) -> None:
        try:
            src = open(self._path(key), "rb")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFound(f"no object {key!r} in {self.root}") from None
        with src:
            shutil.copyfileobj(src, out, 8 << 20)

    def _exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def _list(self, prefix: str) -> Iterable[str]:
        # Walk only the folder the prefix pins down, not the whole store.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root / base if base else self.root
        for folder, dirs, files in os.walk(start):
            rel = Path(folder).relative_to(self.root).as_posix()
            if rel == ".":
                rel = ""
                dirs[:] = [d for d in dirs if d != _TMP]
            for name in files:
                yield f"{rel}/{name}" if rel else name

    def _local_path(self, key: str) -> Path | None:
        return self._path(key)
