"""Blob stores chosen by URI scheme: ``memory://``, ``file://`` (or a plain path), ``s3://``.

One small surface (see ``BlobStore``) that the snapshot store and the report
publisher both sit on, so no backend ever re-implements a layout: layouts live
above this layer, bytes live below it::

    store = open_store("s3://bucket/prefix")      # or "memory://x", "/some/dir", "file:///some/dir"
    store.write("a/b", b"bytes")                  # True; False (nothing written) when "a/b" exists
    store.read("a/b"); store.exists("a/b"); list(store.list("a/"))
    store.download("a/b", Path("out.bin")); store.local_path("a/b")   # a Path for local stores, else None

``base`` holds the interface (public methods that check keys and wrap backend
errors, over each backend's small private methods), ``schemes`` the registry,
and ``local``, ``memory``, ``s3`` the backends; only ``S3Store`` has S3-only
methods (object versions, Object Lock).
"""

from auditor.storage.base import BlobStore, check_key
from auditor.storage.schemes import open_store, register_scheme

__all__ = ["BlobStore", "check_key", "open_store", "register_scheme"]
