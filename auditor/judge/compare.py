"""Is the candidate's improvement real? Two versions compared through their seed-varied reruns.

Each version's calibration reran its recipe under several seeds: two samples of what each recipe gives.
Per headline metric (one with a better direction):

- **P(A > B)**, the probability that a rerun of the candidate beats a rerun of the incumbent, over every
  pair of reruns, ties counted half (Bouthillier et al., arXiv 2103.03098, recommend it over a fixed
  threshold);
- the **difference of means** (candidate − incumbent) with a Welch t interval (``CONFIDENCE``), its
  quantile from :func:`auditor.judge.calibrate.t_quantile`;
- a **gate**: ``beyond_noise`` when the interval lies wholly on the better side and P(A > B) is at least
  :data:`MEANINGFUL` (the improvement is both real and large against the noise), ``worse`` when the
  interval lies wholly on the worse side, ``within_noise`` otherwise.

The comparison's gate is ``worse`` when any headline metric is worse, ``beyond_noise`` when at least one
is beyond noise and none is worse, else ``within_noise``.

It also derives MLflow-native thresholds (``mlflow.models.MetricThreshold``'s fields) from the measured
noise, for ``mlflow.validate_evaluation_results``, which compares one evaluation of each model: a single
run's difference has standard deviation √(s_a² + s_b²), so ``min_absolute_change`` is the one-sided
``CONFIDENCE`` quantile of that, and ``threshold`` is the incumbent's own lower prediction bound (a
candidate below what the incumbent gives under an unlucky seed is refused whatever the baseline run).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from auditor.judge.calibrate import default_direction, resolution, t_quantile
from auditor.judge.result import Direction

#: the difference interval's confidence
CONFIDENCE = 0.95
#: P(A > B) at or above which an improvement is large against the seed noise (Bouthillier et al.)
MEANINGFUL = 0.75
#: the schema of the comparison document
COMPARISON_SCHEMA = "repro.comparison/1"

Gate = Literal["beyond_noise", "within_noise", "worse", "no_direction"]
#: what each gate says, in words (the CLI, the report and the Airflow task use these)
GATE_WORDS: dict[str, str] = {
    "beyond_noise": "improvement beyond seed noise",
    "within_noise": "within seed noise",
    "worse": "worse",
    "no_direction": "no better direction: not judged",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricComparison(_Model):
    metric: str
    direction: Direction
    candidate: list[float] = Field(default_factory=list)
    incumbent: list[float] = Field(default_factory=list)
    p_better: float  # P(candidate rerun beats incumbent rerun), ties half
    diff: float  # mean(candidate) − mean(incumbent)
    low: float  # the difference's interval
    high: float
    confidence: float = CONFIDENCE
    df: float | None = None
    gate: Gate
    sentence: str = ""
    threshold: dict[str, Any] | None = None  # MetricThreshold's keyword arguments


class Comparison(_Model):
    kind: str = COMPARISON_SCHEMA
    candidate: str  # models:/NAME/VERSION, pinned
    incumbent: str
    gate: Gate
    words: str
    metrics: list[MetricComparison] = Field(default_factory=list)
    compared_at: str | None = None
    reruns: dict[str, int] = Field(default_factory=dict)  # seed-varied reruns behind each side, by ref
    calibrated_now: list[str] = Field(default_factory=list)  # refs this comparison had to calibrate first
    #: what each side's calibration reruns cost, by ref (``auditor.steps.reruns.cost``; stored reruns are reused, not rerun)
    cost: dict[str, dict[str, Any]] = Field(default_factory=dict)
    findings: list[str] = Field(default_factory=list)
    published: dict[str, str] = Field(default_factory=dict)  # what was written where: comparison, thresholds

    def thresholds(self) -> dict[str, dict[str, Any]]:
        """``{metric: MetricThreshold kwargs}``: ``{k: MetricThreshold(**v) for k, v in ...items()}`` in MLflow."""
        return {m.metric: m.threshold for m in self.metrics if m.threshold is not None}


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = math.fsum(values) / n
    var = math.fsum((x - mean) ** 2 for x in values) / (n - 1) if n > 1 else 0.0
    return mean, var


def p_better(candidate: Sequence[float], incumbent: Sequence[float], direction: Direction) -> float:
    """P(A > B) over every pair (A a candidate rerun, B an incumbent one), ties counted half; ``lower``: A < B."""
    sign = -1.0 if direction == "lower" else 1.0
    wins = sum(1.0 if sign * a > sign * b else 0.5 if a == b else 0.0 for a in candidate for b in incumbent)
    return wins / (len(candidate) * len(incumbent))


def welch_interval(candidate: Sequence[float], incumbent: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float, float | None]:
    """(difference of means, low, high, Welch's degrees of freedom); a zero-width interval when neither side varies."""
    if len(candidate) < 2 or len(incumbent) < 2:
        raise ValueError("a difference interval needs at least 2 reruns on each side")
    ma, va = _mean_var(candidate)
    mb, vb = _mean_var(incumbent)
    diff = ma - mb
    qa, qb = va / len(candidate), vb / len(incumbent)
    se = math.sqrt(qa + qb)
    if se == 0.0:
        return diff, diff, diff, None
    df = (qa + qb) ** 2 / ((qa**2 / (len(candidate) - 1) if qa else 0.0) + (qb**2 / (len(incumbent) - 1) if qb else 0.0))
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * se
    return diff, diff - half, diff + half, df


def _gate(direction: Direction, low: float, high: float, p: float) -> Gate:
    if direction == "none":
        return "no_direction"
    better_low, better_high = (low, high) if direction == "higher" else (-high, -low)
    if better_low > 0 and p >= MEANINGFUL:
        return "beyond_noise"
    if better_high < 0:
        return "worse"
    return "within_noise"


def mlflow_threshold(candidate: Sequence[float], incumbent: Sequence[float], direction: Direction,
                     confidence: float = CONFIDENCE) -> dict[str, Any] | None:
    """``MetricThreshold`` keyword arguments derived from the measured noise (see the module docstring); None
    for a metric without a direction."""
    if direction == "none":
        return None
    mb, vb = _mean_var(incumbent)
    _, va = _mean_var(candidate)
    one_sided = t_quantile(confidence, len(candidate) + len(incumbent) - 2)
    floor = resolution([*candidate, *incumbent])
    change = max(one_sided * math.sqrt(va + vb), floor)  # MLflow wants a positive number
    bound = t_quantile(confidence, len(incumbent) - 1) * math.sqrt(vb * (1 + 1 / len(incumbent)))
    higher = direction == "higher"
    return {"threshold": mb - bound if higher else mb + bound, "min_absolute_change": change, "greater_is_better": higher}


def compare_metric(metric: str, candidate: Sequence[float], incumbent: Sequence[float], direction: Direction, *,
                   confidence: float = CONFIDENCE) -> MetricComparison:
    """One metric's comparison: P(A > B), the difference with its interval, the gate, the thresholds."""
    p = p_better(candidate, incumbent, direction)
    diff, low, high, df = welch_interval(candidate, incumbent, confidence)
    gate = _gate(direction, low, high, p)
    sentence = (f"{metric}: a candidate rerun beats an incumbent rerun with probability {p:.2f}; the difference of means is "
                f"{diff:+.4g} ({confidence:.0%} interval [{low:+.4g}, {high:+.4g}], {len(candidate)} vs {len(incumbent)} "
                f"seed-varied reruns): {GATE_WORDS[gate]}.")
    return MetricComparison(metric=metric, direction=direction, candidate=list(candidate), incumbent=list(incumbent),
                            p_better=p, diff=diff, low=low, high=high, confidence=confidence, df=df, gate=gate,
                            sentence=sentence, threshold=mlflow_threshold(candidate, incumbent, direction, confidence))


def _values(runs: Sequence[Mapping[str, Any]], metric: str) -> list[float]:
    out = []
    for metrics in runs:
        value = metrics.get(metric)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out.append(float(value))
    return out


def headline_metrics(candidate: Sequence[Mapping[str, Any]], incumbent: Sequence[Mapping[str, Any]],
                     directions: Mapping[str, Direction]) -> list[str]:
    """Metrics both versions' reruns report (at least 2 numbers each) with a better direction."""
    names = sorted({n for m in candidate for n in m} & {n for m in incumbent for n in m})
    return [n for n in names if (directions.get(n) or default_direction(n)) != "none"
            and len(_values(candidate, n)) >= 2 and len(_values(incumbent, n)) >= 2]


def overall(gates: Sequence[str]) -> Gate:
    judged = [g for g in gates if g != "no_direction"]
    if not judged:
        return "no_direction"
    if "worse" in judged:
        return "worse"
    return "beyond_noise" if "beyond_noise" in judged else "within_noise"


def compare_reruns(candidate_ref: str, incumbent_ref: str, candidate: Sequence[Mapping[str, Any]],
                   incumbent: Sequence[Mapping[str, Any]], *, metrics: Sequence[str] | None = None,
                   directions: Mapping[str, Direction] | None = None, confidence: float = CONFIDENCE,
                   compared_at: str | None = None) -> Comparison:
    """Compare two versions from their reruns' metrics (one mapping per rerun); ``ValueError`` when nothing compares."""
    directions = directions or {}
    names = list(metrics) if metrics else headline_metrics(candidate, incumbent, directions)
    if not names:
        raise ValueError("the two versions' reruns share no metric with a better direction to compare")
    rows = []
    for name in names:
        a, b = _values(candidate, name), _values(incumbent, name)
        if len(a) < 2 or len(b) < 2:
            raise ValueError(f"{name}: {len(a)} candidate and {len(b)} incumbent reruns report it; each side needs 2 or more")
        rows.append(compare_metric(name, a, b, directions.get(name) or default_direction(name), confidence=confidence))
    gate = overall([r.gate for r in rows])
    return Comparison(candidate=candidate_ref, incumbent=incumbent_ref, gate=gate, words=GATE_WORDS[gate], metrics=rows,
                      compared_at=compared_at)


__all__ = ["CONFIDENCE", "GATE_WORDS", "MEANINGFUL", "Comparison", "Gate", "MetricComparison", "compare_metric",
           "compare_reruns", "headline_metrics", "mlflow_threshold", "overall", "p_better", "welch_interval"]
