"""Whether calibration's same-seed reruns are execution noise of the recipe that trained the model. Pure.

Calibration measures how far runs of the *registered* recipe land apart. Before any floor or band is
stored, the same-seed reruns must show that they rerun that recipe:

1. **the same data**: every same-seed rerun's model consumed what the others' and the registered run's
   did (``auditor.judge.consumed``); data that differs is input noise, never execution noise;
2. **the same weights**: reruns that agree with one another bit for bit must agree with the registered
   weights too; reruns that differ (execution noise) must have at least one within :data:`RECIPE_MARGIN`
   times the same-seed floor of the registered weights;
3. **the same metrics**: reruns bit-identical to the registered weights must give the registered metrics
   (to float resolution); reruns that differ must bracket each registered metric within a 99.9 %
   prediction interval of their own spread (with 2 reruns, which make that interval vacuous, within
   :data:`FEW_RERUNS_RANGES` times their range).

A difference in any means the recipe being calibrated is not the one that trained the model (an
unpinned environment variable, a side file): calibration stops with these lines, and stores nothing. So
does a blocking difference in the reruns' traced inputs (a variable or file training read otherwise), on its own.
Reruns on another platform than training's are not held to 2 and 3 (a platform changes numerics); nor
are reruns that differ where the record gives no reason they may (``expected.spread_is_execution_noise``:
a CPU run with no declared nondeterministic source), which calibration reports as an input no record pins
instead (``floors.Calibration.findings``), and every audit of it fails.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from auditor.contract import ENV_TORCH_THREADS
from auditor.judge.calibrate import resolution, t_quantile
from auditor.judge.consumed import same_seed_problems, unattributed
from auditor.judge.expected import expected_tier, spread_is_execution_noise
from auditor.judge.floors import (
    SameSeedFloor,
    check_floor,
    platform_differences,
    platform_fingerprint,
    structure_problems,
)
from auditor.judge.result import WeightDiff
from auditor.judge.tolerance import as_number
from auditor.judge.verdict import EVAL_REL_TOL, NOT_REPRODUCIBLE_METRICS, is_duration
from auditor.lineage.record import RunRecord

#: at calibration, a registered model farther than this many times the same-seed floor from every rerun is
#: another recipe's (the audit holds a rebuild to ``floors.FLOOR_MARGIN``; refusing a calibration wants more)
RECIPE_MARGIN = 10.0
#: confidence of the same-seed prediction interval a registered metric must lie in
METRIC_CONFIDENCE = 0.999
#: below this many same-seed reruns a prediction interval is vacuous (Student's t at 99.9 % with 1 degree of
#: freedom is 636: the registered metric could lie ~550 times the reruns' gap away); the registered metric is then
#: held to :data:`FEW_RERUNS_RANGES` times the reruns' range instead
FEW_RERUNS = 3
#: with 2 same-seed reruns, how many times their range a registered metric may lie from their mean: under normal
#: noise about 0.6 % of honest calibrations are refused (the ratio is Cauchy: P ≈ (2/π)·atan(√1.5/(√2·k))), and they
#: pass with 3 reruns or more; a recipe that differs moves a metric by far more than its execution noise
FEW_RERUNS_RANGES = 100.0


def _describe(diff: WeightDiff) -> str:
    structure = structure_problems(diff)
    if structure:
        return "another model: " + "; ".join(structure[:3])
    worst = f", max |Δ| {diff.max_abs:.3g}, rel L2 {diff.rel_l2:.3g}" if diff.max_abs is not None and diff.rel_l2 is not None else ""
    return f"{diff.differing} of {diff.tensors} tensor(s) differ{worst}"


def _number_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for name, value in metrics.items():
        number = as_number(value)
        if number is not None and math.isfinite(number) and not is_duration(name):
            out[name] = number
    return out


def _metric_lines(registered: Mapping[str, Any], reruns: Sequence[Mapping[str, Any]], *, identical: bool) -> list[str]:
    """Registered metrics the same-seed reruns do not give (identical weights) or do not bracket (noise)."""
    lines = []
    own = _number_metrics(registered)
    for name in sorted(own):
        values = [v for m in reruns if (v := _number_metrics(m).get(name)) is not None]
        if len(values) != len(reruns) or not values:
            continue
        value = own[name]
        if identical:
            half = max(EVAL_REL_TOL * abs(value), resolution([value]))
            lower, upper = value - half, value + half
            if all(lower <= v <= upper for v in values):
                continue
            lines.append(f"metric {name}: registered {value!r}, but same-seed reruns of the registered weights give "
                         f"{', '.join(repr(v) for v in values)}")
            continue
        n = len(values)
        mean = math.fsum(values) / n
        if n < FEW_RERUNS:
            # too few reruns for an interval that means anything: a fixed multiple of their range (a weak check, and
            # the line says so), never narrower than the evaluation's own resolution (below)
            half = FEW_RERUNS_RANGES * (max(values) - min(values))
            interval = f"only {n} same-seed rerun(s): held to {FEW_RERUNS_RANGES:g}× their range, {mean - half:.6g} to {mean + half:.6g}"
        else:
            std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
            half = t_quantile(1.0 - (1.0 - METRIC_CONFIDENCE) / 2.0, n - 1) * std * math.sqrt(1.0 + 1.0 / n)
            interval = f"{METRIC_CONFIDENCE:.1%} interval {mean - half:.6g} to {mean + half:.6g}"
        half = max(half, EVAL_REL_TOL * abs(mean), resolution([*values, value]))
        if abs(value - mean) > half:
            weak = " (calibrate with --same-seed 3 or more for a real interval)" if n < FEW_RERUNS else ""
            lines.append(f"metric {name}: registered {value!r} lies outside the same-seed reruns' own spread "
                         f"({min(values)!r} to {max(values)!r}; {interval}){weak}")
    return lines


def recipe_problems(
    registered: RunRecord,
    reruns: Sequence[RunRecord | None],
    metrics: Sequence[Mapping[str, Any]],
    floor: SameSeedFloor,
    diffs: Sequence[WeightDiff | None],
    *,
    traced: Sequence[str] = (),
) -> list[str]:
    """Why the same-seed reruns are not execution noise of the registered recipe, one line each; [] when they are.

    ``diffs`` holds, per rerun, its model against the registered one (None: not compared); ``traced`` the
    lineage findings of the reruns' traced inputs against training's, in words (they name the variable or file).
    """
    lines = same_seed_problems(registered, list(reruns))
    if lines:
        return lines + list(traced)
    # ``traced`` holds blocking findings only: the reruns read other inputs than training, a problem on its own
    return _recipe_lines(registered, reruns, metrics, floor, diffs) + list(traced)


def _recipe_lines(
    registered: RunRecord,
    reruns: Sequence[RunRecord | None],
    metrics: Sequence[Mapping[str, Any]],
    floor: SameSeedFloor,
    diffs: Sequence[WeightDiff | None],
) -> list[str]:
    """``recipe_problems`` past the consumed data, without the traced inputs."""
    lines: list[str] = []
    if not floor.bit_identical and (why := unattributed(registered)):
        return [f"the same-seed reruns differ and {why}, so input noise cannot be told from execution noise "
                "(record it with this SDK, before any model or estimator is called)"]
    own = next((r for r in reruns if r is not None and r.environment is not None), None)
    if own is not None and registered.environment is not None:
        moved = platform_differences(_training_side(registered.environment), _training_side(own.environment))
        if moved:
            # another platform than training's: the weights may differ without another recipe, but the registered
            # metrics must still lie within the reruns' own spread (bit-identical reruns there measure none)
            return [] if floor.bit_identical else _metric_lines(registered.outputs.metrics, metrics, identical=False)
    compared = [d for d in diffs if d is not None]
    deterministic = bool(registered.seeds and registered.seeds.deterministic)
    noise = spread_is_execution_noise(expected_tier(registered).tier, deterministic=deterministic,
                                      accelerator=bool(floor.platform.get("accelerator")), measured=floor.expected)
    if floor.bit_identical:
        if compared and not any(d.identical for d in compared):
            lines.append(f"the {floor.n} same-seed reruns agree with one another bit for bit but not with the registered "
                         f"weights ({_describe(compared[0])})")
            lines += _metric_lines(registered.outputs.metrics, metrics, identical=False)
        else:
            lines += [f"{NOT_REPRODUCIBLE_METRICS}: {line}" for line in _metric_lines(registered.outputs.metrics, metrics, identical=True)]
    elif noise:
        within = [d for d in compared if not structure_problems(d) and check_floor(d, _widened(floor))[0]]
        if compared and not within:
            lines.append(f"the registered weights lie farther from every same-seed rerun than {RECIPE_MARGIN:g}× their own "
                         f"execution noise ({_describe(compared[0])}; same-seed max |Δ| {floor.max_abs:.3g}, rel L2 {floor.rel_l2:.3g})")
        lines += _metric_lines(registered.outputs.metrics, metrics, identical=False)
    return lines


def _training_side(environment: Any) -> dict[str, Any]:
    """A platform fingerprint without the rebuild's own thread pin (``REPRO_TORCH_THREADS``): a rebuild sets it
    from the intra-op thread count training recorded, which the fingerprint compares itself."""
    fingerprint = platform_fingerprint(environment)
    fingerprint["threads"] = {k: v for k, v in fingerprint.get("threads", {}).items() if k != ENV_TORCH_THREADS}
    return fingerprint


def _widened(floor: SameSeedFloor) -> SameSeedFloor:
    return floor.model_copy(update={"margin": RECIPE_MARGIN})


def hint_for(lines: Sequence[str]) -> str:
    """The fix for ``recipe_problems``' lines: make the data a function of the record, or pin the recipe."""
    from auditor.judge.consumed import HINT as DATA_HINT

    return DATA_HINT if lines and "consumed" in lines[0] else HINT


HINT = ("calibrate the recipe that trained the model: pin what the reruns read otherwise (pass the environment "
        "variable or side file through the config or a snapshot), then retrain and register")
