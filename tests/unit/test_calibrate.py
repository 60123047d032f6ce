"""Calibration math: the Student t quantile, the resolution floor, and bands from reruns."""

from __future__ import annotations

import math
import statistics
import struct

import pytest

from auditor.errors import BadInput
from auditor.judge.calibrate import (
    RESOLUTION_ULPS,
    band_from_runs,
    bands_from_reruns,
    default_direction,
    float32_ulp,
    t_quantile,
)
from auditor.judge.tolerance import bands_from_json, bands_to_json, check_metric

# Textbook two-sided 99 % critical values, t(df, 0.995): these hold whether or not scipy is installed.
T_0995 = {1: 63.65674, 2: 9.924843, 3: 5.840909, 4: 4.604095, 5: 4.032143, 9: 3.249836, 29: 2.756386, 120: 2.617421}

LEVELS = [0.6, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 1 - 1e-9, 0.4, 0.025, 0.005, 1e-12]
DFS = [1, 2, 3, 4, 5, 6, 9, 19, 29, 49, 99, 499, 9999, 0.5, 2.5, 1e5]


@pytest.mark.parametrize(("df", "expected"), sorted(T_0995.items()))
def test_the_t_quantile_matches_the_printed_tables(df, expected):
    assert t_quantile(0.995, df) == pytest.approx(expected, rel=2e-6)


def test_the_t_quantile_matches_scipy_across_levels_and_degrees_of_freedom():
    special = pytest.importorskip("scipy.special")  # stdtrit is scipy.stats.t.ppf without stats' import cost
    for df in DFS:
        for p in LEVELS:
            assert t_quantile(p, df) == pytest.approx(float(special.stdtrit(df, p)), rel=1e-9), (p, df)


def test_the_t_quantile_is_symmetric_and_tends_to_the_normal_quantile():
    assert t_quantile(0.5, 3) == 0.0
    assert t_quantile(0.01, 7) == -t_quantile(0.99, 7)
    assert t_quantile(0.995, 1e6) == pytest.approx(statistics.NormalDist().inv_cdf(0.995), rel=1e-5)


@pytest.mark.parametrize(("p", "df"), [(0.0, 3), (1.0, 3), (-0.1, 3), (0.9, 0), (0.9, -1)])
def test_the_t_quantile_refuses_levels_and_degrees_outside_its_domain(p, df):
    with pytest.raises(ValueError):
        t_quantile(p, df)


@pytest.mark.parametrize("x", [0.9, 1.0, 0.0013, 123.25, 3e-30, 0.0])
def test_the_float32_ulp_is_the_gap_to_the_next_float32(x):
    as32 = struct.unpack("<f", struct.pack("<f", x))[0]
    bits = struct.unpack("<I", struct.pack("<f", as32))[0]
    after = struct.unpack("<f", struct.pack("<I", bits + 1))[0]
    assert float32_ulp(x) == after - as32 == float32_ulp(-x)
    assert float32_ulp(1e39) == math.ulp(1e39)  # past float32's range: float64's spacing


def test_a_band_from_reruns_is_the_prediction_interval_of_one_new_observation():
    values = [0.9101, 0.9113, 0.9095, 0.9120, 0.9107]
    runs = [f"run{i}" for i in range(5)]
    band = band_from_runs("auc", values, direction="higher", runs=runs, reference=0.9104)
    mean, s = statistics.fmean(values), statistics.stdev(values)
    half = 4.604094871349993 * s * math.sqrt(1 + 1 / 5)
    assert band.lower == pytest.approx(mean - half, rel=1e-12) and band.upper == pytest.approx(mean + half, rel=1e-12)
    assert band.provenance == "calibrated" and band.runs == runs and band.reference == 0.9104
    assert "t(n-1, 0.995)" in band.method and "√(1+1/n)" in band.method
    assert band.spread["n"] == 5 and band.spread["std"] == pytest.approx(s) and band.spread["min"] == 0.9095
    assert all(check_metric(v, band).inside for v in values)


def test_identical_reruns_give_a_band_no_narrower_than_the_float32_resolution():
    band = band_from_runs("auc", [0.91] * 5, direction="higher", runs=list("abcde"))
    half = (band.upper - band.lower) / 2
    assert half == pytest.approx(RESOLUTION_ULPS * float32_ulp(0.91))
    assert band.spread["std"] == 0.0 and band.spread["resolution"] == pytest.approx(half)
    rounded_through_float32 = struct.unpack("<f", struct.pack("<f", 0.91))[0]
    assert check_metric(rounded_through_float32, band).inside  # re-rounding alone never fails a band
    assert not check_metric(0.91 + 10 * float32_ulp(0.91), band).inside


def test_a_higher_confidence_gives_a_wider_band():
    values, runs = [1.0, 1.1, 0.95, 1.05], list("abcd")
    narrow = band_from_runs("loss", values, direction="lower", runs=runs, confidence=0.9)
    wide = band_from_runs("loss", values, direction="lower", runs=runs, confidence=0.999)
    assert wide.lower < narrow.lower and wide.upper > narrow.upper
    assert "0.95" in narrow.method and "0.9995" in wide.method


def test_a_calibrated_band_survives_the_stored_document_with_its_provenance():
    band = band_from_runs("auc", [0.91, 0.912, 0.909], direction="higher", runs=["a", "b", "c"], calibrated_at="t0")
    assert bands_from_json(bands_to_json({"auc": band}), "test") == {"auc": band}


@pytest.mark.parametrize(
    ("values", "runs", "words"),
    [
        ([0.9], ["a"], "at least 2"),
        ([0.9, 0.91], ["a"], "name every rerun"),
        ([0.9, math.nan], ["a", "b"], "rerun 'b' gave nan"),
        ([0.9, math.inf], ["a", "b"], "rerun 'b' gave inf"),
        ([0.9, "0.91"], ["a", "b"], "rerun 'b'"),
        ([0.9, None], ["a", "b"], "rerun 'b'"),
    ],
)
def test_calibration_refuses_inputs_it_cannot_turn_into_a_band_naming_the_metric(values, runs, words):
    with pytest.raises(BadInput) as caught:
        band_from_runs("auc", values, direction="higher", runs=runs)
    assert words in str(caught.value) and "'auc'" in str(caught.value)


def test_calibration_refuses_a_bad_direction_confidence_or_reference():
    for kwargs in ({"direction": "up"}, {"confidence": 1.0}, {"reference": math.nan}):
        with pytest.raises(BadInput):
            band_from_runs("auc", [0.9, 0.91], runs=["a", "b"], **{"direction": "higher", **kwargs})


def test_bands_from_reruns_bands_every_metric_and_takes_the_registered_value_as_reference():
    reruns = {
        "r1": {"auc": 0.91, "log_loss": 0.30},
        "r2": {"auc": 0.912, "log_loss": 0.29},
        "r3": {"auc": 0.909, "log_loss": 0.31},
    }
    bands = bands_from_reruns(reruns, registered={"auc": 0.9105, "log_loss": "nan"}, calibrated_at="t0")
    assert sorted(bands) == ["auc", "log_loss"]
    assert bands["auc"].direction == "higher" and bands["log_loss"].direction == "lower"
    assert bands["auc"].reference == 0.9105 and bands["log_loss"].reference is None
    assert bands["auc"].runs == ["r1", "r2", "r3"] and bands["auc"].calibrated_at == "t0"


def test_bands_from_reruns_names_the_rerun_that_did_not_report_a_metric():
    with pytest.raises(BadInput, match="rerun\\(s\\) r2 did not report it"):
        bands_from_reruns({"r1": {"auc": 0.9, "acc": 0.8}, "r2": {"auc": 0.91}})


def test_the_default_direction_reads_the_metric_name():
    assert [default_direction(n) for n in ("val_auc", "accuracy", "log_loss", "rmse", "epochs")] == [
        "higher",
        "higher",
        "lower",
        "lower",
        "none",
    ]


@pytest.mark.parametrize(
    ("metric", "values", "low", "high"),
    [
        ("auc", [0.995, 0.999, 0.9999, 0.97, 1.0], 0.0, 1.0),
        ("val_accuracy", [0.001, 0.0, 0.02, 0.0005], 0.0, 1.0),
        ("log_loss", [0.001, 0.0002, 0.03, 0.0], 0.0, math.inf),
        ("mse", [0.0, 0.01, 0.002], 0.0, math.inf),
        ("smooth_l1", [0.0, 0.01, 0.002], 0.0, math.inf),
        ("ppl", [1.0, 1.5, 9.0], 0.0, math.inf),
        ("error_rate", [0.99, 1.0, 0.95], 0.0, 1.0),
    ],
)
def test_a_band_never_leaves_its_metrics_domain(metric, values, low, high):
    from auditor.judge.calibrate import band_from_runs, default_direction

    band = band_from_runs(metric, values, direction=default_direction(metric), runs=[f"r{i}" for i in range(len(values))])
    assert low <= band.lower <= band.upper <= high, band
    assert "clipped to the metric's domain" in band.method


def test_one_table_gives_direction_and_domain_consistently():
    from auditor.judge.calibrate import metric_kind

    assert metric_kind("mse") == metric_kind("smooth_l1") == metric_kind("ppl") == ("lower", (0.0, math.inf))
    assert metric_kind("auc")[0] == metric_kind("f1")[0] == "higher"
    assert metric_kind("error_rate") == ("lower", (0.0, 1.0))
    assert metric_kind("throughput_tokens")[0] == "none"


@pytest.mark.parametrize(("metric", "values"), [
    ("gini", [62.1, 62.9, 62.5, 61.8, 63.0]),        # credit scoring's Gini and KS in percent
    ("ks", [41.0, 42.5, 40.2]),
    ("accuracy", [85.3, 86.1, 85.9]),
])
def test_a_metric_on_another_scale_than_its_name_says_is_not_clipped_into_an_inverted_band(metric, values):
    from auditor.judge.calibrate import band_from_runs, default_direction

    band = band_from_runs(metric, values, direction=default_direction(metric), runs=[f"r{i}" for i in range(len(values))],
                          reference=values[0])
    assert band.lower <= min(values) and max(values) <= band.upper, band
    assert "clipped" not in band.method


def test_durations_get_no_band():
    from auditor.judge.calibrate import bands_from_reruns

    reruns = {f"r{i}": {"auc": 0.9 + i / 1000, "train_seconds": 10.0 + i, "epoch_time": 2.0 + i} for i in range(4)}
    assert set(bands_from_reruns(reruns)) == {"auc"}
