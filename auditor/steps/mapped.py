"""A calibration spread over workers: one task per rerun, their results in the reports store, one reduce.

The CLI calibrates in one process (``auditor.steps.calibrate``). ``dags/repro_calibrate_tolerance.py`` maps the
same reruns over the ``gpu`` queue through four doors here, one task each:

1. ``plan``: the checks ``calibrate`` makes before any rerun (``calibrate.begin``), the version pinned, and the
   reruns named: ``same-I`` under the recorded seed, ``varied-I`` under ``calibration_seeds``. A fresh folder of
   the reports store, ``calibration-reruns/NAME/VERSION/PLAN/``, will hold their results.
2. ``rerun``: one rerun in a scratch workspace of its own; its result (metrics, model digests, the rerun's own
   record, decisions, seconds) written once, under the rerun's name, as a conditional create. A retried task whose
   earlier try stored its result reruns nothing; a result is never stored, or counted, twice. A same-seed rerun
   keeps its model file too (the floor compares them pairwise), under its sha256.
3. ``check``: the same-seed floor from the stored same-seed results, judged as the CLI judges it
   (``calibrate.judge_same_seed``: execution noise of the recipe, a claimed noise source verified) before any
   seed-varied rerun is paid for; stored once as ``floor.json``.
4. ``reduce``: the floor and exactly one stored result per planned seed-varied rerun, in seed order, into
   ``calibrate.finish``: the same calibration, bands, evidence and tags as the CLI's.

The results are working files, not evidence: the ledger does not name them (``report.verify`` passes over
``calibration-reruns/``); the calibration ``reduce`` publishes is the evidence, signed and ledgered as the CLI's.
They are read back as evidence all the same: ``auditor.steps.rerun_files`` says how each is tagged (and sealed)
so that one planted or changed in the store never counts, and how a plan from XCom is held to what it must be.
Every rerun of one calibration must run on one platform, as the CLI's do on one machine.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import time
import uuid
from typing import Any

from auditor.rebuild.run import RunResult
from auditor.steps import rerun_files as files
from auditor.steps.common import Progress, now, quiet
from auditor.steps.rerun_files import FLOOR_FILE, CalibrationPlan, PlannedRerun

log = logging.getLogger(__name__)


def plan(session: Any, model_ref: str, *, reruns: int, same_seed: int, runner: str | None, replace: bool,
         progress: Progress = quiet) -> CalibrationPlan:
    """Check what ``calibrate`` checks before its first rerun, then name every rerun and their folder."""
    from auditor.report.ledger import CALIBRATION_RERUNS
    from auditor.steps.calibrate import begin, calibration_seeds, check_counts

    check_counts(reruns, same_seed)
    runner = _runner_name(session.runner(runner))  # an unknown runner is refused now, not in every mapped task
    info, record, _ = begin(session, model_ref, reruns=reruns, same_seed=same_seed, replace=replace, progress=progress)
    seed = record.seeds.seed
    folder = f"{CALIBRATION_RERUNS}{info.name}/{info.version}/{uuid.uuid4().hex}"
    made = CalibrationPlan(
        ref=info.ref, folder=folder, store=session.store.identity, runner=runner, keyid=files.signer_keyid(session),
        nonce=secrets.token_hex(32), replace=replace, planned_at=now(), started=time.time(),
        same=[PlannedRerun(kind="same", index=i, seed=seed) for i in range(same_seed)],
        varied=[PlannedRerun(kind="varied", index=i, seed=s) for i, s in enumerate(calibration_seeds(seed, reruns))])
    log.info("calibrate %s: planned %d same-seed and %d seed-varied reruns into %s", info.ref, same_seed, reruns, folder)
    return made


def rerun(session: Any, planned: CalibrationPlan, item: PlannedRerun, progress: Progress = quiet) -> dict[str, Any]:
    """Run one planned rerun and store its result, unless an earlier try stored it; returns what was stored."""
    from auditor.rebuild.run import run_recipe
    from auditor.steps.reruns import children_cpu_s, rerun_decisions

    info = session.registry.resolve(planned.ref)
    record, diff = session.registry.load_record(info)
    files.verify_plan(session, planned, info, record)
    key = planned.key(f"{item.name}.json")
    if session.store.exists(key):
        log.info("calibrate %s: rerun %s is stored already (an earlier try): not rerun", planned.ref, item.name)
        return {"rerun": item.name, "stored": key, "reran": False}
    tmp = session.scratch(f"rerun-{item.name}-")
    try:
        progress(f"{item.name} rerun of {planned.ref} (seed {item.seed})")
        log.info("calibrate %s: %s rerun (seed %s)", planned.ref, item.name, item.seed)
        workspace = session.prepare(record, diff, tmp / "workspace")
        run_with = session.runner(planned.runner)
        cpu = children_cpu_s()
        run = run_recipe(record, workspace, run_with, tmp / "out", timeout_s=session.settings.rebuild_timeout_s,
                         seed=item.seed if item.kind == "varied" else None, fresh=item.kind != "varied")
        after = children_cpu_s()  # a container's CPU is the engine's: not counted (``steps.reruns.cost``)
        spent = round(after - cpu, 3) if None not in (cpu, after) and _runner_name(run_with) == "process" else None
        decided = rerun_decisions(run) if item.kind == "varied" else None
        stored = files.store_result(session, planned, item, run, decided, spent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"rerun": item.name, "stored": key, "reran": True, "first": stored}


def check(session: Any, planned: CalibrationPlan, progress: Progress = quiet) -> dict[str, Any]:
    """The same-seed floor from the stored same-seed results, judged (``Findings`` stop the calibration: nothing
    stored, no seed-varied rerun paid for) and stored once; returns its summary."""
    from auditor.judge.floors import SameSeedFloor
    from auditor.steps.calibrate import judge_same_seed

    info = session.registry.resolve(planned.ref)
    record, diff = session.registry.load_record(info)
    files.verify_plan(session, planned, info, record)
    key = planned.key(FLOOR_FILE)
    if session.store.exists(key):
        floor = SameSeedFloor.model_validate_json(files.read(session, planned, key))
        return {"stored": key, "bit_identical": floor.bit_identical}
    tmp = session.scratch("calibrate-check-")
    try:
        same = [files.load_result(session, planned, item, tmp)[0] for item in planned.same]
        files.one_platform(planned, [(item.name, run) for item, run in zip(planned.same, same, strict=True)])
        progress(f"judging the {len(same)} same-seed reruns of {planned.ref}")
        floor = judge_same_seed(session, info, record, same, lambda: session.prepare(record, diff, tmp / "workspace"),
                                session.runner(planned.runner), tmp, progress)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    files.write(session, planned, key, floor.model_dump_json().encode("utf-8"))
    return {"stored": key, "bit_identical": floor.bit_identical}


def reduce(session: Any, planned: CalibrationPlan, progress: Progress = quiet) -> Any:
    """The calibration from the stored floor and seed-varied results (exactly one each, on the same-seed reruns'
    platform), stored as the CLI's; a stronger calibration stored meanwhile is not replaced unless the plan says so."""
    from auditor.judge.floors import SameSeedFloor
    from auditor.steps.calibrate import finish, refuse_weaker

    info = session.registry.resolve(planned.ref)
    record, _ = session.registry.load_record(info)
    files.verify_plan(session, planned, info, record)
    floor = SameSeedFloor.model_validate_json(files.read(session, planned, planned.key(FLOOR_FILE)))
    tmp = session.scratch("calibrate-reduce-")
    try:
        same = [files.load_result(session, planned, item, tmp) for item in planned.same]
        varied = [files.load_result(session, planned, item, tmp) for item in planned.varied]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    files.one_platform(planned, [(item.name, run) for item, (run, _, _) in zip(planned.varied, varied, strict=True)],
                       expected=floor.platform)
    refuse_weaker(session.registry, info, len(planned.varied), planned.replace)
    progress(f"reducing {len(varied)} seed-varied reruns of {planned.ref}")
    return finish(session, info, record, floor, [(item.seed, run, decided) for item, (run, decided, _) in
                                                 zip(planned.varied, varied, strict=True)], _cost([*same, *varied], planned))


def plan_missing(session: Any, refs: list[str], *, reruns: int, same_seed: int,
                 progress: Progress = quiet) -> list[CalibrationPlan]:
    """A plan for each of ``refs`` (once per version) that has no stored calibration with seed-varied reruns: what a
    promotion gate's comparison would otherwise calibrate in its own task (``steps.compare``)."""
    from auditor.steps.calibrate import stored_calibrations

    plans: list[CalibrationPlan] = []
    seen: set[str] = set()
    for ref in refs:
        info = session.registry.resolve(ref)
        if info.ref in seen:
            continue
        seen.add(info.ref)
        calibration, _, _ = stored_calibrations(session, info, [])
        if calibration is None or not calibration.seed_varied:
            plans.append(plan(session, info.ref, reruns=reruns, same_seed=same_seed, runner=None, replace=False,
                              progress=progress))
    return plans


def plans_of(tickets: list[dict[str, Any]]) -> list[CalibrationPlan]:
    """The distinct plans a list of tickets (``CalibrationPlan.tickets``) belongs to, in their order."""
    plans: dict[str, CalibrationPlan] = {}
    for ticket in tickets:
        planned = CalibrationPlan.model_validate(ticket["planned"])
        plans.setdefault(planned.folder, planned)
    return list(plans.values())


def _runner_name(run_with: Any) -> str:
    return getattr(run_with, "name", None) or "process"


def _cost(loaded: list[tuple[RunResult, Any, float | None]], planned: CalibrationPlan) -> dict[str, Any]:
    """What the reruns cost, in the CLI's words: summed over the tasks, each rerun's CPU its own task's children."""
    cpu = [c for _, _, c in loaded]
    device = [r.accelerator_s for r, _, _ in loaded if r.accelerator_s is not None]
    return {"reruns": len(loaded), "wall_s": round(sum(r.wall_s for r, _, _ in loaded), 3),
            "cpu_s": round(sum(cpu), 3) if cpu and None not in cpu else None,
            "accelerator_s": round(sum(device), 3) if device else None, "runner": planned.runner,
            "workers": None, "mapped": True, "elapsed_s": round(time.time() - planned.started, 3)}


__all__ = ["FLOOR_FILE", "CalibrationPlan", "PlannedRerun", "check", "plan", "plan_missing", "plans_of", "reduce", "rerun"]
