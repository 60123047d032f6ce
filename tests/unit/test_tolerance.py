"""Tolerance bands: the stored document, validation on load, and checking one value."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from auditor.canonical import canonical_json
from auditor.errors import MalformedRecord
from auditor.judge.result import Band
from auditor.judge.tolerance import (
    BANDS_SCHEMA,
    BANDS_TAG,
    StoredBand,
    bands_from_json,
    bands_from_tags,
    bands_to_json,
    check_metric,
    check_metrics,
)

AUC = Band(metric="auc", lower=0.90, upper=0.92, reference=0.91, direction="higher")
LOSS = Band(
    metric="log_loss",
    lower=0.25,
    upper=0.35,
    reference=0.3,
    direction="lower",
    provenance="calibrated",
    method="prediction interval",
    runs=["r1", "r2", "r3"],
    spread={"n": 3.0, "std": 0.01},
    calibrated_at="2025-01-01T00:00:00Z",
)


def _doc(bands: dict) -> str:
    return json.dumps({"schema": BANDS_SCHEMA, "bands": bands})


def test_bands_survive_a_round_trip_through_the_stored_document():
    text = bands_to_json({"auc": AUC, "log_loss": LOSS})
    assert bands_from_json(text, "test") == {"auc": AUC, "log_loss": LOSS}
    assert json.loads(text)["schema"] == "repro.bands/1"


def test_the_stored_document_is_the_same_text_whatever_the_order_of_the_bands():
    assert bands_to_json({"auc": AUC, "log_loss": LOSS}) == bands_to_json({"log_loss": LOSS, "auc": AUC})


def test_a_declared_band_can_be_given_as_tolerances_around_a_reference():
    bands = bands_from_json(_doc({"auc": {"reference": 0.9, "abs_tol": 0.01, "rel_tol": 0.02}}), "test")
    assert bands["auc"].lower == pytest.approx(0.9 - 0.018) and bands["auc"].upper == pytest.approx(0.9 + 0.018)
    assert bands["auc"].provenance == "declared"
    only_abs = bands_from_json(_doc({"auc": {"reference": 0.9, "abs_tol": 0.01}}), "test")["auc"]
    assert (only_abs.lower, only_abs.upper) == (0.9 - 0.01, 0.9 + 0.01)


def test_bands_are_read_from_the_model_version_tag_and_a_version_without_one_has_none():
    tags = {BANDS_TAG: bands_to_json({"auc": AUC}), "other": "x"}
    assert bands_from_tags(tags) == {"auc": AUC}
    assert bands_from_tags({"other": "x"}) == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        (json.dumps({"schema": "repro.bands/0", "bands": {}}), "'schema'"),
        (json.dumps({"bands": {}}), "'schema'"),
        (json.dumps({"schema": BANDS_SCHEMA, "bands": []}), "'bands'"),
        (json.dumps({"schema": BANDS_SCHEMA, "bands": {}, "note": 1}), "'note'"),
        (_doc({"auc": {"metric": "acc", "lower": 0, "upper": 1}}), "'metric'"),
        (_doc({"auc": {"lower": 0, "upper": 1, "abs_tol": 0.1, "reference": 0.5}}), "'abs_tol'"),
        (_doc({"auc": {"lower": 0, "upper": 1, "provenance": "calibrated", "method": "m"}}), "'runs'"),
        (_doc({"auc": {"lower": 0, "upper": 1, "spread": {"std": "wide"}}}), "'spread.std'"),
        (_doc({"auc": {"lower": 0, "upper": 1e400}}), "'upper'"),
        (_doc({"auc": {"lower": True, "upper": 1}}), "'lower'"),
        (_doc({"": {"lower": 0, "upper": 1}}), "metric name"),
        (_doc({"auc": [0.9, 0.92]}), "'(band)': must be a JSON object"),
        (_doc({"auc": {"lower": 0}}), "'upper': is missing"),
        (_doc({"auc": {"lower": 0, "upper": 1, "width": 1}}), "'width': unknown field; allowed: abs_tol"),
        (_doc({"auc": {"abs_tol": 0.01}}), "'reference': is required"),
        (_doc({"auc": {"reference": 0.9, "rel_tol": -0.1}}), "'rel_tol': must not be below 0"),
        (_doc({"auc": {"lower": 0.95, "upper": 0.9}}), "'lower': 0.95 is above upper 0.9"),
        (_doc({"auc": {"lower": 0, "upper": 1, "direction": "up"}}), "'direction': must be one of"),
        (_doc({"auc": {"lower": 0, "upper": 1, "provenance": "calibrated", "runs": ["r1"]}}), "'method': is required"),
        (_doc({"auc": {"lower": 0, "upper": 1, "runs": [""]}}), "'runs.0': must not be empty"),
        (_doc({"auc": {"lower": 0, "upper": 1, "evidence": {"run": 7}}}), "'evidence.run': must be text"),
        (_doc({"auc": {"lower": 0, "upper": 1, "declared_by": 7}}), "'declared_by': must be text, got 7"),
        (_doc({"auc": {"lower": "0", "upper": 1}}), "'lower': must be a number, got '0'"),
        (_doc({"auc": {"metric": None, "lower": 0, "upper": 1}}), "'metric': says None"),
    ],
)
def test_a_malformed_document_is_refused_with_a_message_naming_what_is_wrong(text, words):
    with pytest.raises(MalformedRecord) as caught:
        bands_from_json(text, "models:/m/2 tag repro.bands")
    assert words in str(caught.value) and "models:/m/2" in str(caught.value)


def test_the_stored_form_is_the_band_with_its_tolerances_and_every_error_gives_the_fix():
    assert set(StoredBand.model_fields) == set(Band.model_fields) | {"abs_tol", "rel_tol"}
    with pytest.raises(MalformedRecord) as caught:
        bands_from_json(_doc({"auc": {"lower": 1}}), "models:/m/2 tag repro.bands")
    assert caught.value.hint and "Band format" in caught.value.hint


def test_a_band_that_would_be_refused_on_load_is_never_written():
    broken = Band.model_construct(**{**AUC.model_dump(), "lower": 0.95})
    with pytest.raises(MalformedRecord, match="'lower'"):
        bands_to_json({"auc": broken})
    with pytest.raises(MalformedRecord, match="filed under"):
        bands_to_json({"accuracy": AUC})


@pytest.mark.parametrize(
    ("value", "inside", "distance"),
    [
        (0.91, True, -0.01),
        (0.905, True, -0.005),
        (0.90, True, 0.0),
        (0.92, True, 0.0),
        (0.89, False, 0.01),
        (0.95, False, 0.03),
        (np.float32(0.91), True, -0.01),
        (91 // 100, False, 0.9),  # an int is a number: 0 is 0.9 below the band
    ],
)
def test_the_distance_is_signed_negative_inside_zero_on_an_edge_and_positive_outside(value, inside, distance):
    result = check_metric(value, AUC)
    assert result.inside is inside
    assert result.distance == pytest.approx(distance, abs=1e-7)


def test_a_value_on_the_edge_passes_and_says_so():
    result = check_metric(0.92, AUC)
    assert result.inside and result.distance == 0.0 and "edge" in result.reason


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, None, "0.91", True, [0.91]])
def test_a_value_that_is_not_a_finite_number_never_passes_and_stays_json_safe(value):
    result = check_metric(value, AUC)
    assert result.inside is False and result.distance is None and result.reason
    canonical_json(result.model_dump(mode="json"))  # NaN/inf are kept as text, never as bare floats


def test_the_reason_says_which_side_is_better_when_the_band_has_a_direction():
    assert "better" in check_metric(0.95, AUC).reason and "worse" in check_metric(0.85, AUC).reason
    assert "worse" in check_metric(0.40, LOSS).reason


def test_a_metric_without_a_band_is_reported_not_judged():
    result = check_metric(0.91, None, name="auc", registered=0.9)
    assert result.inside is None and result.registered == 0.9 and "no band" in result.reason
    with pytest.raises(ValueError):
        check_metric(0.91, None)


def test_a_difference_too_large_for_a_float_has_no_distance_but_still_fails():
    wide = Band(metric="m", lower=-1e308, upper=-1e308)
    result = check_metric(1.7e308, wide)
    assert result.inside is False and result.distance is None


def test_over_several_reruns_a_metric_is_inside_only_when_every_rerun_is():
    results = check_metrics([{"auc": 0.91}, {"auc": 0.95}, {"auc": 0.905}], {"auc": AUC}, registered={"auc": 0.91})
    [auc] = results
    assert auc.inside is False and auc.distance == pytest.approx(0.03)
    assert auc.rebuilt == [0.91, 0.95, 0.905] and "1 of 3 reruns outside" in auc.reason
    [ok] = check_metrics([{"auc": 0.91}, {"auc": 0.915}], {"auc": AUC})
    assert ok.inside is True and ok.distance == pytest.approx(-0.005)


def test_metrics_are_the_union_of_bands_rebuilt_and_registered_and_a_banded_one_missing_fails():
    results = {r.name: r for r in check_metrics([{"acc": 0.8}], {"auc": AUC}, registered={"loss": 0.3})}
    assert sorted(results) == ["acc", "auc", "loss"]
    assert results["auc"].inside is False and "missing" in results["auc"].reason
    assert results["acc"].inside is None and results["loss"].inside is None
