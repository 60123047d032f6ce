"""The seed lottery: was the registered run's seed picked for its result?

A calibration's seed-varied reruns are draws of the same recipe under other seeds. If the registered run
was one more such draw, its metric is exchangeable with theirs: among the n + 1 values its rank is uniform,
so the chance that it is at least as good as all but k of the n reruns is exactly (k + 1) / (n + 1). A
registered value better than nearly every rerun is what picking the best of several seeds produces
(Picard, arXiv 2109.08203): the model's claimed performance is then a lottery win, not what a retrain
gives.

- one-sided, in the metric's favourable direction (its band's ``direction``): the p-value is
  ``(1 + reruns at least as good) / (n + 1)``; ties count against the registered run, so the test stays
  exact without ties and conservative with them;
- the smallest p-value n reruns can give is 1 / (n + 1): a level ``alpha`` needs n >= 1/alpha - 1
  (19 at 0.05). Fewer reruns are reported as too few to test, never as a pass;
- a metric with no direction is placed (its rank) but not tested: no side is favourable.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from auditor.judge.result import Band, Direction, MetricLottery, SeedLottery
from auditor.lineage.findings import Finding

#: the lottery test's level unless the caller names another
ALPHA = 0.05


def min_reruns(alpha: float = ALPHA) -> int:
    """Fewest reruns whose smallest possible p-value, 1 / (n + 1), reaches ``alpha``."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    return max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _counts(registered: float, reruns: Sequence[float], direction: Direction) -> tuple[int, int]:
    """Reruns strictly better than the registered value, and reruns equal to it (``none`` reads as higher)."""
    sign = -1.0 if direction == "lower" else 1.0
    better = sum(1 for x in reruns if sign * x > sign * registered)
    ties = sum(1 for x in reruns if x == registered)
    return better, ties


def place(metric: str, registered: Any, reruns: Sequence[Any], direction: Direction, *, alpha: float = ALPHA) -> MetricLottery:
    """The registered value of ``metric`` placed among ``reruns``: rank, exact p-value, status and one sentence."""
    needed = min_reruns(alpha)
    value = _number(registered)
    values = [v for v in (_number(x) for x in reruns) if v is not None]
    entry = MetricLottery(metric=metric, direction=direction, registered=value, reruns=values, alpha=alpha, min_reruns=needed)
    if value is None or not values:
        return entry.model_copy(update={"status": "not_numeric", "sentence": (
            f"{metric}: no numeric registered value and reruns to compare, so the seed lottery was not checked.")})
    n = len(values)
    better, ties = _counts(value, values, direction)
    p = (1 + better + ties) / (n + 1)
    entry = entry.model_copy(update={"rank": 1 + better, "better_reruns": better, "ties": ties, "p_value": p})
    mean = math.fsum(values) / n
    where = f"{metric} {value:.6g} ranks {1 + better} of {n + 1} among {n} seed-varied reruns (their mean {mean:.6g})"
    if direction == "none":
        return entry.model_copy(update={"status": "no_direction", "sentence": (
            f"{where}; {metric} has no better direction, so whether its seed was picked for its result is not tested.")})
    if n < needed:
        return entry.model_copy(update={"status": "too_few", "sentence": (
            f"{where}; {n} reruns are too few to test at {alpha:g} (an exact one-sided rank test needs at least "
            f"{needed}): whether the registered seed was picked for its result is unknown, not passed.")})
    if p <= alpha:
        return entry.model_copy(update={"status": "lottery", "sentence": (
            f"{where}, p = {p:.3g} <= {alpha:g}: the registered seed was likely picked for its result; a retrain "
            f"with another seed should be expected to give about {mean:.6g}, not the claimed {value:.6g}.")})
    return entry.model_copy(update={"status": "consistent", "sentence": (
        f"{where}, p = {p:.3g}: consistent with an ordinary seed; the claimed {metric} is what a retrain "
        "with another seed gives.")})


def seed_lottery(calibration: Any, registered: Mapping[str, Any], bands: Mapping[str, Band] | None = None, *,
                 alpha: float = ALPHA) -> SeedLottery | None:
    """The lottery check of every metric the calibration's seed-varied reruns report; None without a calibration.

    ``calibration`` is a ``judge.floors.Calibration``; each metric's direction comes from its band
    (``auditor.judge.calibrate.default_direction`` of its name when it has none).
    """
    from auditor.judge.calibrate import default_direction, is_duration

    if calibration is None or not calibration.seed_varied:
        return None
    bands = bands or {}
    runs = calibration.seed_varied
    names = sorted({name for run in runs for name in run.metrics} & set(registered))
    entries = []
    for name in names:
        if name in calibration.zero_spread or is_duration(name):
            continue  # no seed moved it (calibration's own finding says so), or a duration: not the model's performance
        band = bands.get(name)
        direction = (band.direction if band is not None and band.direction != "none"
                     else calibration.directions.get(name) or default_direction(name))
        entries.append(place(name, registered[name], [run.metrics.get(name) for run in runs], direction, alpha=alpha))
    return SeedLottery(alpha=alpha, reruns=len(runs), calibrated_at=calibration.calibrated_at, metrics=entries)


def lottery_findings(lottery: SeedLottery | None) -> list[Finding]:
    """A warning per metric whose registered value is a favourable outlier, and one when the test could not run."""
    if lottery is None:
        return []
    found = [Finding(code="seeds.lottery_winner", path=f"outputs.metrics.{m.metric}", severity="warning", message=m.sentence,
                     hint="report the reruns' mean (or median) as the model's performance, or retrain under a seed chosen before training")
             for m in lottery.winners]
    too_few = [m.metric for m in lottery.metrics if m.status == "too_few"]
    if too_few:
        needed = lottery.metrics[0].min_reruns
        found.append(Finding(
            code="seeds.lottery_untested", path="seeds", severity="warning",
            message=(f"{lottery.reruns} seed-varied reruns are too few to test at {lottery.alpha:g} whether the registered seed "
                     f"was picked for its result ({', '.join(too_few)}); the check is not passed, it did not run"),
            hint=f"calibrate with --reruns {needed} or more"))
    return found


__all__ = ["ALPHA", "lottery_findings", "min_reruns", "place", "seed_lottery"]
