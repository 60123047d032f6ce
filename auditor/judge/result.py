"""The audit result: one object holding everything a report needs.

Pure data (pydantic), serialised as the JSON evidence file that the HTML report
is rendered from. Produced by ``auditor.steps.audit``; read by
``auditor.report``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from auditor.judge.expected import ExpectedTier
from auditor.judge.multiplicity import Multiplicity
from auditor.lineage.findings import Finding
from auditor.outcomes import Verdict

TierName = Literal["lineage", "artifact_recovery", "statistical", "bitwise"]
TierStatus = Literal["pass", "fail", "skipped", "error"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierResult(_Model):
    name: TierName
    status: TierStatus
    summary: str
    details: list[str] = Field(default_factory=list)


#: which way a metric is better (``none``: neither)
Direction = Literal["higher", "lower", "none"]
#: who set a band: its owner by hand, or a calibration from reruns
Provenance = Literal["declared", "calibrated"]


class Band(_Model):
    """A tolerance band for one metric of one model version. Values on an edge pass.

    Built in code as it is; a stored one is checked on load (``auditor.judge.tolerance.StoredBand``).
    """

    metric: str
    lower: float
    upper: float
    reference: float | None = None
    direction: Direction = "none"
    provenance: Provenance = "declared"
    method: str | None = None  # e.g. "prediction interval mean ± t(n-1,0.995)·s·√(1+1/n)"
    runs: list[str] = Field(default_factory=list)  # rerun ids the band was calibrated from
    spread: dict[str, float] = Field(default_factory=dict)  # noise floor: n, mean, std, min, max
    calibrated_at: str | None = None
    #: a calibrated band's evidence: the calibration run, its artifact and that artifact's sha256
    evidence: dict[str, str] | None = None
    declared_by: str | None = None  # who declared a hand-set band (never shown as calibrated)


class MetricResult(_Model):
    name: str
    registered: float | str | None = None  # the value recorded at training time
    rebuilt: list[float | str | None] = Field(default_factory=list)  # one per rerun
    band: Band | None = None
    inside: bool | None = None  # None when there is no band
    distance: float | None = None  # signed distance to the nearest edge, <0 inside, >0 outside
    reason: str = ""


class TensorDiff(_Model):
    name: str
    shape_a: list[int] | None = None
    shape_b: list[int] | None = None
    dtype_a: str | None = None
    dtype_b: str | None = None
    identical: bool = False
    max_abs: float | None = None
    rel_l2: float | None = None
    cosine: float | None = None
    note: str = ""


class WeightDiff(_Model):
    identical: bool
    tensors: int = 0
    differing: int = 0
    max_abs: float | None = None
    rel_l2: float | None = None  # over all tensors
    only_in_a: list[str] = Field(default_factory=list)
    only_in_b: list[str] = Field(default_factory=list)
    mismatched: list[str] = Field(default_factory=list)  # another model: a tensor name (other shape or dtype), or a flavour's self-described line
    worst: list[TensorDiff] = Field(default_factory=list)
    sha256_a: str | None = None
    sha256_b: str | None = None
    unit: str = "tensor(s)"  # what ``tensors`` and ``differing`` count (a tree flavour compares parameters, trees, arrays)

    def described(self) -> list[str]:
        """``mismatched`` in words: a flavour's line says what kind of difference it is (``flavors.base.KINDS``); a bare
        tensor name is one of another shape or dtype."""
        return [m if ": " in m else f"shape or dtype differs: {m}" for m in self.mismatched]


class EnvDrift(_Model):
    added: dict[str, str] = Field(default_factory=dict)
    removed: dict[str, str] = Field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = Field(default_factory=dict)
    fields: dict[str, tuple[Any, Any]] = Field(default_factory=dict)  # python, cuda, accelerator … (recorded, rebuild)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.fields)


class ModelInfo(_Model):
    name: str
    version: str
    aliases: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    run_id: str | None = None
    uri: str | None = None  # models:/name/version


class Timings(_Model):
    wall_s: float | None = None
    rebuild_s: float | None = None
    accelerator_s: float | None = None


class ChainLink(_Model):
    """One checkpoint of a run's chain, as a segment audit saw it."""

    step: int
    digest: str  # sha256 (hex) the record holds for it
    replayed: bool = False  # the end of a segment this audit replayed
    digest_ok: bool | None = None  # the stored file hashes to the recorded digest (None: not read)


class SegmentCheck(_Model):
    """One replayed segment: from the checkpoint at ``start_step`` (0: the seeded start) to ``end_step``."""

    index: int
    start_step: int
    end_step: int
    status: Literal["pass", "fail"]
    identical: bool = False  # the replayed end state is the stored one, bit for bit
    max_abs: float | None = None  # of the model's tensors
    rel_l2: float | None = None
    replayed_digest: str | None = None
    summary: str = ""
    wall_s: float | None = None

    @property
    def steps(self) -> str:
        return f"steps {self.start_step}–{self.end_step}"


class SegmentReplay(_Model):
    """A segment audit: the chain, which segments were replayed (seeded by the audit date), each comparison."""

    total: int
    selected: list[int] = Field(default_factory=list)
    basis: str = ""  # what seeded the selection
    chain: list[ChainLink] = Field(default_factory=list)
    checks: list[SegmentCheck] = Field(default_factory=list)
    replayed_steps: int = 0
    total_steps: int = 0

    @property
    def failed(self) -> list[SegmentCheck]:
        return [c for c in self.checks if c.status == "fail"]


LotteryStatus = Literal["lottery", "consistent", "too_few", "no_direction", "not_numeric"]


class MetricLottery(_Model):
    """Where the registered value of one metric lies among its seed-varied reruns (``auditor.judge.lottery``)."""

    metric: str
    direction: Direction = "none"
    registered: float | None = None
    reruns: list[float] = Field(default_factory=list)
    rank: int | None = None  # 1: better than every rerun; n + 1: worse than every rerun (favourable order)
    better_reruns: int = 0  # reruns strictly better than the registered value
    ties: int = 0  # reruns equal to it (counted against it: the p-value stays exact or conservative)
    p_value: float | None = None  # exact rank p-value, the registered run one of n + 1 exchangeable draws
    alpha: float = 0.05
    min_reruns: int = 19  # fewest reruns with which the test can reach ``alpha``
    status: LotteryStatus = "too_few"
    sentence: str = ""


class SeedLottery(_Model):
    """The lottery check of a calibrated version: one entry per metric with a band."""

    alpha: float = 0.05
    reruns: int = 0
    calibrated_at: str | None = None
    metrics: list[MetricLottery] = Field(default_factory=list)

    @property
    def winners(self) -> list[MetricLottery]:
        return [m for m in self.metrics if m.status == "lottery"]


class AuditResult(_Model):
    audit_id: str
    model: ModelInfo
    verdict: Verdict
    tiers: dict[str, TierResult] = Field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    audit_run: str | None = None  # Airflow run id, or "cli"
    record: dict[str, Any] | None = None
    record_digest: str | None = None
    findings: list[Finding] = Field(default_factory=list)
    metrics: list[MetricResult] = Field(default_factory=list)
    weight_diff: WeightDiff | None = None
    drift: EnvDrift | None = None
    timings: Timings = Field(default_factory=Timings)
    log_tail: str = ""
    error: str | None = None
    evidence: dict[str, str] = Field(default_factory=dict)  # name -> digest (record, manifests, image, weights)
    responsible_person: str | None = None
    runner: str | None = None
    #: every calibration of this version (newest last): run id, when, from how many reruns, and which judged
    calibrations: list[dict[str, Any]] = Field(default_factory=list)
    segments: SegmentReplay | None = None  # a segment audit (``auditor.steps.segments``); None: a full rebuild
    lottery: SeedLottery | None = None  # the registered run among its seed-varied reruns (``auditor.judge.lottery``)
    expected: ExpectedTier | None = None  # the tier the record alone lets the audit reach (``auditor.judge.expected``)
    #: the share of evaluation rows whose decision flips between seed-only reruns (``auditor.judge.multiplicity``)
    multiplicity: Multiplicity | None = None
    #: what the calibration reruns behind this report cost (``auditor.steps.reruns.cost``); reused, never rerun
    rerun_cost: dict[str, Any] | None = None
    #: what a rebuild of a plain-MLflow version had to assume (``auditor.adopt.rebuild``); empty for every audit
    assumptions: list[str] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        doc = self.model_dump(mode="json")
        for optional in ("segments", "lottery", "expected", "multiplicity", "rerun_cost"):  # evidence without them stays as it was
            if doc.get(optional) is None:
                doc.pop(optional, None)
        if not doc.get("assumptions"):
            doc.pop("assumptions", None)
        return doc
