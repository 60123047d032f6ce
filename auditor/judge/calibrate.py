"""Calibration math: a metric's tolerance band from the spread of seed-varied reruns.

The band is a prediction interval for one new observation,

    mean ± t(n−1, 1−(1−c)/2) · s · √(1 + 1/n)        (c = confidence, 0.99 by default)

and never narrower than the metric's float resolution: :data:`RESOLUTION_ULPS` float32 ULPs at the
largest magnitude seen. Metrics are computed in float32 by most training code, so two evaluations
that differ only in reduction order disagree by a few float32 ULPs; a band narrower than that would
call a bit-identical model "out of tolerance" when its metric was merely re-rounded.

Pure: no I/O, no scipy (see :func:`t_quantile`).
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from auditor.errors import BadInput
from auditor.judge.result import Band, Direction
from auditor.judge.tolerance import as_number

#: the band's half-width floor, in float32 ULPs at the largest |value| (see the module docstring)
RESOLUTION_ULPS = 4

INF = math.inf

#: What a metric's name says about it: which way is better and which values it can take. One table,
#: read top to bottom: the first row one of whose words is a whole token of the name wins (tokens are the
#: name split at ``_ . - / @ :``, spaces, digits-to-letters and camelCase; ``val_rocauc``, ``valLoss`` and
#: ``top1_acc`` end in a word of the table, which counts too). Lower-is-better rates come first, so
#: ``false_positive_rate`` and ``misclassification_rate`` are rates to lower before ``rate`` could say
#: anything. A leading ``neg`` (scikit-learn's ``neg_log_loss``) flips the row. Durations are not here:
#: :func:`is_duration` names them, and they are never a model's performance. A name no
#: row matches has direction ``none`` and an unbounded domain; ``REPRO_METRIC_DIRECTIONS`` declares it.
METRIC_KINDS: tuple[tuple[tuple[str, ...], Direction, tuple[float, float]], ...] = (
    # words (whole tokens, or a phrase of consecutive tokens)                better    domain
    (("error rate", "err rate", "miss rate", "false positive rate", "false negative rate", "false alarm rate",
      "false discovery rate", "misclassification rate", "misclassification", "fpr", "fnr", "fdr", "far", "frr",
      "ece", "zero one loss"),                                               "lower",  (0.0, 1.0)),
    (("loss", "error", "err", "mse", "mae", "rmse", "msle", "rmsle", "mape", "smape", "wape", "mad", "medae",
      "smooth l1", "huber", "l1", "l2", "nll", "logloss", "deviance", "perplexity", "ppl", "brier", "wer", "cer",
      "ter", "distance", "regret"),                                          "lower",  (0.0, INF)),
    (("auc", "rocauc", "auroc", "auprc", "accuracy", "acc", "precision", "recall", "f1", "fbeta", "iou", "dice",
      "ndcg", "map", "mrr", "hit rate", "hits", "tpr", "tnr", "specificity", "sensitivity", "ks", "true positive rate",
      "true negative rate", "balanced accuracy", "coverage"),                "higher", (0.0, 1.0)),
    (("gini", "mcc", "kappa"),                                               "higher", (-1.0, 1.0)),
    (("r2", "explained variance", "rsquared"),                              "higher", (-INF, 1.0)),
    (("bleu", "rouge", "meteor", "score", "likelihood", "reward", "return"),  "higher", (-INF, INF)),
)
#: a compound token that ends in one of these words counts as the word (``valloss``, ``rocauc``, ``trainacc``)
SUFFIX_WORDS = frozenset({"loss", "error", "acc", "accuracy", "auc", "mse", "rmse", "mae", "f1"})


def metric_tokens(metric: str) -> list[str]:
    """The name's lower-case tokens: split at punctuation, spaces and camelCase."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", metric)
    return [t for t in re.split(r"[^a-z0-9]+", spaced.lower()) if t]


#: a metric whose name says it is a duration is never expected to reproduce (it is not a model's property):
#: matched as whole ``_``/``.``/``-``-separated tokens, so ``auc_out_of_time`` or ``second_stage_auc`` are compared
TIMING_TOKENS = frozenset({"time", "seconds", "secs", "sec", "s", "ms", "latency", "duration", "elapsed", "throughput",
                           "speed", "wall", "runtime"})


def is_duration(name: str) -> bool:
    """``train_seconds``, ``epoch_time``, ``latency_ms``, ``samples_per_sec``: yes; ``auc_out_of_time``: no."""
    tokens = metric_tokens(name)
    if not tokens:
        return False
    if "per" in tokens and tokens[-1] in {"sec", "second", "s"}:
        return True
    if "out" in tokens and "of" in tokens:  # out-of-time / out-of-sample validation: a model's property
        return False
    return tokens[-1] in TIMING_TOKENS or tokens[0] in {"duration", "elapsed", "latency", "runtime"}


def _has(tokens: list[str], word: str) -> bool:
    parts = word.split()
    if len(parts) > 1:
        return any(tokens[i:i + len(parts)] == parts for i in range(len(tokens) - len(parts) + 1))
    stripped = [t.rstrip("0123456789") or t for t in tokens]  # acc5 -> acc, top1 -> top
    return word in tokens or word in stripped or (
        word in SUFFIX_WORDS and any(t.endswith(word) and len(t) > len(word) + 1 for t in tokens))


# -- Student t quantile -----------------------------------------------------------------------------------
# Written here rather than taken from scipy: the core runs in trainer images and Airflow workers where a
# 40 MB compiled dependency for one number is not worth it, and the stdlib has only the normal
# distribution. The tests check it against scipy.stats.t.ppf whenever scipy is importable.


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta (modified Lentz; Numerical Recipes §6.4)."""
    tiny, eps = 1e-300, 1e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """Regularised incomplete beta I_x(a, b), with y = 1 − x passed in so neither loses precision."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, y) / b


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom, t >= 0."""
    return 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))


def _t_central(t: float, df: float) -> float:
    """P(0 < T < t), t >= 0: the accurate form near the centre, where the tail is close to 0.5."""
    return 0.5 * _betainc(0.5, df / 2.0, t * t / (df + t * t), df / (df + t * t))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` > 0 degrees of freedom (inverse CDF)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile level must be strictly between 0 and 1, got {p!r}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be positive, got {df!r}")
    if p == 0.5:
        return 0.0
    # Solve on whichever side keeps the small number small: the tail for levels like 0.995 (1 − p is
    # what matters), the central mass for levels near 0.5.
    central = abs(p - 0.5)
    tail = min(p, 1.0 - p)

    def beyond(t: float) -> bool:
        return _t_central(t, df) < central if central < 0.25 else t_upper_tail(t, df) > tail

    lo, hi = 0.0, 1.0
    while beyond(hi):
        lo, hi = hi, hi * 2.0
    for _ in range(2000):  # bisection on a monotone function; stops when the interval is one ULP wide
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if beyond(mid):
            lo = mid
        else:
            hi = mid
    t = 0.5 * (lo + hi)
    return t if p > 0.5 else -t


# -- resolution floor -------------------------------------------------------------------------------------


def float32_ulp(x: float) -> float:
    """Spacing of float32 numbers at |x| (float64's when |x| is beyond float32's range)."""
    x = abs(x)
    try:
        rounded = struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.ulp(x)
    bits = struct.unpack("<I", struct.pack("<f", rounded))[0]
    if bits >= 0x7F7FFFFF:  # float32 max: its spacing is the one below it
        return rounded - struct.unpack("<f", struct.pack("<I", bits - 1))[0]
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0] - rounded


def resolution(values: Sequence[float]) -> float:
    """The narrowest half-width a band over ``values`` may have (see :data:`RESOLUTION_ULPS`)."""
    return RESOLUTION_ULPS * float32_ulp(max(abs(v) for v in values))


# -- bands ------------------------------------------------------------------------------------------------


def metric_kind(metric: str) -> tuple[Direction, tuple[float, float]]:
    """Direction and domain of ``metric`` from :data:`METRIC_KINDS` (``none``, unbounded, for a duration)."""
    tokens = metric_tokens(metric)
    if not tokens or is_duration(metric):
        return "none", (-INF, INF)
    flipped = tokens[0] == "neg" and len(tokens) > 1
    if flipped:
        tokens = tokens[1:]
    for words, direction, (low, high) in METRIC_KINDS:
        if any(_has(tokens, word) for word in words):
            if flipped:
                return ("lower" if direction == "higher" else "higher"), (-high, -low)
            return direction, (low, high)
    return "none", (-INF, INF)


def default_direction(metric: str) -> Direction:
    """A guess at which way is better from the metric's name; ``none`` when the name says nothing."""
    return metric_kind(metric)[0]


def direction_of(metric: str, declared: Mapping[str, str] | None = None) -> Direction:
    """Which way is better for ``metric``: as declared (``REPRO_METRIC_DIRECTIONS``), else what its name says."""
    given = (declared or {}).get(metric)
    return given if given in get_args(Direction) else default_direction(metric)  # type: ignore[return-value]


def _finite_values(
    metric: str, values: Sequence[Any], *, direction: str, runs: Sequence[str], reference: Any, confidence: float
) -> list[float]:
    """The reruns' values as floats, once the calibration's inputs are checked; ``BadInput`` names what is wrong."""
    if direction not in get_args(Direction):
        raise BadInput(f"calibration of {metric!r}: direction must be higher, lower or none, got {direction!r}")
    if not 0.0 < confidence < 1.0:
        raise BadInput(f"calibration of {metric!r}: confidence must be between 0 and 1, got {confidence!r}")
    if len(runs) != len(values):
        raise BadInput(f"calibration of {metric!r}: {len(values)} values but {len(runs)} run ids; name every rerun")
    if len(values) < 2:
        raise BadInput(f"calibration of {metric!r} needs at least 2 reruns, got {len(values)}", hint="use --reruns 2+")
    numbers = []
    for run, value in zip(runs, values, strict=True):
        number = as_number(value)
        if number is None or not math.isfinite(number):
            raise BadInput(
                f"calibration of {metric!r}: rerun {run!r} gave {value!r}, not a finite number",
                hint="a metric that is NaN or infinite in a rerun cannot be calibrated; fix the training",
            )
        numbers.append(number)
    if reference is not None and (as_number(reference) is None or not math.isfinite(reference)):
        raise BadInput(f"calibration of {metric!r}: reference {reference!r} is not a finite number")
    return numbers


def _interval(numbers: Sequence[float], confidence: float) -> dict[str, float]:
    """The prediction interval's numbers: n, mean, std, min, max, t, half_width, resolution, confidence."""
    n = len(numbers)
    # Shifted by the first value: exact when every rerun agrees, and less cancellation in the variance.
    mean = numbers[0] + math.fsum(x - numbers[0] for x in numbers) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in numbers) / (n - 1))
    t = t_quantile(1.0 - (1.0 - confidence) / 2.0, n - 1)
    floor = resolution([*numbers, mean])
    half = max(t * std * math.sqrt(1.0 + 1.0 / n), floor)
    return {"n": float(n), "mean": mean, "std": std, "min": min(numbers), "max": max(numbers), "t": t,
            "half_width": half, "resolution": floor, "confidence": confidence}


def band_from_runs(
    metric: str,
    values: Sequence[Any],
    *,
    direction: Direction,
    runs: Sequence[str],
    reference: float | None = None,
    confidence: float = 0.99,
    calibrated_at: str | None = None,
) -> Band:
    """A calibrated band for ``metric`` from one value per named rerun.

    ``reference`` is stored as the band's reference (the registered value, say); the band is centred on
    the reruns' mean. The spread (n, mean, std, min, max, t, half_width, resolution, confidence) is kept
    on the band as the metric's noise floor.
    """
    numbers = _finite_values(
        metric, values, direction=direction, runs=runs, reference=reference, confidence=confidence
    )
    spread = _interval(numbers, confidence)
    mean, half = spread["mean"], spread["half_width"]
    named, (low, high) = metric_kind(metric)  # a band never leaves the values its metric can take
    if named != direction:  # declared against what the name says: the name's domain is not known to hold
        low, high = -INF, INF
    observed = [*numbers, *([reference] if reference is not None and math.isfinite(reference) else [])]
    if any(not low <= v <= high for v in observed):  # a Gini or an accuracy in percent: another scale than the name's
        low, high = -INF, INF
    lower, upper = max(mean - half, low), min(mean + half, high)
    level = f"{1.0 - (1.0 - confidence) / 2.0:g}"
    return Band(
        metric=metric,
        lower=lower,
        upper=upper,
        reference=reference,
        direction=direction,
        provenance="calibrated",
        method=(
            f"prediction interval mean ± t(n-1, {level})·s·√(1+1/n) over {len(numbers)} seed-varied reruns, "
            f"half-width at least {RESOLUTION_ULPS} float32 ULPs"
            + ("" if (lower, upper) == (mean - half, mean + half) else f", clipped to the metric's domain [{low:g}, {high:g}]")
        ),
        runs=list(runs),
        spread=spread,
        calibrated_at=calibrated_at,
    )


def bands_from_reruns(
    reruns: Mapping[str, Mapping[str, Any]],
    *,
    directions: Mapping[str, Direction] | None = None,
    registered: Mapping[str, Any] | None = None,
    confidence: float = 0.99,
    calibrated_at: str | None = None,
) -> dict[str, Band]:
    """One band per metric from ``{rerun_id: {metric: value}}``; every rerun must report every metric.

    Directions default to :func:`default_direction`; a registered value, when numeric and finite,
    becomes the band's reference. A duration (:func:`is_duration`) gets no band: it is the machine's, not the
    model's, and is never judged (calibration and the bands' binding both come through here).
    """
    directions = directions or {}
    registered = registered or {}
    runs = list(reruns)
    names = sorted({name for metrics in reruns.values() for name in metrics if not is_duration(name)})
    bands = {}
    for name in names:
        missing = [run for run in runs if name not in reruns[run]]
        if missing:
            raise BadInput(
                f"calibration of {name!r}: rerun(s) {', '.join(missing)} did not report it",
                hint="every rerun of the recipe must write the same metrics",
            )
        reference = as_number(registered.get(name))
        bands[name] = band_from_runs(
            name,
            [reruns[run][name] for run in runs],
            direction=directions.get(name) or default_direction(name),
            runs=runs,
            reference=reference if reference is not None and math.isfinite(reference) else None,
            confidence=confidence,
            calibrated_at=calibrated_at,
        )
    return bands
