"""A blob store in an S3 bucket: ``s3://bucket/prefix``, through boto3.

boto3 is imported here only, when a store is opened. Endpoint, region and
credentials come the way boto3 users expect (environment, ``~/.aws``, instance
role; boto3 itself honours ``AWS_ENDPOINT_URL``). Creates are conditional
(``IfNoneMatch="*"``), so two writers racing for one key leave the first
object in place. botocore errors become ``NotFound`` or ``InfrastructureError``
naming the bucket and key.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from auditor.errors import BadInput, InfrastructureError, NotFound, ReproError
from auditor.storage.base import BlobStore, check_key

_MISSING_CODES = {"404", "NoSuchKey", "NotFound", "NoSuchVersion"}
_EXISTS_CODES = {"412", "PreconditionFailed"}
# S3 answers 409 while another conditional write of the same key is in flight.
_RACE_CODES = {"409", "ConditionalRequestConflict"}


def s3_client() -> Any:
    """A boto3 S3 client configured the boto3 way (AWS_ENDPOINT_URL, profiles, roles)."""
    try:
        import boto3
    except ImportError as exc:
        raise BadInput("s3:// stores need boto3", hint="pip install 'repro-audit[s3]'") from exc
    return boto3.client("s3")


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
    if code in {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}:
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


def _is_botocore(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("botocore", "boto3", "s3transfer", "urllib3"))


class S3Store(BlobStore):
    """Objects under ``prefix/`` in one bucket."""

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        if not bucket:
            raise BadInput("an s3:// store needs a bucket", hint="use s3://bucket/prefix")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._client = client

    @classmethod
    def from_uri(cls, uri: str) -> S3Store:
        parsed = urlparse(uri)
        return cls(parsed.netloc, parsed.path)

    @property
    def client(self) -> Any:
        """The boto3 client, made on first use."""
        if self._client is None:
            self._client = s3_client()
        return self._client

    def object_key(self, key: str) -> str:
        """The bucket key that store key ``key`` lives under."""
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, exc: BaseException, key: str | None, action: str) -> ReproError:
        return translate(exc, self.bucket, self.object_key(key) if key else self.prefix or None, action=action)

    def write(self, key: str, data: bytes | Path, *, overwrite: bool = False) -> bool:
        full = self.object_key(key)
        extra = {} if overwrite else {"IfNoneMatch": "*"}
        for attempt in range(5):
            try:
                if isinstance(data, Path):
                    with open(data, "rb") as body:
                        self.client.put_object(Bucket=self.bucket, Key=full, Body=body, **extra)
                else:
                    self.client.put_object(Bucket=self.bucket, Key=full, Body=bytes(data), **extra)
                return True
            except FileNotFoundError:
                raise NotFound(f"cannot store {key!r}: the source file {data} does not exist") from None
            except Exception as exc:
                if not _is_botocore(exc):
                    raise
                code = error_code(exc)
                if code in _EXISTS_CODES:
                    return False
                if code not in _RACE_CODES:
                    raise self._fail(exc, key, "write") from exc
                time.sleep(0.05 * 2**attempt)
        if self.exists(key):
            return False
        raise InfrastructureError(f"S3 kept answering 409 to a conditional write of s3://{self.bucket}/{full}")

    def read(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.object_key(key))["Body"].read()
        except Exception as exc:
            if not _is_botocore(exc):
                raise
            raise self._fail(exc, key, "read") from exc

    def download(self, key: str, dest: Path) -> None:
        try:
            out = open(dest, "xb")
        except FileExistsError:
            raise BadInput(f"cannot download {key!r} to {dest}: the file exists", hint="choose a new path") from None
        try:
            with out:
                body = self.client.get_object(Bucket=self.bucket, Key=self.object_key(key))["Body"]
                shutil.copyfileobj(body, out, 8 << 20)
        except BaseException as exc:
            Path(dest).unlink(missing_ok=True)
            if _is_botocore(exc):
                raise self._fail(exc, key, "download") from exc
            raise

    def exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.object_key(key))
            return True
        except Exception as exc:
            if not _is_botocore(exc):
                raise
            if error_code(exc) in _MISSING_CODES:
                return False
            raise self._fail(exc, key, "look up") from exc

    def list(self, prefix: str = "") -> Iterator[str]:
        base = f"{self.prefix}/" if self.prefix else ""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base + prefix)
            keys = [item["Key"][len(base) :] for page in pages for item in page.get("Contents", [])]
        except Exception as exc:
            if not _is_botocore(exc):
                raise
            raise self._fail(exc, None, "list") from exc
        # S3 already lists in UTF-8 byte order; sorting keeps the contract explicit for other servers.
        yield from sorted(keys)
