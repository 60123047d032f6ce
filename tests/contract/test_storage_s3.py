"""The S3-only methods of ``S3Store`` (object versions, Object Lock), on moto's server on loopback."""

from __future__ import annotations

import uuid

import boto3
import pytest

from auditor.errors import NotFound
from auditor.storage import open_store
from auditor.storage.s3 import ObjectLock, S3Store


@pytest.fixture()
def client(s3_endpoint):
    return boto3.client("s3")


def _read(store: S3Store, key: str, version_id: str | None = None) -> bytes | None:
    chunks = store.stream_version(key, version_id, chunk_size=3)
    return None if chunks is None else b"".join(chunks)


def test_an_older_version_reads_back_by_its_id_after_the_key_is_overwritten(client, s3_bucket):
    store = open_store(f"s3://{s3_bucket}/data")
    assert isinstance(store, S3Store)
    store.write("a.csv", b"first")
    first = client.head_object(Bucket=s3_bucket, Key="data/a.csv")["VersionId"]
    store.write("a.csv", b"second", overwrite=True)
    assert _read(store, "a.csv", first) == b"first"
    assert _read(store, "a.csv") == b"second"


def test_a_deleted_version_or_a_delete_marker_reads_as_gone(client, s3_bucket):
    store = S3Store(s3_bucket)
    store.write("k", b"bytes")
    version = client.head_object(Bucket=s3_bucket, Key="k")["VersionId"]
    marker = client.delete_object(Bucket=s3_bucket, Key="k")["VersionId"]
    assert _read(store, "k") is None  # the current version is a delete marker
    assert _read(store, "k", marker) is None  # the marker itself has no bytes
    assert _read(store, "k", version) == b"bytes"  # the version behind the marker is still there
    client.delete_object(Bucket=s3_bucket, Key="k", VersionId=version)
    assert _read(store, "k", version) is None


def test_a_versioned_read_from_a_missing_bucket_is_not_found_naming_the_bucket(s3_endpoint):
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NotFound, match=bucket):
        S3Store(bucket).stream_version("k", "some-version")


def test_list_versions_gives_every_version_keyed_relative_to_the_prefix(client, s3_bucket):
    store = S3Store(s3_bucket, "p")
    store.write("x/one", b"1")
    store.write("x/one", b"11", overwrite=True)
    store.write("two", b"222")
    client.put_object(Bucket=s3_bucket, Key="elsewhere", Body=b"not under the prefix")
    versions = store.list_versions()
    assert sorted((v.key, v.size, v.is_latest) for v in versions) == [
        ("two", 3, True),
        ("x/one", 1, False),
        ("x/one", 2, True),
    ]
    assert all(v.version_id for v in versions)
    assert [v.key for v in store.list_versions("x/")] == ["x/one", "x/one"]
    latest = next(v for v in versions if v.key == "x/one" and v.is_latest)
    assert _read(store, "x/one", latest.version_id) == b"11"


def test_versioning_status_is_read_from_the_bucket(client, s3_bucket):
    assert S3Store(s3_bucket).versioning_status() == "Enabled"
    plain = f"plain-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=plain)
    assert S3Store(plain).versioning_status() is None
    client.put_bucket_versioning(Bucket=plain, VersioningConfiguration={"Status": "Suspended"})
    assert S3Store(plain).versioning_status() == "Suspended"


def test_an_object_written_before_versioning_has_no_version_id(client):
    bucket = f"late-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="old", Body=b"o")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    [version] = S3Store(bucket).list_versions()
    assert (version.key, version.version_id) == ("old", None)


def test_a_bucket_without_object_lock_has_no_lock_configuration(s3_bucket):
    assert S3Store(s3_bucket, "reports").object_lock() is None


@pytest.mark.parametrize(
    ("retention", "expected"),
    [
        (None, ObjectLock(enabled=True)),
        ({"Mode": "COMPLIANCE", "Days": 30}, ObjectLock(enabled=True, mode="COMPLIANCE", days=30)),
        ({"Mode": "GOVERNANCE", "Years": 2}, ObjectLock(enabled=True, mode="GOVERNANCE", years=2)),
    ],
)
def test_the_object_lock_configuration_and_default_retention_are_read(client, retention, expected):
    bucket = f"lock-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    if retention is not None:
        client.put_object_lock_configuration(
            Bucket=bucket,
            ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": retention}},
        )
    assert S3Store(bucket, "reports").object_lock() == expected


def test_the_object_lock_of_a_missing_bucket_is_not_found_naming_it(s3_endpoint):
    bucket = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NotFound, match=bucket):
        S3Store(bucket).object_lock()
