"""The registered MLflow run's metrics beside the record (the adversarial review's F3): an accuracy logged to the run
with ``mlflow.log_metric`` after the block (on rows the clock picked) is shown on the model's page but never audited;
the report says so by name, as it says a value there that is not the record's."""

from __future__ import annotations

import math

from auditor.judge.logged import logged_metric_findings


def test_a_metric_only_mlflow_shows_is_named_as_never_audited():
    found = logged_metric_findings({"log_loss": 0.31}, {"log_loss": 0.31, "accuracy": 0.671875, "train_seconds": 3.0},
                                   run_id="abc")
    assert [f.code for f in found] == ["outputs.metric_unrecorded"]
    assert "accuracy" in found[0].message and "train_seconds" not in found[0].message and "abc" in found[0].message
    assert found[0].severity == "warning" and "run.log_metrics" in found[0].hint


def test_a_value_mlflow_shows_that_is_not_the_records_is_named():
    found = logged_metric_findings({"auc": 0.91, "loss": float("nan")}, {"auc": 0.95, "loss": math.nan}, run_id="abc")
    assert [f.code for f in found] == ["outputs.metric_differs"]
    assert "auc 0.95 in MLflow, 0.91 in the record" in found[0].message and "loss" not in found[0].message


def test_the_same_metrics_say_nothing():
    assert logged_metric_findings({"auc": 0.91}, {"auc": 0.91000000000001}, run_id="abc") == []
    assert logged_metric_findings({"auc": 0.91}, {}, run_id="abc") == []
