"""An in-process blob store: the test double, and ``memory://NAME`` for demos.

Stores with the same name share their objects for the life of the process, so
``open_store("memory://x")`` twice sees one store (as two S3 clients see one
bucket).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import IO
from urllib.parse import urlparse

from auditor.errors import NotFound
from auditor.storage.base import BlobStore

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

    def _write(self, key: str, data: bytes | Path, overwrite: bool) -> bool:
        payload = Path(data).read_bytes() if isinstance(data, Path) else bytes(data)
        with _SHARED_LOCK:
            if not overwrite and key in self._objects:
                return False
            self._objects[key] = payload
        return True

    def _read(self, key: str) -> bytes:
        try:
            return self._objects[key]
        except KeyError:
            raise NotFound(f"no object {key!r} in {self.uri}") from None

    def _download(self, key: str, out: IO[bytes]) -> None:
        out.write(self._read(key))

    def _exists(self, key: str) -> bool:
        return key in self._objects

    def _list(self, prefix: str) -> Iterable[str]:
        with _SHARED_LOCK:
            return [k for k in self._objects if k.startswith(prefix)]

    @staticmethod
    def forget(name: str) -> None:
        """Drop a named store's objects (tests use it to start clean)."""
        with _SHARED_LOCK:
            _SHARED.get(name, {}).clear()
