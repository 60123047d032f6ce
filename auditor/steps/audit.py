"""``audit``: one resolved version recovered, rebuilt and judged; model-level failures become verdicts.

Three steps over one version: recover the registered artifact, rebuild (or replay segments, see
``auditor.steps.segments``), compare. Whatever fails inside them becomes the verdict that
``auditor.errors.verdict_failure`` gives it; nothing else decides that. Publishing is
``auditor.steps.publish``; the door is ``Session.audit``.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.contract import model_file
from auditor.digests import same, spelled
from auditor.errors import (
    Findings,
    InfrastructureError,
    InputUnrecoverable,
    NotFound,
    RecipeCrashed,
    ReproError,
    describe,
    verdict_failure,
)
from auditor.judge.result import AuditResult, EnvDrift, ModelInfo, Timings, Verdict
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.rebuild.run import RunResult, crash_signature, forked_evaluation, run_recipe
from auditor.steps.common import Progress, drift, gate, now
from auditor.tags import WEIGHTS_ARTIFACT
from auditor.uris import run_artifact_path

log = logging.getLogger(__name__)


@dataclass
class _Audit:
    """What one audit gathers, step by step, until the judge reads it."""

    session: Any
    info: Any
    runner: Any
    tmp: Path
    progress: Progress
    findings: list[Finding] = field(default_factory=list)
    record: RunRecord | None = None
    diff: str | None = None
    recovery: Any = None  # judge.verdict.RecoveryCheck
    weights: Path | None = None  # the registered model artifact (PyTorch weights or another flavour's file), downloaded
    flavor: str | None = None  # its flavour (auditor.flavors); None: PyTorch weights
    metric_results: list = field(default_factory=list)
    weight_diff: Any = None
    calibration: Any = None  # judge.floors.Calibration, when the version was calibrated
    calibrations: list[dict[str, Any]] = field(default_factory=list)  # every calibration run, newest last
    platform: dict | None = None  # the rebuild's platform fingerprint
    drift: EnvDrift | None = None
    log_tail: str = ""
    timings: Timings = field(default_factory=Timings)
    evidence: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # ERROR: no evidence could be produced (retryable)
    unrecoverable: str | None = None  # NOT_REPRODUCIBLE: an input cannot be recovered
    segments: Any = None  # judge.result.SegmentReplay, in a segment audit
    lottery: Any = None  # judge.result.SeedLottery, when the version was calibrated
    calibration_lookup: Any = None  # stored_calibrations' answer and its findings, read once (a segment audit reads it first)

    def failed(self, exc: BaseException) -> None:
        """Turn a failure into the verdict ``verdict_failure`` gives it; keep the run's log tail."""
        self.log_tail = getattr(exc, "log_tail", "") or self.log_tail
        if verdict_failure(exc) == Verdict.ERROR.value:
            self.error = describe(exc)
        else:
            self.unrecoverable = describe(exc)


def _read_record(a: _Audit) -> None:
    """The version's record and diff, or the finding that says why there is none."""
    try:
        a.record, a.diff = a.session.registry.load_record(a.info)
    except InfrastructureError:
        raise
    except ReproError as exc:  # RecordMissing, a malformed or rewritten record
        finding = getattr(exc, "finding", None)
        a.findings = [finding or Finding(code="record.unreadable", path="record", severity="blocking", message=str(exc), hint="re-register the version with a valid run record")]
        return
    a.findings = gate(a.record, a.diff) + _knob_findings(a.record)
    if a.info.run_deleted:
        a.findings.append(Finding(
            code="run.deleted", path="record", severity="warning",
            message=f"run {a.info.run_id} of {a.info.ref} is deleted (not yet purged): the next `mlflow gc` destroys its record and weights",
            hint=f"restore it: `mlflow runs restore --run-id {a.info.run_id}`"))
    changed = _record_changed_since_published(a.session, a.info, a.record.digest())
    if changed:
        a.findings.append(Finding(
            code="record.changed", path="record", severity="blocking",
            message=f"the run record changed after registration: {changed}",
            hint="treat this version as unreproducible and investigate who rewrote the record"))
    a.evidence["record"] = a.record.digest()
    a.evidence.update({f"snapshot.{n}": r.version for n, r in a.record.data.items() if r.version})
    if a.record.environment and a.record.environment.image_digest:
        a.evidence["image"] = a.record.environment.image_digest


def _knob_findings(record: RunRecord) -> list[Finding]:
    """The rule table's findings on the determinism knobs the model's flavour recorded at fit time."""
    artifact = record.outputs.model()
    if artifact is None or not artifact.flavor:
        return []
    from auditor.flavors.rules import findings

    return findings(artifact.flavor, artifact.knobs)


def _record_changed_since_published(session: Any, info: Any, digest: str) -> str | None:
    """How this version's earlier published evidence disagrees with its record's digest now (None: it agrees)."""
    from auditor.report import ledger
    try:
        entries = ledger.entries(session.store)
    except (NotFound, Findings):
        return None  # nothing published yet, or a broken ledger (evidence verify names it)
    for entry in entries:
        audit = entry.get("audit") or {}
        earlier = entry.get("record_digest")
        if audit.get("model") == info.name and str(audit.get("version")) == str(info.version) and earlier and earlier != digest:
            return (f"its digest is {digest} but the evidence of audit {audit.get('audit_id')} (ledger entry "
                    f"{entry.get('seq')}) recorded {earlier}")
    return None


def _registered_weights(a: _Audit) -> tuple[Path | None, str | None, str | None]:
    """Download the registered model artifact; returns (path, recorded sha256, why not)."""
    artifact = a.record.outputs.model()
    if artifact is None:
        return None, None, "the record lists no weights artifact"
    a.flavor = artifact.flavor
    # runs:/<run id>/<path in the run>, as the SDK records it
    uri = artifact.uri
    path = run_artifact_path(uri) or WEIGHTS_ARTIFACT
    try:
        return a.session.registry.download_artifact(a.info, path, a.tmp / f"registered-{model_file(a.flavor)}"), artifact.sha256, None
    except InfrastructureError:
        raise  # an outage is retryable: never a verdict on the model
    except ReproError as exc:
        return None, artifact.sha256, f"registered weights {path} could not be downloaded: {exc}"


def _recover_artifact(a: _Audit) -> None:
    """Step 1: the registered weights, hashed against the record."""
    from auditor.judge.verdict import RecoveryCheck
    from auditor.judge.weights import sha256_file

    a.progress("checking the registered artifact")
    log.info("audit %s: checking the registered artifact", a.info.ref)
    a.weights, expected, why = _registered_weights(a)
    actual = sha256_file(a.weights) if a.weights else None
    if actual:
        a.evidence["weights.registered"] = actual
    a.recovery = RecoveryCheck(expected_sha256=expected, actual_sha256=actual, registered=dict(a.record.outputs.metrics), unrecoverable=[why] if why else [])


def _rebuild(a: _Audit, reruns: int) -> list[RunResult]:
    """Step 2: the workspace, then ``reruns`` rebuilds; the first re-evaluates the registered weights too.

    It evaluates them in a child its own process forks before training (``REPRO_EVALUATE_THEN_TRAIN``),
    so one interpreter, one set of imports and one capture serve both. A script or platform that can
    only evaluate (the SDK does not fork where CUDA is already initialised) leaves an evaluation, not a
    training: then the rebuild runs as a second process, as it always did.
    """
    timeout = a.session.settings.rebuild_timeout_s
    a.progress("preparing the workspace")
    log.info("audit %s: preparing the workspace", a.info.ref)
    workspace = a.session.prepare(a.record, a.diff, a.tmp / "workspace")
    runs: list[RunResult] = []
    hosted = 0.0  # seconds of the evaluation a rebuild's process hosted
    if a.weights is not None:
        a.progress("rebuild 1 (the registered weights re-evaluated in the same process)")
        log.info("audit %s: rebuild 1, re-evaluating the registered weights in the same process", a.info.ref)
        out = a.tmp / "rebuild-0"
        try:
            first = run_recipe(a.record, workspace, a.runner, out, timeout_s=timeout, evaluate=a.weights,
                               then_train=EVALUATE_THEN_TRAIN)
        except RecipeCrashed as exc:
            if exc.timed_out:
                raise
            evaluation, forked_s, evaluation_crash = forked_evaluation(out)
            if forked_s is None or evaluation_crash:  # it crashed evaluating (in a forked child, or evaluating only)
                a.log_tail = exc.log_tail
                return _not_evaluable(a, evaluation_crash or crash_signature(exc.log_tail) or str(exc))
            if evaluation is not None:  # the evaluation passed, the training crashed: as any rebuild's crash
                a.recovery = a.recovery.model_copy(update={"evaluated": evaluation})
            first = _once_more(a, workspace, out, timeout, exc)
        if first.evaluation_crash:
            a.log_tail = first.log_tail
            return _not_evaluable(a, first.evaluation_crash)
        if first.evaluated:  # it evaluated only: the registered weights' metrics, then a rebuild of its own
            a.recovery = a.recovery.model_copy(update={"evaluated": first.metrics})
        else:
            if first.evaluation is not None:
                a.recovery = a.recovery.model_copy(update={"evaluated": first.evaluation})
            hosted = first.evaluation_s or 0.0
            runs.append(first)
    for i in range(len(runs), reruns):
        a.progress(f"rebuild {i + 1}/{reruns}")
        log.info("audit %s: rebuild %d/%d", a.info.ref, i + 1, reruns)
        runs.append(rebuild_once(a, workspace, a.tmp / (f"rebuild-{i}" + ("-train" if i == 0 and a.weights is not None else "")), timeout))
    a.log_tail = runs[-1].log_tail
    # the rebuild's own time: what re-running the recipe costs, without the evaluation it hosted
    a.timings.rebuild_s = round(sum(r.wall_s for r in runs) - hosted, 3)
    accel = [r.accelerator_s for r in runs if r.accelerator_s is not None]
    a.timings.accelerator_s = round(sum(accel), 3) if accel else None
    return runs


def _not_evaluable(a: _Audit, why: str) -> list[RunResult]:
    """The registered weights cannot even be evaluated by the recipe that made them (a shape mismatch loading
    them, say): the artifact is not recovered, whatever a rebuild would show."""
    a.recovery = a.recovery.model_copy(update={"unrecoverable": [
        *a.recovery.unrecoverable, f"re-evaluating the registered weights with the recorded recipe crashed: {why}"]})
    return []


def rebuild_once(a: _Audit, workspace, out: Path, timeout: float, **recipe: Any) -> RunResult:
    """One rebuild; a crash is run once more, and a crash that repeats identically is the recipe's own failure."""
    try:
        return run_recipe(a.record, workspace, a.runner, out, timeout_s=timeout, **recipe)
    except RecipeCrashed as first:
        return _once_more(a, workspace, out, timeout, first, **recipe)


#: Re-evaluate the registered weights in a forked child of the rebuild's own process (issue 18), instead
#: of a second process. An audit of the adapted public example once hung there: its script ran torch
#: code before ``auditor.start``, so the child entered an OpenMP pool whose threads a fork does not copy;
#: the child now always limits its native pools to one thread (``auditor.sdk.evaluation.one_thread``).
EVALUATE_THEN_TRAIN = True


def _once_more(a: _Audit, workspace, out: Path, timeout: float, first: RecipeCrashed, **recipe: Any) -> RunResult:
    """After ``first``, a rebuild's crash: run it once more; an identical crash is the recipe's own failure."""
    if first.timed_out:
        raise first
    a.progress("the rebuild crashed; running it once more to tell a flaky machine from a broken recipe")
    log.warning("audit %s: the rebuild crashed; running it once more", a.info.ref)
    try:
        return run_recipe(a.record, workspace, a.runner, out.with_name(out.name + "-again"), timeout_s=timeout, **recipe)
    except RecipeCrashed as second:
        signature = crash_signature(second.log_tail)
        if signature and signature == crash_signature(first.log_tail):
            error = InputUnrecoverable(f"persistent recipe failure: the recorded entrypoint crashed identically twice: {signature}",
                                       hint="the recorded recipe cannot be rerun to completion; the end of its log is in the report")
            error.log_tail = second.log_tail
            raise error from None
        raise


def _compare_traced(a: _Audit, runs: list[RunResult]) -> None:
    """What training read that the record does not pin, against what each rebuild read: a difference fails lineage."""
    from auditor.lineage.traced import compare as compare_traced

    for run in runs:
        if run.record is None:
            a.findings.append(Finding(code="traced.unknown", path="traced", severity="warning",
                                      message="the rebuild left no run record, so what it read was not traced",
                                      hint="use the SDK (auditor.track) in the training script"))
            continue
        a.findings += [f for f in compare_traced(a.record, run.record) if f not in a.findings]


def _compare(a: _Audit, runs: list[RunResult]) -> None:
    """Step 3: metrics against their bands, weights against the registered ones, the environment drift."""
    from auditor.judge.binding import bind
    from auditor.judge.floors import platform_fingerprint
    from auditor.judge.models import model_diff
    from auditor.judge.tolerance import bands_from_json, check_metrics
    from auditor.steps.calibrate import stored_calibrations
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    lookup = a.calibration_lookup or (*stored_calibrations(a.session, a.info, found := []), found)
    calibration, evidence, a.calibrations, found = lookup
    a.findings += found
    calibration_text = a.info.tags.get(TAG_CALIBRATION)
    if calibration is not None:
        a.calibration = calibration  # the run's evidence, never the editable tag
        if calibration_text and calibration_text != calibration.to_json():
            a.findings.append(Finding(
                code="calibration.tag_edited", path="bands", severity="warning",
                message=f"tag {TAG_CALIBRATION} differs from the calibration run {evidence['run_id']} it copies; the run's evidence judged",
                hint="re-run `repro-audit calibrate`"))
    elif calibration_text:
        a.findings.append(Finding(
            code="calibration.unbound", path="bands", severity="warning",
            message=f"tag {TAG_CALIBRATION} names no calibration run of this version: its same-seed floor is not used",
            hint="re-run `repro-audit calibrate`"))
    bands_text = a.session.registry.get_bands(a.info)
    bands = bands_from_json(bands_text, source=f"{a.info.ref} tag {TAG_BANDS}") if bands_text else {}
    bands, refused = bind(bands, calibration, evidence, a.record.outputs.metrics)
    a.findings += refused
    from auditor.judge.lottery import lottery_findings, seed_lottery

    a.lottery = seed_lottery(calibration, a.record.outputs.metrics, bands)  # was the registered seed picked for its result?
    a.findings += lottery_findings(a.lottery)
    a.metric_results = check_metrics([r.metrics for r in runs], bands, registered=a.record.outputs.metrics)
    rebuilt = runs[0]
    _compare_traced(a, runs)
    if rebuilt.weights_sha256:
        a.evidence["weights.rebuilt"] = rebuilt.weights_sha256
    if a.weights is not None and rebuilt.weights is not None:
        diff, lines = model_diff(a.weights, rebuilt.weights, a.flavor)
        a.evidence.update(lines)
        a.weight_diff = diff.model_copy(update={"sha256_a": a.evidence.get("weights.registered"), "sha256_b": rebuilt.weights_sha256})
        a.findings += _knob_changes(a.record, rebuilt)
    elif rebuilt.weights is None:
        a.unrecoverable = f"the rebuild left no {model_file(a.flavor)}"
    elif a.recovery is not None and a.recovery.expected_sha256 and rebuilt.weights_sha256:
        # the registered file is gone: the rebuild is held to the sha256 the record holds for it
        from auditor.judge.result import WeightDiff

        a.weight_diff = WeightDiff(identical=same(rebuilt.weights_sha256, a.recovery.expected_sha256),
                                   sha256_a=spelled(a.recovery.expected_sha256), sha256_b=rebuilt.weights_sha256)
    a.platform = platform_fingerprint(rebuilt.record.environment if rebuilt.record else None)
    a.drift = drift(a.record, rebuilt)


def _knob_changes(record: RunRecord, rebuilt: RunResult) -> list[Finding]:
    """Knobs the rebuild resolved otherwise than training did (a thread count, say): reported, not judged
    (the comparison of the normalised models judges; the rule table says which knobs diverge)."""
    from auditor.flavors.rules import THREAD_KNOBS, knob_changes

    recorded = record.outputs.model()
    own = rebuilt.record.outputs.model() if rebuilt.record is not None else None
    if recorded is None or own is None or not recorded.flavor:
        return []
    changes = knob_changes(recorded.knobs, own.knobs)
    if not changes:
        return []
    said = "; ".join(f"{k} {a!r} at training, {b!r} in the rebuild" for k, (a, b) in changes.items())
    threads = set(changes) <= THREAD_KNOBS
    return [Finding(code="knobs.changed", path="outputs.artifacts", severity="warning",
                    message=f"the rebuild's {recorded.flavor} knobs differ: {said}"
                            + (" (thread counts only: the models are compared on their normalised form)" if threads else ""),
                    hint="pin the knob in the training script (e.g. n_jobs from the recorded value)")]


def audit_version(session: Any, info: Any, options: Any, progress: Progress,
                  rebuild_step: Callable[[_Audit], list[RunResult]] | None = None) -> AuditResult:
    """Audit one resolved version: recover, rebuild, compare, judge. Model-level failures become verdicts."""
    runner = options.runner or session.settings.runner
    started, clock = now(), time.monotonic()
    a = _Audit(session=session, info=info, runner=session.runner(runner), tmp=session.scratch("audit-"), progress=progress)
    log.info("audit %s: started (runner %s, %d rebuild(s))", info.ref, runner, max(1, options.reruns))
    try:
        _gather(a, lambda: rebuild_step(a) if rebuild_step else _rebuild(a, max(1, options.reruns)))
    except Exception as exc:  # noqa: BLE001 - one model's failure is its verdict, never the night's crash
        a.failed(exc)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)
    verdict, tiers = _judge(a)
    a.timings.wall_s = round(time.monotonic() - clock, 3)
    log.info("audit %s: %s in %.1f s", info.ref, verdict.value, a.timings.wall_s)
    return _result(a, verdict, tiers, started=started, runner=runner, options=options)


def _gather(a: _Audit, rebuild: Callable[[], list[RunResult]]) -> None:
    """The record, the registered artifact, the rebuild and the comparison: what the judge reads."""
    from auditor.lineage.gate import blocking

    _read_record(a)
    if a.record is None:
        return
    _recover_artifact(a)
    if not blocking(a.findings):
        runs = rebuild()
        if runs:
            _compare(a, runs)


def _judge(a: _Audit) -> tuple[Verdict, dict[str, Any]]:
    from auditor.judge.verdict import judge

    verdict, tiers = judge(findings=a.findings, recovery=a.recovery, metric_results=a.metric_results, weight_diff=a.weight_diff,
                           error=a.error, unrecoverable=a.unrecoverable,
                           floor=a.calibration.same_seed if a.calibration else None, platform=a.platform,
                           calibration_findings=a.calibration.findings() if a.calibration else (),
                           deterministic=bool(a.record and a.record.seeds and a.record.seeds.deterministic))
    if a.segments is not None:
        from auditor.segments import segment_verdict

        verdict, tiers = segment_verdict(a.segments, verdict, tiers)
    return verdict, tiers


def _result(a: _Audit, verdict: Verdict, tiers: dict[str, Any], *, started: str, runner: str, options: Any) -> AuditResult:
    """The result as it leaves the process (CLI, --json, reports): tier texts, findings and logs redacted."""
    from auditor.lineage.redact import redact

    info = a.info
    model = ModelInfo(name=info.name, version=str(info.version), aliases=list(info.aliases), tags=dict(info.tags), run_id=info.run_id, uri=info.ref)
    tiers = {name: tier.model_copy(update={"summary": redact(tier.summary) or "", "details": [redact(d) or "" for d in tier.details]})
             for name, tier in tiers.items()}
    findings = [f.model_copy(update={"message": redact(f.message) or "", "hint": redact(f.hint) or ""}) for f in a.findings]
    return AuditResult(
        audit_id=options.date or started.replace(":", "").replace("-", ""),
        model=model, started_at=started, audit_run=options.audit_run or "cli",
        responsible_person=a.session.settings.responsible_person, runner=runner,
        verdict=verdict, tiers=tiers, finished_at=now(),
        record=a.record.to_dict() if a.record else None,
        record_digest=a.record.digest() if a.record else None,
        findings=findings, metrics=a.metric_results, weight_diff=a.weight_diff, drift=a.drift, timings=a.timings,
        log_tail=redact(a.log_tail) or "",
        error=redact(a.error or a.unrecoverable),
        evidence=a.evidence, calibrations=a.calibrations, segments=a.segments, lottery=a.lottery,
    )
