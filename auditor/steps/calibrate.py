"""``calibrate``: both noise floors measured by rerunning, stored with the version as evidence.

``same_seed`` reruns under the recorded seed measure execution noise (is the recipe bit-identical here,
and if not how far apart its weights land); ``reruns`` seed-varied reruns measure each metric's band.
The calibration is stored as a run of the audits experiment (its artifact's sha256 a param MLflow does
not let anyone change); the version's tags copy it, and an audit judges the run's evidence, never the tag.
"""

from __future__ import annotations

import itertools
import json
import logging
import shutil
from typing import Any

from auditor.digests import sha256_digest
from auditor.errors import BadInput
from auditor.judge.result import Band
from auditor.lineage.findings import Finding
from auditor.rebuild.run import RunResult, run_recipe
from auditor.steps.common import Progress, now, require_complete_lineage

log = logging.getLogger(__name__)


class Bands(dict):
    """``calibrate``'s answer: one band per metric, and the calibration they came from (its findings)."""

    calibration: Any = None  # judge.floors.Calibration


def calibration_seeds(seed: int, reruns: int) -> list[int]:
    """The seeds of a calibration's reruns: derived from the recorded one, never equal to it."""
    from auditor.seeds import derive_seed

    return [derive_seed(seed, f"calibration-{i}") % 2**31 for i in range(reruns)]


def _check_counts(reruns: int, same_seed: int) -> None:
    from auditor.judge.floors import MIN_SAME_SEED, MIN_SEED_VARIED

    if reruns < MIN_SEED_VARIED:
        raise BadInput(f"calibration needs at least {MIN_SEED_VARIED} seed-varied reruns for a usable band, got {reruns}",
                       hint="pass --reruns 5 (3 or 4 give a band the report flags as weak)")
    if same_seed < MIN_SAME_SEED:
        raise BadInput(f"calibration needs at least {MIN_SAME_SEED} same-seed reruns to measure execution noise, got {same_seed}",
                       hint="pass --same-seed 2 or more")


def _refuse_weaker(registry: Any, info: Any, reruns: int, replace: bool) -> None:
    """Bands made from more reruns are never replaced by ones made from fewer unless ``replace``."""
    from auditor.judge.tolerance import bands_from_json
    from auditor.tags import TAG_BANDS

    existing = registry.get_bands(info)
    if not existing or replace:
        return
    stored = bands_from_json(existing, source=f"{info.ref} tag {TAG_BANDS}")
    most = max((len(b.runs) for b in stored.values()), default=0)
    if most > reruns:
        raise BadInput(f"{info.ref} has bands calibrated from {most} reruns; {reruns} would replace them with weaker ones",
                       hint=f"pass --reruns {most} or more, or --replace to replace them anyway")


def same_seed_floor(record: Any, runs: list[RunResult]) -> Any:
    """The same-seed floor from reruns under the recorded seed (their models compared pairwise, each by its
    flavour's normalised comparison: a tree model's reruns are bit-identical when their normal forms are)."""
    from auditor.judge.floors import FloorRun, floor_from_reruns, platform_fingerprint
    from auditor.judge.models import model_diff

    pairs = [model_diff(a.weights, b.weights, a.flavor)[0] for a, b in itertools.combinations(runs, 2) if a.weights and b.weights]
    own = next((r.record for r in runs if r.record is not None), None)
    platform = platform_fingerprint(own.environment if own else None)
    seed = record.seeds.seed if record.seeds else None
    return floor_from_reruns([FloorRun(seed=seed, weights_sha256=model_digest(r), metrics=r.metrics) for r in runs], pairs, platform)


def model_digest(run: RunResult) -> str | None:
    """What tells two reruns' models apart: the normalised model's sha256 (PyTorch: the weights file's)."""
    return run.canonical_sha256 or run.weights_sha256


def _rerun(session: Any, info: Any, record: Any, diff: str | None, run_with: Any, counts: tuple[int, int],
           progress: Progress) -> tuple[Any, list[int], list[RunResult]]:
    """The same-seed reruns (their floor, measured before the scratch folder goes), then the seed-varied
    ones with their seeds, in one scratch workspace."""
    same_seed, reruns = counts
    tmp = session.scratch("calibrate-")
    timeout = session.settings.rebuild_timeout_s
    try:
        progress("preparing the workspace")
        log.info("calibrate %s: preparing the workspace", info.ref)
        workspace = session.prepare(record, diff, tmp / "workspace")
        same = []
        for i in range(same_seed):
            progress(f"same-seed rerun {i + 1}/{same_seed} (seed {record.seeds.seed})")
            log.info("calibrate %s: same-seed rerun %d/%d (seed %s)", info.ref, i + 1, same_seed, record.seeds.seed)
            same.append(run_recipe(record, workspace, run_with, tmp / f"same-{i}", timeout_s=timeout))
        floor = same_seed_floor(record, same)
        seeds = calibration_seeds(record.seeds.seed, reruns)
        varied = []
        for i, seed in enumerate(seeds):
            progress(f"seed-varied rerun {i + 1}/{reruns} (seed {seed})")
            log.info("calibrate %s: seed-varied rerun %d/%d (seed %s)", info.ref, i + 1, reruns, seed)
            varied.append(run_recipe(record, workspace, run_with, tmp / f"rerun-{i}", timeout_s=timeout, seed=seed))
        return floor, seeds, varied
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def calibrate(session: Any, model_ref: str, *, reruns: int, same_seed: int, runner: str | None, replace: bool,
              progress: Progress) -> Bands:
    """Measure both noise floors and store them with the version; returns the bands.

    A metric no seed moves gets no band (a finding).
    """
    from auditor.judge.calibrate import bands_from_reruns
    from auditor.judge.floors import Calibration, FloorRun
    from auditor.judge.tolerance import bands_to_json
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    _check_counts(reruns, same_seed)
    run_with = session.runner(runner)
    registry = session.registry
    info = registry.resolve(model_ref)
    record, diff = registry.load_record(info)
    require_complete_lineage(info.ref, record, diff)
    if record.seeds is None or record.seeds.seed is None:
        raise BadInput(f"{info.ref} records no base seed to vary")
    _refuse_weaker(registry, info, reruns, replace)
    floor, seeds, varied = _rerun(session, info, record, diff, run_with, (same_seed, reruns), progress)
    metrics = {f"rerun-{i + 1}-seed-{seed}": run.metrics for i, (seed, run) in enumerate(zip(seeds, varied, strict=True))}
    names = sorted({n for m in metrics.values() for n in m})
    zero = [n for n in names if len({json.dumps(m.get(n)) for m in metrics.values()}) == 1]
    hashes = {model_digest(run) for run in varied}
    calibration = Calibration(
        calibrated_at=now(),
        same_seed=floor,
        seed_varied=[FloorRun(seed=s, weights_sha256=model_digest(r), metrics=r.metrics) for s, r in zip(seeds, varied, strict=True)],
        zero_spread=zero,
        seed_ignored=len(hashes) == 1 and None not in hashes,
    )
    banded = {run_id: {k: v for k, v in m.items() if k not in zero} for run_id, m in metrics.items()}
    computed = bands_from_reruns(banded, registered=record.outputs.metrics, calibrated_at=calibration.calibrated_at)
    evidence = log_calibration_run(session, info, calibration)
    bands = Bands({name: band.model_copy(update={"evidence": evidence}) for name, band in computed.items()})
    bands.calibration = calibration
    registry.set_tags(info, {TAG_BANDS: bands_to_json(bands), TAG_CALIBRATION: calibration.to_json()})
    log.info("calibrate %s: stored %d band(s)", info.ref, len(bands))
    return bands


def log_calibration_run(session: Any, info: Any, calibration: Any) -> dict[str, str]:
    """Store a calibration's evidence as a run of the audits experiment; returns what its bands name.

    The artifact holds every rerun's seed, weight digest and metrics and the same-seed floor; its
    sha256 is a param of the run, which MLflow does not let anyone change. Each calibration adds a
    run, so a version's calibrations keep their history.
    """
    from auditor import tags as t
    data = calibration.to_json().encode("utf-8")
    sha = sha256_digest(data)
    run_id = session.registry.log_run(
        experiment=session.settings.audit_experiment, identity=f"calibration {info.ref} {sha}",
        name=f"calibration {info.name} v{info.version} {calibration.calibrated_at}",
        params={t.PARAM_CALIBRATION_SHA256: sha, t.PARAM_CALIBRATION_RERUNS: str(len(calibration.seed_varied)),
                t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)},
        tags={t.TAG_RUN_KIND: "calibration", t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version),
              t.MLFLOW_SOURCE_NAME: t.AUDIT_RUN_SOURCE, t.MLFLOW_SOURCE_TYPE: "JOB"},
        metrics={}, artifacts={t.CALIBRATION_ARTIFACT: data},
    )
    return {"run_id": run_id, "sha256": sha, "artifact": t.CALIBRATION_ARTIFACT}


def stored_calibrations(session: Any, info: Any, findings: list[Finding]) -> tuple[Any, dict[str, str] | None, list[dict[str, Any]]]:
    """The version's newest calibration as its run stored it (checked against the run's sha256 param).

    Returns (calibration, the evidence its bands must name, every calibration run for the report's
    history). A calibration run whose artifact no longer matches its param is refused with a finding
    appended to ``findings``: the evidence was altered.
    """
    from auditor import tags as t
    from auditor.judge.floors import calibration_from_json

    runs = session.registry.find_runs(experiment=session.settings.audit_experiment,
                                      params={t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)})
    history: list[dict[str, Any]] = []
    newest: tuple[Any, dict[str, str] | None] = (None, None)
    for run in runs:
        sha = run.params.get(t.PARAM_CALIBRATION_SHA256)
        if not sha:
            continue
        data = session.registry.read_run_file(run.run_id, t.CALIBRATION_ARTIFACT)
        entry = {"run_id": run.run_id, "sha256": sha, "reruns": run.params.get(t.PARAM_CALIBRATION_RERUNS), "deleted": run.deleted}
        if data is None or sha256_digest(data) != sha:
            findings.append(Finding(
                code="calibration.altered", path="bands", severity="warning",
                message=f"calibration run {run.run_id}: its artifact {t.CALIBRATION_ARTIFACT} no longer matches its sha256 param {sha}; its bands are refused",
                hint="re-run `repro-audit calibrate`"))
            history.append({**entry, "valid": False})
            continue
        calibration = calibration_from_json(data, source=f"calibration run {run.run_id}")
        history.append({**entry, "calibrated_at": calibration.calibrated_at, "valid": True})
        newest = (calibration, {"run_id": run.run_id, "sha256": sha, "artifact": t.CALIBRATION_ARTIFACT})
    if newest[1] is not None:
        for item in history:
            item["judged"] = item["run_id"] == newest[1]["run_id"]
    return newest[0], newest[1], history


__all__ = ["Band", "Bands", "calibrate", "calibration_seeds", "log_calibration_run", "model_digest", "same_seed_floor",
           "stored_calibrations"]
