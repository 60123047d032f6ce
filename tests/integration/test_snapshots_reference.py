"""Snapshot by reference: pin S3 object versions (moto's server on loopback) by version id and content hash."""

from __future__ import annotations

import uuid

import boto3
import pytest

from auditor.cli import main
from auditor.errors import BadInput, SnapshotCorrupt
from auditor.snapshots import load_manifest, materialize, verify_snapshot
from auditor.snapshots.reference import create_reference_snapshot


@pytest.fixture()
def client(s3_endpoint):
    return boto3.client("s3")


@pytest.fixture()
def dataset(client, s3_bucket) -> str:
    for key, body in {"raw/a.csv": b"a\n1\n", "raw/part/b.csv": b"b\n2\n", "raw/big.bin": bytes(range(256)) * 4096}.items():
        client.put_object(Bucket=s3_bucket, Key=key, Body=body)
    client.put_object(Bucket=s3_bucket, Key="elsewhere.csv", Body=b"not in the prefix")
    return f"s3://{s3_bucket}/raw"


def test_a_reference_snapshot_pins_each_object_version_without_copying(dataset, client, s3_bucket, tmp_path):
    store = tmp_path / "store"
    info = create_reference_snapshot(dataset, store)
    manifest = load_manifest(info.id, store)
    assert manifest.kind == "s3-reference" and info.new_objects == 0
    assert [e.path for e in manifest.files] == ["a.csv", "big.bin", "part/b.csv"]
    head = client.head_object(Bucket=s3_bucket, Key="raw/a.csv")
    assert manifest.files[0].source == {"uri": f"s3://{s3_bucket}/raw/a.csv", "version_id": head["VersionId"]}
    assert list((store / "objects").glob("*")) == []
    assert verify_snapshot(info.id, store) == []


def test_a_newer_version_does_not_change_what_the_snapshot_holds(dataset, client, s3_bucket, tmp_path):
    store = tmp_path / "store"
    info = create_reference_snapshot(dataset, store)
    client.put_object(Bucket=s3_bucket, Key="raw/a.csv", Body=b"a\nrewritten\n")
    assert verify_snapshot(info.id, store) == []
    dest = materialize(info.id, store, tmp_path / "dest")
    assert (dest / "a.csv").read_bytes() == b"a\n1\n"


def test_a_deleted_version_is_reported_lost_and_materialize_leaves_nothing(capsys, dataset, client, s3_bucket, tmp_path):
    store = tmp_path / "store"
    info = create_reference_snapshot(dataset, store)
    version = load_manifest(info.id, store).files[2].source["version_id"]
    client.delete_object(Bucket=s3_bucket, Key="raw/part/b.csv", VersionId=version)
    [problem] = verify_snapshot(info.id, store)
    assert (problem.path, problem.kind) == ("part/b.csv", "lost") and version in problem.detail
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "verify", info.id, "--store", str(store)])
    assert exited.value.code == 1 and "part/b.csv" in capsys.readouterr().err
    dest = tmp_path / "dest"
    with pytest.raises(SnapshotCorrupt, match="part/b.csv"):
        materialize(info.id, store, dest)
    assert not dest.exists()


def test_a_bucket_without_versioning_is_refused(s3_endpoint, client, tmp_path):
    bucket = f"plain-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="x/y", Body=b"1")
    with pytest.raises(BadInput, match="versioning"):
        create_reference_snapshot(f"s3://{bucket}/x", tmp_path / "store")


def test_the_cli_creates_a_reference_snapshot_for_an_s3_uri(capsys, dataset, tmp_path):
    with pytest.raises(SystemExit) as exited:
        main(["snapshot", "create", dataset, "--store", str(tmp_path / "store"), "--json"])
    assert exited.value.code == 0
    import json

    assert json.loads(capsys.readouterr().out)["kind"] == "s3-reference"
