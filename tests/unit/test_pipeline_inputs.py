"""Caller mistakes are errors, never verdicts published about a model."""

import pytest

from auditor import pipeline
from auditor.errors import BadInput
from auditor.settings import Settings


def test_an_unknown_runner_is_bad_input_raised_before_anything_is_judged(tmp_path):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="runner 'Docker'"):
        pipeline.audit("models:/anything/1", runner="Docker", settings=settings)


@pytest.mark.parametrize("reruns", [0, 1, 2])
def test_calibration_refuses_fewer_than_three_seed_varied_reruns_before_any_work(tmp_path, reruns):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="at least 3 seed-varied reruns"):
        pipeline.calibrate("models:/anything/1", reruns=reruns, settings=settings)
    assert not (tmp_path / "work").exists()  # nothing was prepared, let alone trained


def test_calibration_refuses_fewer_than_two_same_seed_reruns(tmp_path):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="at least 2 same-seed reruns"):
        pipeline.calibrate("models:/anything/1", reruns=5, same_seed=1, settings=settings)
