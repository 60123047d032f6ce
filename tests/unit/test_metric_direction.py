"""Which way is better for a metric (issue 31): read from whole tokens of its name, flipped by scikit-learn's
``neg_``, declared where the name says nothing or the wrong thing, kept in the calibration so the judge's
recomputation of the bands agrees, and never given to a duration."""

from __future__ import annotations

import math

import pytest

from auditor.errors import BadInput
from auditor.judge.binding import expected_bands
from auditor.judge.calibrate import bands_from_reruns, direction_of, is_duration, metric_kind
from auditor.judge.compare import compare_reruns, headline_metrics
from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor
from auditor.judge.lottery import seed_lottery
from auditor.settings import Settings

INF = math.inf


@pytest.mark.parametrize(("name", "direction"), [
    # a substring used to decide these: "map" in mape, "rate" in false_positive_rate
    ("mape", "lower"), ("val_smape", "lower"), ("mean_absolute_percentage_error", "lower"),
    ("false_positive_rate", "lower"), ("misclassification_rate", "lower"), ("error_rate", "lower"),
    ("neg_log_loss", "higher"), ("neg_mean_squared_error", "higher"), ("neg_root_mean_squared_error", "higher"),
    ("brier_score", "lower"), ("valLoss", "lower"), ("logloss", "lower"),
    ("val_auc", "higher"), ("roc_auc", "higher"), ("val_rocauc", "higher"), ("top1_acc", "higher"),
    ("accuracy@5", "higher"), ("map@10", "higher"), ("f1_score", "higher"), ("ks", "higher"), ("gini", "higher"),
    ("r2", "higher"), ("auc_out_of_time", "higher"),
    # nothing said: none
    ("approval_rate", "none"), ("heatmap_size", "none"), ("epochs", "none"), ("calibration_slope", "none"),
    # durations are not a model's performance
    ("train_seconds", "none"), ("trainTime", "none"), ("latency_ms", "none"), ("samples_per_sec", "none"),
])
def test_the_name_decides_by_whole_tokens(name, direction):
    assert metric_kind(name)[0] == direction


def test_neg_flips_the_domain_too_and_durations_are_named():
    assert metric_kind("neg_log_loss") == ("higher", (-INF, -0.0))
    assert metric_kind("false_positive_rate") == ("lower", (0.0, 1.0))
    assert is_duration("trainTime") and not is_duration("auc_out_of_time")


def test_a_declared_direction_wins_and_unclips_the_band():
    declared = dict(Settings.from_env({"REPRO_METRIC_DIRECTIONS": "approval_rate=higher, mape=higher"}).metric_directions)
    assert declared == {"approval_rate": "higher", "mape": "higher"}
    assert direction_of("approval_rate", declared) == "higher" and direction_of("auc", declared) == "higher"
    reruns = {f"r{i}": {"mape": -0.5 + 0.01 * i} for i in range(5)}  # a domain the name's rule would clip at 0
    band = bands_from_reruns(reruns, directions={"mape": "higher"})["mape"]
    assert band.direction == "higher" and band.lower < -0.5


def test_a_malformed_direction_is_a_usage_error_naming_the_variable():
    with pytest.raises(BadInput, match="REPRO_METRIC_DIRECTIONS"):
        Settings.from_env({"REPRO_METRIC_DIRECTIONS": "mape=down"})


def _calibration(directions=None):
    floor = SameSeedFloor(runs=[FloorRun(seed=1), FloorRun(seed=1)], bit_identical=True)
    runs = [FloorRun(seed=i, metrics={"mape": 0.20 + 0.001 * i, "train_seconds": 10.0 + i}) for i in range(19)]
    return Calibration(calibrated_at="2026-12-01T00:00:00Z", same_seed=floor, seed_varied=runs,
                       directions=directions or {})


def test_the_judge_recomputes_bands_with_the_directions_calibration_stored():
    stored = expected_bands(_calibration({"mape": "higher", "train_seconds": "none"}), {})
    assert stored["mape"].direction == "higher"
    assert expected_bands(_calibration(), {})["mape"].direction == "lower"  # stored before directions were kept


def test_a_mape_lottery_winner_is_caught_and_a_duration_is_never_in_the_lottery():
    lottery = seed_lottery(_calibration(), {"mape": 0.15, "train_seconds": 1.0})
    assert [m.metric for m in lottery.metrics] == ["mape"]
    assert lottery.metrics[0].status == "lottery"


def test_a_real_mape_improvement_is_beyond_noise_and_a_slower_training_does_not_make_it_worse():
    candidate = [{"mape": 0.10 + 0.001 * i, "train_seconds": 50.0 + i} for i in range(5)]
    incumbent = [{"mape": 0.20 + 0.001 * i, "train_seconds": 10.0 + i} for i in range(5)]
    assert headline_metrics(candidate, incumbent, {}) == ["mape"]
    assert compare_reruns("c", "i", candidate, incumbent).gate == "beyond_noise"
    assert compare_reruns("c", "i", incumbent, candidate).gate == "worse"
