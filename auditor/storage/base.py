"""The blob-store interface and the scheme registry.

Backends implement five methods. Keys are ``/``-separated relative paths; the
base class refuses keys that could escape the store (``..``, absolute, empty
segments) before a backend sees them.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

from auditor.errors import UnknownScheme, UnsafePath


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative ``/``-path, else raise ``UnsafePath``."""
    if not key or key.startswith("/") or "\\" in key or "\x00" in key:
        raise UnsafePath(f"store key {key!r} is not a relative path", hint="use a/b/c style keys")
    parts = key.split("/")
    if any(part in {"", ".", ".."} for part in parts):
        raise UnsafePath(f"store key {key!r} has an empty, '.' or '..' segment", hint="use a/b/c style keys")
    return key


class BlobStore(abc.ABC):
    """Immutable-by-default bytes under string keys."""

    uri: str

    @abc.abstractmethod
    def write(self, key: str, data: bytes | Path, *, overwrite: bool = False) -> bool:
        """Store ``data`` (bytes, or a file to stream) under ``key``.

        Without ``overwrite`` it is a conditional create: returns False, writing
        nothing, when ``key`` already exists (whatever its bytes). Writes are
        atomic: a reader sees the old object, the new one, or none.
        """

    @abc.abstractmethod
    def read(self, key: str) -> bytes:
        """The bytes under ``key``; ``NotFound`` naming the key when absent."""

    @abc.abstractmethod
    def download(self, key: str, dest: Path) -> None:
        """Stream the object under ``key`` to the file ``dest`` (which must not exist)."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """Whether ``key`` holds an object."""

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with ``prefix``, in sorted order."""

    def local_path(self, key: str) -> Path | None:
        """The object's file when the store is a local directory (for hard links), else None."""
        return None


_BACKENDS: dict[str, Callable[[str], BlobStore]] = {}
_BUILTINS_LOADED = False


def register_scheme(scheme: str, factory: Callable[[str], BlobStore]) -> None:
    """Make ``open_store`` answer ``scheme://`` URIs with ``factory(uri)``."""
    _BACKENDS[scheme] = factory


def open_store(uri: str | Path) -> BlobStore:
    """Open the store a URI names. A plain path means a local directory."""
    uri = str(uri)
    scheme = urlparse(uri).scheme if "://" in uri else "file"
    if not _BUILTINS_LOADED:
        _register_builtin()
    try:
        factory = _BACKENDS[scheme]
    except KeyError:
        valid = ", ".join(f"{s}://" for s in sorted(_BACKENDS))
        raise UnknownScheme(f"no blob store for {uri!r}", hint=f"use one of {valid} or a plain path") from None
    return factory(uri)


def _register_builtin() -> None:
    # Imported here so that importing the interface never imports a backend; s3.py imports boto3 lazily itself.
    global _BUILTINS_LOADED
    from auditor.storage import local, memory, s3

    for scheme, factory in (
        ("memory", memory.MemoryStore.from_uri),
        ("file", local.LocalStore.from_uri),
        ("s3", s3.S3Store.from_uri),
    ):
        _BACKENDS.setdefault(scheme, factory)
    _BUILTINS_LOADED = True
