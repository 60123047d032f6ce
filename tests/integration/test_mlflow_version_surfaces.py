"""Where MLflow users look (issue 29, build 6): the version page leads with short tags (the verdict, each tier,
the report's web address under ``REPRO_REPORTS_URL``), and the audit run carries the audit's real durations.

Real MLflow on SQLite (the ``sqlite_tracking_uri`` fixture), the product's publish step (``auditor.steps.publish._publish``)
over a seeded version; the audit's evidence is built by the real judge (``tests.fixtures.judged``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from auditor.registry.mlflow import MlflowRegistry
from auditor.settings import Settings
from auditor.steps.publish import _publish
from auditor.storage import open_store
from auditor.tags import TAG_AUDIT_TIER_PREFIX, TAG_LOGGED_MODEL, TAG_REPORT, TAG_REPORT_URL, TAG_VERDICT
from tests.fixtures.judged import floor, judged_audit, weight_diff
from tests.fixtures.mlflow import seed_version
from tests.fixtures.records import complete_record


@pytest.fixture()
def published(sqlite_tracking_uri, tmp_path):
    version = seed_version(sqlite_tracking_uri, "credit-scorer", complete_record())
    registry = MlflowRegistry(sqlite_tracking_uri)
    # the LoggedModel the SDK logs beside the weights and names in the run's repro.logged_model tag
    run_id = registry.client.get_model_version("credit-scorer", version).run_id
    experiment_id = registry.client.get_run(run_id).info.experiment_id
    model_id = registry.client.create_logged_model(experiment_id, name="weights", source_run_id=run_id).model_id
    registry.client.set_tag(run_id, TAG_LOGGED_MODEL, model_id)
    settings = Settings(tracking_uri=sqlite_tracking_uri, reports=str(tmp_path / "reports"),
                        reports_url="https://reports.example.org/audits/")
    session = SimpleNamespace(registry=registry, settings=settings, store=open_store(settings.reports), signer=None)
    info = registry.resolve(f"models:/credit-scorer/{version}")
    audit = judged_audit(diff=weight_diff(0.05), same_seed=floor(), name="credit-scorer", audit_id="oot-1")
    report = _publish(session, info, audit, "2026-03-02", lambda _msg: None)
    return registry, registry.resolve(f"models:/credit-scorer/{version}"), audit, report


def test_the_version_page_leads_with_the_verdict_each_tier_and_the_reports_web_address(published):
    registry, info, audit, report = published
    assert info.tags[TAG_VERDICT] == "OUT_OF_TOLERANCE"
    tiers = {k.removeprefix(TAG_AUDIT_TIER_PREFIX): v for k, v in info.tags.items() if k.startswith(TAG_AUDIT_TIER_PREFIX)}
    assert tiers == {name: tier.status for name, tier in audit.tiers.items()} and tiers["statistical"] == "fail"
    key = report.rsplit("/", 1)[-1]
    assert info.tags[TAG_REPORT] == report  # where it is stored, for the tools
    assert info.tags[TAG_REPORT_URL] == f"https://reports.example.org/audits/{key}"  # where a person opens it
    # every tag the audit writes on the version is short: bulky JSON stays in artifacts
    written = {k: v for k, v in info.tags.items() if k.startswith("repro.audit.")}
    assert all(len(v) <= 200 and not v.lstrip().startswith(("{", "[")) for v in written.values()), written


def test_the_audit_run_carries_the_audits_real_durations_and_the_reports_address(published):
    registry, info, audit, report = published
    run = registry.client.get_run(info.tags["repro.audit.run"])
    assert run.data.metrics["audit.rebuild_s"] == pytest.approx(540.2)
    assert run.data.metrics["audit.wall_s"] == pytest.approx(612.5)
    assert run.data.tags[TAG_REPORT_URL].startswith("https://reports.example.org/audits/")
    # the run's own tags are short too: the evidence (findings, bands, report) is in its artifacts
    assert all(len(v) <= 250 for k, v in run.data.tags.items() if not k.startswith("mlflow.")), run.data.tags


def test_the_audit_run_links_the_audited_logged_model_and_the_verified_dataset(published):
    registry, info, audit, report = published
    client = registry.client
    run = client.get_run(info.tags["repro.audit.run"])
    model_id = info.run_tags[TAG_LOGGED_MODEL]
    assert [m.model_id for m in run.inputs.model_inputs] == [model_id]
    (data,) = run.inputs.dataset_inputs
    snapshot = audit.record["data"]["train"]["version"]
    tags = {tag.key: tag.value for tag in data.tags}
    assert data.dataset.name == "train" and snapshot.startswith(data.dataset.digest)
    assert tags["mlflow.data.context"] == "audit" and tags["repro.version"] == snapshot
    assert tags["repro.tier.lineage"] == audit.tiers["lineage"].status
    # the rebuilt metrics are the model's, measured on that dataset: they show on the LoggedModel's page
    linked = {m.key: m for m in client.get_logged_model(model_id).metrics}
    rebuilt = {k for k in run.data.metrics if k.startswith("rebuilt.")}
    assert rebuilt and rebuilt <= set(linked), (rebuilt, linked)
    assert {(linked[k].dataset_name, linked[k].dataset_digest) for k in rebuilt} == {("train", data.dataset.digest)}
    assert "audit.wall_s" not in linked  # the audit's own durations stay the run's


def test_a_reports_url_that_is_not_a_web_address_is_refused_naming_the_variable():
    from auditor.errors import BadInput

    with pytest.raises(BadInput, match="REPRO_REPORTS_URL"):
        Settings.from_env({"REPRO_REPORTS_URL": "javascript:alert(1)"})
