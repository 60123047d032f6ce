"""A blob store in a local directory: ``file:///abs/dir`` or a plain path.

Writes go to a temporary file under ``<root>/.tmp`` and are then hard-linked
into place, because ``os.link`` fails when the name exists: that is the local
twin of S3's conditional create, atomic and race-free between processes.
Objects are left read-only so that a hard-linked copy handed to a training
script is not edited by accident (root ignores the bit; verification re-hashes).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

from auditor.errors import BadInput, InfrastructureError, NotFound, ObjectConflict, UnsafePath
from auditor.storage.base import BlobStore, check_key

_TMP = ".tmp"


class LocalStore(BlobStore):
    """Objects as files under ``root``, one file per key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.uri = str(root)

    @classmethod
    def from_uri(cls, uri: str) -> LocalStore:
        if "://" not in uri:
            return cls(Path(uri))
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise BadInput(f"{uri!r} names a remote host", hint="use file:///absolute/path or a plain path")
        return cls(Path(unquote(parsed.path)))

    def _path(self, key: str) -> Path:
        check_key(key)
        if key.split("/", 1)[0] == _TMP:
            raise UnsafePath(f"store key {key!r} uses the reserved {_TMP!r} folder of a local store")
        return self.root / key

    def _staging(self) -> Path:
        staging = self.root / _TMP
        try:
            staging.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InfrastructureError(f"cannot create the store folder {staging}: {exc.strerror}") from exc
        return staging

    def write(self, key: str, data: bytes | Path, *, overwrite: bool = False) -> bool:
        final = self._path(key)
        if not overwrite and final.exists():
            return False
        fd, tmp_name = tempfile.mkstemp(dir=self._staging(), prefix="w-")
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
        except FileNotFoundError as exc:
            if isinstance(data, Path) and not data.exists():
                raise NotFound(f"cannot store {key!r}: the source file {data} does not exist") from exc
            raise InfrastructureError(f"cannot write {final}: {exc}") from exc
        except NotADirectoryError as exc:
            raise ObjectConflict(f"cannot write {key!r} in {self.root}: a parent of it is an object") from exc
        except OSError as exc:
            raise InfrastructureError(f"cannot write {final}: {exc.strerror or exc}") from exc
        finally:
            tmp.unlink(missing_ok=True)

    def read(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise NotFound(f"no object {key!r} in {self.root}") from None
        except OSError as exc:
            raise InfrastructureError(f"cannot read {path}: {exc.strerror or exc}") from exc

    def download(self, key: str, dest: Path) -> None:
        path = self._path(key)
        try:
            with open(path, "rb") as src, open(dest, "xb") as out:
                shutil.copyfileobj(src, out, 8 << 20)
        except FileExistsError:
            raise BadInput(f"cannot download {key!r} to {dest}: the file exists", hint="choose a new path") from None
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            if not path.is_file():
                raise NotFound(f"no object {key!r} in {self.root}") from None
            raise InfrastructureError(f"cannot create {dest}: its folder does not exist") from None
        except OSError as exc:
            raise InfrastructureError(f"cannot copy {path} to {dest}: {exc.strerror or exc}") from exc

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> Iterator[str]:
        # Walk only the folder the prefix pins down, not the whole store.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root / base if base else self.root
        found: list[str] = []
        try:
            for folder, dirs, files in os.walk(start):
                rel = Path(folder).relative_to(self.root).as_posix()
                if rel == ".":
                    rel = ""
                    dirs[:] = [d for d in dirs if d != _TMP]
                for name in files:
                    key = f"{rel}/{name}" if rel else name
                    if key.startswith(prefix):
                        found.append(key)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise InfrastructureError(f"cannot list {start}: {exc.strerror or exc}") from exc
        yield from sorted(found)

    def local_path(self, key: str) -> Path | None:
        return self._path(key)
