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
import time
from pathlib import Path
from typing import Any

from auditor.digests import sha256_digest
from auditor.errors import BadInput, Findings
from auditor.judge.result import Band
from auditor.lineage.findings import Finding
from auditor.rebuild.run import RunResult, run_recipe
from auditor.steps import noise_claims
from auditor.steps.common import Progress, in_parallel, now, require_complete_lineage, resolving

log = logging.getLogger(__name__)


class Bands(dict):
    """``calibrate``'s answer: one band per metric, and the calibration they came from (its findings)."""

    calibration: Any = None  # judge.floors.Calibration


def calibration_seeds(seed: int, reruns: int) -> list[int]:
    """The seeds of a calibration's reruns: derived from the recorded one, never equal to it."""
    from auditor.seeds import derive_seed

    return [derive_seed(seed, f"calibration-{i}") % 2**31 for i in range(reruns)]


def check_counts(reruns: int, same_seed: int) -> None:
    from auditor.judge.floors import MIN_SAME_SEED, MIN_SEED_VARIED

    if reruns < MIN_SEED_VARIED:
        raise BadInput(f"calibration needs at least {MIN_SEED_VARIED} seed-varied reruns for a usable band, got {reruns}",
                       hint="pass --reruns 5 (3 or 4 give a band the report flags as weak)")
    if same_seed < MIN_SAME_SEED:
        raise BadInput(f"calibration needs at least {MIN_SAME_SEED} same-seed reruns to measure execution noise, got {same_seed}",
                       hint="pass --same-seed 2 or more")


def refuse_weaker(registry: Any, info: Any, reruns: int, replace: bool) -> None:
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
    floor = floor_from_reruns([FloorRun(seed=seed, weights_sha256=model_digest(r), metrics=r.metrics) for r in runs], pairs, platform)
    return floor.model_copy(update={"expected": measured_tier(runs)})


def measured_tier(runs: list[RunResult]) -> str | None:
    """The strongest tier the reruns' own records expect (``auditor.judge.expected``): their spread is explained only
    where every one of them gives the reason (None: no rerun left a record)."""
    from auditor.judge.expected import TIER_RANK, expected_tier

    tiers = [expected_tier(r.record).tier for r in runs if r.record is not None]
    return min(tiers, key=TIER_RANK.__getitem__) if tiers else None


def check_recipe(session: Any, info: Any, record: Any, same: list[RunResult], floor: Any, tmp: Any) -> None:
    """Stop calibration (``Findings``: nothing is stored) when the same-seed reruns are not execution noise of the
    recipe that trained the model: their models consumed other data, or their weights or metrics are not the
    registered run's (``auditor.judge.recipe``). Each line names the batch, weights, metric or input at fault."""
    from auditor.errors import ReproError
    from auditor.judge.models import model_diff
    from auditor.judge.recipe import hint_for, recipe_problems
    from auditor.lineage.traced import compare as compare_traced

    registered, sha256 = _registered_model(session, info, record, tmp) or (None, None)
    diffs = []
    for run in same:
        try:  # the registered file compared only as the bytes found to be the recorded ones (judge.models.model_diff)
            diffs.append(model_diff(registered, run.weights, run.flavor, registered_sha256=sha256)[0]
                         if registered and run.weights else None)
        except ReproError as exc:  # an unreadable model: the audit's own comparison names it
            log.warning("calibrate %s: could not compare a rerun's model with the registered one: %s", info.ref, exc)
            diffs.append(None)
    traced: list[str] = []
    for run in same:
        for finding in compare_traced(record, run.record) if run.record is not None else []:
            line = f"the reruns read other inputs than training did: {finding.message}"
            if finding.blocking and line not in traced:
                traced.append(line)
    problems = recipe_problems(record, [r.record for r in same], [r.metrics for r in same], floor, diffs, traced=traced)
    if problems:
        lines = "\n".join(f"  - {line}" for line in problems)
        raise Findings(f"calibration of {info.ref} stopped and stored no band: its same-seed reruns are not execution noise "
                       f"of the recipe that trained the model:\n{lines}", hint=hint_for(problems))


def _registered_model(session: Any, info: Any, record: Any, tmp: Any) -> tuple[Path, str] | None:
    """The registered model file, downloaded and checked against the record's sha256, and that sha256 (None: not
    available; the audit's artifact recovery names why)."""
    from auditor.contract import model_file
    from auditor.digests import same
    from auditor.errors import InfrastructureError, ReproError
    from auditor.judge.weights import sha256_file
    from auditor.tags import WEIGHTS_ARTIFACT
    from auditor.uris import run_artifact_path

    artifact = record.outputs.model()
    if artifact is None:
        return None
    try:
        path = session.registry.download_artifact(info, run_artifact_path(artifact.uri) or WEIGHTS_ARTIFACT,
                                                  tmp / f"registered-{model_file(artifact.flavor)}")
    except InfrastructureError:
        raise
    except ReproError as exc:
        log.warning("calibrate %s: the registered model could not be downloaded (%s): not compared with the reruns", info.ref, exc)
        return None
    actual = sha256_file(path)
    return (path, actual) if same(actual, artifact.sha256) else None


def model_digest(run: RunResult) -> str | None:
    """What tells two reruns' models apart: the normalised model's sha256 (PyTorch: the weights file's)."""
    return run.canonical_sha256 or run.weights_sha256


def judge_same_seed(session: Any, info: Any, record: Any, same: list[RunResult], workspace: Any, run_with: Any, tmp: Any,
                    progress: Progress) -> Any:
    """The same-seed floor, once the reruns are execution noise of the recipe (``check_recipe``, else ``Findings``)
    and any noise source the record claims is verified (``noise_claims``: it widens nothing until then). Called
    before the seed-varied reruns, so nothing is paid for a refusal; ``workspace()`` is prepared only when a claim
    needs its deterministic reruns."""
    floor = same_seed_floor(record, same)
    check_recipe(session, info, record, same, floor, tmp)
    if noise_claims.needs_verifying(record, floor):
        floor = floor.model_copy(update={"noise_verified": noise_claims.verify(
            info.ref, record, workspace(), run_with, tmp, timeout_s=session.settings.rebuild_timeout_s, progress=progress,
            digest=model_digest)})
    return floor


def _rerun(session: Any, info: Any, record: Any, diff: str | None, run_with: Any, counts: tuple[int, int],
           progress: Progress) -> tuple[Any, list[int], list[RunResult], list[Any], dict[str, Any]]:
    """The same-seed reruns (their floor, measured before the scratch folder goes), then the seed-varied
    ones with their seeds, in one scratch workspace; with each seed-varied rerun's decisions and the cost
    (``auditor.steps.reruns``)."""
    from auditor.steps.reruns import children_cpu_s, cost, rerun_decisions

    same_seed, reruns = counts
    tmp = session.scratch("calibrate-")
    cpu_before = children_cpu_s()
    timeout = session.settings.rebuild_timeout_s
    try:
        progress("preparing the workspace")
        log.info("calibrate %s: preparing the workspace", info.ref)
        workspace = session.prepare(record, diff, tmp / "workspace")
        workers = session.settings.rerun_workers
        started = time.monotonic()

        def same_run(i: int) -> RunResult:
            progress(f"same-seed rerun {i + 1}/{same_seed} (seed {record.seeds.seed})")
            log.info("calibrate %s: same-seed rerun %d/%d (seed %s)", info.ref, i + 1, same_seed, record.seeds.seed)
            return run_recipe(record, workspace, run_with, tmp / f"same-{i}", timeout_s=timeout, fresh=True)

        same = in_parallel(same_run, range(same_seed), workers)
        floor = judge_same_seed(session, info, record, same, lambda: workspace, run_with, tmp, progress)
        seeds = calibration_seeds(record.seeds.seed, reruns)

        def varied_run(item: tuple[int, int]) -> RunResult:
            i, seed = item
            progress(f"seed-varied rerun {i + 1}/{reruns} (seed {seed})")
            log.info("calibrate %s: seed-varied rerun %d/%d (seed %s)", info.ref, i + 1, reruns, seed)
            return run_recipe(record, workspace, run_with, tmp / f"rerun-{i}", timeout_s=timeout, seed=seed)

        varied = in_parallel(varied_run, list(enumerate(seeds)), workers)
        elapsed = time.monotonic() - started
        decided = [rerun_decisions(run) for run in varied]  # read before the scratch folder goes
        spent = cost([*same, *varied], cpu_before, runner=getattr(run_with, "name", None))
        return floor, seeds, varied, decided, {**spent, "workers": workers, "elapsed_s": round(elapsed, 3)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def calibrate(session: Any, model_ref: str, *, reruns: int, same_seed: int, runner: str | None, replace: bool,
              progress: Progress) -> Bands:
    """Measure both noise floors and store them with the version; returns the bands (the CLI's path: every rerun in
    this process; ``auditor.steps.mapped`` spreads the same reruns over workers and ends in the same ``finish``).

    A metric no seed moves gets no band (a finding).
    """
    check_counts(reruns, same_seed)  # before the runner, as before: a count is the commonest slip
    run_with = session.runner(runner)
    info, record, diff = begin(session, model_ref, reruns=reruns, same_seed=same_seed, replace=replace, progress=progress)
    floor, seeds, varied, decided, spent = _rerun(session, info, record, diff, run_with, (same_seed, reruns), progress)
    return finish(session, info, record, floor, list(zip(seeds, varied, decided, strict=True)), spent)


def begin(session: Any, model_ref: str, *, reruns: int, same_seed: int, replace: bool, progress: Progress) -> tuple[Any, Any, Any]:
    """Before any rerun: the counts are usable, the version resolved (pinned), its lineage complete, a base seed
    recorded, and no stronger calibration would be replaced. Returns (info, record, diff)."""
    check_counts(reruns, same_seed)
    info = resolving(session, model_ref, progress)
    record, diff = session.registry.load_record(info)
    require_complete_lineage(info.ref, record, diff)
    if record.seeds is None or record.seeds.seed is None:
        raise BadInput(f"{info.ref} records no base seed to vary")
    refuse_weaker(session.registry, info, reruns, replace)
    return info, record, diff


def finish(session: Any, info: Any, record: Any, floor: Any, varied: list[tuple[int, RunResult, Any]],
           spent: dict[str, Any]) -> Bands:
    """From the same-seed floor and the seed-varied reruns (seed, run, packed decisions), in seed order: the
    calibration and its bands, stored with the version as evidence (``log_calibration_run``) and as its tags."""
    from auditor.judge.calibrate import bands_from_reruns, direction_of
    from auditor.judge.expected import expected_tier
    from auditor.judge.floors import Calibration, FloorRun
    from auditor.judge.tolerance import bands_to_json
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    metrics = {f"rerun-{i + 1}-seed-{seed}": run.metrics for i, (seed, run, _) in enumerate(varied)}
    names = sorted({n for m in metrics.values() for n in m})
    zero = [n for n in names if len({json.dumps(m.get(n)) for m in metrics.values()}) == 1]
    hashes = {model_digest(run) for _, run, _ in varied}
    declared = dict(session.settings.metric_directions)
    calibration = Calibration(
        calibrated_at=now(),
        same_seed=floor,
        seed_varied=[FloorRun(seed=s, weights_sha256=model_digest(r), metrics=r.metrics, decisions=d) for s, r, d in varied],
        cost=spent,
        zero_spread=zero,
        seed_ignored=len(hashes) == 1 and None not in hashes,
        deterministic=bool(record.seeds.deterministic),
        expected=expected_tier(record).tier,
        directions={n: direction_of(n, declared) for n in names},
    )
    banded = {run_id: {k: v for k, v in m.items() if k not in zero} for run_id, m in metrics.items()}
    computed = bands_from_reruns(banded, directions=calibration.directions, registered=record.outputs.metrics,
                                 calibrated_at=calibration.calibrated_at)
    evidence = log_calibration_run(session, info, calibration)
    bands = Bands({name: band.model_copy(update={"evidence": evidence}) for name, band in computed.items()})
    bands.calibration = calibration
    session.registry.set_tags(info, {TAG_BANDS: bands_to_json(bands), TAG_CALIBRATION: calibration.to_json()})
    log.info("calibrate %s: stored %d band(s)", info.ref, len(bands))
    return bands


def log_calibration_run(session: Any, info: Any, calibration: Any) -> dict[str, str]:
    """Publish a calibration's evidence like an audit's, then log it as a run of the audits experiment; returns
    what its bands name.

    The evidence (every rerun's seed, weight digest and metrics and the same-seed floor) goes to the
    reports store, signed by the auditor's key where one is configured, with a ledger entry of its own
    (``auditor.report.calibrations``): the judge uses a calibration only when that entry and signature
    verify. The run holds the same file, its sha256 as a param, and the ledger head as its anchor.
    """
    from auditor import tags as t
    from auditor.report.calibrations import publish_calibration
    from auditor.steps.anchoring import log_calibration_anchor, repair_calibration_anchors

    repair_calibration_anchors(session, info)  # an earlier calibration that stopped before its run: anchored now
    data = calibration.to_json().encode("utf-8")
    sha = sha256_digest(data)
    if session.settings.require_object_lock:  # published like an audit: to a locked bucket only, when that is required
        from auditor.report.lock import require_object_lock

        require_object_lock(session.store, session.settings.lock_retention_days)
    published = publish_calibration(session.store, data, model=info.name, version=str(info.version), sha256=sha,
                                    calibrated_at=calibration.calibrated_at, key=session.signer)
    run_id = log_calibration_anchor(session, info, published.entry, published.entry_version_id, data)
    from auditor.report.publish import refresh

    refresh(session.store)
    return {"run_id": run_id, "sha256": sha, "artifact": t.CALIBRATION_ARTIFACT}


def judge_key(session: Any) -> Any:
    """The public key calibrations are held to: the session's signer's, else the configured public key (None: neither)."""
    from auditor.report.attest import configured_public_key

    signer = session.signer
    return signer.signer.public_key if signer is not None else configured_public_key(session.settings)


def stored_calibrations(session: Any, info: Any, findings: list[Finding]) -> tuple[Any, dict[str, str] | None, list[dict[str, Any]]]:
    """The version's newest calibration whose ledger entry (and, with a signing key, signature) verifies.

    Returns (calibration, the evidence its bands must name, every calibration for the report's history,
    each saying whether it was judged and why not). The ledger in the reports store decides which
    calibrations exist: an MLflow calibration run the ledger does not record (made by hand, with a
    consistent sha256 param) is refused, and so is a ledgered one whose file, entry or signature does not
    verify; each refusal is a finding naming the calibration. The editable tags never decide.
    """
    from auditor import tags as t
    from auditor.judge.floors import calibration_from_json
    from auditor.report.calibrations import ledgered_calibrations

    runs = session.registry.find_runs(experiment=session.settings.audit_experiment,
                                      params={t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)})
    ledgered, unreadable = ledgered_calibrations(session.store, info.name, str(info.version), judge_key(session))
    if unreadable:
        findings.append(_refusal("calibration.unverified", unreadable))
    history: list[dict[str, Any]] = []
    run_of = _ledgered_runs(session, runs, {c.sha256 for c in ledgered}, findings, history)
    newest: tuple[Any, dict[str, str] | None] = (None, None)
    for item in ledgered:
        run = run_of.get(item.sha256)
        entry = {"run_id": run.run_id if run is not None else None, "sha256": item.sha256, "deleted": bool(run and run.deleted),
                 "reruns": run.params.get(t.PARAM_CALIBRATION_RERUNS) if run is not None else None,
                 "ledger": f"ledger entry {item.seq}, signature {item.signature}" + (f" (key {item.keyid})" if item.keyid else "")}
        if item.problem:
            findings.append(_refusal("calibration.unverified", f"{item.describe()}: {item.problem}; refused"))
            history.append({**entry, "valid": False, "refused": "signature or ledger entry fails"})
            continue
        if run is None or run.deleted:
            findings.append(_refusal("calibration.run_missing", (
                f"{item.describe()}: its MLflow calibration run is {'deleted' if run else 'gone (purged or never logged)'}; "
                "the ledger's signed copy is judged")))
        calibration = calibration_from_json(item.data, source=item.describe())
        history.append({**entry, "calibrated_at": calibration.calibrated_at, "valid": True})
        newest = (calibration, {"run_id": entry["run_id"] or f"ledger entry {item.seq}", "sha256": item.sha256,
                                "artifact": t.CALIBRATION_ARTIFACT, "ledger_seq": str(item.seq)})
    if newest[1] is not None:
        for item in history:
            item["judged"] = item.get("valid", False) and item["sha256"] == newest[1]["sha256"]
    return newest[0], newest[1], history


def _ledgered_runs(session: Any, runs: list[Any], in_ledger: set[str], findings: list[Finding],
                   history: list[dict[str, Any]]) -> dict[str, Any]:
    """The MLflow calibration runs by the sha256 of their evidence, those the ledger records and whose artifact still
    matches; each other one is a finding and a refused line of ``history``."""
    from auditor import tags as t

    run_of: dict[str, Any] = {}
    for run in runs:
        sha = run.params.get(t.PARAM_CALIBRATION_SHA256)
        if not sha:
            continue
        data = session.registry.read_run_file(run.run_id, t.CALIBRATION_ARTIFACT)
        entry = {"run_id": run.run_id, "sha256": sha, "reruns": run.params.get(t.PARAM_CALIBRATION_RERUNS), "deleted": run.deleted}
        if data is None or sha256_digest(data) != sha:
            findings.append(_refusal("calibration.altered", (
                f"calibration run {run.run_id}: its artifact {t.CALIBRATION_ARTIFACT} no longer matches its sha256 param {sha}; "
                "its bands are refused")))
            history.append({**entry, "valid": False, "refused": "altered"})
        elif sha not in in_ledger:
            findings.append(_refusal("calibration.unledgered", (
                f"calibration run {run.run_id} (evidence {sha}) is not recorded in the ledger at {session.store.uri}: "
                "no calibration of this product made it (it was logged by hand); refused")))
            history.append({**entry, "valid": False, "refused": "not in the ledger"})
        else:
            run_of.setdefault(sha, run)
    return run_of


def _refusal(code: str, message: str) -> Finding:
    return Finding(code=code, path="bands", severity="warning", message=message, hint="re-run `repro-audit calibrate`")


__all__ = ["Band", "Bands", "begin", "refuse_weaker", "calibrate", "calibration_seeds", "check_counts", "check_recipe", "finish", "judge_same_seed", "log_calibration_run", "model_digest", "same_seed_floor",
           "stored_calibrations"]
