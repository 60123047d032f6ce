"""Which blob store answers which URI scheme: ``open_store`` and ``register_scheme``.

The registry lives here, above the interface and the backends, so neither
imports the other's registry: ``base`` knows no backend, a backend knows only
``base``, and each built-in backend is imported when its scheme is first opened
(``s3.py`` imports boto3 only when a client is needed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from auditor.errors import UnknownScheme
from auditor.storage.base import BlobStore


def _memory(uri: str) -> BlobStore:
    from auditor.storage.memory import MemoryStore

    return MemoryStore.from_uri(uri)


def _file(uri: str) -> BlobStore:
    from auditor.storage.local import LocalStore

    return LocalStore.from_uri(uri)


def _s3(uri: str) -> BlobStore:
    from auditor.storage.s3 import S3Store

    return S3Store.from_uri(uri)


_BACKENDS: dict[str, Callable[[str], BlobStore]] = {"memory": _memory, "file": _file, "s3": _s3}


def register_scheme(scheme: str, factory: Callable[[str], BlobStore]) -> None:
    """Make ``open_store`` answer ``scheme://`` URIs with ``factory(uri)`` (replacing a built-in one)."""
    _BACKENDS[scheme] = factory


def open_store(uri: str | Path) -> BlobStore:
    """Open the store a URI names. A plain path means a local directory."""
    uri = str(uri)
    scheme = urlparse(uri).scheme if "://" in uri else "file"
    try:
        factory = _BACKENDS[scheme]
    except KeyError:
        valid = ", ".join(f"{s}://" for s in sorted(_BACKENDS))
        raise UnknownScheme(f"no blob store for {uri!r}", hint=f"use one of {valid} or a plain path") from None
    return factory(uri)
