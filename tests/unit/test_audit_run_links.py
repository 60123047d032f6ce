"""What the audit run links and where a report opens (issue 29, build 6), as pure rules.

The LoggedModel behind a version (MLflow's SQL registry keeps no ``model_id`` on the version), the audit run's
links (``auditor.steps.publish.audit_links``), the report's web address under ``REPRO_REPORTS_URL`` and the
trainer's lines on a stream (``auditor.rebuild.runners.trainer_output_to``: the CLI's ``--stream-output`` and
the rebuild pod's log). The MLflow side of the links is checked on a real store in
``tests/integration/test_mlflow_version_surfaces.py``; the Airflow link in ``tests/dags/test_airflow_outcomes.py``.
"""

from __future__ import annotations

import io
import logging
from types import SimpleNamespace

import pytest

from auditor.registry.base import ModelVersionInfo
from auditor.steps.publish import audit_links, report_url
from auditor.tags import TAG_LOGGED_MODEL
from tests.fixtures.judged import floor, judged_audit, weight_diff

MODEL_ID = "m-" + "0123456789abcdef" * 2


@pytest.mark.parametrize(("info", "expected"), [
    (ModelVersionInfo("m", "1", model_id=MODEL_ID, source="runs:/r/weights"), MODEL_ID),  # a registry that keeps it
    (ModelVersionInfo("m", "1", source=f"models:/{MODEL_ID}"), MODEL_ID),  # mlflow.register_model("models:/m-…")
    (ModelVersionInfo("m", "1", source="s3://b/models/x/artifacts", run_tags={TAG_LOGGED_MODEL: MODEL_ID}), MODEL_ID),  # the SDK
    (ModelVersionInfo("m", "1", source="runs:/r/weights"), None),  # a version made from a run's files
    (ModelVersionInfo("m", "1", source="models:/other/3"), None),  # a version copied from another version
])
def test_the_logged_model_behind_a_version(info, expected):
    assert info.logged_model_id == expected


def test_the_audit_run_links_the_model_the_records_datasets_and_only_the_models_own_metrics():
    audit = judged_audit(diff=weight_diff(0.05), same_seed=floor())
    info = ModelVersionInfo("churn", "3", source=f"models:/{MODEL_ID}")
    links = audit_links(info, audit, {"audit.wall_s": 1.0, "rebuilt.auc": 0.9})
    assert links.model_id == MODEL_ID and links.context == "audit"
    assert dict(links.datasets) == audit.record["data"]
    assert links.input_tags == {"repro.tier.lineage": audit.tiers["lineage"].status}
    assert links.model_metrics == ("rebuilt.auc",)  # the audit's durations are the run's, not the model's
    bare = audit.model_copy(update={"record": None})  # an audit with no record (a plain registration) links no data
    assert dict(audit_links(ModelVersionInfo("churn", "3"), bare, {}).datasets) == {}


def test_the_reports_web_address_comes_from_the_configured_base_url():
    assert report_url(SimpleNamespace(reports_url="https://reports.example.org/a/"), "x.html") == "https://reports.example.org/a/x.html"
    assert report_url(SimpleNamespace(reports_url=None), "x.html") is None


def test_the_trainers_lines_reach_a_stream_while_asked_and_the_logger_is_restored():
    from auditor.rebuild.runners import TRAINER_OUTPUT, trainer_output_to

    before, stream = TRAINER_OUTPUT.level, io.StringIO()
    with trainer_output_to(stream):
        assert TRAINER_OUTPUT.isEnabledFor(logging.INFO)
        TRAINER_OUTPUT.info("%s", "epoch 0: train loss 0.5")
    TRAINER_OUTPUT.info("%s", "after the block")
    assert stream.getvalue() == "  │ epoch 0: train loss 0.5\n"
    assert TRAINER_OUTPUT.level == before and not [h for h in TRAINER_OUTPUT.handlers if getattr(h, "stream", None) is stream]
