"""The tiered verdict: which guarantee a rebuild earns, each tier reported on its own.

Tiers, weakest to strongest:

- ``lineage``: the gate's findings on the record; a blocking one fails the tier.
- ``artifact_recovery``: the registered weights still hash to the recorded sha256, every input could
  be recovered, and (when the audit re-evaluated them, or a rebuild's model is bit-identical to them)
  the registered model reproduces the registered metrics to within float resolution; otherwise "the
  registered metrics are not reproducible from the registered model" (metrics taken on a subset chosen
  by the clock, say), whether or not the script honours the re-evaluation hook.
- ``statistical``: every banded metric of the rebuild lies inside its band (edges pass; NaN, ±inf,
  missing or non-numeric values never do), and, when the weights are not bit-identical, their
  distance to the registered weights lies within the measured same-seed floor
  (``auditor.judge.floors``). Metrics without a band are reported, not judged.
- ``bitwise``: the rebuilt weights equal the registered ones, compared by integer view.

The overall verdict, first rule that applies:

1. ``NOT_REPRODUCIBLE`` when lineage or artifact recovery fails, or an input proved unrecoverable
   (``unrecoverable``: commit gone, snapshot corrupt, outputs missing after a clean exit, a crash
   re-evaluating the registered weights, a crash that repeats identically): retrying cannot change
   those, so they win over an infrastructure error. Which exception means which is decided once, by
   ``auditor.errors.verdict_failure``.
2. ``ERROR`` when the audit could not produce evidence (``error``): the engine, network or registry
   failed, or the recorded entrypoint crashed or timed out once mid-rebuild.
3. ``OUT_OF_TOLERANCE`` when the rebuilt weights are another model: a different set of tensors, or
   a tensor of another shape or dtype. Never reproduced, whatever the metrics say.
4. ``OUT_OF_TOLERANCE`` when the statistical tier fails. Weights that are not bit-identical fail it:
   - when same-seed calibration was bit-identical on a matching platform: the recipe is
     deterministic here, so any difference means an input the record does not pin;
   - when same-seed reruns differ although the record gives no reason the run cannot be bitwise
     (expected ``bitwise``: a CPU run, whatever its ``deterministic`` flag, with no nondeterministic
     source declared): such spread is an input no record pins (the clock, an unseeded generator),
     never execution noise (``auditor.judge.expected.spread_is_execution_noise``);
   - when they lie farther from the registered weights than the same-seed floor allows;
   - when no same-seed floor was measured at all (nothing says how far they may differ).
   On a platform other than the calibration's, the weights are not held to the floor: the metric
   bands alone judge, and the tier says so with a warning. A failed tier is never hidden by a
   stronger one that passed (bit-identical weights with a NaN metric are not "reproduced").
5. ``REPRODUCED_BITWISE`` when the bitwise tier passes.
6. ``REPRODUCED_WITHIN_TOLERANCE`` when the statistical tier passes, and the registered metrics were recomputed
   from the registered model (the re-evaluation hook): weights that are not the registered ones say nothing
   about them, so without that evaluation artifact recovery fails (``NEVER_RECOMPUTED``) and rule 1 applies.
7. ``OUT_OF_TOLERANCE`` when the weights differ and nothing passed: the tolerance is zero.
8. ``NOT_REPRODUCIBLE`` when there was nothing to judge the rebuild by (no weights and no band).

A tier with no data is ``skipped`` (artifact recovery not checked, no band, no rebuilt weights) and
never fails the verdict on its own.

The expected tier (``expected``, worked out from the record alone by ``auditor.judge.expected``) adjusts
rules 4 and 7: a run that cannot be better than ``statistical`` (a GPU without deterministic algorithms,
say) is never failed on its bits alone: its bitwise tier is ``skipped`` ("not expected", the difference
kept), and its weights are held to the same-seed floor (without one the statistical tier fails closed:
the expected tier comes from fields the trainer wrote and never loosens the judgement); a run expected
``not_reproducible`` (a
randomness source no recorded seed controls) whose weights differ fails the statistical tier, since no
floor or band can tell that noise from a divergence. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from auditor.contract import WEIGHTS_FILE
from auditor.digests import bare
from auditor.judge.calibrate import is_duration, resolution
from auditor.judge.expected import spread_is_execution_noise, why_no_noise
from auditor.judge.floors import SameSeedFloor, check_floor, platform_differences, structure_problems
from auditor.judge.result import Band, MetricResult, TensorDiff, TierResult, Verdict, WeightDiff
from auditor.judge.tolerance import as_number, check_metric
from auditor.lineage.findings import Finding

#: how far a re-evaluation of the *same* weights may drift from the registered metric, relative; only
#: the reduction order differs, which moves a float32 mean by far less than this
EVAL_REL_TOL = 1e-5


class RecoveryCheck(BaseModel):
    """What the audit found when it tried to recover the registered artifact and the inputs."""

    model_config = ConfigDict(extra="forbid")

    artifact: str = WEIGHTS_FILE
    expected_sha256: str | None = None  # from record.outputs.artifacts; None: the record holds none
    actual_sha256: str | None = None  # of the registered file as downloaded now; None: file missing
    registered: dict[str, float | str | None] = Field(default_factory=dict)  # record.outputs.metrics
    evaluated: dict[str, float | str | None] | None = None  # registered weights re-evaluated; None: not done
    #: the metrics of rebuilds whose model is bit-identical to the registered one: the rebuild's own evaluation
    #: of the registered model, whether or not the script honours the re-evaluation hook
    rebuilt_identical: list[dict[str, float | str | None]] = Field(default_factory=list)
    unrecoverable: list[str] = Field(default_factory=list)  # e.g. "data.train: snapshot blake3:… is gone"


def _hex(digest: str) -> str:
    return bare(digest.lower())


def _lineage(findings: Sequence[Finding]) -> TierResult:
    blocking = [f for f in findings if f.blocking]
    details = [str(f) for f in blocking] + [str(f) for f in findings if not f.blocking]
    if blocking:
        return TierResult(
            name="lineage", status="fail", summary=f"{len(blocking)} blocking finding(s)", details=details
        )
    summary = "complete" if not findings else f"complete, {len(findings)} warning(s)"
    return TierResult(name="lineage", status="pass", summary=summary, details=details)


def _eval_band(name: str, registered: float) -> Band:
    half = max(EVAL_REL_TOL * abs(registered), resolution([registered]))
    return Band(metric=name, lower=registered - half, upper=registered + half, reference=registered)


#: the words of the artifact-recovery failure when an evaluation of the registered model misses a registered metric
NOT_REPRODUCIBLE_METRICS = "the registered metrics are not reproducible from the registered model"
def metric_problems(source: str, metrics: dict[str, float | str | None], registered: dict[str, float | str | None],
                      notes: list[str], *, whole_run: bool = False) -> list[str]:
    """How ``metrics`` (an evaluation of the registered model) miss the registered ones, one line per metric.

    ``whole_run``: ``metrics`` come from a whole rebuild (training included), so a registered metric it did not
    report is a problem too; an evaluation alone reports only the evaluation's metrics."""
    problems = []
    for name in sorted(set(registered) - set(metrics)) if whole_run else ():
        if not is_duration(name):
            problems.append(f"{name}: registered, but {source} nothing for it (the rebuild did not log it)")
    for name in sorted(metrics):
        value = as_number(registered.get(name))
        if name not in registered:
            notes.append(f"{name}: not among the registered metrics; not compared")
        elif is_duration(name):
            notes.append(f"{name}: a duration, not a property of the model; not compared")
        elif value is None or not math.isfinite(value):
            problems.append(f"{name}: registered value {registered[name]!r} cannot be reproduced")
        else:
            result = check_metric(metrics[name], _eval_band(name, value), registered=value)
            if not result.inside:
                problems.append(f"{name}: {source} {metrics[name]!r}, registered {value!r}: {result.reason}")
    return problems


def _recovery(check: RecoveryCheck | None) -> TierResult:
    if check is None:
        return TierResult(name="artifact_recovery", status="skipped", summary="not checked")
    problems = list(check.unrecoverable)
    if check.expected_sha256 is None:
        problems.append(f"{check.artifact}: the record holds no sha256, so the registered file cannot be proven")
    elif check.actual_sha256 is None:
        problems.append(f"{check.artifact}: the registered file is missing")
    elif _hex(check.expected_sha256) != _hex(check.actual_sha256):
        problems.append(
            f"{check.artifact}: sha256 is {check.actual_sha256}, the record says {check.expected_sha256} "
            "(altered after registration)"
        )
    notes: list[str] = []
    evaluations = ([("the registered weights evaluate to", check.evaluated, False)] if check.evaluated is not None else []) + [
        ("a rebuild whose model is bit-identical to the registered one evaluates to", m, True) for m in check.rebuilt_identical]
    if not evaluations:
        notes.append("registered metrics not re-evaluated")
    missed: list[str] = []
    for source, metrics, whole_run in evaluations:
        for line in metric_problems(source, metrics, check.registered, notes, whole_run=whole_run):
            if line not in missed:
                missed.append(line)
    if missed:
        problems.append(f"{NOT_REPRODUCIBLE_METRICS}: {missed[0]}")
        problems += missed[1:]
    if problems:
        return TierResult(name="artifact_recovery", status="fail", summary=problems[0], details=problems + list(dict.fromkeys(notes)))
    summary = "weights match the recorded sha256" + ("" if not evaluations else " and reproduce the metrics")
    return TierResult(name="artifact_recovery", status="pass", summary=summary, details=notes)


def _weights_check(diff: WeightDiff | None, floor: SameSeedFloor | None, platform: dict | None,
                   deterministic: bool = False, expected: str | None = None) -> tuple[bool | None, str, list[str]]:
    """Whether weights that are not bit-identical are still a reproduction: (ok or None, why, warnings).

    None means the weights are not judged here: bit-identical, another model (rule 3), no weights, or a
    platform other than the calibration's (the bands alone judge, with a warning). No floor fails closed,
    whatever the expected tier (``auditor.judge.expected``) says. A floor whose spread the record gives no reason
    for fails first, even a bit-identical rebuild (``expected.spread_is_execution_noise``).
    """
    if diff is None or structure_problems(diff):
        return None, "", []
    if floor is not None and not floor.bit_identical and not spread_is_execution_noise(
            expected, deterministic=deterministic, accelerator=bool(floor.platform.get("accelerator")), measured=floor.expected):
        # before the bits and any platform: spread the record gives no reason for is an input, and a rebuild that
        # happens to match (the clock chose the same rows today) is that input's coincidence, not a guarantee
        why = why_no_noise(expected, floor.expected)
        if diff.identical:
            return False, (f"the rebuild is bit-identical, but {floor.n} same-seed reruns at calibration differed although {why}: "
                           "the recipe reads an input the record does not pin, so this match is that input's coincidence, "
                           "not a reproduction"), []
        return False, (f"{floor.n} same-seed reruns differ although {why}: the spread is an input the record does not pin "
                       "(the clock, an unseeded generator, a side file), never execution noise, so no floor excuses the "
                       "difference, on this platform or another"), []
    if diff.identical:
        return None, "", []
    if expected == "not_reproducible":  # an unseeded generator's noise is an input's, never execution noise
        return False, ("the rebuilt weights differ and the record says the run draws randomness no recorded seed controls "
                       "(expected not reproducible): no floor or band can tell that noise from a divergence"), []
    if floor is None:  # an expected tier (from fields the trainer wrote) never loosens the judgement: fail closed
        return False, "the weights differ and no same-seed floor was measured, so nothing says by how much they may: run `repro-audit calibrate`", []
    if not floor.bit_identical and floor.noise_verified is None:  # a claim is verified before it widens anything
        return False, (f"{floor.n} same-seed reruns at calibration differed and the record claims a noise source, but the "
                       "claim was never verified (by reruns with execution made deterministic): an unverified claim widens "
                       "no tolerance; recalibrate (`repro-audit calibrate`) to verify it"), []
    warnings: list[str] = []
    if not floor.platform or not platform:
        # unknown is not "another platform": only a recorded difference may relax the floor
        warnings.append("the platform was not recorded " + ("at calibration" if not floor.platform else "by the rebuild")
                        + ": the same-seed floor is applied as if it matched")
        differences = []
    else:
        differences = platform_differences(floor.platform, platform)
    if differences:
        warning = (f"this rebuild ran on another platform than the calibration ({'; '.join(differences)}): "
                   "the weights are not held to the same-seed floor, the metric bands alone judge")
        return None, "", [warning]
    if floor.bit_identical:
        return False, (f"the recipe is bit-identical on this platform ({floor.n} same-seed reruns gave one weights hash), "
                       "so a rebuild that differs means an input the record does not pin"), warnings
    return (*check_floor(diff, floor), warnings)


def _statistical(results: Sequence[MetricResult], unrecoverable: str | None, error: str | None,
                 weights: tuple[bool | None, str, list[str]] = (None, "", [])) -> TierResult:
    if unrecoverable is not None:
        return TierResult(name="statistical", status="fail", summary=f"cannot be rebuilt: {unrecoverable}")
    if error is not None:
        return TierResult(name="statistical", status="error", summary=f"not judged: {error}")
    weights_ok, weights_why, warnings = weights
    judged = [m for m in results if m.band is not None]
    unbanded = [f"{m.name}: {m.reason or 'no band'}" for m in results if m.band is None]
    failed = [m for m in judged if m.inside is not True]
    details = (
        [f"warning: {w}" for w in warnings]
        + ([f"weights: {weights_why}"] if weights_why else [])
        + [f"{m.name}: {m.reason}" for m in failed] + [f"{m.name}: {m.reason}" for m in judged if m.inside] + unbanded
    )
    if weights_ok is False:
        return TierResult(name="statistical", status="fail", summary=weights_why, details=details)
    if not judged:  # weights within the floor alone are not enough: no metric was shown to reproduce
        return TierResult(
            name="statistical",
            status="skipped",
            summary="no metric has a band: declare one or run `repro-audit calibrate`",
            details=details,
        )
    if failed:
        names = ", ".join(m.name for m in failed)
        return TierResult(
            name="statistical",
            status="fail",
            summary=f"{len(failed)} of {len(judged)} banded metric(s) outside: {names}",
            details=details,
        )
    parts = [f"all {len(judged)} banded metric(s) inside"] if judged else []
    if weights_ok:
        parts.append("weights within the same-seed floor")
    if warnings and weights_ok is None:
        parts.append("judged by the bands alone (another platform)")
    return TierResult(name="statistical", status="pass", summary="; ".join(parts), details=details)


def _bitwise(diff: WeightDiff | None, unrecoverable: str | None, error: str | None) -> TierResult:
    if unrecoverable is not None:
        return TierResult(name="bitwise", status="fail", summary=f"cannot be rebuilt: {unrecoverable}")
    if error is not None and diff is None:
        return TierResult(name="bitwise", status="error", summary=f"not judged: {error}")
    if diff is None:
        return TierResult(name="bitwise", status="skipped", summary="no rebuilt weights to compare")
    if diff.identical and diff.tensors == 0 and diff.sha256_a:
        return TierResult(name="bitwise", status="pass",
                          summary=f"the rebuilt weights hash to the recorded sha256 {diff.sha256_a} (compared by hash: the registered file is missing)")
    if diff.identical:
        return TierResult(name="bitwise", status="pass", summary=f"all {diff.tensors} tensor(s) bit-identical")
    if diff.tensors == 0 and diff.sha256_a:
        return TierResult(name="bitwise", status="fail",
                          summary=f"the rebuilt weights hash to {diff.sha256_b}, the record says {diff.sha256_a} (compared by hash: the registered file is missing)")
    details = [f"only in registered: {name}" for name in diff.only_in_a]
    details += [f"only in rebuild: {name}" for name in diff.only_in_b]
    described = sorted(diff.described(), key=_consequence)  # the cause before its consequences
    details += described
    details += [_worst_line(t) for t in diff.worst if f"{t.name}: {t.note}" not in described]  # each difference once
    summary = f"{diff.differing} of {diff.tensors} {diff.unit} differ"
    if diff.max_abs is not None:
        summary += f", max |Δ| {diff.max_abs:.3g}"
    return TierResult(name="bitwise", status="fail", summary=summary, details=details)


def _consequence(line: str) -> bool:
    """Sort key: False (first) for a differing parameter, the cause of the differences that follow from it."""
    return not line.startswith("parameter ")


def _worst_line(t: TensorDiff) -> str:
    """One of the largest differences, its measures at four significant digits (as the report shows numbers; the
    evidence's weight_diff keeps every digit), the measures a kind has not (a tree node's cosine) left out."""
    measures = ", ".join(f"{label} {value:.4g}" for label, value in (("max |Δ|", t.max_abs), ("rel L2", t.rel_l2), ("cosine", t.cosine))
                         if value is not None)
    return f"{t.name}: {measures} {t.note}".strip()


def _expected_bitwise(tier: TierResult, expected: str | None, structure: Sequence[str]) -> TierResult:
    """The bitwise tier beside the expected one: a run that cannot be better than statistical is not failed on
    bits alone (its differing bits are expected, said and kept in the details); one expected bitwise, or not
    reproducible, that differs says so."""
    if tier.status != "fail" or expected is None or structure or tier.summary.startswith("cannot be rebuilt"):
        return tier
    if expected == "bitwise":
        return tier.model_copy(update={"summary": f"{tier.summary} (expected bitwise from the record: see the stronger finding)"})
    if expected != "statistical":
        return tier.model_copy(update={"summary": f"{tier.summary} (expected {expected.replace('_', ' ')} from the record)"})
    return tier.model_copy(update={"status": "skipped", "summary": (
        f"not expected: the record says this run cannot be bitwise (expected {expected.replace('_', ' ')}); {tier.summary}")})


def judge(
    *,
    findings: Sequence[Finding],
    recovery: RecoveryCheck | None,
    metric_results: Sequence[MetricResult],
    weight_diff: WeightDiff | None,
    error: str | None = None,
    unrecoverable: str | None = None,
    floor: SameSeedFloor | None = None,
    platform: dict | None = None,
    calibration_findings: Sequence[str] = (),
    deterministic: bool = False,
    expected: str | None = None,
    blind_floor: str | None = None,
) -> tuple[Verdict, dict[str, TierResult]]:
    """The overall verdict and every tier's result (rules in the module docstring).

    ``error`` is a failure that produced no evidence (retryable); ``unrecoverable`` is a recorded input
    that cannot be recovered or a recipe that left no outputs, which no retry fixes. ``floor`` is the
    version's same-seed calibration, ``platform`` the rebuild's fingerprint (``floors.platform_fingerprint``),
    ``deterministic`` whether the record says the run had deterministic algorithms on, ``expected`` the tier
    the record alone lets it reach (``auditor.judge.expected``; None: not worked out), ``blind_floor`` why the floor
    cannot tell a changed input from noise (``floors.Calibration.blind_floor``): weights within it then count for nothing.
    """
    structure = structure_problems(weight_diff) if weight_diff is not None else []
    structure.sort(key=_consequence)  # a parameter (the cause) before the trees and values that follow from it
    weights = _weights_check(weight_diff, floor, platform, deterministic, expected)
    if blind_floor and weights[0] is True:  # within a blind floor proves nothing; beyond it still fails
        weights = (None, blind_floor, weights[2])
    tiers = {
        "lineage": _lineage(findings),
        "artifact_recovery": _recovery(recovery),
        "statistical": _statistical(metric_results, unrecoverable, error, weights),
        "bitwise": _expected_bitwise(_bitwise(weight_diff, unrecoverable, error), expected, structure),
    }
    if calibration_findings:  # said on the tier the calibration feeds, whatever the verdict
        tiers["statistical"].details.extend(f"calibration: {line}" for line in calibration_findings)
    if structure:  # another model: its statistical tier never passes, whichever rule decides the verdict
        tiers["statistical"] = tiers["statistical"].model_copy(update={
            "status": "fail", "summary": "the rebuild is another model: " + "; ".join(structure[:3]),
            "details": structure + tiers["statistical"].details})
    if (tiers["statistical"].status == "pass" and tiers["bitwise"].status != "pass" and tiers["artifact_recovery"].status == "pass"
            and recovery is not None and _never_recomputed(recovery)):
        tiers["artifact_recovery"] = _unverified_metrics(tiers["artifact_recovery"], recovery)
    return _verdict(tiers, unrecoverable=unrecoverable, error=error, another_model=bool(structure)), tiers


def _verdict(tiers: dict[str, TierResult], *, unrecoverable: str | None, error: str | None, another_model: bool) -> Verdict:
    """The verdict from the tiers' statuses, first rule that holds (the module docstring's order)."""
    status = {name: tier.status for name, tier in tiers.items()}
    if "fail" in (status["lineage"], status["artifact_recovery"]) or unrecoverable is not None:
        return Verdict.NOT_REPRODUCIBLE
    if error is not None:
        return Verdict.ERROR
    if another_model or status["statistical"] == "fail":
        return Verdict.OUT_OF_TOLERANCE
    if status["bitwise"] == "pass":
        return Verdict.REPRODUCED_BITWISE
    if status["statistical"] == "pass":
        return Verdict.REPRODUCED_WITHIN_TOLERANCE
    if status["bitwise"] == "fail":
        return Verdict.OUT_OF_TOLERANCE
    tiers["statistical"].details.append("nothing to judge the rebuild by: no band and no rebuilt weights")
    return Verdict.NOT_REPRODUCIBLE


#: the words of the artifact-recovery failure when nothing recomputed the registered metrics from the registered model
NEVER_RECOMPUTED = "the registered metrics were never recomputed from the registered model"


def _never_recomputed(check: RecoveryCheck) -> list[str]:
    """The registered metrics (durations aside) when no evaluation of the registered model recomputed any of them (the
    script ignored the re-evaluation hook, or its evaluation logged none of the registered names, and no rebuild was
    bit-identical); [] when one was recomputed."""
    names = sorted(name for name in check.registered if not is_duration(name))
    covered = set(check.evaluated or {}).union(*(set(m) for m in check.rebuilt_identical))
    return [] if covered & set(names) else names


def _unverified_metrics(tier: TierResult, check: RecoveryCheck) -> TierResult:
    """Artifact recovery failed for a rebuild that passed on its floor and bands alone: weights that are not the
    registered ones say nothing about the registered metrics, so a metric taken on a subset the clock picked would
    pass (issue 26). Only an evaluation of the registered model (the hook) shows they are the model's."""
    names = _never_recomputed(check)
    how = ("its evaluation of the registered weights logged none of them" if check.evaluated is not None
           else "the script ignores the re-evaluation hook")
    summary = (f"{NEVER_RECOMPUTED} ({', '.join(names[:6])}{' …' if len(names) > 6 else ''}): {how} and the rebuild is not "
               "bit-identical, so nothing shows the registered model gives them; when run.weights_to_evaluate is set, load "
               "that model instead of training and log the same metrics (`if not run.restore_weights(model):` does it for a "
               "PyTorch module)")
    return tier.model_copy(update={"status": "fail", "summary": summary, "details": [summary, *tier.details]})


def not_reached(tiers: dict[str, TierResult], why: str) -> dict[str, TierResult]:
    """The rebuild's tiers when no rebuild was compared: each one without evidence says why it was not reached
    (``why``), never "run calibrate" (a calibrated version audited with no rebuild still has its bands)."""
    out = dict(tiers)
    for name in ("statistical", "bitwise"):
        tier = out.get(name)
        if tier is not None and tier.status == "skipped":
            out[name] = tier.model_copy(update={"summary": f"not reached: {why}"})
    return out
