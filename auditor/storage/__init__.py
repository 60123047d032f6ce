"""Blob stores chosen by URI scheme: ``memory://``, ``file://`` (or a plain path), ``s3://``.

One small surface (see ``BlobStore``) that the snapshot store and the report
publisher both sit on, so no backend ever re-implements a layout: layouts live
above this layer, bytes live below it.
"""

from auditor.storage.base import BlobStore, open_store

__all__ = ["BlobStore", "open_store"]
