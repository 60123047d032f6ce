"""Caller mistakes are errors, never verdicts published about a model."""

import pytest

from auditor.errors import BadInput
from auditor.settings import Settings
from auditor.steps import AuditOptions, Session


def test_an_unknown_runner_is_bad_input_raised_before_anything_is_judged(tmp_path):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="runner 'Docker'"):
        Session(settings).audit("models:/anything/1", AuditOptions(runner="Docker", publish=False))


@pytest.mark.parametrize("reruns", [0, 1, 2])
def test_calibration_refuses_fewer_than_three_seed_varied_reruns_before_any_work(tmp_path, reruns):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="at least 3 seed-varied reruns"):
        Session(settings).calibrate("models:/anything/1", reruns=reruns)
    assert not (tmp_path / "work").exists()  # nothing was prepared, let alone trained


def test_calibration_refuses_fewer_than_two_same_seed_reruns(tmp_path):
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path)})
    with pytest.raises(BadInput, match="at least 2 same-seed reruns"):
        Session(settings).calibrate("models:/anything/1", reruns=5, same_seed=1)
