"""The seed lottery: does the registered run rank above what other seeds give, and how often would an honest seed?

A calibration's seed-varied reruns are draws of the same recipe under other seeds. If the registered run
was one more such draw, it is exchangeable with them: among the n + 1 runs its place is uniform, so the
chance that it ranks at least this well is exactly (runs ranking at least this well) / (n + 1). A registered
run above nearly every rerun is what registering the best of several seeds leaves (Picard, arXiv 2109.08203),
and also what 1 honest seed in n + 1 does: the check reports the rank and that frequency, never a motive.

**One test for all headline metrics.** A version reports several metrics, and testing each alone at
``alpha`` flags an honest run more often than ``alpha`` (three metrics: 11 % in ``bench/bench_lottery.py``). The metrics with a
better direction are tested at once, by one exact rank statistic:

- each of the n + 1 runs (the registered one and every rerun reporting all those metrics) gets its rank on
  each metric among the n + 1, in the metric's favourable direction (its band's ``direction``); ties count
  against every tied run (a run's rank is how many runs are at least as good);
- a run's standing is its ranks sorted best first, compared in turn (best rank first, then the next: the
  lexicographic minimum of the per-metric ranks); the p-value is the share of the n + 1 runs whose standing
  is at least as good as the registered run's.

The standing is computed the same way for every run from the pooled values, so under exchangeability the
registered run's p-value is exact (conservative with ties): the false-alarm rate is at most ``alpha`` for
any number of metrics, however they correlate, with no model of that correlation. Why this statistic:

- a picked seed was picked on one metric (its rank there is first) and, metrics being correlated, ranks
  well on the others: the best rank, then the next, is the minimum p-value across metrics calibrated on the
  reruns themselves, which uses their correlation instead of paying for it;
- a Bonferroni or Holm correction of the per-metric p-values cannot flag anything until n + 1 >= k / alpha
  (59 reruns at three metrics, where this test needs 19) and ignores the correlation. In a simulation made
  while choosing (three metrics correlated 0.3 to 0.9, 19 or 39 reruns, a seed picked as the best of 20 on
  one metric) this statistic detected about as often as the maximum or the sum of z-scores (within 2 points),
  3 to 5 points more often than a sum of ranks where the metrics correlate weakly, and 1.3 to 15 times as
  often as the bare minimum rank (whose ties make it conservative). ``bench/bench_lottery.py`` measures it;
- with one metric it is the plain exact one-sided rank test: p = (1 + reruns at least as good) / (n + 1).

The smallest p-value n reruns can give is 1 / (n + 1) whatever the number of metrics: a level ``alpha``
needs n >= 1/alpha - 1 (19 at 0.05). Fewer reruns are reported as too few to test, never as a pass. A metric
with no direction is placed (its rank) but not tested: no side is favourable.

Pure: no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

from auditor.judge.result import Band, Direction, MetricLottery, SeedLottery
from auditor.lineage.findings import Finding

#: the lottery test's level unless the caller names another
ALPHA = 0.05
WORDS = {1: "first", 2: "second", 3: "third"}


def min_reruns(alpha: float = ALPHA) -> int:
    """Fewest reruns whose smallest possible p-value, 1 / (n + 1), reaches ``alpha`` (any number of metrics)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    return max(1, math.ceil(1.0 / alpha - 1.0 - 1e-9))


def ordinal(rank: int) -> str:
    """first, second, third, 4th, …, 21st, 22nd."""
    if rank in WORDS:
        return WORDS[rank]
    suffix = "th" if 10 <= rank % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(rank % 10, "th")
    return f"{rank}{suffix}"


def _times(count: int, total: int) -> str:
    return f"{count} time{'s' if count != 1 else ''} in {total}"


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


def joint_count(rows: Sequence[Sequence[float]], directions: Sequence[Direction]) -> int:
    """How many of ``rows`` (runs; row 0 the registered one) stand at least as well as row 0 on all columns at once.

    A run's rank on a column is how many runs are at least as good there (ties against every tied run); its
    standing is its ranks sorted best first, compared lexicographically. ``count / len(rows)`` is the exact
    p-value of row 0 when the rows are exchangeable. With one column it is the registered run's rank.
    """
    signs = [-1.0 if d == "lower" else 1.0 for d in directions]
    columns = [sorted(sign * row[m] for row in rows) for m, sign in enumerate(signs)]
    size = len(rows)
    standings = [sorted(size - bisect.bisect_left(columns[m], sign * row[m]) for m, sign in enumerate(signs))
                 for row in rows]
    return sum(1 for standing in standings if standing <= standings[0])


def place(metric: str, registered: Any, reruns: Sequence[Any], direction: Direction, *, alpha: float = ALPHA) -> MetricLottery:
    """The registered value of ``metric`` placed among ``reruns``: rank, exact p-value of this metric alone, status, sentence.

    The status is this metric's own test; ``seed_lottery`` decides a version's metrics together.
    """
    needed = min_reruns(alpha)
    value = _number(registered)
    values = [v for v in (_number(x) for x in reruns) if v is not None]
    entry = MetricLottery(metric=metric, direction=direction, registered=value, reruns=values, alpha=alpha, min_reruns=needed)
    if value is None or not values:
        return entry.model_copy(update={"status": "not_numeric", "sentence": (
            f"{metric}: no numeric registered value and reruns to compare, so the seed lottery was not checked.")})
    n = len(values)
    better, ties = _counts(value, values, direction)
    p = (1 + better + ties) / (n + 1)  # runs at least as good, the registered one included: ties count against it
    entry = entry.model_copy(update={"rank": 1 + better, "better_reruns": better, "ties": ties, "p_value": p})
    where = _where(entry)
    if direction == "none":
        return entry.model_copy(update={"status": "no_direction", "sentence": (
            f"{where}; {metric} has no better direction, so it is placed, not tested.")})
    if n < needed:
        return entry.model_copy(update={"status": "too_few", "sentence": f"{where}; {_too_few(n, alpha)}"})
    flagged = p <= alpha
    verdict = _verdict(1 + better + ties, n + 1, p, alpha, [entry] if flagged else [])
    return entry.model_copy(update={"status": "lottery" if flagged else "consistent", "sentence": f"{where}; {verdict}"})


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _where(m: MetricLottery) -> str:
    n = len(m.reruns)
    tied = f", tied with {m.ties} of them" if m.ties else ""
    return (f"{m.metric} {m.registered:.6g} ranks {ordinal(m.rank or 0)} of {n + 1} beside {n} seed-varied reruns "
            f"(their mean {_mean(m.reruns):.6g}{tied})")


def _too_few(n: int, alpha: float) -> str:
    return (f"{n} reruns are too few to test at {alpha:g}: the smallest p-value they can give is 1/{n + 1} = {1 / (n + 1):.3g}, "
            f"so even a run above every rerun could not be told from an honest seed (an exact rank test needs at least "
            f"{min_reruns(alpha)} reruns, whatever the number of metrics); not tested, not passed.")


def _and(words: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _verdict(count: int, total: int, p: float, alpha: float, leading: Sequence[MetricLottery]) -> str:
    """How often an honest seed ranks this well, and what follows; ``leading``: the flagged metrics (none: not flagged)."""
    often = f"an honest seed ranks this well {_times(count, total)} (p = {p:.3g}"
    if not leading:
        return f"{often} > {alpha:g}): consistent with an ordinary seed."
    means = _and([f"{_mean(m.reruns):.6g} for {m.metric}" for m in leading])
    claimed = _and([f"{m.registered:.6g}" for m in leading])
    return (f"{often} <= {alpha:g}): the registered value{'s sit' if len(leading) > 1 else ' sits'} above what other seeds "
            f"give; a retrain with another seed should be expected to give about {means}, not the registered {claimed}.")


def _standing(entries: Sequence[MetricLottery], total: int) -> str:
    """'first of 20 on auc and ks, 4th on log_loss': the registered run's ranks, best first."""
    by_rank: dict[int, list[str]] = {}
    for m in sorted(entries, key=lambda m: (m.rank or 0, m.metric)):
        by_rank.setdefault(m.rank or 0, []).append(m.metric)
    parts = [f"{ordinal(rank)}{f' of {total}' if i == 0 else ''} on {_and(names)}"
             for i, (rank, names) in enumerate(by_rank.items())]
    return _and(parts)


def _complete(runs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[list[float]]:
    """Each rerun's values of ``names``, for the reruns that report every one of them as a finite number."""
    rows = [[_number(run.get(name)) for name in names] for run in runs]
    return [[v for v in row if v is not None] for row in rows if all(v is not None for v in row)]


def joint(entries: Sequence[MetricLottery], runs: Sequence[Mapping[str, Any]], *, alpha: float = ALPHA) -> list[MetricLottery]:
    """``entries`` (placed, each with a better direction) decided together by one exact test; each gets the shared sentence."""
    if len(entries) < 2:
        return list(entries)
    names = [m.metric for m in entries]
    rows = _complete(runs, names)
    n, k = len(rows), len(entries)
    if n < min_reruns(alpha):
        why = (f"only {n} of the reruns report all {k} headline metrics ({', '.join(names)}); " if n < len(runs) else "")
        return [m.model_copy(update={"status": "too_few", "sentence": f"{_where(m)}; {why}{_too_few(n, alpha)}"})
                for m in entries]
    count = joint_count([[m.registered for m in entries], *rows], [m.direction for m in entries])
    p = count / (n + 1)
    best = min(m.rank or 0 for m in entries)
    leading = [m for m in entries if m.rank == best] if p <= alpha else []
    flagged = {m.metric for m in leading}
    shared = (f"Beside {n} seed-varied reruns, the registered run ranks {_standing(entries, n + 1)}; across these {k} headline "
              f"metrics at once (best rank first, then the next) {_verdict(count, n + 1, p, alpha, leading)}")
    out = []
    for m in entries:
        alone = f"{m.metric} {m.registered:.6g} (the reruns' mean {_mean(m.reruns):.6g}): p = {m.p_value:.3g} alone. "
        lead = m.metric in flagged
        out.append(m.model_copy(update={"status": "lottery" if lead else "consistent", "sentence": shared if lead else alone + shared}))
    return out


def seed_lottery(calibration: Any, registered: Mapping[str, Any], bands: Mapping[str, Band] | None = None, *,
                 alpha: float = ALPHA) -> SeedLottery | None:
    """The lottery check of every metric the calibration's seed-varied reruns report; None without a calibration.

    ``calibration`` is a ``judge.floors.Calibration``; each metric's direction comes from its band
    (``auditor.judge.calibrate.default_direction`` of its name when it has none). Every metric placed with a
    better direction is a headline metric: they are decided together (``joint``), so the version's false-alarm
    rate is at most ``alpha``; a metric's ``p_value`` stays its own, alone.
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
    tested = [m for m in entries if m.status in ("lottery", "consistent")]
    decided = dict(zip((m.metric for m in tested), joint(tested, [run.metrics for run in runs], alpha=alpha), strict=True))
    entries = [decided.get(m.metric, m) for m in entries]
    return SeedLottery(alpha=alpha, reruns=len(runs), calibrated_at=calibration.calibrated_at, metrics=entries)


def lottery_findings(lottery: SeedLottery | None) -> list[Finding]:
    """One warning when the registered run ranks above what an honest seed does but ``alpha`` of the time, and one
    when the test could not run."""
    if lottery is None:
        return []
    found = []
    if lottery.winners:  # the headline metrics' one test: one finding, naming the metrics the registered run leads
        names = [m.metric for m in lottery.winners]
        found.append(Finding(
            code="seeds.lottery_winner", path="outputs.metrics" + (f".{names[0]}" if len(names) == 1 else ""),
            severity="warning", message=lottery.winners[0].sentence,
            hint="report the reruns' mean (or median) as the model's expected performance, or register a run whose seed "
                 "was fixed before its result was seen"))
    too_few = [m.metric for m in lottery.metrics if m.status == "too_few"]
    if too_few:
        needed = lottery.metrics[0].min_reruns
        found.append(Finding(
            code="seeds.lottery_untested", path="seeds", severity="warning",
            message=(f"{lottery.reruns} seed-varied reruns are too few to test at {lottery.alpha:g} whether the registered run "
                     f"ranks above what other seeds give ({', '.join(too_few)}); the check is not passed, it did not run"),
            hint=f"calibrate with --reruns {needed} or more"))
    return found


__all__ = ["ALPHA", "joint", "joint_count", "lottery_findings", "min_reruns", "ordinal", "place", "seed_lottery"]
