"""Production equals documented (issue 32, build point 3; acceptance 3), on the demo world.

Real parts: the demo's reference model trained and registered in MLflow on SQLite under the alias ``champion``,
audited through the one door (``Session.audit``: a real rebuild, the evidence published and ledgered), then
served from two places the settings name: an S3 bucket on the loopback moto server and a local file. After the
audit, the registry's copy of the weights is replaced in MLflow's artifact store: the production check and the
coverage page say "production differs from what was audited". A serving object replaced by a newer version, a
deployed file that went missing, and a production version never audited are each caught, never "the same".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from auditor.demo import Variant, seed
from auditor.settings import Settings
from auditor.steps import Session
from auditor.steps.options import AuditOptions
from auditor.steps.production import DIFFERS, NOT_AUDITED, SAME, production_check
from auditor.tags import WEIGHTS_ARTIFACT

pytestmark = pytest.mark.slow
DATE = "2026-07-01"


def _weights_file(tracking_uri: str, run_id: str) -> Path:
    from mlflow import MlflowClient

    artifact_uri = MlflowClient(tracking_uri=tracking_uri).get_run(run_id).info.artifact_uri
    return Path(artifact_uri.removeprefix("file://")) / WEIGHTS_ARTIFACT


@pytest.fixture(scope="module")
def world(tmp_path_factory, s3_endpoint):
    import boto3

    root = tmp_path_factory.mktemp("production")
    seeded = seed(root, [Variant("clean", "a clean run, serving", alias="champion")], epochs=2, progress=lambda _m: None)
    ref = seeded.versions["clean"]
    bucket = f"serving-{os.urandom(4).hex()}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    served = root / "server" / "model.safetensors"
    deployed = f"credit-scorer@champion=s3://{bucket}/credit/model.safetensors|{served}"
    settings = Settings.from_env({**seeded.env, "REPRO_DEPLOYED_ARTIFACTS": deployed})
    session = Session(settings)
    outcome = session.audit(ref, AuditOptions(date=DATE))
    assert outcome.report and outcome.result is not None
    info = session.registry.resolve(ref)
    weights = _weights_file(settings.tracking_uri, info.run_id)
    audited = weights.read_bytes()
    served.parent.mkdir(parents=True)
    served.write_bytes(audited)  # what the serving systems loaded: the audited bytes
    s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=audited)
    return {"session": session, "ref": ref, "weights": weights, "audited": audited, "served": served, "bucket": bucket,
            "s3": s3, "settings": settings, "seeded": seeded}


def _row(session: Session) -> dict:
    rows = production_check(session)
    assert len(rows) == 1, rows
    return rows[0]


def test_what_serves_the_production_alias_hashes_to_the_audited_artifact(world):
    row = _row(world["session"])
    assert row["status"] == SAME, row
    assert [c["where"] for c in row["copies"]] == ["registry", "deployed credit-scorer@champion", "deployed credit-scorer@champion"]
    assert all(c["status"] == SAME and c["found"] == row["audited"] for c in row["copies"])
    _, page = world["session"].coverage(write=True)
    html = Path(page).read_text(encoding="utf-8")
    assert "Production equals documented" in html and SAME in html and DIFFERS not in html


def test_an_artifact_replaced_after_the_audit_is_flagged_on_the_coverage_page(world):
    weights: Path = world["weights"]
    tampered = bytearray(world["audited"])
    tampered[-1] ^= 0x01  # one bit of the registry's copy, after the audit
    weights.write_bytes(bytes(tampered))
    try:
        row = _row(world["session"])
        assert row["status"] == DIFFERS
        registry = row["copies"][0]
        assert registry["where"] == "registry" and registry["status"] == DIFFERS and registry["found"] != row["audited"]
        assert all(c["status"] == SAME for c in row["copies"][1:])  # the serving copies still hold the audited bytes
        _, page = world["session"].coverage(write=True)
        html = Path(page).read_text(encoding="utf-8")
        assert DIFFERS in html and "registry: it hashes to" in html
        stored = (Path(world["settings"].reports) / "coverage.json").read_text(encoding="utf-8")
        assert DIFFERS in stored  # the page's inputs hold the finding: evidence verify renders the same page
    finally:
        weights.write_bytes(world["audited"])


def test_a_serving_object_replaced_by_a_newer_version_or_a_missing_file_is_not_the_same(world):
    s3, bucket, served = world["s3"], world["bucket"], world["served"]
    s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=world["audited"] + b"\0")  # a newer version, one byte longer
    served.unlink()
    try:
        row = _row(world["session"])
        assert row["status"] == DIFFERS
        registry, bucket_copy, file_copy = row["copies"]
        assert registry["status"] == SAME
        assert bucket_copy["status"] == DIFFERS and bucket_copy["found"] != row["audited"]
        assert file_copy["status"] == DIFFERS and "cannot be read" in file_copy["detail"] and file_copy["found"] is None
    finally:
        s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=world["audited"])
        served.write_bytes(world["audited"])


def test_a_production_version_never_audited_is_said_so_not_the_same(world):
    from mlflow import MlflowClient

    from tests.fixtures.mlflow import seed_version
    from tests.fixtures.records import complete_record

    uri = world["settings"].tracking_uri
    version = seed_version(uri, "credit-scorer", complete_record(), weights=world["audited"], aliases=["live"])
    try:
        rows = {r["version"]: r for r in production_check(world["session"])}
        assert rows[version]["status"] == NOT_AUDITED and rows[version]["audited"] is None
        assert all(c["status"] != SAME for c in rows[version]["copies"])  # the same bytes, but nothing audited them
    finally:
        MlflowClient(tracking_uri=uri).delete_registered_model_alias("credit-scorer", "live")


def test_the_audit_report_finding_names_a_deployed_copy_that_differs_and_only_that_one(world):
    from auditor.steps.production import deployed_findings

    session, s3, bucket = world["session"], world["s3"], world["bucket"]
    info = session.registry.resolve(world["ref"])
    audited = _row(session)["audited"]
    assert deployed_findings(session, info, audited) == []
    s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=b"another model")
    try:
        findings = deployed_findings(session, info, audited)
        assert [(f.code, f.severity) for f in findings] == [("production.differs", "warning")]
        assert DIFFERS in findings[0].message and f"s3://{bucket}/credit/model.safetensors" in findings[0].message
    finally:
        s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=world["audited"])


def test_an_audit_while_a_deployed_copy_differs_says_so_on_its_report(world):
    """Acceptance 3 on the report itself: the audit step holds every deployed copy named for the version to the
    registered artifact it judged, and the report carries the finding (a warning: the verdict is on the registry)."""
    session, s3, bucket = world["session"], world["s3"], world["bucket"]
    s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=b"another model")
    try:
        outcome = session.audit(world["ref"], AuditOptions(date="2026-07-02"))
        found = [f for f in outcome.result.findings if f.code == "production.differs"]
        assert len(found) == 1 and DIFFERS in found[0].message and bucket in found[0].message, outcome.result.findings
        html = Path(str(outcome.report).removeprefix("file://")).read_text(encoding="utf-8")
        assert DIFFERS in html
    finally:
        s3.put_object(Bucket=bucket, Key="credit/model.safetensors", Body=world["audited"])


def test_a_registry_artifact_replaced_after_the_audit_is_named_on_the_next_report_and_stays_flagged(world):
    """Acceptance 3 on the report for the registry's own copy: the next audit of the production version finds the
    replaced bytes and its report says "production differs from what was audited", naming both digests; and that
    audit does not make the replaced bytes "what was audited" for the coverage page (it still differs)."""
    session, weights = world["session"], world["weights"]
    before = _row(session)["audited"]
    tampered = bytearray(world["audited"])
    tampered[-1] ^= 0x01
    weights.write_bytes(bytes(tampered))
    try:
        outcome = session.audit(world["ref"], AuditOptions(date="2026-07-03"))
        found = [f for f in outcome.result.findings if f.code == "production.differs"]
        assert len(found) == 1 and "registry's copy" in found[0].message and before.removeprefix("sha256:") in found[0].message, \
            outcome.result.findings
        html = Path(str(outcome.report).removeprefix("file://")).read_text(encoding="utf-8")
        assert DIFFERS in html
        row = _row(session)  # the latest audit judged the replaced bytes: still not "the same"
        assert row["status"] == DIFFERS and "already differs from the one training recorded" in row["detail"], row
        _, page = session.coverage(write=True)
        assert DIFFERS in Path(page).read_text(encoding="utf-8")
    finally:
        weights.write_bytes(world["audited"])


def test_retention_names_the_audited_report_outside_a_write_once_store_and_a_deleted_version_as_lost(world):
    """Last in this module: it deletes the registered version."""
    from mlflow import MlflowClient

    session = world["session"]
    before = session.retention(years=10)
    row = next(r for r in before["versions"] if r["ref"] == world["ref"])
    assert row["production"] and row["audited"]
    items = {i["input"]: i for i in row["items"]}
    assert items["report"]["status"] == "at risk" and "outside a write-once store" in items["report"]["detail"]
    assert items["report"]["where"].endswith(".html")
    assert before["red"] == []  # nothing is lost yet: at risk is not red
    name, version = world["ref"].removeprefix("models:/").rsplit("/", 1)
    MlflowClient(tracking_uri=world["settings"].tracking_uri).delete_model_version(name, version)
    after = session.retention(years=10)
    gone = next(r for r in after["versions"] if r["ref"] == world["ref"])
    assert gone["status"] == "lost" and gone["items"][0]["input"] == "registered version"
    assert "no longer in the registry" in gone["items"][0]["detail"]

