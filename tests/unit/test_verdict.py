"""The verdict logic, case by case.

THE TABLE below is the contract for the statistical tier: one metric ``auc`` with the band
[0.90, 0.92] (direction "higher"), the rebuild's value, whether the rebuilt weights are bit-identical,
and the verdict that combination gets. Lineage is clean and the registered artifact recovered in all
of them; the rows after the table change one of those at a time.
"""

from __future__ import annotations

import json
import math

import pytest

from auditor.errors import MalformedRecord
from auditor.judge.floors import FloorRun, SameSeedFloor
from auditor.judge.result import Band, MetricResult, TensorDiff, Verdict, WeightDiff
from auditor.judge.tolerance import bands_from_json, check_metrics
from auditor.judge.verdict import RecoveryCheck, judge
from auditor.lineage.findings import Finding

LOW, HIGH = 0.90, 0.92
BAND = Band(metric="auc", lower=LOW, upper=HIGH, reference=0.91, direction="higher")
MISSING = object()  # the rebuild did not report the metric at all
NO_BAND = object()  # the model version has no band for the metric

SAME = WeightDiff(identical=True, tensors=3, max_abs=0.0, rel_l2=0.0)
DIFFERENT = WeightDiff(
    identical=False, tensors=3, differing=1, max_abs=1e-4, rel_l2=1e-6,
    worst=[TensorDiff(name="fc.weight", max_abs=1e-4, rel_l2=1e-6, cosine=0.999999)],
)  # fmt: skip

# The same-seed floor these cases are judged under: noisy execution (not bit-identical) on the platform
# the rebuild ran on, with DIFFERENT well within it, so the table is about the metric bands alone.
PLATFORM = {"machine": "x86_64", "cpu_model": "test cpu", "torch": "2.13.0", "threads": {"torch_intra_op": 2}}
from tests.fixtures.judged import VERIFIED  # noqa: E402

FLOOR = SameSeedFloor(runs=[FloorRun(seed=7, weights_sha256="a"), FloorRun(seed=7, weights_sha256="b")],
                      bit_identical=False, max_abs=1e-4, rel_l2=1e-6, platform=PLATFORM, noise_verified=VERIFIED)

# Bands that slipped past validation (built in code with model_construct): they must never let a value pass.
NAN_EDGE = Band.model_construct(**{**BAND.model_dump(), "lower": math.nan})
INVERTED = Band.model_construct(**{**BAND.model_dump(), "lower": 0.95})

BITWISE, WITHIN, OUT = Verdict.REPRODUCED_BITWISE, Verdict.REPRODUCED_WITHIN_TOLERANCE, Verdict.OUT_OF_TOLERANCE

# fmt: off
TABLE = [
    # case                          rebuilt auc                    band     weights    verdict
    ("inside",                      0.91,                          BAND,    DIFFERENT, WITHIN),
    ("inside, weights identical",   0.91,                          BAND,    SAME,      BITWISE),
    ("exactly on the lower edge",   LOW,                           BAND,    DIFFERENT, WITHIN),
    ("exactly on the upper edge",   HIGH,                          BAND,    DIFFERENT, WITHIN),
    ("just below the lower edge",   math.nextafter(LOW, -math.inf), BAND,   DIFFERENT, OUT),
    ("just above the upper edge",   math.nextafter(HIGH, math.inf), BAND,   DIFFERENT, OUT),
    ("far outside",                 0.5,                           BAND,    DIFFERENT, OUT),
    ("NaN",                         math.nan,                      BAND,    DIFFERENT, OUT),
    ("NaN, weights identical",      math.nan,                      BAND,    SAME,      OUT),
    ("+inf",                        math.inf,                      BAND,    DIFFERENT, OUT),
    ("-inf",                        -math.inf,                     BAND,    DIFFERENT, OUT),
    ("missing metric",              MISSING,                       BAND,    DIFFERENT, OUT),
    ("missing metric, identical",   MISSING,                       BAND,    SAME,      OUT),
    ("null metric",                 None,                          BAND,    DIFFERENT, OUT),
    ("text instead of a number",    "0.91",                        BAND,    DIFFERENT, OUT),
    ("bool instead of a number",    True,                          BAND,    DIFFERENT, OUT),
    ("missing band",                0.91,                          NO_BAND, DIFFERENT, OUT),
    ("missing band, identical",     0.91,                          NO_BAND, SAME,      BITWISE),
    ("malformed band: NaN edge",    0.91,                          NAN_EDGE, DIFFERENT, OUT),
    ("malformed band: lower>upper", 0.91,                          INVERTED, DIFFERENT, OUT),
    ("malformed band, identical",   0.91,                          INVERTED, SAME,      OUT),
    # a malformed band in the stored document is refused on load, naming metric and field: see MALFORMED
]
# fmt: on


def _metric_results(value, band) -> list[MetricResult]:
    rebuilt = {} if value is MISSING else {"auc": value}
    bands = {} if band is NO_BAND else {"auc": band}
    return check_metrics([rebuilt], bands, registered={"auc": 0.91})


def _recovered() -> RecoveryCheck:
    return RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32)


@pytest.mark.parametrize(("case", "value", "band", "weights", "expected"), TABLE, ids=[row[0] for row in TABLE])
def test_each_case_of_the_table_gets_its_verdict(case, value, band, weights, expected):
    verdict, tiers = judge(
        findings=[], recovery=_recovered(), metric_results=_metric_results(value, band), weight_diff=weights,
        floor=FLOOR, platform=PLATFORM,
    )
    assert verdict is expected, f"{case}: {tiers['statistical']}"
    assert list(tiers) == ["lineage", "artifact_recovery", "statistical", "bitwise"]
    assert tiers["lineage"].status == "pass" and tiers["artifact_recovery"].status == "pass"


@pytest.mark.parametrize(
    ("case", "value", "band", "weights", "expected"),
    [row for row in TABLE if row[2] is not NO_BAND],
    ids=[row[0] for row in TABLE if row[2] is not NO_BAND],
)
def test_the_statistical_tier_fails_exactly_when_the_metric_is_not_inside(case, value, band, weights, expected):
    _, tiers = judge(findings=[], recovery=None, metric_results=_metric_results(value, band), weight_diff=weights,
                     floor=FLOOR, platform=PLATFORM)
    passes = expected is not OUT
    assert tiers["statistical"].status == ("pass" if passes else "fail")
    if not passes:
        assert "auc" in tiers["statistical"].summary


def test_a_missing_band_is_reported_as_not_judged_and_the_tier_says_how_to_get_one():
    _, tiers = judge(findings=[], recovery=None, metric_results=_metric_results(0.91, NO_BAND), weight_diff=DIFFERENT,
                     floor=FLOOR, platform=PLATFORM)
    assert tiers["statistical"].status == "skipped"
    assert "calibrate" in tiers["statistical"].summary
    assert tiers["bitwise"].status == "fail"


# A malformed band in the stored document never reaches the judge: loading it is an error that names the
# metric and the field (exit code 2 through the CLI), so it can never pass silently.
MALFORMED = [
    ({"lower": 0.9}, "upper"),
    ({"lower": "0.9", "upper": 0.92}, "lower"),
    ({"lower": 0.93, "upper": 0.92}, "lower"),
    ({"lower": None, "upper": 0.92}, "lower"),
    ({"lower": 0.9, "upper": 0.92, "direction": "up"}, "direction"),
    ({"lower": 0.9, "upper": 0.92, "provenance": "calibrated"}, "method"),
    ({"lower": 0.9, "upper": 0.92, "tolerance": 0.1}, "tolerance"),
    ({"abs_tol": 0.01}, "reference"),
    ({"reference": 0.91, "abs_tol": -0.01}, "abs_tol"),
    ([0.9, 0.92], "(band)"),
]


@pytest.mark.parametrize(("band", "field"), MALFORMED, ids=[field for _, field in MALFORMED])
def test_a_malformed_band_is_an_error_naming_the_metric_and_the_field(band, field):
    text = json.dumps({"schema": "repro.bands/1", "bands": {"auc": band}})
    with pytest.raises(MalformedRecord) as caught:
        bands_from_json(text, "models:/m/1 tag repro.bands")
    message = str(caught.value)
    assert "'auc'" in message and f"'{field}'" in message and "models:/m/1" in message


def test_a_nan_literal_in_the_band_document_is_refused_naming_the_field():
    with pytest.raises(MalformedRecord, match="'auc', field 'lower': must be finite"):
        bands_from_json('{"schema": "repro.bands/1", "bands": {"auc": {"lower": NaN, "upper": 1}}}', "tag")


# -- the other tiers ------------------------------------------------------------------------------------


def _blocking() -> Finding:
    return Finding(
        code="data.mutable_version", path="data.train.version", severity="blocking",
        message="version 'latest' is mutable", hint="snapshot the data",
    )  # fmt: skip


def test_a_blocking_lineage_finding_makes_the_model_not_reproducible_whatever_the_rebuild_gives():
    verdict, tiers = judge(
        findings=[_blocking()], recovery=_recovered(), metric_results=_metric_results(0.91, BAND), weight_diff=SAME
    )
    assert verdict is Verdict.NOT_REPRODUCIBLE
    assert tiers["lineage"].status == "fail"
    assert "data.train.version" in tiers["lineage"].details[0]
    assert tiers["bitwise"].status == "pass"  # each tier is still reported on its own


def test_a_warning_finding_does_not_block_and_is_kept_in_the_details():
    warning = _blocking().model_copy(update={"severity": "warning"})
    verdict, tiers = judge(
        findings=[warning], recovery=_recovered(), metric_results=_metric_results(0.91, BAND), weight_diff=SAME
    )
    assert verdict is Verdict.REPRODUCED_BITWISE
    assert tiers["lineage"].status == "pass" and len(tiers["lineage"].details) == 1


def test_registered_weights_altered_after_registration_fail_artifact_recovery_even_when_the_rebuild_is_identical():
    altered = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "cd" * 32)
    verdict, tiers = judge(findings=[], recovery=altered, metric_results=_metric_results(0.91, BAND), weight_diff=SAME)
    assert verdict is Verdict.NOT_REPRODUCIBLE
    assert tiers["artifact_recovery"].status == "fail"
    assert "altered" in tiers["artifact_recovery"].summary


@pytest.mark.parametrize(
    ("check", "words"),
    [
        (RecoveryCheck(expected_sha256=None, actual_sha256="sha256:" + "ab" * 32), "holds no sha256"),
        (RecoveryCheck(expected_sha256="ab" * 32, actual_sha256=None), "missing"),
        (RecoveryCheck(expected_sha256="ab" * 32, actual_sha256="ab" * 32, unrecoverable=["data.train: gone"]), "gone"),
        (
            RecoveryCheck(
                expected_sha256="ab" * 32, actual_sha256="ab" * 32, registered={"auc": 0.91}, evaluated={"auc": 0.95}
            ),
            "evaluate to 0.95",
        ),
        (
            RecoveryCheck(
                expected_sha256="ab" * 32, actual_sha256="ab" * 32, registered={"auc": 0.91}, evaluated={"auc": "nan"}
            ),
            "evaluate to 'nan'",
        ),
    ],
    ids=["no recorded sha", "file missing", "input gone", "metric not reproduced", "metric NaN on re-evaluation"],
)
def test_an_unrecoverable_artifact_or_input_fails_artifact_recovery(check, words):
    verdict, tiers = judge(findings=[], recovery=check, metric_results=_metric_results(0.91, BAND), weight_diff=SAME)
    assert verdict is Verdict.NOT_REPRODUCIBLE
    assert tiers["artifact_recovery"].status == "fail"
    assert words in tiers["artifact_recovery"].summary


def test_recovery_accepts_a_re_evaluation_within_float_resolution_and_bare_or_prefixed_hashes():
    check = RecoveryCheck(
        expected_sha256="AB" * 32,
        actual_sha256="sha256:" + "ab" * 32,
        registered={"auc": 0.91, "loss": 0.3},
        evaluated={"auc": 0.91 * (1 + 1e-7)},
    )
    verdict, tiers = judge(findings=[], recovery=check, metric_results=_metric_results(0.91, BAND), weight_diff=SAME)
    assert verdict is Verdict.REPRODUCED_BITWISE
    assert tiers["artifact_recovery"].status == "pass"
    assert "reproduce the metrics" in tiers["artifact_recovery"].summary


def test_an_infrastructure_error_gives_error_but_a_blocking_finding_still_wins_because_retrying_cannot_fix_it():
    verdict, tiers = judge(
        findings=[], recovery=_recovered(), metric_results=[], weight_diff=None, error="dockerd down"
    )
    assert verdict is Verdict.ERROR and verdict.exit_code == 3
    assert tiers["statistical"].status == "error" and tiers["bitwise"].status == "error"
    verdict, _ = judge(findings=[_blocking()], recovery=None, metric_results=[], weight_diff=None, error="dockerd down")
    assert verdict is Verdict.NOT_REPRODUCIBLE


def test_a_recipe_that_fails_to_run_is_not_reproducible():
    verdict, tiers = judge(
        findings=[], recovery=_recovered(), metric_results=[], weight_diff=None, unrecoverable="exit status 1"
    )
    assert verdict is Verdict.NOT_REPRODUCIBLE
    assert tiers["statistical"].status == "fail" and "exit status 1" in tiers["bitwise"].summary


def test_nothing_to_judge_by_is_not_reproducible():
    verdict, tiers = judge(findings=[], recovery=None, metric_results=[], weight_diff=None)
    assert verdict is Verdict.NOT_REPRODUCIBLE
    assert tiers["statistical"].status == "skipped" and tiers["bitwise"].status == "skipped"


def test_bitwise_failure_details_name_the_tensors_that_differ_most():
    diff = DIFFERENT.model_copy(update={"only_in_b": ["extra.bias"], "mismatched": ["fc.weight2"]})
    _, tiers = judge(findings=[], recovery=None, metric_results=_metric_results(0.91, BAND), weight_diff=diff)
    details = "\n".join(tiers["bitwise"].details)
    assert "fc.weight" in details and "extra.bias" in details and "fc.weight2" in details
    assert tiers["bitwise"].summary.startswith("1 of 3 tensor(s) differ")


def test_the_verdict_exit_codes_follow_the_cli_contract():
    assert [v.exit_code for v in Verdict] == [0, 0, 1, 1, 1, 3]  # LINEAGE_INSUFFICIENT (an adoption assessment) exits 1
