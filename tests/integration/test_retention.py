"""``repro-audit retention check`` (issue 32, build point 4; acceptance 4) over a world of real stores.

Real parts: MLflow on SQLite (versions registered as the SDK lays them out), a Delta table vacuumed with
deltalake, an Iceberg table on pyiceberg's SQL catalog whose guard tag was removed, an S3 bucket with a
lifecycle rule on the loopback moto server, Debian's docker-registry on loopback holding an image manifest
pushed and then deleted through the registry HTTP API (no Docker engine needed), a soft-deleted MLflow run.
Each input is named with its status and its date; a version neither in production nor audited is not listed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import tempfile
import urllib.request
from pathlib import Path

import pytest

from auditor.cli import main
from auditor.lineage.record import DataRef, EnvironmentInfo
from auditor.steps.retention import AT_RISK, KEPT, LOST, red
from auditor.tags import TAG_AUDIT_AT
from tests.fixtures.common import free_port
from tests.fixtures.images import LocalRegistry
from tests.fixtures.mlflow import seed_version
from tests.fixtures.records import complete_record

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg", reason="the iceberg extra is not installed")

MODEL = "credit-scorer"
DAY_MS = 86_400_000


def _when(text: str | None) -> dt.datetime:
    assert text, "the item has no date"
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _push_manifest(registry: LocalRegistry, repository: str) -> str:
    """Push a one-layer OCI image through the registry HTTP API (blob uploads, then the manifest); returns its digest."""

    def blob(data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        start = urllib.request.Request(f"{registry.url}/v2/{repository}/blobs/uploads/", method="POST", data=b"")
        with urllib.request.urlopen(start, timeout=10) as answer:
            location = answer.headers["Location"]
        location = location if location.startswith("http") else registry.url + location
        put = urllib.request.Request(f"{location}{'&' if '?' in location else '?'}digest={digest}", method="PUT", data=data,
                                     headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(put, timeout=10) as answer:
            assert answer.status == 201
        return {"digest": digest, "size": len(data)}

    config = blob(json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}).encode())
    layer = blob(b"\x1f\x8b" + b"\x00" * 30)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer}]}).encode()
    put = urllib.request.Request(f"{registry.url}/v2/{repository}/manifests/v1", method="PUT", data=manifest,
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    with urllib.request.urlopen(put, timeout=10) as answer:
        assert answer.status == 201
        return answer.headers["Docker-Content-Digest"]


@pytest.fixture(scope="module")
def registry_on_loopback():
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("docker-registry is not installed (apt-get install docker-registry; .ci/sysdeps installs it)")
    root = Path(tempfile.mkdtemp(prefix="repro-retention-registry-"))
    registry = LocalRegistry(binary=binary, root=root, port=free_port(), storage=root / "storage")
    try:
        registry.start()
        yield registry
    finally:
        registry.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def world(tmp_path_factory, s3_endpoint, registry_on_loopback):
    """Four versions: production v1 (vacuumed Delta, deleted image), audited v2 (unguarded Iceberg, soft-deleted run),
    audited v3 (S3 under a lifecycle rule, an un-vacuumed Delta version), and v4 (neither production nor audited)."""
    import boto3
    from mlflow import MlflowClient
    from pyiceberg.catalog import load_catalog

    from auditor.snapshots.delta import create_delta_snapshot
    from auditor.snapshots.iceberg import create_iceberg_snapshot, guard_tag
    from auditor.snapshots.reference import create_reference_snapshot

    root = tmp_path_factory.mktemp("retention")
    store = root / "snapshots"
    tracking = f"sqlite:///{root / 'mlflow.db'}"

    _delta_pinned = root / "pinned"  # version 0 pinned, overwritten by version 1, then vacuumed with zero retention
    deltalake.write_deltalake(_delta_pinned, pa.table({"id": [1, 2]}))
    vacuumed = create_delta_snapshot(_delta_pinned, store, version=0)
    deltalake.write_deltalake(_delta_pinned, pa.table({"id": [3]}), mode="overwrite")
    deltalake.DeltaTable(_delta_pinned).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    first_after = next(h for h in deltalake.DeltaTable(_delta_pinned).history() if h["version"] == 1)["timestamp"]

    kept_delta = root / "kept"
    deltalake.write_deltalake(kept_delta, pa.table({"id": [1, 2]}))
    unvacuumed = create_delta_snapshot(kept_delta, store, version=0)
    deltalake.write_deltalake(kept_delta, pa.table({"id": [3]}), mode="overwrite")
    kept_after = next(h for h in deltalake.DeltaTable(kept_delta).history() if h["version"] == 1)["timestamp"]

    props = {"type": "sql", "uri": f"sqlite:///{root}/catalog.db", "warehouse": f"file://{root}/warehouse"}
    catalog = load_catalog("audit", **props)
    catalog.create_namespace("shop")
    schema = pa.schema([("id", pa.int64())])
    table = catalog.create_table("shop.orders", schema=schema)
    table.append(pa.table({"id": [1, 2, 3]}, schema=schema))
    table.append(pa.table({"id": [4]}, schema=schema))
    first = min(table.snapshots(), key=lambda s: s.sequence_number)
    iceberg = create_iceberg_snapshot("shop.orders", store, catalog="audit", catalog_properties=props, snapshot_id=first.snapshot_id)
    catalog.load_table("shop.orders").manage_snapshots().remove_tag(guard_tag(first.snapshot_id)).commit()
    second = max(table.snapshots(), key=lambda s: s.sequence_number)
    guarded = create_iceberg_snapshot("shop.orders", store, catalog="audit", catalog_properties=props, snapshot_id=second.snapshot_id)

    bucket = f"retention-{root.name[-8:].lower().replace('_', '-')}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="train/part-0.csv", Body=b"id\n1\n2\n")
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [
        {"ID": "expire-old-data", "Status": "Enabled", "Filter": {"Prefix": "train/"}, "Expiration": {"Days": 400}}]})
    modified = s3.head_object(Bucket=bucket, Key="train/part-0.csv")["LastModified"]
    reference = create_reference_snapshot(f"s3://{bucket}/train/", store)
    locked = f"{bucket}-locked"  # Object Lock in COMPLIANCE mode, each version retained for 20 years
    s3.create_bucket(Bucket=locked, ObjectLockEnabledForBucket=True)
    s3.put_object_lock_configuration(Bucket=locked, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Years": 20}}})
    retain = (dt.datetime.now(dt.UTC) + dt.timedelta(days=20 * 365)).replace(microsecond=0)
    put = s3.put_object(Bucket=locked, Key="labels/part-0.csv", Body=b"y\n0\n1\n",
                        ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=retain)
    assert put.get("VersionId")
    labels = create_reference_snapshot(f"s3://{locked}/labels/", store)

    image_digest = _push_manifest(registry_on_loopback, "trainer")
    registry_on_loopback.delete_manifest("trainer", image_digest)

    def record(**data):
        env = EnvironmentInfo(python="3.11.7", image_ref=f"{registry_on_loopback.host}/trainer@{image_digest}",
                              image_digest=image_digest) if data.pop("image", False) else None
        refs = {name: DataRef(kind="snapshot", uri=str(store), version=sid) for name, sid in data.items()}
        return complete_record(data=refs, environment=env) if env else complete_record(data=refs).model_copy(
            update={"environment": EnvironmentInfo(python="3.11.7")})

    audited = {TAG_AUDIT_AT: "2026-06-01T00:00:00Z"}
    v1 = seed_version(tracking, MODEL, record(train=vacuumed.id, image=True), weights=b"w1", aliases=["champion"])
    v2 = seed_version(tracking, MODEL, record(train=iceberg.id), weights=b"w2", tags=audited)
    v3 = seed_version(tracking, MODEL, record(train=reference.id, features=unvacuumed.id, holdout=guarded.id, labels=labels.id), weights=b"w3", tags=audited)
    v4 = seed_version(tracking, MODEL, record(train=vacuumed.id), weights=b"w4")
    client = MlflowClient(tracking_uri=tracking)
    run2 = client.get_model_version(MODEL, v2).run_id
    client.delete_run(run2)
    return {"root": root, "tracking": tracking, "versions": (v1, v2, v3, v4), "run2": run2, "first_after": first_after,
            "kept_after": kept_after, "iceberg_ts": first.timestamp_ms, "modified": modified, "bucket": bucket,
            "image": image_digest, "retain": retain}


@pytest.fixture(scope="module")
def checked(world, tmp_path_factory):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main(["retention", "check", "--json", "--years", "10", "--tracking-uri", world["tracking"],
              "--reports", str(tmp_path_factory.mktemp("reports"))])
    return exited.value.code, json.loads(out.getvalue())


def _items(report: dict, version: str) -> dict[str, dict]:
    row = next(r for r in report["versions"] if r["version"] == version)
    return {i["input"]: i for i in row["items"]}


def test_retention_check_exits_1_and_lists_only_production_and_audited_versions(world, checked):
    code, report = checked
    v1, v2, v3, v4 = world["versions"]
    assert code == 1
    assert [r["version"] for r in report["versions"]] == [v1, v2, v3]  # production first; v4 is neither
    assert report["versions"][0]["production"] and report["versions"][0]["status"] == LOST
    assert report["years"] == 10
    assert _when(report["horizon"]) - _when(report["checked_at"]) == dt.timedelta(days=3650)


def test_a_vacuumed_delta_version_of_a_production_model_is_lost_with_the_date_it_became_vacuumable(world, checked):
    _, report = checked
    item = _items(report, world["versions"][0])["data.train (delta)"]
    assert item["status"] == LOST and "vacuumed" in item["detail"] and "deletedFileRetentionDuration = 7 days" in item["detail"]
    assert _when(item["until"]) == dt.datetime.fromtimestamp(world["first_after"] / 1000, tz=dt.UTC).replace(microsecond=0) + dt.timedelta(days=7)
    assert report["red"] and any("data.train (delta)" in r for r in report["red"])


def test_a_deleted_image_digest_is_lost_and_named(world, checked):
    _, report = checked
    item = _items(report, world["versions"][0])["image"]
    assert item["status"] == LOST and world["image"] in item["detail"] and item["until"]
    assert any(r.endswith(f"image ({item['where']})") for r in red(report["versions"]))


def test_an_unguarded_iceberg_snapshot_is_at_risk_until_its_expiry_date(world, checked):
    _, report = checked
    item = _items(report, world["versions"][1])["data.train (iceberg)"]
    assert item["status"] == AT_RISK and "unguarded" in item["detail"] and "re-tag it" in item["fix"]
    expected = dt.datetime.fromtimestamp((world["iceberg_ts"] + 5 * DAY_MS) / 1000, tz=dt.UTC).replace(microsecond=0)
    assert _when(item["until"]) == expected


def test_a_soft_deleted_run_is_at_risk_of_mlflow_gc(world, checked):
    _, report = checked
    item = _items(report, world["versions"][1])["run"]
    assert item["status"] == AT_RISK and "mlflow gc" in item["detail"] and world["run2"] in item["fix"]
    assert item["until"] == report["checked_at"]  # purgeable now: the date of the check


def test_s3_objects_under_a_lifecycle_rule_and_an_unvacuumed_delta_version_carry_their_dates(world, checked):
    _, report = checked
    items = _items(report, world["versions"][2])
    s3 = items["data.train (s3)"]
    assert s3["status"] == AT_RISK and "expire-old-data" in s3["detail"] and "no Object Lock" in s3["detail"]
    assert _when(s3["until"]) == world["modified"].astimezone(dt.UTC).replace(microsecond=0) + dt.timedelta(days=400)
    delta = items["data.features (delta)"]
    assert delta["status"] == AT_RISK
    assert _when(delta["until"]) == dt.datetime.fromtimestamp(world["kept_after"] / 1000, tz=dt.UTC).replace(microsecond=0) + dt.timedelta(days=7)


def test_only_a_lost_production_input_is_red(world, checked):
    _, report = checked
    v1 = world["versions"][0]
    assert report["red"] and all(r.startswith(f"models:/{MODEL}/{v1}:") for r in report["red"])
    assert len(report["red"]) == 2  # the vacuumed Delta version and the deleted image


def test_a_snapshot_held_by_the_guards_tag_is_kept_and_nothing_kept_is_counted_at_risk(world, checked):
    _, report = checked
    item = _items(report, world["versions"][2])["data.holdout (iceberg)"]
    assert item["status"] == KEPT and item["until"] is None and "guard's tag" in item["detail"]
    assert report["versions"][2]["status"] == AT_RISK  # the worst of its inputs, not the best


def test_an_object_version_locked_in_compliance_mode_past_the_horizon_is_kept_until_its_retain_date(world, checked):
    _, report = checked
    item = _items(report, world["versions"][2])["data.labels (s3)"]
    assert item["status"] == KEPT and "COMPLIANCE" in item["detail"]
    assert _when(item["until"]) == world["retain"]
