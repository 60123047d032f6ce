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

import contextlib
import datetime as dt
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.contract import ENV_STOP_STEP, WEIGHTS_FILE
from auditor.errors import (
    BadInput,
    Findings,
    InfrastructureError,
    InputUnrecoverable,
    LineageIncomplete,
    NotFound,
    RecipeCrashed,
    ReproError,
    describe,
    verdict_failure,
)
from auditor.judge.result import AuditResult, Band, EnvDrift, ModelInfo, Timings, Verdict
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.rebuild.run import RunResult, crash_signature, forked_evaluation, make_runner, run_recipe
from auditor.settings import REPORTS, Settings, get_settings
from auditor.tags import (
    TAG_AUDIT_DATE,
    TAG_AUDIT_PREVIOUS_DATE,
    TAG_AUDIT_RUN,
    TAG_COST_HOURS,
    TAG_REPORT,
    WEIGHTS_ARTIFACT,
)

__all__ = [
    "Bands", "Published", "RebuildResult", "RunResult", "audit", "audit_and_publish", "audit_segments", "calibrate", "calibration_seeds",
    "make_runner", "nightly", "preflight", "preflight_store", "publish_audit", "publish_segments", "publish_summary", "rebuild", "sample",
]

Progress = Callable[[str], None]
log = logging.getLogger(__name__)  # each step's stages, for a task log or the CLI's stderr


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _quiet(_: str) -> None:
    pass


def _registry(settings: Settings):
    from auditor.registry import open_registry

    return open_registry(settings.tracking_uri, settings.registry_uri, settings=settings)


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
    run_with = make_runner(runner, settings)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise BadInput(f"output folder {out_dir} is not empty", hint="pass a new folder")
    progress(f"resolving {model_ref}")
    log.info("rebuild %s: resolving", model_ref)
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    record, diff = registry.load_record(info)
    _require_complete_lineage(info.ref, record, diff)
    progress("preparing the workspace (code at the recorded commit, verified data)")
    log.info("rebuild %s: preparing the workspace", info.ref)
    workspace = _prepare(record, diff, out_dir / "workspace", settings)
    progress(f"running {' '.join(record.code.entrypoint or [])}")
    log.info("rebuild %s: running %s", info.ref, " ".join(record.code.entrypoint or []))
    run = run_recipe(record, workspace, run_with, out_dir / "output", timeout_s=settings.rebuild_timeout_s)
    log.info("rebuild %s: done in %.1f s, weights %s", info.ref, run.wall_s, run.weights_sha256)
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
    run_with = make_runner(runner, settings)
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
        log.info("calibrate %s: preparing the workspace", info.ref)
        workspace = _prepare(record, diff, tmp / "workspace", settings)
        timeout = settings.rebuild_timeout_s
        same = []
        for i in range(same_seed):
            progress(f"same-seed rerun {i + 1}/{same_seed} (seed {record.seeds.seed})")
            log.info("calibrate %s: same-seed rerun %d/%d (seed %s)", info.ref, i + 1, same_seed, record.seeds.seed)
            same.append(run_recipe(record, workspace, run_with, tmp / f"same-{i}", timeout_s=timeout))
        floor = _same_seed_floor(record, same)
        varied: dict[str, RunResult] = {}
        seeds = calibration_seeds(record.seeds.seed, reruns)
        for i, seed in enumerate(seeds):
            progress(f"seed-varied rerun {i + 1}/{reruns} (seed {seed})")
            log.info("calibrate %s: seed-varied rerun %d/%d (seed %s)", info.ref, i + 1, reruns, seed)
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
    computed = bands_from_reruns(banded, registered=record.outputs.metrics, calibrated_at=calibration.calibrated_at)
    evidence = _log_calibration_run(registry, info, calibration, settings)
    bands = Bands({name: band.model_copy(update={"evidence": evidence}) for name, band in computed.items()})
    bands.calibration = calibration
    registry.set_tags(info, {TAG_BANDS: bands_to_json(bands), TAG_CALIBRATION: calibration.to_json()})
    log.info("calibrate %s: stored %d band(s)", info.ref, len(bands))
    return bands


def _log_calibration_run(registry, info, calibration, settings: Settings) -> dict[str, str]:
    """Store a calibration's evidence as a run of the audits experiment; returns what its bands name.

    The artifact holds every rerun's seed, weight digest and metrics and the same-seed floor; its
    sha256 is a param of the run, which MLflow does not let anyone change. Each calibration adds a
    run, so a version's calibrations keep their history.
    """
    from auditor import tags as t
    from auditor.canonical import sha256_hex

    data = calibration.to_json().encode("utf-8")
    sha = "sha256:" + sha256_hex(data)
    run_id = registry.log_run(
        experiment=settings.audit_experiment, identity=f"calibration {info.ref} {sha}",
        name=f"calibration {info.name} v{info.version} {calibration.calibrated_at}",
        params={t.PARAM_CALIBRATION_SHA256: sha, t.PARAM_CALIBRATION_RERUNS: str(len(calibration.seed_varied)),
                t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)},
        tags={t.TAG_RUN_KIND: "calibration", t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version),
              t.MLFLOW_SOURCE_NAME: t.AUDIT_RUN_SOURCE, t.MLFLOW_SOURCE_TYPE: "JOB"},
        metrics={}, artifacts={t.CALIBRATION_ARTIFACT: data},
    )
    return {"run_id": run_id, "sha256": sha, "artifact": t.CALIBRATION_ARTIFACT}


def _calibrations(a: _Audit) -> tuple[Any, dict[str, str] | None]:
    """The version's newest calibration as its run stored it (checked against the run's sha256 param).

    Also fills ``a.calibrations`` (the history the report shows). A calibration run whose artifact
    no longer matches its param is refused with a finding: the evidence was altered.
    """
    from auditor import tags as t
    from auditor.canonical import sha256_hex
    from auditor.judge.floors import calibration_from_json

    runs = a.registry.find_runs(experiment=a.settings.audit_experiment,
                                params={t.TAG_RUN_MODEL: a.info.name, t.TAG_RUN_MODEL_VERSION: str(a.info.version)})
    newest: tuple[Any, dict[str, str] | None] = (None, None)
    for run in runs:
        sha = run.params.get(t.PARAM_CALIBRATION_SHA256)
        if not sha:
            continue
        data = a.registry.read_run_file(run.run_id, t.CALIBRATION_ARTIFACT)
        entry = {"run_id": run.run_id, "sha256": sha, "reruns": run.params.get(t.PARAM_CALIBRATION_RERUNS), "deleted": run.deleted}
        if data is None or "sha256:" + sha256_hex(data) != sha:
            a.findings.append(Finding(
                code="calibration.altered", path="bands", severity="warning",
                message=f"calibration run {run.run_id}: its artifact {t.CALIBRATION_ARTIFACT} no longer matches its sha256 param {sha}; its bands are refused",
                hint="re-run `repro-audit calibrate`"))
            a.calibrations.append({**entry, "valid": False})
            continue
        calibration = calibration_from_json(data, source=f"calibration run {run.run_id}")
        a.calibrations.append({**entry, "calibrated_at": calibration.calibrated_at, "valid": True})
        newest = (calibration, {"run_id": run.run_id, "sha256": sha, "artifact": t.CALIBRATION_ARTIFACT})
    if newest[1] is not None:
        for item in a.calibrations:
            item["judged"] = item["run_id"] == newest[1]["run_id"]
    return newest


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
    calibrations: list[dict[str, Any]] = field(default_factory=list)  # every calibration run, newest last
    platform: dict | None = None  # the rebuild's platform fingerprint
    drift: EnvDrift | None = None
    log_tail: str = ""
    timings: Timings = field(default_factory=Timings)
    evidence: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # ERROR: no evidence could be produced (retryable)
    unrecoverable: str | None = None  # NOT_REPRODUCIBLE: an input cannot be recovered
    segments: Any = None  # judge.result.SegmentReplay, in a segment audit

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
    changed = _record_changed_since_published(a.info, a.record.digest(), a.settings)
    if changed:
        a.findings.append(Finding(
            code="record.changed", path="record", severity="blocking",
            message=f"the run record changed after registration: {changed}",
            hint="treat this version as unreproducible and investigate who rewrote the record"))
    a.evidence["record"] = a.record.digest()
    a.evidence.update({f"snapshot.{n}": r.version for n, r in a.record.data.items() if r.version})
    if a.record.environment and a.record.environment.image_digest:
        a.evidence["image"] = a.record.environment.image_digest


def _record_changed_since_published(info, digest: str, settings: Settings) -> str | None:
    """How this version's earlier published evidence disagrees with its record's digest now (None: it agrees)."""
    from auditor.report import ledger
    from auditor.storage import open_store

    try:
        entries = ledger.entries(open_store(settings.reports))
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
    timeout = a.settings.rebuild_timeout_s
    a.progress("preparing the workspace")
    log.info("audit %s: preparing the workspace", a.info.ref)
    workspace = _prepare(a.record, a.diff, a.tmp / "workspace", a.settings)
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
        runs.append(_rebuild_once(a, workspace, a.tmp / (f"rebuild-{i}" + ("-train" if i == 0 and a.weights is not None else "")), timeout))
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


def _rebuild_once(a: _Audit, workspace, out: Path, timeout: float, **recipe: Any) -> RunResult:
    """One rebuild; a crash is run once more, and a crash that repeats identically is the recipe's own failure."""
    try:
        return run_recipe(a.record, workspace, a.runner, out, timeout_s=timeout, **recipe)
    except RecipeCrashed as first:
        return _once_more(a, workspace, out, timeout, first, **recipe)


#: Re-evaluate the registered weights in a forked child of the rebuild's own process (issue 18), instead
#: of a second process. An audit of the adapted public example once hung there: its script ran torch
#: code before ``auditor.start``, so the child entered an OpenMP pool whose threads a fork does not copy;
#: the child now always limits its native pools to one thread (``auditor.registry.sdk._one_thread``).
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
    from auditor.judge.tolerance import bands_from_json, check_metrics
    from auditor.judge.weights import diff_safetensors
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    calibration, evidence = _calibrations(a)
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
    bands_text = a.registry.get_bands(a.info)
    bands = bands_from_json(bands_text, source=f"{a.info.ref} tag {TAG_BANDS}") if bands_text else {}
    bands, refused = bind(bands, calibration, evidence, a.record.outputs.metrics)
    a.findings += refused
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


def _audit_version(registry, info, *, runner: str, reruns: int, date: str | None, audit_run: str | None, settings: Settings, progress: Progress,
                   rebuild_step: Callable[[_Audit], list[RunResult]] | None = None) -> AuditResult:
    """Audit one resolved version: recover, rebuild, compare, judge. Model-level failures become verdicts."""
    from auditor.judge.verdict import judge
    from auditor.lineage.gate import blocking
    from auditor.lineage.redact import redact

    run_with = make_runner(runner, settings)  # an unknown runner is the caller's error, not a verdict on the model
    started, clock = _now(), time.monotonic()
    a = _Audit(registry=registry, info=info, settings=settings, runner=run_with, tmp=_scratch(settings, "audit-"), progress=progress)
    log.info("audit %s: started (runner %s, %d rebuild(s))", info.ref, runner, max(1, reruns))
    try:
        _read_record(a)
        if a.record is not None:
            _recover_artifact(a)
            if not blocking(a.findings):
                runs = rebuild_step(a) if rebuild_step else _rebuild(a, max(1, reruns))
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
    if a.segments is not None:
        from auditor.segments import segment_verdict

        verdict, tiers = segment_verdict(a.segments, verdict, tiers)
    a.timings.wall_s = round(time.monotonic() - clock, 3)
    log.info("audit %s: %s in %.1f s", info.ref, verdict.value, a.timings.wall_s)
    model = ModelInfo(name=info.name, version=str(info.version), aliases=list(info.aliases), tags=dict(info.tags), run_id=info.run_id, uri=info.ref)
    # the result leaves the process (CLI, --json, reports): tier texts and findings quote crash output
    tiers = {name: tier.model_copy(update={"summary": redact(tier.summary) or "", "details": [redact(d) or "" for d in tier.details]})
             for name, tier in tiers.items()}
    a.findings = [f.model_copy(update={"message": redact(f.message) or "", "hint": redact(f.hint) or ""}) for f in a.findings]
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
        calibrations=a.calibrations,
        segments=a.segments,
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
    make_runner(runner, settings)
    registry = _registry(settings)
    info = registry.resolve(model_ref)  # a bad ref is the caller's error: raise
    preflight(registry, info, settings, publishing=False)
    return _audit_version(registry, info, runner=runner, reruns=reruns, date=date, audit_run=audit_run, settings=settings, progress=progress)


# -- segment replay ------------------------------------------------------------------------
def _stored_checkpoint(a: _Audit, link, dest: Path) -> tuple[Path | None, str | None]:
    """Download one checkpoint of the chain and check its digest; (path, why not)."""
    from auditor import segments as seg

    uri = link.uri
    path = uri[len("runs:/") :].split("/", 1)[1] if uri.startswith("runs:/") and uri.count("/") >= 2 else seg.store_path(link.digest)
    try:
        local = a.registry.download_artifact(a.info, path, dest)
    except InfrastructureError:
        raise
    except ReproError as exc:
        return None, f"the stored checkpoint at step {link.step} ({path}) cannot be downloaded: {exc}"
    actual = seg.sha256_of(local)
    if actual != link.digest:
        return None, (f"the stored checkpoint at step {link.step} fails its digest (the record holds sha256:{link.digest}, "
                      f"the stored file hashes to sha256:{actual}): the artifact was altered")
    return local, None


def _replay_segments(a: _Audit, *, count: int | None, budget: float | None, date: str, workers: int = 1) -> list[RunResult]:
    """Step 2 of a segment audit: verify the chain, replay the chosen segments, compare each end state.

    Returns the last segment's run (it ends where training ended: its weights and metrics are compared
    with the registered ones by step 3, as a full rebuild's are); it also re-evaluates the registered weights.
    """
    from auditor import segments as seg
    from auditor.judge.floors import calibration_from_json
    from auditor.judge.result import ChainLink, SegmentReplay
    from auditor.tags import TAG_CALIBRATION

    links = seg.chain(a.record)
    parts = seg.segments(links)
    timeout = a.settings.rebuild_timeout_s
    a.progress(f"verifying the checkpoint chain ({len(links)} checkpoints)")
    stored: dict[int, Path] = {}
    for link in links:
        local, why = _stored_checkpoint(a, link, a.tmp / "chain" / f"{link.digest}.safetensors")
        if why:
            a.unrecoverable = why
            return []
        stored[link.step] = local
    if a.weights is not None and not seg.model_weights_equal(stored[links[-1].step], a.weights):
        a.unrecoverable = f"the chain's last checkpoint (step {links[-1].step}) does not hold the registered weights: the chain is not this version's"
        return []
    chosen = seg.pick_segments(len(parts), date=date, salt=a.record.digest(), count=count, budget=budget)
    a.progress("preparing the workspace")
    workspace = _prepare(a.record, a.diff, a.tmp / "workspace", a.settings)
    calibration_text = a.info.tags.get(TAG_CALIBRATION)
    floor = calibration_from_json(calibration_text, source=f"{a.info.ref} tag {TAG_CALIBRATION}").same_seed if calibration_text else None
    deterministic = bool(a.record.seeds and a.record.seeds.deterministic)
    checks, last, hosted, wall = [], None, 0.0, 0.0

    def replay(n_index: tuple[int, int]) -> RunResult:
        n, index = n_index
        part = parts[index]
        a.progress(f"replaying segment {n + 1}/{len(chosen)}: {part.steps}")
        recipe: dict[str, Any] = {"resume": stored[part.begin.step] if part.begin else None, "stop_step": part.end}
        if index == len(parts) - 1 and a.weights is not None:
            recipe.update(evaluate=a.weights, then_train=True)
        return _rebuild_once(a, workspace, a.tmp / f"segment-{index}", timeout, **recipe)

    if workers > 1:  # segments are independent: one process each, ``workers`` at a time
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(replay, enumerate(chosen)))
    else:
        done = [replay(item) for item in enumerate(chosen)]
    for index, run in zip(chosen, done, strict=True):
        part = parts[index]
        final = index == len(parts) - 1
        wall += run.wall_s
        if run.checkpoint is None:
            a.log_tail = run.log_tail
            a.unrecoverable = (f"the replay of {part.steps} left no end checkpoint: the recipe does not honour {ENV_STOP_STEP} "
                               "(see the entry-point contract in the README)")
            return []
        comparison = seg.compare_checkpoints(stored[part.end], run.checkpoint, a.tmp / f"compare-{index}")
        checks.append(seg.judge_segment(part, comparison, deterministic=deterministic, floor=floor, wall_s=run.wall_s,
                                        replayed_digest=seg.sha256_of(run.checkpoint)))
        if final:
            last = run
            hosted = run.evaluation_s or 0.0
            if run.evaluation_crash:
                a.recovery = a.recovery.model_copy(update={"unrecoverable": [
                    *a.recovery.unrecoverable, f"re-evaluating the registered weights with the recorded recipe crashed: {run.evaluation_crash}"]})
            elif run.evaluation is not None:
                a.recovery = a.recovery.model_copy(update={"evaluated": run.evaluation})
    replayed = {parts[i].end for i in chosen}
    a.segments = SegmentReplay(
        total=len(parts), selected=chosen, basis=f"audit date {date}, record {a.record.digest()[:19]}…",
        chain=[ChainLink(step=link.step, digest=link.digest, replayed=link.step in replayed, digest_ok=True) for link in links],
        checks=checks, replayed_steps=sum(parts[i].end - parts[i].start for i in chosen), total_steps=links[-1].step,
    )
    a.timings.rebuild_s = round(wall - hosted, 3)  # replay processes' time (summed over workers)
    a.log_tail = last.log_tail if last else ""
    return [last] if last is not None else []


def audit_segments(
    model_ref: str,
    *,
    segments: int | None = None,
    budget: float | None = None,
    runner: str = "process",
    date: str | None = None,
    audit_run: str | None = None,
    workers: int = 1,
    settings: Settings | None = None,
    progress: Progress = _quiet,
) -> AuditResult:
    """Audit a version by replaying some segments of its checkpoint chain instead of all of training.

    ``segments`` segments (default 2), or a ``budget`` fraction of them, chosen seeded by ``date`` and
    always including the last; each starts from its stored checkpoint and must end in the next one
    (bit for bit where the recipe is deterministic, within the same-seed floor otherwise); ``workers``
    replay that many segments at once (they are independent). The last
    one's weights and metrics are judged like a full rebuild's. Publishing nothing (``publish_segments``
    publishes). A bad ref, or a version whose record lists no checkpoint chain, raises ``BadInput``.
    """
    settings = settings or get_settings()
    registry, info, step = _segment_step(model_ref, segments, budget, runner, date, settings, workers)
    return _audit_version(registry, info, runner=runner, reruns=1, date=date, audit_run=audit_run, settings=settings, progress=progress,
                          rebuild_step=step)


def publish_segments(model_ref: str, *, date: str, audit_run: str, segments: int | None = None, budget: float | None = None,
                     runner: str = "process", settings: Settings | None = None, progress: Progress = _quiet) -> Published:
    """``audit_segments`` published as that day's audit of the version (the same report, ledger entry and tags as ``publish_audit``)."""
    settings = settings or get_settings()
    registry, info, step = _segment_step(model_ref, segments, budget, runner, date, settings, publishing=True)
    return _publish_version(registry, info, date=date, audit_run=audit_run, runner=runner, reruns=1, settings=settings,
                            progress=progress, rebuild_step=step)


def _segment_step(model_ref: str, segments: int | None, budget: float | None, runner: str, date: str | None, settings: Settings, workers: int = 1,
                  *, publishing: bool = False):
    import functools

    from auditor import segments as seg

    make_runner(runner, settings)
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    preflight(registry, info, settings, publishing=publishing)
    record, _ = registry.load_record(info)
    if not seg.chain(record):
        raise BadInput(f"{info.ref} records no checkpoint chain, so it has no segments to replay",
                       hint="audit it with a full rebuild, or save checkpoints in training (auditor.checkpoint_every)")
    day = date or dt.datetime.now(dt.UTC).date().isoformat()
    seg.pick_segments(2, date=day, count=segments, budget=budget)  # a bad count or budget is the caller's error: now
    return registry, info, functools.partial(_replay_segments, count=segments, budget=budget, date=day, workers=workers)


# -- pre-flight: what would fail after the rebuild, checked before it ----------------------------
def _redacted(uri: str) -> str:
    from auditor.lineage.redact import redact_text

    return redact_text(uri)


def preflight_store(settings: Settings) -> None:
    """The report store opens, is reachable and (when required) locked; a local one is a folder, not a file."""
    from auditor.report.index import INDEX_FILE
    from auditor.report.ledger import LEDGER_FILE
    from auditor.report.lock import require_object_lock
    from auditor.storage import open_store

    store = open_store(settings.reports)
    local = store.local_path(INDEX_FILE)
    if local is not None and local.parent.exists() and not local.parent.is_dir():
        raise BadInput(f"the report store {local.parent} is a file, not a folder", hint=f"set {REPORTS.name} to a folder or s3://bucket/prefix")
    if settings.require_object_lock:
        require_object_lock(store, settings.lock_retention_days)
    store.exists(LEDGER_FILE)  # reachable: an outage or a refused credential fails here, not after the rebuild


def preflight(registry, info, settings: Settings, *, publishing: bool) -> None:
    """Before any rebuild: the version's bands and calibration parse, and the report store is usable.

    A malformed band is the caller's to fix (``MalformedRecord``, exit 2), said now rather than as an
    ERROR verdict after an hour of rebuilding.
    """
    from auditor.judge.floors import calibration_from_json
    from auditor.judge.tolerance import bands_from_json
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    log.info("pre-flight %s: bands%s", info.ref, " and the report store" if publishing else "")
    bands_text = registry.get_bands(info)
    if bands_text:
        bands_from_json(bands_text, source=f"{info.ref} tag {TAG_BANDS}")
    calibration_text = info.tags.get(TAG_CALIBRATION)
    if calibration_text:
        calibration_from_json(calibration_text, source=f"{info.ref} tag {TAG_CALIBRATION}")
    if publishing:
        preflight_store(settings)


# -- publish and the nightly sequence -------------------------------------------------------
def _publish_keeping_verdict(publish, result: AuditResult, settings: Settings):
    """``publish(result)``; a failure carries the result (``exc.audit_result``), so the CLI still prints the verdict."""
    try:
        return publish(result, settings.reports, settings=settings)
    except Exception as exc:
        with contextlib.suppress(AttributeError):
            exc.audit_result = result
        raise


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
                     rebuild_step: Callable[[_Audit], list[RunResult]] | None = None,
                     publish_error: bool = True) -> Published:
    from auditor.report.evidence import audit_of
    from auditor.report.publish import publish

    stored = _published_evidence(info, date, settings)
    skipped = stored is not None
    if skipped:
        result = audit_of(stored)
    else:
        result = _audit_version(registry, info, runner=runner, reruns=reruns, date=date, audit_run=audit_run, settings=settings, progress=progress,
                                rebuild_step=rebuild_step)
        if result.verdict is Verdict.ERROR and not publish_error:  # an orchestrator retry audits it afresh
            raise InfrastructureError(f"{info.ref}: verdict ERROR, not published yet: {result.error}",
                                      hint="retried; the last try publishes the ERROR verdict")
    progress("publishing the report")
    log.info("publish %s: %s to %s", info.ref, result.verdict.value, settings.reports)
    publication = _publish_keeping_verdict(publish, result, settings)  # completes a half-done publish
    report_uri = f"{publication.location.rstrip('/')}/{publication.report_key}"
    progress("anchoring the ledger in MLflow")
    run_id = _log_audit_run(registry, info, result, publication, settings)
    if info.tags.get(TAG_AUDIT_DATE) != date or info.tags.get(TAG_REPORT) != report_uri or info.tags.get(TAG_AUDIT_RUN) != run_id:
        registry.write_outcome(info, result.verdict.value, result.finished_at or _now(), report_uri)
        tags = {TAG_AUDIT_DATE: date, TAG_AUDIT_RUN: run_id}
        previous = info.tags.get(TAG_AUDIT_DATE)
        if previous and previous != date:
            tags[TAG_AUDIT_PREVIOUS_DATE] = previous
        registry.set_tags(info, tags)
    log.info("publish %s: %s", info.ref, report_uri)
    row = {"ref": info.ref, "verdict": result.verdict.value, "report": report_uri, "error": result.error, "skipped": skipped}
    return Published(result=result, row=row)


def _log_audit_run(registry, info, result: AuditResult, publication, settings: Settings) -> str:
    """Log the audit as a run of the audits experiment, once per audit; its params anchor the ledger head.

    MLflow refuses to change a param once logged, so the head written here (sequence number
    and entry hash, for this reports location) is what ``evidence verify`` holds the ledger to:
    a rewritten, re-chained or rolled-back ledger no longer matches it.
    """
    from auditor import tags as t
    from auditor.storage import open_store

    entry = publication.entry or {}
    params = {
        t.PARAM_LEDGER_LOCATION: open_store(settings.reports).identity,
        t.PARAM_LEDGER_SEQ: str(publication.seq),
        t.PARAM_LEDGER_HEAD: publication.entry_hash,
        t.PARAM_EVIDENCE_SHA256: (entry.get("evidence") or {}).get("sha256", ""),
        t.PARAM_RECORD_DIGEST: result.record_digest or "",
    }
    if entry.get("attestation"):
        params[t.PARAM_ATTESTATION_SHA256] = entry["attestation"]["sha256"]
    if publication.entry_version_id:
        params[t.PARAM_LEDGER_ENTRY_VERSION] = publication.entry_version_id
    run_tags = {
        t.TAG_RUN_KIND: "audit",
        t.TAG_RUN_MODEL: info.name,
        t.TAG_RUN_MODEL_VERSION: str(info.version),
        t.TAG_VERDICT: result.verdict.value,
        t.MLFLOW_SOURCE_NAME: t.AUDIT_RUN_SOURCE,
        t.MLFLOW_SOURCE_TYPE: "JOB",
        **{f"{t.TAG_RUN_TIER_PREFIX}{name}": tier.status for name, tier in result.tiers.items()},
    }
    metrics = {}
    for m in result.metrics:
        values = [v for v in m.rebuilt if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
        if values:
            metrics[f"rebuilt.{m.name}"] = float(values[0])
    return registry.log_run(
        experiment=settings.audit_experiment, identity=publication.stem, name=f"audit {info.name} v{info.version} {result.audit_id}",
        params=params, tags=run_tags, metrics=metrics, artifacts=publication.files or {},
    )


def ledger_anchors(location: str, settings: Settings | None = None) -> list[Any]:
    """The ledger heads the audits experiment anchors for ``location`` (``evidence verify`` compares them)."""
    from auditor.report.verify import Anchor
    from auditor.storage import open_store
    from auditor.tags import PARAM_LEDGER_ENTRY_VERSION, PARAM_LEDGER_HEAD, PARAM_LEDGER_LOCATION, PARAM_LEDGER_SEQ

    settings = settings or get_settings()
    uri = open_store(location).identity
    anchors = []
    for run in _registry(settings).find_runs(experiment=settings.audit_experiment, params={PARAM_LEDGER_LOCATION: uri}):
        seq, head = run.params.get(PARAM_LEDGER_SEQ), run.params.get(PARAM_LEDGER_HEAD)
        if seq is not None and seq.isdigit() and head:
            state = " (deleted)" if run.deleted else ""
            anchors.append(Anchor(seq=int(seq), head=head, where=f"MLflow run {run.run_id}{state} of {settings.audit_experiment!r}",
                                  entry_version=run.params.get(PARAM_LEDGER_ENTRY_VERSION)))
    return anchors


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
    make_runner(runner, settings)
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    preflight(registry, info, settings, publishing=True)
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
    preflight_store(settings)
    chosen = sample(date, settings=settings)
    if not chosen["picks"] and not chosen["skipped"]:
        from auditor.errors import Findings

        raise Findings(f"the registry at {_redacted(settings.tracking_uri)} has no registered model versions: nothing to audit",
                       hint="check MLFLOW_TRACKING_URI (or --tracking-uri), or register a model first")
    log.info("nightly %s: %d pick(s), %d skipped", date, len(chosen["picks"]), len(chosen["skipped"]))
    results = []
    for pick in chosen["picks"]:
        progress(f"auditing {pick['ref']} ({pick['reason']})")
        results.append(audit_and_publish(pick["ref"], date=date, audit_run=audit_run or f"cli-nightly-{date}", settings=settings, progress=progress))
    return publish_summary(date, chosen, results, settings=settings)
