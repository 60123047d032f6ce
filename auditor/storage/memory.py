"""An in-process blob store: the test double, and ``memory://NAME`` for demos.

Stores with the same name share their objects for the life of the process, so
``open_store("memory://x")`` twice sees one store (as two S3 clients see one
bucket).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from auditor.errors import BadInput, NotFound
from auditor.storage.base import BlobStore, check_key

_SHARED: dict[str, dict[str, bytes]] = {}
_SHARED_LOCK = threading.Lock()


class MemoryStore(BlobStore):
    """Bytes in a dict, shared per name; atomic under one lock."""

    def __init__(self, name: str = "default") -> None:
        self.name = name
        self.uri = f"memory://{name}"
        with _SHARED_LOCK:
            self._objects = _SHARED.setdefault(name, {})

    @classmethod
    def from_uri(cls, uri: str) -> MemoryStore:
        parsed = urlparse(uri)
        name = (parsed.netloc + parsed.path).strip("/") or "default"
        return cls(name)

    def write(self, key: str, data: bytes | Path, *, overwrite: bool = False) -> bool:
        check_key(key)
        payload = Path(data).read_bytes() if isinstance(data, Path) else bytes(data)
        with _SHARED_LOCK:
            if not overwrite and key in self._objects:
                return False
            self._objects[key] = payload
        return True

    def read(self, key: str) -> bytes:
        check_key(key)
        try:
            return self._objects[key]
        except KeyError:
            raise NotFound(f"no object {key!r} in {self.uri}") from None

    def download(self, key: str, dest: Path) -> None:
        data = self.read(key)
        try:
            with open(dest, "xb") as out:
                out.write(data)
        except FileExistsError:
            raise BadInput(f"cannot download {key!r} to {dest}: the file exists", hint="choose a new path") from None

    def exists(self, key: str) -> bool:
        return check_key(key) in self._objects

    def list(self, prefix: str = "") -> Iterator[str]:
        with _SHARED_LOCK:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
        yield from keys

    @staticmethod
    def forget(name: str) -> None:
        """Drop a named store's objects (tests use it to start clean)."""
        with _SHARED_LOCK:
            _SHARED.get(name, {}).clear()
