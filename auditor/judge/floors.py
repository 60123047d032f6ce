"""The same-seed noise floor: how far two runs of the recorded recipe, under the recorded seed, land apart.

Calibration runs two kinds of reruns of the recipe (``auditor.steps.calibrate``):

- **same-seed reruns** measure *execution noise*. Either the recipe is bit-identical on this
  platform (every rerun's weights hash the same), or the reruns differ (GPU reductions, an unseeded
  generator) and their pairwise weight distances are the floor a rebuild is held to;
- **seed-varied reruns** measure each metric's band (``auditor.judge.calibrate``).

Thresholds follow Proof-of-Learning's verification (Jia et al., 2021): a replayed result is accepted
when its distance to the claimed one is within what reproduction noise produces, measured on the
same platform. Here the threshold is :data:`FLOOR_MARGIN` times the largest same-seed distance seen,
per measure (max |Δ| and relative L2), so that a rebuild drawn from the same noise as the reruns
passes with a margin, and a distance several times the noise does not.

A platform fingerprint (CPU model and flags, torch build, CUDA, accelerator, thread settings) is
stored with the floor: a floor says nothing about another platform. Pure: no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from auditor.contract import THREAD_VARS
from auditor.judge.result import Direction, WeightDiff

#: a rebuild may be this many times farther from the registered weights than the farthest pair of
#: same-seed reruns were from each other (see the module docstring)
FLOOR_MARGIN = 3.0
#: fewest same-seed reruns a floor is measured from (one pair)
MIN_SAME_SEED = 2

#: the environment fields whose difference changes numerics (EnvironmentInfo names)
PLATFORM_FIELDS = ("machine", "cpu_model", "cpu_flags_digest", "torch", "cuda", "cudnn", "driver", "accelerator", "accelerator_count")
#: the thread settings that change the weights (FACTS.md)
PLATFORM_THREADS = ("torch_intra_op", *THREAD_VARS)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FloorRun(_Model):
    """One calibration rerun: its seed, what it left, and where it ran."""

    seed: int | None = None
    weights_sha256: str | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    #: its decisions on the recorded evaluation rows (``auditor.steps.reruns``: packed, rows, threshold, data_sha256)
    decisions: dict[str, Any] | None = None


#: a same-seed spread at least this share of the seed-varied spread makes the floor blind (``Calibration.blind_metrics``)
BLIND_RATIO = 0.5


class SameSeedFloor(_Model):
    """Execution noise of the recipe under the recorded seed, on one platform."""

    runs: list[FloorRun]
    bit_identical: bool
    max_abs: float = 0.0  # largest max |Δ| over pairs of reruns
    rel_l2: float = 0.0  # largest relative L2 over pairs
    cosine_min: float | None = None  # smallest per-tensor cosine over pairs
    per_tensor: dict[str, dict[str, float | None]] = Field(default_factory=dict)  # worst pair's worst tensors
    metric_spread: dict[str, float] = Field(default_factory=dict)  # largest |Δ| of each metric over pairs
    platform: dict[str, Any] = Field(default_factory=dict)
    margin: float = FLOOR_MARGIN
    #: the tier the same-seed reruns' own records let them reach (``auditor.judge.expected``): a reason for their spread
    #: must hold where the spread was measured, not only in training's record (None: stored before this was kept)
    expected: str | None = None
    #: how the spread was shown to be execution noise (``auditor.steps.noise_claims``: reruns with execution made
    #: deterministic were bit-identical); None: never verified (reruns that agree need no verifying)
    noise_verified: str | None = None

    @property
    def n(self) -> int:
        return len(self.runs)

    def thresholds(self) -> dict[str, float]:
        """What a rebuild's distance to the registered weights may be, per measure."""
        return {"max_abs": self.margin * self.max_abs, "rel_l2": self.margin * self.rel_l2}


def platform_fingerprint(environment: Mapping[str, Any] | Any | None) -> dict[str, Any]:
    """The fields of a record's environment that decide numerics (a dict or an ``EnvironmentInfo``)."""
    if environment is None:
        return {}
    data = environment if isinstance(environment, Mapping) else environment.model_dump()
    fingerprint = {name: data.get(name) for name in PLATFORM_FIELDS}
    threads = data.get("threads") or {}
    fingerprint["threads"] = {name: threads.get(name) for name in PLATFORM_THREADS if threads.get(name) is not None}
    return fingerprint


def platform_differences(calibrated: Mapping[str, Any], rebuild: Mapping[str, Any]) -> list[str]:
    """How the rebuild's platform differs from the calibration's, one line per field; [] when they match.

    An empty fingerprint (a rebuild that recorded no environment) matches nothing.
    """
    if not calibrated or not rebuild:
        return ["the platform was not recorded" + (" at calibration" if not calibrated else " by the rebuild")]
    lines = []
    for name in PLATFORM_FIELDS:
        if calibrated.get(name) != rebuild.get(name):
            lines.append(f"{name}: calibrated on {calibrated.get(name)!r}, rebuilt on {rebuild.get(name)!r}")
    a, b = calibrated.get("threads") or {}, rebuild.get("threads") or {}
    for name in sorted(set(a) | set(b)):
        if str(a.get(name)) != str(b.get(name)):
            lines.append(f"threads.{name}: calibrated with {a.get(name)!r}, rebuilt with {b.get(name)!r}")
    return lines


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def floor_from_reruns(runs: Sequence[FloorRun], pair_diffs: Sequence[WeightDiff], platform: Mapping[str, Any]) -> SameSeedFloor:
    """The floor from same-seed reruns and the weight diffs of their pairs (in ``itertools.combinations`` order)."""
    if len(runs) < MIN_SAME_SEED:
        raise ValueError(f"a same-seed floor needs at least {MIN_SAME_SEED} reruns, got {len(runs)}")
    hashes = {r.weights_sha256 for r in runs}
    bit_identical = len(hashes) == 1 and None not in hashes
    floor = SameSeedFloor(runs=list(runs), bit_identical=bit_identical, platform=dict(platform))
    worst: WeightDiff | None = None
    for diff in pair_diffs:
        if diff.max_abs is not None and diff.max_abs > floor.max_abs:
            floor.max_abs, worst = diff.max_abs, diff
        if diff.rel_l2 is not None:
            floor.rel_l2 = max(floor.rel_l2, diff.rel_l2)
        for tensor in diff.worst:
            if tensor.cosine is not None:
                floor.cosine_min = tensor.cosine if floor.cosine_min is None else min(floor.cosine_min, tensor.cosine)
    if worst is not None:
        floor.per_tensor = {t.name: {"max_abs": t.max_abs, "rel_l2": t.rel_l2, "cosine": t.cosine} for t in worst.worst}
    for a, b in itertools.combinations(runs, 2):
        for name in sorted(set(a.metrics) & set(b.metrics)):
            x, y = _number(a.metrics[name]), _number(b.metrics[name])
            if x is not None and y is not None:
                floor.metric_spread[name] = max(floor.metric_spread.get(name, 0.0), abs(x - y))
    return floor


def structure_problems(diff: WeightDiff) -> list[str]:
    """A different set of tensors, or a tensor of another shape or dtype: another model, never a reproduction."""
    lines = [f"only in the registered weights: {n}" for n in diff.only_in_a]
    lines += [f"only in the rebuild: {n}" for n in diff.only_in_b]
    known = {t.name: t for t in diff.worst if t.shape_a is not None and t.shape_b is not None}
    for n in diff.mismatched:  # in words where the shapes are known: "another shape" must read as such
        t = known.get(n)
        if t is None:
            lines.append(n if ": " in n else f"shape or dtype differs: {n}")  # a flavour's line names its own kind
        else:
            what = " and ".join(w for w, differs in (("shape", t.shape_a != t.shape_b), ("dtype", t.dtype_a != t.dtype_b)) if differs)
            lines.append(f"shape or dtype differs: {n} has another {what or 'layout'}: {t.dtype_a} of shape {t.shape_a} in the "
                         f"registered weights, {t.dtype_b} of shape {t.shape_b} in the rebuild")
    return lines


def check_floor(diff: WeightDiff, floor: SameSeedFloor) -> tuple[bool, str]:
    """Whether the rebuild's distance to the registered weights lies within the floor's thresholds."""
    limits = floor.thresholds()
    measured = {"max_abs": diff.max_abs, "rel_l2": diff.rel_l2}
    over = []
    for name, limit in limits.items():
        value = measured[name]
        if value is None or not math.isfinite(value):
            over.append(f"{name} is {value!r}, not a finite distance")
        elif value > limit:
            over.append(f"{name} {value:.3g} > {limit:.3g}")
    basis = f"{floor.margin:g}× the largest of {floor.n} same-seed reruns (max |Δ| {floor.max_abs:.3g}, rel L2 {floor.rel_l2:.3g})"
    if over:
        return False, f"weights farther from the registered ones than execution noise allows: {'; '.join(over)} ({basis})"
    return True, f"weight distance within the same-seed floor: max |Δ| {diff.max_abs:.3g}, rel L2 {diff.rel_l2:.3g} ({basis})"


# -- the calibration document ------------------------------------------------------------------------
CALIBRATION_SCHEMA = "repro.calibration/1"
#: fewest seed-varied reruns a band is measured from; fewer is refused (a t quantile on 1 degree of
#: freedom is 63.7 at 99 %: such a band would pass almost anything)
MIN_SEED_VARIED = 3
#: seed-varied reruns below this make a band the report flags as weak
GOOD_SEED_VARIED = 5


class Calibration(_Model):
    """What calibration measured for one version: both floors, with the evidence they rest on."""

    kind: str = CALIBRATION_SCHEMA
    calibrated_at: str | None = None
    same_seed: SameSeedFloor
    seed_varied: list[FloorRun] = Field(default_factory=list)
    zero_spread: list[str] = Field(default_factory=list)  # metrics no seed moved: findings, not bands
    seed_ignored: bool = False  # every seed-varied rerun left the same weights
    #: what the reruns cost (``auditor.steps.reruns.cost``: reruns, wall_s, cpu_s, accelerator_s, runner); {}: not kept
    cost: dict[str, Any] = Field(default_factory=dict)
    #: the record says deterministic algorithms were on (None: a calibration stored before this was kept)
    deterministic: bool | None = None
    #: the tier the record alone lets an audit reach (``auditor.judge.expected``; None: stored before this was kept)
    expected: str | None = None
    #: which way is better per metric, as calibration took it (declared, else the name's; {}: stored before this
    #: was kept, and the name's rule of today applies)
    directions: dict[str, Direction] = Field(default_factory=dict)

    @property
    def weak(self) -> bool:
        return len(self.seed_varied) < GOOD_SEED_VARIED

    @property
    def explained_spread(self) -> bool:
        """Whether the record gives a reason the same-seed reruns may differ (``expected.spread_is_execution_noise``)."""
        from auditor.judge.expected import spread_is_execution_noise

        return spread_is_execution_noise(self.expected, deterministic=bool(self.deterministic),
                                         accelerator=bool(self.same_seed.platform.get("accelerator")),
                                         measured=self.same_seed.expected)

    def blind_metrics(self) -> dict[str, tuple[float, float]]:
        """The metrics whose same-seed spread is about as wide as their spread across seeds (at least
        :data:`BLIND_RATIO` of it): ``{metric: (same-seed spread, seed-varied range)}``. There, comparing weights cannot
        tell a changed input from noise (issue 42, build 2)."""
        out: dict[str, tuple[float, float]] = {}
        for name, same in sorted(self.same_seed.metric_spread.items()):
            values = [v for r in self.seed_varied if isinstance(v := r.metrics.get(name), (int, float)) and not isinstance(v, bool)]
            varied = (max(values) - min(values)) if len(values) >= 2 else 0.0
            if varied > 0 and same >= BLIND_RATIO * varied:
                out[name] = (float(same), float(varied))
        return out

    def blind_floor(self) -> str | None:
        """Why the same-seed floor cannot tell a changed input from noise, in words (None: it can)."""
        blind = self.blind_metrics()
        if self.same_seed.bit_identical or not blind:
            return None
        said = "; ".join(f"{name}: same seed {same:.4g}, other seeds {varied:.4g}" for name, (same, varied) in blind.items())
        return (f"the same-seed floor is about as wide as the spread across seeds ({said}): comparing weights cannot tell a "
                "changed input from noise, so the statistical verdict rests on the metric bands, the registered metrics "
                "recomputed from the registered model and the decisions on the recorded evaluation rows, never on the "
                "weights alone")

    def findings(self) -> list[str]:
        """What calibration found wrong with the recipe's randomness, in words."""
        lines = [blind] if (blind := self.blind_floor()) else []
        if not self.same_seed.bit_identical and not self.explained_spread:
            from auditor.judge.expected import why_no_noise

            fix = ("" if self.expected == "not_reproducible"
                   else ", or, for a kernel that really is nondeterministic, declared with run.record_nondeterminism")
            lines.append(
                f"the {self.same_seed.n} same-seed reruns differ although {why_no_noise(self.expected, self.same_seed.expected)}: it draws on something "
                "no recorded seed controls (the clock, an unseeded generator, a side file), never execution noise; every audit "
                "of it is OUT_OF_TOLERANCE until that input is pinned (seeded from run.seed, passed through the config or a "
                f"snapshot){fix}"
            )
        if self.seed_ignored:
            lines.append(
                f"every one of {len(self.seed_varied)} seed-varied reruns left the same weights: the script ignores the "
                "audit's seed (it seeds itself); take the seed from the SDK (run.seed, or seed= left unset in track())"
            )
        for name in self.zero_spread:
            lines.append(f"{name}: the same value under {len(self.seed_varied)} different seeds, so no band was made "
                         "(the script ignores the audit's seed, or the metric does not depend on it)")
        if self.weak:
            lines.append(f"the bands rest on {len(self.seed_varied)} seed-varied reruns: a weak band "
                         f"(calibrate with --reruns {GOOD_SEED_VARIED} or more)")
        return lines

    def to_json(self) -> str:
        import json

        doc = self.model_dump(mode="json")
        if not doc.get("cost"):  # a document stored before costs and decisions were kept serialises as it was
            doc.pop("cost", None)
        if doc.get("same_seed", {}).get("noise_verified", "") is None:  # stored before noise claims were verified
            doc["same_seed"].pop("noise_verified")
        for run in [*doc.get("seed_varied", []), *doc.get("same_seed", {}).get("runs", [])]:
            if run.get("decisions") is None:
                run.pop("decisions", None)
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def calibration_from_json(text: str | bytes, *, source: str) -> Calibration:
    """Parse a stored calibration document; ``MalformedRecord`` naming ``source`` when it does not validate."""
    import json

    from pydantic import ValidationError

    from auditor.errors import MalformedRecord

    try:
        data = json.loads(text)
        calibration = Calibration.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise MalformedRecord(f"{source}: not a {CALIBRATION_SCHEMA} document: {str(exc).splitlines()[0]}",
                              hint="re-run `repro-audit calibrate` for this version") from None
    if calibration.kind != CALIBRATION_SCHEMA:
        raise MalformedRecord(f"{source}: kind {calibration.kind!r} is not {CALIBRATION_SCHEMA}")
    return calibration
