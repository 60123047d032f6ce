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
from pathlib import Path
from typing import Any

from auditor.contract import model_file
from auditor.digests import same, spelled
from auditor.errors import (
    InfrastructureError,
    InputUnrecoverable,
    RecipeCrashed,
    ReproError,
)
from auditor.judge.result import AuditResult, ModelInfo, Verdict
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.rebuild.run import RunResult, crash_signature, forked_evaluation, run_recipe
from auditor.steps.audit_record import _Audit, _read_record
from auditor.steps.common import Progress, drift, now
from auditor.tags import WEIGHTS_ARTIFACT
from auditor.uris import run_artifact_path

log = logging.getLogger(__name__)


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
        from auditor.steps.production import deployed_findings, registry_findings

        # deployed copies are held to what training documented (the record's sha256), else to the registered bytes
        a.findings += registry_findings(a.session, a.info, actual) + deployed_findings(a.session, a.info, expected or actual)
    a.recovery = RecoveryCheck(expected_sha256=expected, actual_sha256=actual, registered=dict(a.record.outputs.metrics), unrecoverable=[why] if why else [])
    served = _served_problems(a, expected)
    if served:
        a.recovery = a.recovery.model_copy(update={"unrecoverable": [*a.recovery.unrecoverable, *served]})
    _refuse_unsafe(a)


def _refuse_unsafe(a: _Audit) -> None:
    """A registered file whose content is a pickle, whatever its name, is refused before anything reads it: the
    artifact cannot be recovered safely (NOT_REPRODUCIBLE, "unsafe format: pickle"), never ERROR (issue 39)."""
    if a.weights is None or a.recovery is None:
        return
    from auditor.flavors.unsafe import UnsafeArtifact, refuse_unsafe

    try:
        refuse_unsafe(a.weights)
    except UnsafeArtifact as exc:
        a.recovery = a.recovery.model_copy(update={"unrecoverable": [*a.recovery.unrecoverable, str(exc)]})
        raise


def _served_problems(a: _Audit, weights_sha256: str | None) -> list[str]:
    """What the registered version serves (its LoggedModel: MLmodel, code copy, weights), hashed file by file
    against the manifest its training run logged as a param; every file's sha256 goes into the evidence
    (``served.<path>``), so the report names what was covered. Returns why the served model is not the audited one."""
    import json

    from auditor.registry.tracking import served_manifest
    from auditor.tags import PARAM_SERVED_MANIFEST

    download = getattr(a.session.registry, "download_served", None)
    folder = download(a.info, a.tmp / "served") if download is not None else None
    logged = a.info.run_params.get(PARAM_SERVED_MANIFEST)  # a run param: MLflow refuses to change it
    if folder is None:
        if logged and download is not None:  # fail closed: the tag that points at the LoggedModel is editable
            return [f"the training run logged a manifest of the LoggedModel it serves ({PARAM_SERVED_MANIFEST}), but "
                    f"{a.info.ref} no longer leads to it (its source or its run's LoggedModel tag changed): what is "
                    "served could not be compared with what was audited"]
        return []
    found = served_manifest(folder)
    a.evidence.update({f"served.{path}": sha for path, sha in found.items()})
    problems = []
    if weights_sha256 and not any(same(sha, weights_sha256) for sha in found.values()):
        weights = [path for path in found if path.endswith(".safetensors")]
        problems.append(f"the served model's weights {', '.join(weights) or '(no file of the registered sha256)'} are not "
                        f"the registered weights (sha256 {spelled(weights_sha256)}): what is served is not what was audited")
    if not logged:
        a.findings.append(Finding(code="served.unanchored", path="outputs.artifacts", severity="warning",
                                  message=f"{a.info.ref} serves a LoggedModel whose training run logged no manifest of it: "
                                          "only its weights were compared, not its code copy or MLmodel",
                                  hint="re-register the version with this version of the SDK"))
        return problems
    expected = json.loads(logged)
    for path in sorted(set(expected) | set(found)):
        if path not in found:
            problems.append(f"the served file {path} is missing from the LoggedModel")
        elif path not in expected:
            problems.append(f"the served file {path} was added to the LoggedModel after training (not in its logged manifest)")
        elif expected[path] != found[path]:
            problems.append(f"the served file {path} changed after training (sha256 {expected[path]} logged, {found[path]} now)")
    return problems


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
                               then_train=EVALUATE_THEN_TRAIN, fresh=reruns > 1)
        except RecipeCrashed as exc:
            if exc.timed_out:
                raise
            evaluation, forked_s, evaluation_crash = forked_evaluation(out)
            if forked_s is None or evaluation_crash:  # it crashed evaluating (in a forked child, or evaluating only)
                a.log_tail = exc.log_tail
                _compare_traced_of_crash(a, out)  # what it read before crashing still names a changed input
                return _not_evaluable(a, evaluation_crash or crash_signature(exc.log_tail) or str(exc))
            if evaluation is not None:  # the evaluation passed, the training crashed: as any rebuild's crash
                a.recovery = a.recovery.model_copy(update={"evaluated": evaluation})
            first = _once_more(a, workspace, out, timeout, exc, fresh=reruns > 1)
        if first.evaluation_crash:  # the evaluation crashed, the training in the same process finished
            a.log_tail = first.log_tail
            _not_evaluable(a, first.evaluation_crash)
            a.timings.rebuild_s = round(first.wall_s - (first.evaluation_s or 0.0), 3)
            return [first]  # its weights (another shape?) and traced inputs are still compared
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
        # fresh interpreters (the first too): the spread among same-seed rebuilds must be fresh processes' (RunSpec.fresh)
        runs.append(rebuild_once(a, workspace, a.tmp / (f"rebuild-{i}" + ("-train" if i == 0 and a.weights is not None else "")), timeout,
                                 fresh=reruns > 1))
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


def _compare_traced_of_crash(a: _Audit, out: Path) -> None:
    """A crashed run's traced inputs (its record is written even when the script fails) against training's: an
    input read otherwise is named. What it did not read proves nothing (it stopped early), so only reads that differ
    or are new count."""
    from auditor.contract import RECORD_FILE
    from auditor.lineage.traced import compare as compare_traced

    try:
        rebuilt = RunRecord.from_json((out / RECORD_FILE).read_bytes(), source=str(out))
    except (OSError, ReproError):
        return
    a.findings += [f for f in compare_traced(a.record, rebuilt)
                   if f.code.startswith("traced.") and not f.code.endswith(("_not_read", "not_traced")) and f not in a.findings]


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


def compare_reads(a: _Audit, runs: list[RunResult]) -> None:
    """What training read that the record does not pin, against what each rebuild read: a difference fails lineage."""
    from auditor.lineage.traced import compare as compare_traced

    for run in runs:
        if run.record is None:
            unknown = Finding(code="traced.unknown", path="traced", severity="warning",
                              message="the rebuild left no run record, so what it read was not traced",
                              hint="use the SDK (auditor.track) in the training script")
            if unknown not in a.findings:  # segment audits compare every replay, then the last one again
                a.findings.append(unknown)
            continue
        a.findings += [f for f in compare_traced(a.record, run.record) if f not in a.findings]


def _rebuilds_agree(a: _Audit, runs: list[RunResult]) -> None:
    """``--reruns N`` of a run the record gives no reason to vary (``expected.spread_is_execution_noise``) must rebuild
    one model: rebuilds that differ among themselves read an input the record does not pin (only the first is
    compared with the registered model, so this is said here)."""
    from auditor.judge.expected import spread_is_execution_noise, why_no_noise
    from auditor.steps.calibrate import model_digest

    digests = [d for d in map(model_digest, runs) if d]
    if len(set(digests)) < 2:
        return
    tier = a.expected.tier if a.expected is not None else None
    accelerator = bool(runs[0].record and runs[0].record.environment and runs[0].record.environment.accelerator)
    if spread_is_execution_noise(tier, deterministic=bool(a.record.seeds and a.record.seeds.deterministic), accelerator=accelerator):
        return
    a.findings.append(Finding(
        code="rebuild.reruns_differ", path="outputs.artifacts", severity="blocking",
        message=(f"the audit's {len(digests)} rebuilds under one seed gave {len(set(digests))} different models although "
                 f"{why_no_noise(tier)}: the recipe reads an input the record does not pin"),
        hint="pin what the reruns read otherwise (seed it from run.seed, pass it through the config or a snapshot)"))


def _compare_downloads(a: _Audit, runs: list[RunResult]) -> None:
    """Data the script downloads (``auditor.generated(..., source=URL)``): a rebuild that downloaded other bytes
    trained on other data, because the source changed since training (not because a generator was unseeded)."""
    for name, ref in a.record.data.items():
        for run in runs:
            again = run.record.data.get(name) if run.record is not None else None
            if not ref.source or ref.content_hash is None or again is None or again.content_hash in (None, ref.content_hash):
                continue
            finding = Finding(
                code="data.source_changed", path=f"data.{name}", severity="blocking",
                message=f"the source changed since training: {ref.source} now gives other bytes ({again.content_hash}) than "
                        f"at training ({ref.content_hash}, recorded as snapshot {ref.version})",
                hint=f"read the data from run.data_path({name!r}) (the recorded snapshot) instead of downloading it again")
            if finding not in a.findings:
                a.findings.append(finding)


def _compare_consumed(a: _Audit, runs: list[RunResult]) -> None:
    """What each rebuild's model consumed against what training's did: other data fails lineage, naming the first
    differing batch, whatever the determinism flags say (``auditor.judge.consumed``). A segment replay consumes a
    part of training's batches by design, so it is judged by its checkpoints instead."""
    if a.segments is not None:
        return
    from auditor.judge.consumed import rebuild_findings

    for run in runs:
        a.findings += [f for f in rebuild_findings(a.record, run.record) if f not in a.findings]


def _bits_over_unknown_inputs(a: _Audit) -> None:
    """One rule for what is evidence (issue 39): a rebuild whose model is bit-identical to the registered one is its own
    evidence. A difference in what the model consumed (``consumed.differs``), or a rebuild whose consumed data cannot be
    compared with training's (``consumed.unknown``: no fingerprint, or one of another scheme), blocks only a rebuild
    whose model differs: there input noise cannot be told from execution noise. Over bit-identical weights the finding
    stays, as a warning; artifact recovery still recomputes the registered metrics from that model, so a difference in
    the evaluation data is caught there."""
    if a.weight_diff is None or not a.weight_diff.identical:
        return
    a.findings = [f.model_copy(update={"severity": "warning", "message": f"{f.message}; the rebuilt model is bit-identical to "
                                                                         "the registered one, so it changed nothing in the model"})
                  if f.code in ("consumed.unknown", "consumed.differs") and f.blocking else f for f in a.findings]


def _identical_rebuilds_evaluate(a: _Audit, runs: list[RunResult]) -> None:
    """A rebuild whose model is bit-identical to the registered one evaluated the registered model: its metrics must
    be the registered ones (artifact recovery), whether or not the script honours the re-evaluation hook."""
    if a.recovery is None or a.weight_diff is None or not a.weight_diff.identical or not runs[0].weights_sha256:
        return
    same = [r.metrics for r in runs if r.weights_sha256 == runs[0].weights_sha256 and not r.evaluated]
    a.recovery = a.recovery.model_copy(update={"rebuilt_identical": same})


def _calibration_evidence(a: _Audit) -> dict[str, Any]:
    """The version's verified calibration, its bands, and what the seed-varied reruns say without a rebuild (the
    seed lottery, the decisions that flip): read before the rebuild, so every calibrated report has them."""
    from auditor.judge.binding import bind
    from auditor.judge.tolerance import bands_from_json
    from auditor.steps.calibrate import stored_calibrations
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    lookup = a.calibration_lookup = a.calibration_lookup or (*stored_calibrations(a.session, a.info, found := []), found)
    calibration, evidence, a.calibrations, found = lookup
    a.findings += found
    calibration_text = a.info.tags.get(TAG_CALIBRATION)
    if calibration is not None:
        a.calibration = calibration  # the run's evidence, never the editable tag
        floor = calibration.same_seed  # its numbers beside the judged calibration: the report pictures the weights against them
        for entry in a.calibrations:
            if entry.get("judged"):
                entry["floor"] = {"n": floor.n, "max_abs": floor.max_abs, "rel_l2": floor.rel_l2, "margin": floor.margin,
                                  "bit_identical": floor.bit_identical, "thresholds": floor.thresholds()}
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

    a.lottery = seed_lottery(calibration, a.record.outputs.metrics, bands)  # does the registered run rank above its reruns?
    a.findings += lottery_findings(a.lottery)
    from auditor.judge.multiplicity import from_calibration

    a.multiplicity = from_calibration(calibration)  # from the stored reruns: nothing is rerun for it
    return bands


def _compare(a: _Audit, runs: list[RunResult], bands: dict[str, Any]) -> None:
    """Step 3: metrics against their bands, weights against the registered ones, the environment drift."""
    from auditor.judge.floors import platform_fingerprint
    from auditor.judge.models import model_diff
    from auditor.judge.tolerance import check_metrics

    a.metric_results = check_metrics([r.metrics for r in runs], bands, registered=a.record.outputs.metrics)
    rebuilt = runs[0]
    _rebuilds_agree(a, runs)
    compare_reads(a, runs)
    _compare_consumed(a, runs)
    _compare_downloads(a, runs)
    if rebuilt.weights_sha256:
        a.evidence["weights.rebuilt"] = rebuilt.weights_sha256
    if a.weights is not None and rebuilt.weights is not None:
        # read only as the bytes hashed before the rebuilds, which were handed its path (judge.models.unchanged)
        diff, lines = model_diff(a.weights, rebuilt.weights, a.flavor, registered_sha256=a.evidence.get("weights.registered"))
        a.evidence.update(lines)
        a.weight_diff = diff.model_copy(update={"sha256_a": a.evidence.get("weights.registered"), "sha256_b": rebuilt.weights_sha256})
        a.findings += _knob_changes(a.record, rebuilt)
        _predictions(a, rebuilt)
    elif rebuilt.weights is None:
        a.unrecoverable = f"the rebuild left no {model_file(a.flavor)}"
    elif a.recovery is not None and a.recovery.expected_sha256 and rebuilt.weights_sha256:
        # the registered file is gone: the rebuild is held to the sha256 the record holds for it
        from auditor.judge.result import WeightDiff

        a.weight_diff = WeightDiff(identical=same(rebuilt.weights_sha256, a.recovery.expected_sha256),
                                   sha256_a=spelled(a.recovery.expected_sha256), sha256_b=rebuilt.weights_sha256)
    _identical_rebuilds_evaluate(a, runs)
    _bits_over_unknown_inputs(a)
    a.platform = platform_fingerprint(rebuilt.record.environment if rebuilt.record else None)
    a.drift = drift(a.record, rebuilt)
    _image_answered(a)


def _image_answered(a: _Audit) -> None:
    """The gate warns that a record without an image leaves the rebuild to "whatever environment the auditor has":
    a rebuild whose environment matched the record's (no drift: interpreter, platform, every package) and whose model
    is bit-identical answered that warning for this audit, so the report does not repeat it. Any drift, or any other
    model, keeps it (it may be the reason)."""
    if a.drift is not None and a.drift.empty and a.weight_diff is not None and a.weight_diff.identical:
        a.findings = [f for f in a.findings if f.code != "environment.no_image"]


def _predictions(a: _Audit, rebuilt: RunResult) -> None:
    """A tabular model's scores on the recorded evaluation data (``auditor.judge.models.prediction_evidence``):
    evidence lines, and the decision-flip rate judged beside the metrics."""
    artifact = a.record.outputs.model()
    if artifact is None or not a.flavor or a.flavor == "torch":
        return
    from auditor.judge.models import prediction_evidence

    lines, flips, why = prediction_evidence(artifact.predictions, rebuilt.output_dir,
                                            floor=a.calibration.same_seed if a.calibration else None)
    a.evidence.update(lines)
    if flips is not None:
        a.metric_results = [*a.metric_results, flips]
    if why:
        a.findings.append(Finding(code="predictions.unscored", path="outputs.artifacts", severity="warning",
                                  message=f"the registered model's predictions were {why}",
                                  hint="pass the evaluation data to run.save_model(model, eval_data=x_test, threshold=t)"))


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
    bands = _calibration_evidence(a)
    _recover_artifact(a)
    if not blocking(a.findings):
        runs = rebuild()
        if runs:
            _compare(a, runs, bands)


def _judge(a: _Audit) -> tuple[Verdict, dict[str, Any]]:
    from auditor.judge.verdict import judge

    verdict, tiers = judge(findings=a.findings, recovery=a.recovery, metric_results=a.metric_results, weight_diff=a.weight_diff,
                           error=a.error, unrecoverable=a.unrecoverable,
                           floor=a.calibration.same_seed if a.calibration else None, platform=a.platform,
                           calibration_findings=a.calibration.findings() if a.calibration else (),
                           deterministic=bool(a.record and a.record.seeds and a.record.seeds.deterministic),
                           expected=a.expected.tier if a.expected is not None else None,
                           blind_floor=a.calibration.blind_floor() if a.calibration else None)
    from auditor.judge.expected import missed_bitwise

    if a.weight_diff is not None:  # a model was rebuilt and compared: nothing rebuilt misses nothing
        a.findings = missed_bitwise(a.expected, tiers["bitwise"].status) + a.findings  # the stronger finding first
    if a.segments is not None:
        from auditor.segments import segment_verdict

        verdict, tiers = segment_verdict(a.segments, verdict, tiers)
    if not a.metric_results and a.weight_diff is None:  # no rebuild was compared: its tiers say why
        from auditor.judge.verdict import not_reached

        tiers = not_reached(tiers, _why_not_rebuilt(a))
    return verdict, tiers


def _why_not_rebuilt(a: _Audit) -> str:
    """Why no rebuild was compared, for the tiers that needed one."""
    blocking = [f.code for f in a.findings if f.blocking]
    if a.record is None:
        return f"no run record could be used ({', '.join(blocking) or 'none read'}), so nothing was rebuilt"
    if a.error:
        return "the audit stopped on an error before a rebuild could be compared (see the error)"
    if a.unrecoverable:
        return "the model could not be rebuilt from what was recorded (see the error)"
    if a.recovery is not None and a.recovery.unrecoverable:
        return f"no rebuild was judged: {a.recovery.unrecoverable[-1]}"
    if blocking:
        return f"the lineage gate blocked the rebuild ({', '.join(dict.fromkeys(blocking))}): fix those findings and audit again"
    return "no rebuild was compared"


def _rerun_cost(a: _Audit) -> dict[str, Any] | None:
    """The calibration reruns behind this report and what they cost, with what reused them (None: not calibrated)."""
    if a.calibration is None:
        return None
    same, varied = a.calibration.same_seed.n, len(a.calibration.seed_varied)
    used = [what for what, by in (("the bands", a.metric_results), ("the same-seed floor", a.weight_diff is not None),
                                  ("the lottery check", a.lottery is not None),
                                  ("the multiplicity figure", a.multiplicity is not None and a.multiplicity.status == "measured"))
            if by]
    return {"same_seed": same, "seed_varied": varied, "calibrated_at": a.calibration.calibrated_at, **(a.calibration.cost or {}),
            "reruns": same + varied, "reused_by": [*used, "repro-audit compare"]}


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
        evidence=a.evidence, calibrations=a.calibrations, segments=a.segments, lottery=a.lottery, expected=a.expected,
        multiplicity=a.multiplicity, rerun_cost=_rerun_cost(a),
    )
