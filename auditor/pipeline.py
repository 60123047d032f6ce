"""The step functions: sample, rebuild, calibrate, audit, publish. The only layer the CLI and the DAGs call.

Each step takes ids and URIs, returns plain data or one result object, and is
safe to repeat (Airflow runs tasks at least once): an audit is keyed on
(model version, audit id) and publishing it twice publishes it once.
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

from auditor.errors import (
    BadInput,
    InfrastructureError,
    InputUnrecoverable,
    LineageIncomplete,
    MalformedRecord,
    ReproError,
    RunFailed,
    SnapshotCorrupt,
)
from auditor.judge.result import AuditResult, Band, EnvDrift, ModelInfo, Timings, Verdict
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.settings import Settings, get_settings

Progress = Callable[[str], None]

WEIGHTS_FILE = "model.safetensors"
METRICS_FILE = "metrics.json"
EVALUATION_FILE = "evaluation.json"  # left by the SDK when the script evaluated the weights it was given
TAG_AUDIT_DATE = "repro.audit.date"
TAG_AUDIT_PREVIOUS_DATE = "repro.audit.previous_date"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _quiet(_: str) -> None:
    pass


def _registry(settings: Settings):
    from auditor.registry import open_registry

    return open_registry(settings.tracking_uri, settings.registry_uri)


def make_runner(name: str):
    """``process`` (a subprocess here) or ``docker`` (a locked-down container, image by digest)."""
    if name == "process":
        from auditor.rebuild.runners import ProcessRunner

        return ProcessRunner()
    if name == "docker":
        from auditor.rebuild.runners_docker import DockerRunner

        return DockerRunner()
    raise BadInput(f"runner {name!r} is not one of process, docker", hint="pass --runner process or --runner docker")


# -- one run of the recorded recipe ----------------------------------------------------
@dataclass
class RunResult:
    """What one run of the recorded entrypoint left behind."""

    output_dir: Path
    metrics: dict[str, Any]
    weights: Path | None
    weights_sha256: str | None
    record: RunRecord | None  # the rebuild's own record (its environment gives the drift)
    wall_s: float
    accelerator_s: float | None
    log_tail: str
    evaluated: bool = False


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


def rebuild_env(record: RunRecord, *, seed: int | None = None, evaluate: Path | None = None) -> dict[str, str]:
    """The entry-point contract's seed, determinism and thread pins for ``record`` (paths are the runner's)."""
    env: dict[str, str] = {}
    seeds = record.seeds
    if seeds is not None:
        chosen = seed if seed is not None else seeds.seed
        if chosen is not None:
            env["REPRO_SEED"] = str(chosen)
        env["REPRO_DETERMINISTIC"] = "0" if seeds.deterministic is False else "1"
        if seeds.pythonhashseed not in (None, "unset", "random"):
            env["PYTHONHASHSEED"] = seeds.pythonhashseed
        if seeds.flags.get("CUBLAS_WORKSPACE_CONFIG"):
            env["CUBLAS_WORKSPACE_CONFIG"] = str(seeds.flags["CUBLAS_WORKSPACE_CONFIG"])
    environment = record.environment
    if environment is not None:
        threads = environment.threads
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", "REPRO_TORCH_THREADS"):
            if threads.get(name):
                env[name] = str(threads[name])
        # the thread count changes the weights (FACTS.md): pin what training actually used
        if threads.get("torch_intra_op") and "REPRO_TORCH_THREADS" not in env:
            env["REPRO_TORCH_THREADS"] = str(threads["torch_intra_op"])
    if evaluate is not None:
        env["REPRO_EVALUATE_WEIGHTS"] = str(evaluate)
    return env


def _home(workspace) -> Path:
    """A HOME of the rebuild's own, so it never reads the auditor's ~/.aws, ~/.netrc or caches."""
    home = workspace.root / "home"
    home.mkdir(exist_ok=True)
    return home


def _run_once(record: RunRecord, workspace, runner, output_dir: Path, settings: Settings, *, seed: int | None = None, evaluate: Path | None = None) -> RunResult:
    from auditor.judge.weights import sha256_file
    from auditor.rebuild.runners import AcceleratorRequest, ImageRef, RunSpec

    output_dir.mkdir(parents=True, exist_ok=False)
    environment = record.environment
    spec = RunSpec(
        argv=list(record.code.entrypoint or []),
        cwd=workspace.project_dir,
        output_dir=output_dir,
        env={**rebuild_env(record, seed=seed, evaluate=evaluate), "HOME": str(_home(workspace))},
        data=workspace.data_dirs,
        config_file=workspace.config_path,
        timeout_s=settings.rebuild_timeout_s,
        image=ImageRef.from_environment(environment) if environment else None,
        accelerator=AcceleratorRequest.from_environment(environment) if environment else None,
        log_path=output_dir.with_name(output_dir.name + ".log"),
    )
    outcome = runner.run(spec)
    if not outcome.ok:
        why = "timed out" if outcome.timed_out else f"exited with code {outcome.exit_code}"
        error = RunFailed(f"the recorded entrypoint {' '.join(spec.argv)!r} {why} (the end of its log is in the report)")
        error.log_tail = outcome.log_tail
        raise error
    metrics_path = output_dir / METRICS_FILE
    try:
        metrics = json.loads(metrics_path.read_text())
    except (OSError, ValueError) as exc:
        error = InputUnrecoverable(f"the entrypoint succeeded but left no readable {METRICS_FILE} in {output_dir}: {exc}", hint="see the entry-point contract in the README")
        error.log_tail = outcome.log_tail
        raise error from None
    if not isinstance(metrics, dict):
        raise InputUnrecoverable(f"{metrics_path} holds {type(metrics).__name__}, not a JSON object of metrics")
    weights = output_dir / WEIGHTS_FILE
    own_record = None
    if (output_dir / "run_record.json").exists():
        try:
            own_record = RunRecord.from_json((output_dir / "run_record.json").read_bytes(), source=str(output_dir))
        except MalformedRecord:
            own_record = None
    return RunResult(
        output_dir=output_dir,
        metrics=metrics,
        weights=weights if weights.exists() else None,
        weights_sha256=sha256_file(weights) if weights.exists() else None,
        record=own_record,
        wall_s=outcome.wall_s,
        accelerator_s=outcome.accelerator_s,
        log_tail=outcome.log_tail,
        evaluated=(output_dir / EVALUATION_FILE).exists(),
    )


def _load(model_ref: str, settings: Settings):
    registry = _registry(settings)
    info = registry.resolve(model_ref)
    record, diff = registry.load_record(info)
    return registry, info, record, diff


def _gate(record: RunRecord, diff: str | None) -> list[Finding]:
    from auditor.lineage.gate import check

    return check(record, diff=diff)


def _prepare(record: RunRecord, diff: str | None, dest: Path, settings: Settings):
    from auditor.rebuild.workspace import prepare_workspace

    return prepare_workspace(record, diff, dest=dest, git_cache=settings.git_cache)


# -- rebuild ---------------------------------------------------------------------------
def rebuild(model_ref: str, *, runner: str = "process", out_dir: Path, settings: Settings | None = None, progress: Progress = _quiet) -> RebuildResult:
    """Rebuild a registered version from its five recorded inputs into ``out_dir`` (on-demand rebuild)."""
    from auditor.lineage.gate import blocking
    from auditor.rebuild.drift import environment_drift

    settings = settings or get_settings()
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise BadInput(f"output folder {out_dir} is not empty", hint="pass a new folder")
    progress(f"resolving {model_ref}")
    _, info, record, diff = _load(model_ref, settings)
    blockers = blocking(_gate(record, diff))
    if blockers:
        raise LineageIncomplete(blockers, subject=info.ref)
    progress("preparing the workspace (code at the recorded commit, verified data)")
    workspace = _prepare(record, diff, out_dir / "workspace", settings)
    progress(f"running {' '.join(record.code.entrypoint or [])}")
    run = _run_once(record, workspace, make_runner(runner), out_dir / "output", settings)
    drift = environment_drift(record.environment, run.record.environment) if run.record and run.record.environment and record.environment else None
    return RebuildResult(model_ref=info.ref, workspace=workspace.root, runs=[run], drift=drift)


# -- calibrate --------------------------------------------------------------------------
def calibration_seeds(seed: int, reruns: int) -> list[int]:
    """The seeds of a calibration's reruns: derived from the recorded one, never equal to it."""
    from auditor.seeds import derive_seed

    return [derive_seed(seed, f"calibration-{i}") % 2**31 for i in range(reruns)]


def calibrate(model_ref: str, *, reruns: int = 5, runner: str = "process", settings: Settings | None = None, progress: Progress = _quiet) -> dict[str, Band]:
    """Rerun the recorded recipe ``reruns`` times varying only the seeds; store and return one band per metric."""
    from auditor.judge.calibrate import bands_from_reruns
    from auditor.judge.tolerance import bands_to_json
    from auditor.lineage.gate import blocking

    settings = settings or get_settings()
    if reruns < 2:
        raise BadInput(f"calibration needs at least 2 reruns to measure a spread, got {reruns}")
    registry, info, record, diff = _load(model_ref, settings)
    blockers = blocking(_gate(record, diff))
    if blockers:
        raise LineageIncomplete(blockers, subject=info.ref)
    if record.seeds is None or record.seeds.seed is None:
        raise BadInput(f"{info.ref} records no base seed to vary")
    settings.work_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="calibrate-", dir=settings.work_dir))
    try:
        progress("preparing the workspace")
        workspace = _prepare(record, diff, tmp / "workspace", settings)
        run_with = make_runner(runner)
        results: dict[str, dict[str, Any]] = {}
        for i, seed in enumerate(calibration_seeds(record.seeds.seed, reruns)):
            progress(f"rerun {i + 1}/{reruns} (seed {seed})")
            run = _run_once(record, workspace, run_with, tmp / f"rerun-{i}", settings, seed=seed)
            results[f"rerun-{i + 1}-seed-{seed}"] = run.metrics
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bands = bands_from_reruns(results, registered=record.outputs.metrics, calibrated_at=_now())
    registry.set_bands(info, bands_to_json(bands))
    return bands


# -- audit -----------------------------------------------------------------------------
def _record_finding(exc: ReproError) -> Finding:
    finding = getattr(exc, "finding", None)
    if finding is not None:
        return finding
    return Finding(code="record.unreadable", path="record", severity="blocking", message=str(exc), hint="re-register the version with a valid run record")


def _registered_weights(registry, info, record: RunRecord, dest: Path) -> tuple[Path | None, str | None, str | None]:
    """Download the registered weights; returns (path, recorded sha256, why not)."""
    from auditor.registry.base import WEIGHTS_ARTIFACT

    artifact = next((a for a in record.outputs.artifacts if a.name.endswith(".safetensors") or a.name == "model"), None)
    if artifact is None:
        return None, None, "the record lists no weights artifact"
    # runs:/<run id>/<path in the run>, as the SDK records it
    path = artifact.uri[len("runs:/") :].split("/", 1)[1] if artifact.uri.startswith("runs:/") and artifact.uri.count("/") >= 2 else WEIGHTS_ARTIFACT
    try:
        return registry.download_artifact(info, path, dest), artifact.sha256, None
    except InfrastructureError:
        raise  # an outage is retryable: never a verdict on the model
    except ReproError as exc:
        return None, artifact.sha256, f"registered weights {path} could not be downloaded: {exc}"


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
    """Rebuild, judge and return everything a report needs. Model-level failures become verdicts, not exceptions."""
    from auditor.judge.tolerance import bands_from_json, check_metrics
    from auditor.judge.verdict import RecoveryCheck, judge
    from auditor.judge.weights import diff_safetensors, sha256_file
    from auditor.lineage.gate import blocking
    from auditor.rebuild.drift import environment_drift

    settings = settings or get_settings()
    run_with = make_runner(runner)  # an unknown runner is the caller's error, not a verdict on the model
    started, clock = _now(), time.monotonic()
    audit_id = date or started.replace(":", "").replace("-", "")
    registry = _registry(settings)
    info = registry.resolve(model_ref)  # a bad ref is the caller's error: raise
    model = ModelInfo(name=info.name, version=str(info.version), aliases=list(info.aliases), tags=dict(info.tags), run_id=info.run_id, uri=info.ref)
    result = dict(audit_id=audit_id, model=model, started_at=started, audit_run=audit_run or "cli", responsible_person=settings.responsible_person, runner=runner)
    findings: list[Finding] = []
    record: RunRecord | None = None
    recovery: RecoveryCheck | None = None
    metric_results, weight_diff, drift = [], None, None
    error = rebuild_error = None
    log_tail = ""
    timings = Timings()
    evidence: dict[str, str] = {}
    settings.work_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="audit-", dir=settings.work_dir))
    try:
        try:
            record, diff = registry.load_record(info)
        except (MalformedRecord, InfrastructureError) as exc:
            if isinstance(exc, InfrastructureError):
                raise
            findings = [_record_finding(exc)]
        except ReproError as exc:  # RecordMissing and friends
            findings = [_record_finding(exc)]
        if record is not None:
            findings = _gate(record, diff)
            evidence["record"] = record.digest()
            evidence.update({f"snapshot.{n}": r.version for n, r in record.data.items() if r.version})
            if record.environment and record.environment.image_digest:
                evidence["image"] = record.environment.image_digest
            progress("checking the registered artifact")
            weights, expected, why = _registered_weights(registry, info, record, tmp / "registered.safetensors")
            actual = sha256_file(weights) if weights else None
            if actual:
                evidence["weights.registered"] = actual
            recovery = RecoveryCheck(expected_sha256=expected, actual_sha256=actual, registered=dict(record.outputs.metrics), unrecoverable=[why] if why else [])
            if not blocking(findings):
                progress("preparing the workspace")
                workspace = _prepare(record, diff, tmp / "workspace", settings)
                if weights is not None:
                    progress("re-evaluating the registered weights")
                    check = _run_once(record, workspace, run_with, tmp / "evaluate", settings, evaluate=weights)
                    if check.evaluated:
                        recovery = recovery.model_copy(update={"evaluated": check.metrics})
                runs = []
                for i in range(max(1, reruns)):
                    progress(f"rebuild {i + 1}/{max(1, reruns)}")
                    runs.append(_run_once(record, workspace, run_with, tmp / f"rebuild-{i}", settings))
                log_tail = runs[-1].log_tail
                timings.rebuild_s = round(sum(r.wall_s for r in runs), 3)
                accel = [r.accelerator_s for r in runs if r.accelerator_s is not None]
                timings.accelerator_s = round(sum(accel), 3) if accel else None
                bands_text = registry.get_bands(info)
                bands = bands_from_json(bands_text, source=f"{info.ref} tag repro.bands") if bands_text else {}
                metric_results = check_metrics([r.metrics for r in runs], bands, registered=record.outputs.metrics)
                rebuilt = runs[0]
                if rebuilt.weights_sha256:
                    evidence["weights.rebuilt"] = rebuilt.weights_sha256
                if weights is not None and rebuilt.weights is not None:
                    weight_diff = diff_safetensors(weights, rebuilt.weights)
                    weight_diff = weight_diff.model_copy(update={"sha256_a": actual, "sha256_b": rebuilt.weights_sha256})
                elif rebuilt.weights is None:
                    rebuild_error = f"the rebuild left no {WEIGHTS_FILE}"
                if rebuilt.record and rebuilt.record.environment and record.environment:
                    drift = environment_drift(record.environment, rebuilt.record.environment)
    except (InputUnrecoverable, SnapshotCorrupt) as exc:
        rebuild_error = str(exc)
        log_tail = getattr(exc, "log_tail", "") or log_tail
    except (InfrastructureError, RunFailed) as exc:
        error = str(exc)
        log_tail = getattr(exc, "log_tail", "") or log_tail
    except MalformedRecord as exc:  # e.g. a malformed band: named, never a silent pass
        error = str(exc)
    except ReproError as exc:
        rebuild_error = str(exc)
    except Exception as exc:  # noqa: BLE001 - one model's crash must not take the night down
        error = f"unexpected {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    verdict, tiers = judge(findings=findings, recovery=recovery, metric_results=metric_results, weight_diff=weight_diff, error=error, rebuild_error=rebuild_error)
    timings.wall_s = round(time.monotonic() - clock, 3)
    return AuditResult(
        **result,
        verdict=verdict,
        tiers=tiers,
        finished_at=_now(),
        record=record.to_dict() if record else None,
        record_digest=record.digest() if record else None,
        findings=findings,
        metrics=metric_results,
        weight_diff=weight_diff,
        drift=drift,
        timings=timings,
        log_tail=log_tail,
        error=error or rebuild_error,
        evidence=evidence,
    )


# -- publish and the nightly sequence -------------------------------------------------------
def _published_evidence(info, date: str, settings: Settings) -> dict[str, Any] | None:
    """The stored evidence of this version's audit for ``date``, if its evidence was published."""
    from auditor.report.evidence import load_evidence, report_stem
    from auditor.storage import open_store

    stem = report_stem(info.name, str(info.version), date)
    store = open_store(settings.reports)
    if not store.exists(f"{stem}.json"):
        return None
    return load_evidence(store.read(f"{stem}.json"), source=f"{store.uri}/{stem}.json")


def audit_and_publish(
    model_ref: str,
    *,
    date: str,
    audit_run: str,
    runner: str | None = None,
    reruns: int = 1,
    settings: Settings | None = None,
    progress: Progress = _quiet,
) -> dict[str, Any]:
    """Audit one version for one logical date and publish its report, exactly once.

    Returns ``{"ref", "verdict", "report", "error", "skipped"}``. A model-level
    failure is a verdict (``ERROR`` or ``NOT_REPRODUCIBLE``), never an exception;
    an infrastructure failure (registry, reports store) raises, so that the task
    is retried. Every step is safe to repeat: once the evidence is stored, a
    retry finishes publishing *that* evidence (report, ledger, registry tags)
    instead of auditing again.
    """
    from auditor.report.evidence import audit_of
    from auditor.report.publish import publish

    settings = settings or get_settings()
    registry = _registry(settings)
    try:
        info = registry.resolve(model_ref)  # pin the version now: an alias may move while we work
    except InfrastructureError:
        raise
    except ReproError as exc:  # a version deleted since sampling, a malformed ref: this model's row says so
        return {"ref": model_ref, "verdict": Verdict.ERROR.value, "report": None, "error": str(exc), "skipped": False}
    stored = _published_evidence(info, date, settings)
    skipped = stored is not None
    if skipped:
        result = audit_of(stored)
    else:
        result = audit(info.ref, runner=runner or settings.runner, reruns=reruns, date=date, audit_run=audit_run, settings=settings, progress=progress)
    publication = publish(result, settings.reports, settings=settings)  # completes a half-done publish
    report_uri = f"{publication.location.rstrip('/')}/{publication.report_key}"
    if info.tags.get(TAG_AUDIT_DATE) != date or info.tags.get("repro.audit.report") != report_uri:
        registry.write_outcome(info, result.verdict.value, result.finished_at or _now(), report_uri)
        tags = {TAG_AUDIT_DATE: date}
        previous = info.tags.get(TAG_AUDIT_DATE)
        if previous and previous != date:
            tags[TAG_AUDIT_PREVIOUS_DATE] = previous
        registry.set_tags(info, tags)
    return {"ref": info.ref, "verdict": result.verdict.value, "report": report_uri, "error": result.error, "skipped": skipped}


def sample(date: str, *, settings: Settings | None = None) -> dict[str, Any]:
    """Tonight's sample from the registry under the configured budget (see ``auditor.sampling``)."""
    from auditor.sampling import Budget, Candidate, choose

    settings = settings or get_settings()
    candidates = []
    for info in _registry(settings).list_versions():
        candidate = Candidate.from_tags(info.name, str(info.version), info.aliases, dict(info.tags))
        if info.train_seconds and "repro.cost_hours" not in info.tags:
            candidate = Candidate(**{**candidate.__dict__, "cost_hours": info.train_seconds / 3600})
        candidates.append(candidate)
    budget = Budget(max_models=settings.nightly_max_models, max_hours=settings.nightly_budget_hours)
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
