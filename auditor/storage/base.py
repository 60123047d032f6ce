"""The blob-store interface: public methods here, small private ones in each backend.

As Kedro's ``AbstractDataset.load()``/``_load()`` and MLflow's artifact
repositories do, every public method does the shared work once: it checks the
key (``check_key``: no ``..``, absolute or empty segments), calls the backend's
private method (``_write``, ``_read``, ``_download``, ``_exists``, ``_list``,
``_local_path``), and turns what the backend raised into the library's errors
naming the store URI and the key (``_backend_error``). A backend raises a
``ReproError`` itself only for what only it can tell (a missing object, a
parent that is an object); anything else it lets through to be wrapped here.

This module imports no backend: ``open_store`` and the scheme registry live in
``auditor.storage.schemes``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from auditor.errors import BadInput, InfrastructureError, NotFound, ReproError, UnsafePath


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative ``/``-path, else raise ``UnsafePath``."""
    if not key or key.startswith("/") or "\\" in key or "\x00" in key:
        raise UnsafePath(f"store key {key!r} is not a relative path", hint="use a/b/c style keys")
    parts = key.split("/")
    if any(part in {"", ".", ".."} for part in parts):
        raise UnsafePath(f"store key {key!r} has an empty, '.' or '..' segment", hint="use a/b/c style keys")
    return key


def os_detail(exc: OSError) -> str:
    """``strerror: filename`` of an ``OSError`` (or its text when it has neither)."""
    if exc.strerror and exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    return exc.strerror or str(exc) or type(exc).__name__


class BlobStore(abc.ABC):
    """Immutable-by-default bytes under string keys."""

    uri: str

    # -- the public surface: shared work, then the backend -----------------------------

    def write(self, key: str, data: bytes | Path, *, overwrite: bool = False) -> bool:
        """Store ``data`` (bytes, or a file to stream) under ``key``.

        Without ``overwrite`` it is a conditional create: returns False, writing
        nothing, when ``key`` already exists (whatever its bytes). Writes are
        atomic: a reader sees the old object, the new one, or none.
        """
        check_key(key)
        with self._errors(key, "write"):
            try:
                return self._write(key, data, overwrite)
            except FileNotFoundError:
                if isinstance(data, Path) and not data.exists():
                    raise NotFound(f"cannot store {key!r}: the source file {data} does not exist") from None
                raise

    def read(self, key: str) -> bytes:
        """The bytes under ``key``; ``NotFound`` naming the key when absent."""
        check_key(key)
        with self._errors(key, "read"):
            return self._read(key)

    def download(self, key: str, dest: Path) -> None:
        """Stream the object under ``key`` to the file ``dest`` (which must not exist); no file is left on failure."""
        check_key(key)
        dest = Path(dest)
        try:
            out = open(dest, "xb")
        except FileExistsError:
            raise BadInput(f"cannot download {key!r} to {dest}: the file exists", hint="choose a new path") from None
        except FileNotFoundError:
            raise InfrastructureError(f"cannot create {dest}: its folder does not exist") from None
        except OSError as exc:
            raise InfrastructureError(f"cannot create {dest} to download {key!r} into: {os_detail(exc)}") from exc
        try:
            with out, self._errors(key, "download"):
                self._download(key, out)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise

    def exists(self, key: str) -> bool:
        """Whether ``key`` holds an object."""
        check_key(key)
        with self._errors(key, "look up"):
            return self._exists(key)

    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with ``prefix``, in sorted order."""
        with self._errors(None, "list"):
            keys = sorted(k for k in self._list(prefix) if k.startswith(prefix))
        yield from keys

    @property
    def identity(self) -> str:
        """The store's one spelling, whatever path or URI opened it (what anchors name it by)."""
        return self.uri

    def version_ids(self, keys: Iterable[str]) -> dict[str, str]:
        """``{key: version id}`` of the current version of each key, where the store keeps versions (S3); else {}."""
        return {}

    def local_path(self, key: str) -> Path | None:
        """The object's file when the store is a local directory (for hard links), else None."""
        check_key(key)
        return self._local_path(key)

    # -- what a backend implements ------------------------------------------------------

    @abc.abstractmethod
    def _write(self, key: str, data: bytes | Path, overwrite: bool) -> bool:
        """Store ``data`` under the checked ``key``; False (nothing written) when it exists and not ``overwrite``."""

    @abc.abstractmethod
    def _read(self, key: str) -> bytes:
        """The bytes under the checked ``key``; raise ``NotFound`` when absent."""

    @abc.abstractmethod
    def _download(self, key: str, out: IO[bytes]) -> None:
        """Copy the object under the checked ``key`` into the open file ``out``; ``NotFound`` when absent."""

    @abc.abstractmethod
    def _exists(self, key: str) -> bool:
        """Whether the checked ``key`` holds an object."""

    @abc.abstractmethod
    def _list(self, prefix: str) -> Iterable[str]:
        """The keys starting with ``prefix``, in any order."""

    def _local_path(self, key: str) -> Path | None:
        return None

    def _backend_error(self, exc: Exception, key: str | None, action: str) -> ReproError | None:
        """The library's error for what the backend raised (None: let it through unchanged).

        ``key`` is the store key, or None for an operation on the whole store.
        Backends extend this for their client's errors; an ``OSError`` is an
        infrastructure error everywhere.
        """
        if isinstance(exc, OSError):
            where = f"{key!r} in {self.uri}" if key is not None else self.uri
            return InfrastructureError(f"cannot {action} {where}: {os_detail(exc)}")
        return None

    @contextmanager
    def _errors(self, key: str | None, action: str) -> Iterator[None]:
        """Re-raise what the block raised as ``_backend_error`` says; a ``ReproError`` passes unchanged."""
        try:
            yield
        except ReproError:
            raise
        except Exception as exc:
            wrapped = self._backend_error(exc, key, action)
            if wrapped is None:
                raise
            raise wrapped from exc

