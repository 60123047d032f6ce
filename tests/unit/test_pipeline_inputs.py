"""Caller mistakes are errors, never verdicts published about a model."""

import pytest

from auditor import pipeline
from auditor.errors import BadInput
from auditor.settings import Settings


def test_an_unknown_runner_is_bad_input_raised_before_anything_is_judged(tmp_path):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="runner 'Docker'"):
        pipeline.audit("models:/anything/1", runner="Docker", settings=settings)


def test_calibration_needs_at_least_two_reruns(tmp_path):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="at least 2 reruns"):
        pipeline.calibrate("models:/anything/1", reruns=1, settings=settings)
