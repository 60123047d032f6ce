"""A blob store in an S3 bucket: ``s3://bucket/prefix``, through boto3.

boto3 is imported here only, when a store first needs a client. Endpoint,
region and credentials come the way boto3 users expect (environment,
``~/.aws``, instance role; boto3 itself honours ``AWS_ENDPOINT_URL``). Creates
are conditional (``IfNoneMatch="*"``), so two writers racing for one key leave
the first object in place.

Whether an exception is an S3 client error is decided by ``is_s3_error`` only,
and ``translate`` alone turns one into ``NotFound`` or ``InfrastructureError``
naming the bucket and key; the public methods of ``BlobStore`` apply it.

Beside the common surface, ``S3Store`` has the S3-only features the snapshot
and report code need, so neither calls boto3 itself::

    store.versioning_status()                    # "Enabled", "Suspended" or None
    store.list_versions("sub/")                  # [ObjectVersion(key, version_id, size, is_latest)], every version
    store.stream_version(key, version_id)        # an iterator of chunks, or None when that version is gone
    store.object_lock()                          # ObjectLock(enabled, mode, days, years), or None when there is none
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from auditor.errors import BadInput, InfrastructureError, NotFound, ReproError
from auditor.storage.base import BlobStore, check_key

_MISSING_CODES = {"404", "NoSuchKey", "NotFound", "NoSuchVersion"}
# A GET by the version id of a delete marker answers 405 (a GET without one, 404).
_GONE_CODES = _MISSING_CODES | {"405", "MethodNotAllowed"}
_EXISTS_CODES = {"412", "PreconditionFailed"}
# S3 answers 409 while another conditional write of the same key is in flight.
_RACE_CODES = {"409", "ConditionalRequestConflict"}
_DENIED_CODES = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}
_NO_LOCK_CODE = "ObjectLockConfigurationNotFoundError"
_CHUNK = 8 << 20
_CLIENT_LOCK = threading.Lock()


def s3_client() -> Any:
    """A boto3 S3 client configured the boto3 way (AWS_ENDPOINT_URL, profiles, roles)."""
    try:
        import boto3
    except ImportError as exc:
        raise BadInput("s3:// stores need boto3", hint="pip install 'repro-audit[s3]'") from exc
    with _CLIENT_LOCK:  # boto3's default session is not safe to use from several threads at once
        return boto3.client("s3")


def is_s3_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from the S3 client stack (botocore, boto3, s3transfer, urllib3): the one rule."""
    return type(exc).__module__.startswith(("botocore", "boto3", "s3transfer", "urllib3"))


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError`` ('' for other errors)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def translate(exc: BaseException, bucket: str, key: str | None = None, *, action: str = "access") -> ReproError:
    """Turn a botocore error into the library's error, naming ``s3://bucket/key``."""
    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    code = error_code(exc)
    if code == "NoSuchBucket":
        return NotFound(f"bucket {bucket!r} does not exist (while trying to {action} {where})")
    if code in _MISSING_CODES:
        return NotFound(f"no object at {where}")
    if code in _DENIED_CODES:
        return InfrastructureError(
            f"S3 refused to {action} {where}: {code}",
            hint="check the credentials boto3 finds (AWS_PROFILE, AWS_ACCESS_KEY_ID) and the bucket policy",
        )
    name = type(exc).__name__
    if name == "NoCredentialsError":
        return InfrastructureError(f"no AWS credentials to {action} {where}", hint="set AWS_PROFILE or AWS_ACCESS_KEY_ID")
    detail = code or str(exc)
    return InfrastructureError(
        f"S3 failed to {action} {where}: {detail}", hint="check AWS_ENDPOINT_URL and that the server is reachable"
    )


@dataclass(frozen=True)
class ObjectVersion:
    """One version of one object, keyed as the store keys it (relative to the store's prefix)."""

    key: str
    version_id: str | None  # None (S3's "null") for an object written before versioning was enabled
    size: int
    is_latest: bool


@dataclass(frozen=True)
class ObjectLock:
    """A bucket's Object Lock configuration: whether it is enabled, and its default retention if it has one."""

    enabled: bool
    mode: str | None = None
    days: int | None = None
    years: int | None = None


class S3Store(BlobStore):
    """Objects under ``prefix/`` in one bucket."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        if not bucket:
            raise BadInput("an s3:// store needs a bucket", hint="use s3://bucket/prefix")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._client = client
        self._client_lock = threading.Lock()

    @classmethod
    def from_uri(cls, uri: str) -> S3Store:
        parsed = urlparse(uri)
        return cls(parsed.netloc, parsed.path)

    @property
    def client(self) -> Any:
        """The boto3 client, made on first use."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = s3_client()
        return self._client

    def object_key(self, key: str) -> str:
        """The bucket key that store key ``key`` lives under."""
        return self._full(check_key(key))

    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _backend_error(self, exc: Exception, key: str | None, action: str) -> ReproError | None:
        if is_s3_error(exc):
            return translate(exc, self.bucket, self._full(key) if key is not None else self.prefix or None, action=action)
        return super()._backend_error(exc, key, action)

    # -- the common surface ---------------------------------------------------------------

    def _write(self, key: str, data: bytes | Path, overwrite: bool) -> bool:
        full = self._full(key)
        extra = {} if overwrite else {"IfNoneMatch": "*"}
        for attempt in range(5):
            try:
                if isinstance(data, Path):
                    with open(data, "rb") as body:
                        self.client.put_object(Bucket=self.bucket, Key=full, Body=body, **extra)
                else:
                    self.client.put_object(Bucket=self.bucket, Key=full, Body=bytes(data), **extra)
                return True
            except Exception as exc:
                code = error_code(exc)
                if code in _EXISTS_CODES:
                    return False
                if code not in _RACE_CODES:
                    raise
                time.sleep(0.05 * 2**attempt)
        if self._exists(key):
            return False
        raise InfrastructureError(f"S3 kept answering 409 to a conditional write of s3://{self.bucket}/{full}")

    def _read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"].read()

    def _download(self, key: str, out: IO[bytes]) -> None:
        body = self.client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"]
        shutil.copyfileobj(body, out, _CHUNK)

    def _exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._full(key))
            return True
        except Exception as exc:
            if error_code(exc) in _MISSING_CODES:
                return False
            raise

    def _list(self, prefix: str) -> Iterable[str]:
        base = f"{self.prefix}/" if self.prefix else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base + prefix)
        return [item["Key"][len(base) :] for page in pages for item in page.get("Contents", [])]

    # -- S3 only --------------------------------------------------------------------------

    def versioning_status(self) -> str | None:
        """The bucket's versioning status: ``"Enabled"``, ``"Suspended"``, or None when it was never enabled."""
        with self._errors(None, "read the versioning status of"):
            return self.client.get_bucket_versioning(Bucket=self.bucket).get("Status")

    def version_ids(self, keys: Iterable[str]) -> dict[str, str]:
        """The current version id of each key; {} on a bucket that keeps no versions."""
        found: dict[str, str] = {}
        for key in keys:
            with self._errors(key, "read the version of"):
                version = self.client.head_object(Bucket=self.bucket, Key=self._full(check_key(key))).get("VersionId")
            if version and version != "null":
                found[key] = version
        return found

    def read_version(self, key: str, version_id: str) -> bytes | None:
        """The bytes of one recorded version of ``key``; None when that version is gone."""
        chunks = self.stream_version(key, version_id)
        return None if chunks is None else b"".join(chunks)

    def list_versions(self, prefix: str = "") -> list[ObjectVersion]:
        """Every version of every object whose store key starts with ``prefix`` (delete markers left out)."""
        base = f"{self.prefix}/" if self.prefix else ""
        with self._errors(None, "list versions under"):
            pages = self.client.get_paginator("list_object_versions").paginate(Bucket=self.bucket, Prefix=base + prefix)
            return [
                ObjectVersion(
                    key=v["Key"][len(base) :],
                    version_id=None if v.get("VersionId") in (None, "null") else v["VersionId"],
                    size=int(v.get("Size", 0)),
                    is_latest=bool(v.get("IsLatest")),
                )
                for page in pages
                for v in page.get("Versions", [])
            ]

    def stream_version(self, key: str, version_id: str | None = None, *, chunk_size: int = _CHUNK) -> Iterator[bytes] | None:
        """The bytes of one version of ``key`` (the current one without ``version_id``), in chunks.

        None when that version is gone: the object or version was deleted, or a
        delete marker hides it. A missing bucket is ``NotFound``; other failures,
        also while the chunks are read, are ``InfrastructureError`` naming the key.
        """
        check_key(key)
        args = {"Bucket": self.bucket, "Key": self._full(key), **({"VersionId": version_id} if version_id else {})}
        with self._errors(key, "read"):
            try:
                body = self.client.get_object(**args)["Body"]
            except Exception as exc:
                if error_code(exc) in _GONE_CODES:
                    return None
                raise
        return self._chunks(body, key, chunk_size)

    def _chunks(self, body: Any, key: str, chunk_size: int) -> Iterator[bytes]:
        with self._errors(key, "read"):
            yield from body.iter_chunks(chunk_size)

    def object_lock(self) -> ObjectLock | None:
        """The bucket's Object Lock configuration and default retention; None when it has no configuration."""
        with self._errors(None, "read the Object Lock configuration of"):
            try:
                answer = self.client.get_object_lock_configuration(Bucket=self.bucket)
            except Exception as exc:
                if error_code(exc) == _NO_LOCK_CODE:
                    return None
                raise
        config = answer.get("ObjectLockConfiguration") or {}
        retention = (config.get("Rule") or {}).get("DefaultRetention") or {}
        return ObjectLock(
            enabled=config.get("ObjectLockEnabled") == "Enabled",
            mode=retention.get("Mode"),
            # A server may answer 0 for the unit not used (moto does): 0 is no retention in that unit.
            days=int(retention.get("Days") or 0) or None,
            years=int(retention.get("Years") or 0) or None,
        )
