"""The step functions: sample, rebuild, calibrate, audit, publish. The only layer the CLI and the DAGs call.

Each step takes ids and URIs, returns plain data or one result object, and is
safe to repeat (Airflow runs tasks at least once): an audit is keyed on
(model version, audit id) and publishing it twice publishes it once. Settings
are resolved once by the caller (CLI, DAG task, pod) and passed down; a step
given none reads ``get_settings()`` once.

An audit is three steps over one resolved version: recover the registered
artifact, rebuild, compare. Whatever fails inside them becomes the verdict that
``auditor.errors.verdict_failure`` gives it; nothing else decides that.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.contract import WEIGHTS_FILE
from auditor.errors import (
    BadInput,
    InfrastructureError,
    InputUnrecoverable,
    LineageIncomplete,
    RecipeCrashed,
    ReproError,
    describe,
    verdict_failure,
)
from auditor.judge.result import AuditResult, Band, EnvDrift, ModelInfo, Timings, Verdict
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.rebuild.run import RunResult, crash_signature, make_runner, run_recipe
from auditor.settings import Settings, get_settings
from auditor.tags import TAG_AUDIT_DATE, TAG_AUDIT_PREVIOUS_DATE, TAG_COST_HOURS, TAG_REPORT, WEIGHTS_ARTIFACT

__all__ = [
    "Bands", "Published", "RebuildResult", "RunResult", "audit", "audit_and_publish", "calibrate", "calibration_seeds",
    "make_runner", "nightly", "publish_audit", "publish_summary", "rebuild", "sample",
]

Progress = Callable[[str], None]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _quiet(_: str) -> None:
    pass


def _registry(settings: Settings):
    from auditor.registry import open_registry

    return open_registry(settings.tracking_uri, settings.registry_uri)


def _gate(record: RunRecord, diff: str | None) -> list[Finding]:
    from auditor.lineage.gate import check

    return check(record, diff=diff)


def _require_complete_lineage(ref: str, record: RunRecord, diff: str | None) -> None:
    from auditor.lineage.gate import blocking

    blockers = blocking(_gate(record, diff))
    if blockers:
        raise LineageIncomplete(blockers, subject=ref)


def _prepare(record: RunRecord, diff: str | None, dest: Path, settings: Settings):
    from auditor.rebuild.workspace import prepare_workspace

    return prepare_workspace(record, diff, dest=dest, git_cache=settings.git_cache)


def _scratch(settings: Settings, prefix: str) -> Path:
    settings.work_dir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=settings.work_dir))


# -- rebuild ---------------------------------------------------------------------------
@dataclass
class RebuildResult:
    """``rebuild``'s answer: the rebuilt weights and metrics, the environment drift, the run's log."""

    model_ref: str
    workspace: Path
    runs: list[RunResult] = field(default_factory=list)
    drift: EnvDrift | None = None

    @property
    def first(self) -> RunResult:
        return self.runs[0]


def _drift(record: RunRecord, run: RunResult) -> EnvDrift | None:
    from auditor.rebuild.drift import environment_drift

    if run.record and run.record.environment and record.environment:
        return environment_drift(record.environment, run.record.environment)
    return None


def rebuild(model_ref: str, *, runner: str = "process", out_dir: Path, settings: Settings | None = None, progress: Progress = _quiet) -> RebuildResult:
    """Rebuild a registered version from its five recorded inputs into ``out_dir`` (on-demand rebuild)."""
    settings = settings or get_settings()
    run_with = make_runner(runner)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise BadInput(f"output folder {out_dir} is not empty", hint="pass a new folder")
    progress(f"resolving {model_ref}")
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    record, diff = registry.load_record(info)
    _require_complete_lineage(info.ref, record, diff)
    progress("preparing the workspace (code at the recorded commit, verified data)")
    workspace = _prepare(record, diff, out_dir / "workspace", settings)
    progress(f"running {' '.join(record.code.entrypoint or [])}")
    run = run_recipe(record, workspace, run_with, out_dir / "output", timeout_s=settings.rebuild_timeout_s)
    return RebuildResult(model_ref=info.ref, workspace=workspace.root, runs=[run], drift=_drift(record, run))


# -- calibrate --------------------------------------------------------------------------
class Bands(dict):
    """``calibrate``'s answer: one band per metric, and the calibration they came from (its findings)."""

    calibration: Any = None  # judge.floors.Calibration

def calibration_seeds(seed: int, reruns: int) -> list[int]:
    """The seeds of a calibration's reruns: derived from the recorded one, never equal to it."""
    from auditor.seeds import derive_seed

    return [derive_seed(seed, f"calibration-{i}") % 2**31 for i in range(reruns)]


def _same_seed_floor(record: RunRecord, runs: list[RunResult]):
    """The same-seed floor from reruns under the recorded seed (their weights compared pairwise)."""
    import itertools

    from auditor.judge.floors import FloorRun, floor_from_reruns, platform_fingerprint
    from auditor.judge.weights import diff_safetensors

    pairs = [diff_safetensors(a.weights, b.weights) for a, b in itertools.combinations(runs, 2) if a.weights and b.weights]
    own = next((r.record for r in runs if r.record is not None), None)
    platform = platform_fingerprint(own.environment if own else None)
    seed = record.seeds.seed if record.seeds else None
    return floor_from_reruns([FloorRun(seed=seed, weights_sha256=r.weights_sha256, metrics=r.metrics) for r in runs], pairs, platform)


def calibrate(
    model_ref: str,
    *,
    reruns: int = 5,
    same_seed: int = 2,
    runner: str = "process",
    replace: bool = False,
    settings: Settings | None = None,
    progress: Progress = _quiet,
) -> dict[str, Band]:
    """Measure both noise floors and store them with the version; returns the bands.

    ``same_seed`` reruns under the recorded seed measure execution noise (is the recipe bit-identical
    here, and if not how far apart its weights land); ``reruns`` seed-varied reruns measure each
    metric's band. A metric no seed moves gets no band (a finding). A band made from more reruns is
    never replaced by one made from fewer unless ``replace``.
    """
    from auditor.judge.calibrate import bands_from_reruns
    from auditor.judge.floors import MIN_SAME_SEED, MIN_SEED_VARIED, Calibration, FloorRun
    from auditor.judge.tolerance import bands_from_json, bands_to_json
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    settings = settings or get_settings()
    if reruns < MIN_SEED_VARIED:
        raise BadInput(f"calibration needs at least {MIN_SEED_VARIED} seed-varied reruns for a usable band, got {reruns}",
                       hint="pass --reruns 5 (3 or 4 give a band the report flags as weak)")
    if same_seed < MIN_SAME_SEED:
        raise BadInput(f"calibration needs at least {MIN_SAME_SEED} same-seed reruns to measure execution noise, got {same_seed}",
                       hint="pass --same-seed 2 or more")
    run_with = make_runner(runner)
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    record, diff = registry.load_record(info)
    _require_complete_lineage(info.ref, record, diff)
    if record.seeds is None or record.seeds.seed is None:
        raise BadInput(f"{info.ref} records no base seed to vary")
    existing = registry.get_bands(info)
    if existing and not replace:
        stored = bands_from_json(existing, source=f"{info.ref} tag {TAG_BANDS}")
        most = max((len(b.runs) for b in stored.values()), default=0)
        if most > reruns:
            raise BadInput(f"{info.ref} has bands calibrated from {most} reruns; {reruns} would replace them with weaker ones",
                           hint=f"pass --reruns {most} or more, or --replace to replace them anyway")
    tmp = _scratch(settings, "calibrate-")
    try:
        progress("preparing the workspace")
        workspace = _prepare(record, diff, tmp / "workspace", settings)
        timeout = settings.rebuild_timeout_s
        same = []
        for i in range(same_seed):
            progress(f"same-seed rerun {i + 1}/{same_seed} (seed {record.seeds.seed})")
            same.append(run_recipe(record, workspace, run_with, tmp / f"same-{i}", timeout_s=timeout))
        floor = _same_seed_floor(record, same)
        varied: dict[str, RunResult] = {}
        seeds = calibration_seeds(record.seeds.seed, reruns)
        for i, seed in enumerate(seeds):
            progress(f"seed-varied rerun {i + 1}/{reruns} (seed {seed})")
            varied[f"rerun-{i + 1}-seed-{seed}"] = run_recipe(record, workspace, run_with, tmp / f"rerun-{i}", timeout_s=timeout, seed=seed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    metrics = {run_id: run.metrics for run_id, run in varied.items()}
    names = sorted({n for m in metrics.values() for n in m})
    zero = [n for n in names if len({json.dumps(m.get(n)) for m in metrics.values()}) == 1]
    hashes = {run.weights_sha256 for run in varied.values()}
    calibration = Calibration(
        calibrated_at=_now(),
        same_seed=floor,
        seed_varied=[FloorRun(seed=s, weights_sha256=r.weights_sha256, metrics=r.metrics) for s, r in zip(seeds, varied.values(), strict=True)],
        zero_spread=zero,
        seed_ignored=len(hashes) == 1 and None not in hashes,
    )
    banded = {run_id: {k: v for k, v in m.items() if k not in zero} for run_id, m in metrics.items()}
    bands = Bands(bands_from_reruns(banded, registered=record.outputs.metrics, calibrated_at=calibration.calibrated_at))
    bands.calibration = calibration
    registry.set_tags(info, {TAG_BANDS: bands_to_json(bands), TAG_CALIBRATION: calibration.to_json()})
    return bands


# -- audit -----------------------------------------------------------------------------
@dataclass
class _Audit:
    """What one audit gathers, step by step, until the judge reads it."""

    registry: Any
    info: Any
    settings: Settings
    runner: Any
    tmp: Path
    progress: Progress
    findings: list[Finding] = field(default_factory=list)
    record: RunRecord | None = None
    diff: str | None = None
    recovery: Any = None  # judge.verdict.RecoveryCheck
    weights: Path | None = None  # the registered weights, downloaded
    metric_results: list = field(default_factory=list)
    weight_diff: Any = None
    calibration: Any = None  # judge.floors.Calibration, when the version was calibrated
    platform: dict | None = None  # the rebuild's platform fingerprint
    drift: EnvDrift | None = None
    log_tail: str = ""
    timings: Timings = field(default_factory=Timings)
    evidence: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # ERROR: no evidence could be produced (retryable)
    unrecoverable: str | None = None  # NOT_REPRODUCIBLE: an input cannot be recovered

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
        a.record, a.diff = a.registry.load_record(a.info)
    except InfrastructureError:
        raise
    except ReproError as exc:  # RecordMissing, a malformed or rewritten record
        finding = getattr(exc, "finding", None)
        a.findings = [finding or Finding(code="record.unreadable", path="record", severity="blocking", message=str(exc), hint="re-register the version with a valid run record")]
        return
    a.findings = _gate(a.record, a.diff)
    if a.info.run_deleted:
        a.findings.append(Finding(
            code="run.deleted", path="record", severity="warning",
            message=f"run {a.info.run_id} of {a.info.ref} is deleted (not yet purged): the next `mlflow gc` destroys its record and weights",
            hint=f"restore it: `mlflow runs restore --run-id {a.info.run_id}`"))
    a.evidence["record"] = a.record.digest()
    a.evidence.update({f"snapshot.{n}": r.version for n, r in a.record.data.items() if r.version})
    if a.record.environment and a.record.environment.image_digest:
        a.evidence["image"] = a.record.environment.image_digest


def _registered_weights(a: _Audit) -> tuple[Path | None, str | None, str | None]:
    """Download the registered weights; returns (path, recorded sha256, why not)."""
    artifact = next((x for x in a.record.outputs.artifacts if x.name.endswith(".safetensors") or x.name == "model"), None)
    if artifact is None:
        return None, None, "the record lists no weights artifact"
    # runs:/<run id>/<path in the run>, as the SDK records it
    uri = artifact.uri
    path = uri[len("runs:/") :].split("/", 1)[1] if uri.startswith("runs:/") and uri.count("/") >= 2 else WEIGHTS_ARTIFACT
    try:
        return a.registry.download_artifact(a.info, path, a.tmp / "registered.safetensors"), artifact.sha256, None
    except InfrastructureError:
        raise  # an outage is retryable: never a verdict on the model
    except ReproError as exc:
        return None, artifact.sha256, f"registered weights {path} could not be downloaded: {exc}"


def _recover_artifact(a: _Audit) -> None:
    """Step 1: the registered weights, hashed against the record."""
    from auditor.judge.verdict import RecoveryCheck
    from auditor.judge.weights import sha256_file

    a.progress("checking the registered artifact")
    a.weights, expected, why = _registered_weights(a)
    actual = sha256_file(a.weights) if a.weights else None
    if actual:
        a.evidence["weights.registered"] = actual
    a.recovery = RecoveryCheck(expected_sha256=expected, actual_sha256=actual, registered=dict(a.record.outputs.metrics), unrecoverable=[why] if why else [])


def _rebuild(a: _Audit, reruns: int) -> list[RunResult]:
    """Step 2: the workspace, the registered weights re-evaluated, then ``reruns`` rebuilds."""
    timeout = a.settings.rebuild_timeout_s
    a.progress("preparing the workspace")
    workspace = _prepare(a.record, a.diff, a.tmp / "workspace", a.settings)
    if a.weights is not None:
        a.progress("re-evaluating the registered weights")
        try:
            check = run_recipe(a.record, workspace, a.runner, a.tmp / "evaluate", timeout_s=timeout, evaluate=a.weights)
        except RecipeCrashed as exc:
            if exc.timed_out:
                raise
            # the registered weights cannot even be evaluated by the recipe that made them (a shape mismatch
            # loading them, say): the artifact is not recovered, whatever a rebuild would show
            a.log_tail = exc.log_tail
            a.recovery = a.recovery.model_copy(update={"unrecoverable": [
                *a.recovery.unrecoverable,
                f"re-evaluating the registered weights with the recorded recipe crashed: {crash_signature(exc.log_tail) or exc}"]})
            return []
        if check.evaluated:
            a.recovery = a.recovery.model_copy(update={"evaluated": check.metrics})
    runs = []
    for i in range(reruns):
        a.progress(f"rebuild {i + 1}/{reruns}")
        runs.append(_rebuild_once(a, workspace, a.tmp / f"rebuild-{i}", timeout))
    a.log_tail = runs[-1].log_tail
    a.timings.rebuild_s = round(sum(r.wall_s for r in runs), 3)
    accel = [r.accelerator_s for r in runs if r.accelerator_s is not None]
    a.timings.accelerator_s = round(sum(accel), 3) if accel else None
    return runs


def _rebuild_once(a: _Audit, workspace, out: Path, timeout: float) -> RunResult:
    """One rebuild; a crash is run once more, and a crash that repeats identically is the recipe's own failure."""
    try:
        return run_recipe(a.record, workspace, a.runner, out, timeout_s=timeout)
    except RecipeCrashed as first:
        if first.timed_out:
            raise
        a.progress("the rebuild crashed; running it once more to tell a flaky machine from a broken recipe")
        try:
            return run_recipe(a.record, workspace, a.runner, out.with_name(out.name + "-again"), timeout_s=timeout)
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
    from auditor.judge.floors import calibration_from_json, platform_fingerprint
    from auditor.judge.tolerance import bands_from_json, check_metrics
    from auditor.judge.weights import diff_safetensors
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    calibration_text = a.info.tags.get(TAG_CALIBRATION)
    if calibration_text:
        a.calibration = calibration_from_json(calibration_text, source=f"{a.info.ref} tag {TAG_CALIBRATION}")
    bands_text = a.registry.get_bands(a.info)
    bands = bands_from_json(bands_text, source=f"{a.info.ref} tag {TAG_BANDS}") if bands_text else {}
    a.metric_results = check_metrics([r.metrics for r in runs], bands, registered=a.record.outputs.metrics)
    rebuilt = runs[0]
    _compare_traced(a, runs)
    if rebuilt.weights_sha256:
        a.evidence["weights.rebuilt"] = rebuilt.weights_sha256
    if a.weights is not None and rebuilt.weights is not None:
        diff = diff_safetensors(a.weights, rebuilt.weights)
        a.weight_diff = diff.model_copy(update={"sha256_a": a.evidence.get("weights.registered"), "sha256_b": rebuilt.weights_sha256})
    elif rebuilt.weights is None:
        a.unrecoverable = f"the rebuild left no {WEIGHTS_FILE}"
    elif a.recovery is not None and a.recovery.expected_sha256 and rebuilt.weights_sha256:
        # the registered file is gone: the rebuild is held to the sha256 the record holds for it
        from auditor.judge.result import WeightDiff

        same = rebuilt.weights_sha256.removeprefix("sha256:") == a.recovery.expected_sha256.removeprefix("sha256:")
        a.weight_diff = WeightDiff(identical=same, sha256_a="sha256:" + a.recovery.expected_sha256.removeprefix("sha256:"), sha256_b=rebuilt.weights_sha256)
    a.platform = platform_fingerprint(rebuilt.record.environment if rebuilt.record else None)
    a.drift = _drift(a.record, rebuilt)


def _audit_version(registry, info, *, runner: str, reruns: int, date: str | None, audit_run: str | None, settings: Settings, progress: Progress) -> AuditResult:
    """Audit one resolved version: recover, rebuild, compare, judge. Model-level failures become verdicts."""
    from auditor.judge.verdict import judge
    from auditor.lineage.gate import blocking
    from auditor.report.evidence import redact

    run_with = make_runner(runner)  # an unknown runner is the caller's error, not a verdict on the model
    started, clock = _now(), time.monotonic()
    a = _Audit(registry=registry, info=info, settings=settings, runner=run_with, tmp=_scratch(settings, "audit-"), progress=progress)
    try:
        _read_record(a)
        if a.record is not None:
            _recover_artifact(a)
            if not blocking(a.findings):
                runs = _rebuild(a, max(1, reruns))
                if runs:
                    _compare(a, runs)
    except Exception as exc:  # noqa: BLE001 - one model's failure is its verdict, never the night's crash
        a.failed(exc)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)
    verdict, tiers = judge(findings=a.findings, recovery=a.recovery, metric_results=a.metric_results, weight_diff=a.weight_diff, error=a.error, unrecoverable=a.unrecoverable,
                           floor=a.calibration.same_seed if a.calibration else None, platform=a.platform,
                           calibration_findings=a.calibration.findings() if a.calibration else (),
                           deterministic=bool(a.record and a.record.seeds and a.record.seeds.deterministic))
    a.timings.wall_s = round(time.monotonic() - clock, 3)
    model = ModelInfo(name=info.name, version=str(info.version), aliases=list(info.aliases), tags=dict(info.tags), run_id=info.run_id, uri=info.ref)
    return AuditResult(
        audit_id=date or started.replace(":", "").replace("-", ""),
        model=model,
        started_at=started,
        audit_run=audit_run or "cli",
        responsible_person=settings.responsible_person,
        runner=runner,
        verdict=verdict,
        tiers=tiers,
        finished_at=_now(),
        record=a.record.to_dict() if a.record else None,
        record_digest=a.record.digest() if a.record else None,
        findings=a.findings,
        metrics=a.metric_results,
        weight_diff=a.weight_diff,
        drift=a.drift,
        timings=a.timings,
        log_tail=redact(a.log_tail) or "",  # the result leaves the process (CLI, --json, reports): never a secret
        error=redact(a.error or a.unrecoverable),
        evidence=a.evidence,
    )


def audit(
    model_ref: str,
    *,
    runner: str = "process",
    reruns: int = 1,
    date: str | None = None,
    audit_run: str | None = None,
    settings: Settings | None = None,
    progress: Progress = _quiet,
) -> AuditResult:
    """Rebuild, judge and return everything a report needs, publishing nothing. A bad ref raises."""
    settings = settings or get_settings()
    make_runner(runner)
    registry = _registry(settings)
    info = registry.resolve(model_ref)  # a bad ref is the caller's error: raise
    return _audit_version(registry, info, runner=runner, reruns=reruns, date=date, audit_run=audit_run, settings=settings, progress=progress)


# -- publish and the nightly sequence -------------------------------------------------------
@dataclass
class Published:
    """A published audit: the result (None only when the version could not be resolved) and its summary row."""

    result: AuditResult | None
    row: dict[str, Any]  # {"ref", "verdict", "report", "error", "skipped"}


def _published_evidence(info, date: str, settings: Settings) -> dict[str, Any] | None:
    """The stored evidence of this version's audit for ``date``, if its evidence was published."""
    from auditor.report.evidence import load_evidence, report_stem
    from auditor.storage import open_store

    stem = report_stem(info.name, str(info.version), date)
    store = open_store(settings.reports)
    if not store.exists(f"{stem}.json"):
        return None
    return load_evidence(store.read(f"{stem}.json"), source=f"{store.uri}/{stem}.json")


def _publish_version(registry, info, *, date: str, audit_run: str, runner: str, reruns: int, settings: Settings, progress: Progress,
                     publish_error: bool = True) -> Published:
    from auditor.report.evidence import audit_of
    from auditor.report.publish import publish

    stored = _published_evidence(info, date, settings)
    skipped = stored is not None
    if skipped:
        result = audit_of(stored)
    else:
        result = _audit_version(registry, info, runner=runner, reruns=reruns, date=date, audit_run=audit_run, settings=settings, progress=progress)
        if result.verdict is Verdict.ERROR and not publish_error:  # an orchestrator retry audits it afresh
            raise InfrastructureError(f"{info.ref}: verdict ERROR, not published yet: {result.error}",
                                      hint="retried; the last try publishes the ERROR verdict")
    progress("publishing the report")
    publication = publish(result, settings.reports, settings=settings)  # completes a half-done publish
    report_uri = f"{publication.location.rstrip('/')}/{publication.report_key}"
    if info.tags.get(TAG_AUDIT_DATE) != date or info.tags.get(TAG_REPORT) != report_uri:
        registry.write_outcome(info, result.verdict.value, result.finished_at or _now(), report_uri)
        tags = {TAG_AUDIT_DATE: date}
        previous = info.tags.get(TAG_AUDIT_DATE)
        if previous and previous != date:
            tags[TAG_AUDIT_PREVIOUS_DATE] = previous
        registry.set_tags(info, tags)
    row = {"ref": info.ref, "verdict": result.verdict.value, "report": report_uri, "error": result.error, "skipped": skipped}
    return Published(result=result, row=row)


def publish_audit(
    model_ref: str,
    *,
    date: str,
    audit_run: str,
    runner: str | None = None,
    reruns: int = 1,
    settings: Settings | None = None,
    progress: Progress = _quiet,
) -> Published:
    """Audit one version for one logical date and publish its report, exactly once; a bad ref raises.

    What ``repro-audit audit`` runs; ``audit_and_publish`` (the DAG tasks) is the same step. The
    version is resolved once, here, and pinned: an alias may move while we work.
    """
    settings = settings or get_settings()
    runner = runner or settings.runner
    make_runner(runner)
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    return _publish_version(registry, info, date=date, audit_run=audit_run, runner=runner, reruns=reruns, settings=settings, progress=progress)


def audit_and_publish(
    model_ref: str,
    *,
    date: str,
    audit_run: str,
    runner: str | None = None,
    reruns: int = 1,
    settings: Settings | None = None,
    progress: Progress = _quiet,
    publish_error: bool = True,
) -> dict[str, Any]:
    """``publish_audit`` for a task: returns ``{"ref", "verdict", "report", "error", "skipped"}``.

    ``publish_error=False`` (a task with retries left) raises ``InfrastructureError`` for an ERROR
    verdict instead of publishing it, so that the orchestrator's retry audits the version afresh.

    A model-level failure is a verdict (``ERROR`` or ``NOT_REPRODUCIBLE``), never an exception, and so
    is a version that cannot be resolved (deleted since sampling: that model's row says so); an
    infrastructure failure (registry, reports store) raises, so that the task is retried. Every step
    is safe to repeat: once the evidence is stored, a retry finishes publishing *that* evidence
    (report, ledger, registry tags) instead of auditing again.
    """
    settings = settings or get_settings()
    runner = runner or settings.runner
    registry = _registry(settings)
    try:
        info = registry.resolve(model_ref)
    except InfrastructureError:
        raise
    except ReproError as exc:
        return {"ref": model_ref, "verdict": Verdict.ERROR.value, "report": None, "error": str(exc), "skipped": False}
    return _publish_version(registry, info, date=date, audit_run=audit_run, runner=runner, reruns=reruns, settings=settings, progress=progress,
                            publish_error=publish_error).row


def sample(date: str, *, settings: Settings | None = None, models: str | None = None) -> dict[str, Any]:
    """Tonight's sample from the registry under the configured budget (see ``auditor.sampling``).

    ``models``, a shell pattern, keeps only the versions whose name (``credit-*``) or ``NAME/VERSION``
    (``credit-scorer/3``) matches.
    """
    from fnmatch import fnmatchcase

    from auditor.sampling import Budget, Candidate, choose

    settings = settings or get_settings()
    candidates = []
    for info in _registry(settings).list_versions():
        if models and not (fnmatchcase(info.name, models) or fnmatchcase(f"{info.name}/{info.version}", models)):
            continue
        candidate = Candidate.from_tags(info.name, str(info.version), info.aliases, dict(info.tags))
        if info.train_seconds and TAG_COST_HOURS not in info.tags:
            candidate = Candidate(**{**candidate.__dict__, "cost_hours": info.train_seconds / 3600})
        candidates.append(candidate)
    budget = Budget(max_models=settings.nightly_max_models, max_hours=settings.nightly_budget_hours,
                    production_aliases=settings.production_aliases)
    return choose(candidates, date, budget).to_dict()


def publish_summary(date: str, sample: dict[str, Any], results: list[dict[str, Any]], *, settings: Settings | None = None) -> dict[str, Any]:
    """Write the night's summary (every sampled model with its verdict or error) and refresh the index."""
    from auditor.report.publish import refresh
    from auditor.storage import open_store

    settings = settings or get_settings()
    by_ref = {r.get("ref"): r for r in results if r}
    rows = []
    for pick in sample.get("picks", []):
        row = by_ref.get(pick["ref"]) or {"ref": pick["ref"], "verdict": Verdict.ERROR.value, "report": None, "error": "the audit task failed (see the orchestrator's log)", "skipped": False}
        rows.append({**row, "reason": pick.get("reason")})
    summary = {"date": date, "hours": sample.get("hours"), "audits": rows, "skipped": sample.get("skipped", []), "written_at": _now()}
    store = open_store(settings.reports)
    store.write(f"summaries/{date}.json", json.dumps(summary, indent=2, sort_keys=True).encode(), overwrite=True)
    refresh(store)
    return summary


def nightly(date: str, *, audit_run: str | None = None, settings: Settings | None = None, progress: Progress = _quiet) -> dict[str, Any]:
    """The nightly sequence without Airflow: sample, audit and publish each, then the summary."""
    settings = settings or get_settings()
    chosen = sample(date, settings=settings)
    results = []
    for pick in chosen["picks"]:
        progress(f"auditing {pick['ref']} ({pick['reason']})")
        results.append(audit_and_publish(pick["ref"], date=date, audit_run=audit_run or f"cli-nightly-{date}", settings=settings, progress=progress))
    return publish_summary(date, chosen, results, settings=settings)
