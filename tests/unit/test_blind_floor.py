"""Issue 42, build 2: a floor that cannot see is said to be blind. When the same-seed floor is about as wide as the
spread across seeds, weights within it prove nothing: the report says so and the statistical tier rests on the bands
and the recomputed registered metrics; weights beyond it still fail."""

from __future__ import annotations

from auditor.judge.floors import BLIND_RATIO, Calibration, FloorRun
from auditor.judge.result import WeightDiff
from auditor.judge.tolerance import check_metrics
from auditor.judge.verdict import RecoveryCheck, judge
from tests.fixtures.judged import BAND, PLATFORM, floor


def _calibration(same: float, varied: list[float]) -> Calibration:
    f = floor().model_copy(update={"metric_spread": {"auc": same}})
    return Calibration(same_seed=f, seed_varied=[FloorRun(seed=i, metrics={"auc": v}) for i, v in enumerate(varied)])


def test_a_floor_as_wide_as_the_seed_spread_is_blind_and_says_so_with_both_figures():
    blind = _calibration(0.02, [0.90, 0.93, 0.91])  # same seed 0.02 of seeds' 0.03
    same, varied = blind.blind_metrics()["auc"]
    assert same == 0.02 and abs(varied - 0.03) < 1e-12
    said = blind.blind_floor()
    assert said and "cannot tell a changed input from noise" in said and "same seed 0.02" in said
    assert said in blind.findings()
    seeing = _calibration(0.001, [0.90, 0.93, 0.91])
    assert BLIND_RATIO * 0.03 > 0.001 and seeing.blind_floor() is None


def _judged(blind: str | None, max_abs: float):
    diff = WeightDiff(identical=False, tensors=2, differing=2, max_abs=max_abs, rel_l2=max_abs / 10)
    metrics = check_metrics([{"auc": 0.91}], {"auc": BAND}, registered={"auc": 0.91})
    recovery = RecoveryCheck(expected_sha256="sha256:" + "1" * 64, actual_sha256="sha256:" + "1" * 64, registered={"auc": 0.91},
                             evaluated={"auc": 0.91})
    return judge(findings=[], recovery=recovery, metric_results=metrics, weight_diff=diff, floor=floor(), platform=PLATFORM,
                 blind_floor=blind)


def test_weights_within_a_blind_floor_count_for_nothing_and_beyond_it_still_fail():
    said = _calibration(0.02, [0.90, 0.93, 0.91]).blind_floor()
    verdict, tiers = _judged(said, 1e-5)  # within the floor (1e-4 x margin)
    statistical = tiers["statistical"]
    assert "weights within the same-seed floor" not in statistical.summary, statistical
    assert any("cannot tell a changed input from noise" in d for d in statistical.details), statistical.details
    assert verdict.value == "REPRODUCED_WITHIN_TOLERANCE"  # the bands and the recomputed metrics decide
    _, seeing = _judged(None, 1e-5)
    assert "weights within the same-seed floor" in seeing["statistical"].summary
    verdict, tiers = _judged(said, 1.0)  # far beyond the floor: still a failure
    assert tiers["statistical"].status == "fail" and not verdict.value.startswith("REPRODUCED")
