"""Segment replay: a version audited by replaying some segments of its checkpoint chain, not all of training.

``segments`` segments, or a ``budget`` fraction of them, never fewer than the minimum sample (the first,
one interior segment drawn at random, the last: ``auditor.segments.minimum_sample``), drawn by a seed the
auditor draws at audit time (after the chain was registered: its trainer cannot choose it) unless the
caller fixes one (``AuditOptions.segment_seed``, to repeat an audit); each starts from its stored
checkpoint and must end in the next one (bit for bit where the recipe is deterministic, within the
same-seed floor otherwise); ``workers`` replay that many
segments at once (they are independent). The last one's weights and metrics are judged like a full
rebuild's. ``segment_step`` gives ``auditor.steps.audit`` the step that replaces its rebuild.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from auditor.contract import ENV_STOP_STEP
from auditor.digests import spelled
from auditor.errors import BadInput, InfrastructureError, ReproError
from auditor.rebuild.run import RunResult
from auditor.steps.audit import compare_reads, rebuild_once
from auditor.steps.common import today
from auditor.uris import run_artifact_path


def segment_step(session: Any, info: Any, options: Any) -> Any:
    """The rebuild step of a segment audit of ``info``; a version with no checkpoint chain, or a bad count
    or budget, is the caller's error (``BadInput``), said now."""
    from auditor import segments as seg

    try:
        record, _ = session.registry.load_record(info)
    except InfrastructureError:
        raise
    except ReproError:
        record = None  # an unreadable or edited record: the audit's lineage step names it (never the caller's error)
    if record is not None and not seg.chain(record):
        raise BadInput(f"{info.ref} records no checkpoint chain, so it has no segments to replay",
                       hint="audit it with a full rebuild, or save checkpoints in training (auditor.checkpoint_every)")
    seg.sample_size(3, count=options.segments, budget=options.budget)  # a bad count or budget: said now
    given = options.segment_seed
    return functools.partial(_replay_segments, count=options.segments, budget=options.budget, date=options.date or today(),
                             workers=options.workers, seed=given or seg.draw_seed(), drawn=not given)


def _stored_checkpoint(a: Any, link, dest: Path) -> tuple[Path | None, str | None]:
    """Download one checkpoint of the chain and check its digest; (path, why not)."""
    from auditor import segments as seg

    uri = link.uri
    path = run_artifact_path(uri) or seg.store_path(link.digest)
    try:
        local = a.session.registry.download_artifact(a.info, path, dest)
    except InfrastructureError:
        raise
    except ReproError as exc:
        return None, f"the stored checkpoint at step {link.step} ({path}) cannot be downloaded: {exc}"
    actual = seg.sha256_of(local)
    if actual != link.digest:
        return None, (f"the stored checkpoint at step {link.step} fails its digest (the record holds {spelled(link.digest)}, "
                      f"the stored file hashes to {spelled(actual)}): the artifact was altered")
    return local, None


def _verified_chain(a: Any, links: list[Any]) -> dict[int, Path] | None:
    """Every stored checkpoint, downloaded and checked against its digest; None (and why, on ``a``) when one fails."""
    from auditor import segments as seg

    a.progress(f"verifying the checkpoint chain ({len(links)} checkpoints)")
    stored: dict[int, Path] = {}
    for link in links:
        local, why = _stored_checkpoint(a, link, a.tmp / "chain" / f"{link.digest}.safetensors")
        if why:
            a.unrecoverable = why
            return None
        stored[link.step] = local
    if a.weights is not None and not seg.model_weights_equal(stored[links[-1].step], a.weights):
        a.unrecoverable = f"the chain's last checkpoint (step {links[-1].step}) does not hold the registered weights: the chain is not this version's"
        return None
    return stored


def _run_replays(a: Any, parts: list[Any], chosen: list[int], stored: dict[int, Path], workers: int) -> list[RunResult]:
    """Replay the chosen segments (``workers`` at a time: they are independent); the last re-evaluates the registered weights."""
    timeout = a.session.settings.rebuild_timeout_s
    a.progress("preparing the workspace")
    workspace = a.session.prepare(a.record, a.diff, a.tmp / "workspace")

    def replay(n_index: tuple[int, int]) -> RunResult:
        n, index = n_index
        part = parts[index]
        a.progress(f"replaying segment {n + 1}/{len(chosen)}: {part.steps}")
        recipe: dict[str, Any] = {"resume": stored[part.begin.step] if part.begin else None, "stop_step": part.end}
        if index == len(parts) - 1 and a.weights is not None:
            run = rebuild_once(a, workspace, a.tmp / f"segment-{index}", timeout, **recipe, evaluate=a.weights, then_train=True)
            if not run.evaluated:
                return run
            # it evaluated only (CUDA was up, so the SDK could not fork): the registered weights' metrics, as the full
            # audit takes them, then the segment replayed in a process of its own
            a.recovery = a.recovery.model_copy(update={"evaluated": run.metrics})
            return rebuild_once(a, workspace, a.tmp / f"segment-{index}-train", timeout, **recipe)
        return rebuild_once(a, workspace, a.tmp / f"segment-{index}", timeout, **recipe)

    from auditor.steps.common import in_parallel

    return in_parallel(replay, enumerate(chosen), workers)


def _segment_floor(a: Any) -> Any:
    """The same-seed floor of the version's newest calibration run whose evidence matches its sha256 param, as the
    full audit judges by: never the editable ``repro.calibration`` tag (a widened floor there would pass a chain
    trained on other data)."""
    from auditor.steps.calibrate import stored_calibrations

    if a.calibration_lookup is None:  # the audit read it before the rebuild; a replay on its own reads it here
        a.calibration_lookup = (*stored_calibrations(a.session, a.info, found := []), found)
    calibration = a.calibration_lookup[0]
    return calibration.same_seed if calibration is not None else None


def _replay_segments(a: Any, *, count: int | None, budget: float | None, date: str, workers: int = 1, seed: str = "",
                     drawn: bool = True) -> list[RunResult]:
    """Step 2 of a segment audit: verify the chain, replay the chosen segments, compare each end state.

    Returns the last segment's run (it ends where training ended: its weights and metrics are compared
    with the registered ones by step 3, as a full rebuild's are); it also re-evaluates the registered weights.
    """
    from auditor import segments as seg
    from auditor.judge.result import ChainLink, SegmentReplay

    links = seg.chain(a.record)
    parts = seg.segments(links)
    stored = _verified_chain(a, links)
    if stored is None:
        return []
    chosen = seg.pick_segments(len(parts), seed=seed, count=count, budget=budget)
    from auditor.judge.expected import spread_is_execution_noise, why_no_noise

    floor = _segment_floor(a)  # a bad tag: before replaying
    # held bit for bit unless the record explains noise (one rule with calibration and the judge)
    tier = a.expected.tier if a.expected is not None else None
    measured = floor.expected if floor is not None else None
    deterministic = not spread_is_execution_noise(
        tier, deterministic=bool(a.record.seeds and a.record.seeds.deterministic),
        accelerator=bool(floor is not None and floor.platform.get("accelerator")), measured=measured)
    done = _run_replays(a, parts, chosen, stored, workers)
    checks, last, hosted, wall = [], None, 0.0, 0.0
    for index, run in zip(chosen, done, strict=True):
        part = parts[index]
        wall += run.wall_s
        if run.checkpoint is None:
            a.log_tail = run.log_tail
            a.unrecoverable = (f"the replay of {part.steps} left no end checkpoint: the recipe does not honour {ENV_STOP_STEP} "
                               "(see docs/reference/entry-point-contract.md)")
            return []
        comparison = seg.compare_checkpoints(stored[part.end], run.checkpoint, a.tmp / f"compare-{index}")
        checks.append(seg.judge_segment(part, comparison, deterministic=deterministic, floor=floor, wall_s=run.wall_s,
                                        replayed_digest=seg.sha256_of(run.checkpoint), why=why_no_noise(tier, measured)))
        if index == len(parts) - 1:
            last, hosted = run, run.evaluation_s or 0.0
            _recovered_by(a, run)
    compare_reads(a, done)  # what every replay read, not only the last: a side file changed under any segment
    from auditor.judge.consumed import segment_findings

    a.findings += segment_findings(a.record, [(parts[i].start, parts[i].end, run.record) for i, run in zip(chosen, done, strict=True)],
                                   links[-1].step)
    replayed = {parts[i].end for i in chosen}
    a.segments = SegmentReplay(
        total=len(parts), selected=chosen,
        basis=f"audit {date}: " + seg.sample_basis(len(parts), seed=seed, drawn=drawn, count=count, budget=budget),
        chain=[ChainLink(step=link.step, digest=link.digest, replayed=link.step in replayed, digest_ok=True) for link in links],
        checks=checks, replayed_steps=sum(parts[i].end - parts[i].start for i in chosen), total_steps=links[-1].step,
    )
    a.timings.rebuild_s = round(wall - hosted, 3)  # replay processes' time (summed over workers)
    a.log_tail = last.log_tail if last else ""
    return [last] if last is not None else []


def _recovered_by(a: Any, run: RunResult) -> None:
    """The last segment's re-evaluation of the registered weights, into the recovery check."""
    if run.evaluation_crash:
        a.recovery = a.recovery.model_copy(update={"unrecoverable": [
            *a.recovery.unrecoverable, f"re-evaluating the registered weights with the recorded recipe crashed: {run.evaluation_crash}"]})
    elif run.evaluation is not None:
        a.recovery = a.recovery.model_copy(update={"evaluated": run.evaluation})
