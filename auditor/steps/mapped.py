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
They are read back as evidence all the same, so where the auditor signs (``REPRO_SIGNING_KEY``) each is sealed by
the worker that wrote it, a DSSE envelope over its sha256 beside it (``NAME.<hex>.dsse``: two tries never share
one), and the check and the reduce refuse a file without a valid seal: one planted in the store by hand (before
the real rerun wrote, so that the real one lost the conditional create) never counts. A same-seed model file must
hash to what its sealed result says.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from auditor.digests import sha256_digest, sha256_hex
from auditor.errors import Findings, InfrastructureError
from auditor.rebuild.run import RunResult
from auditor.steps.common import Progress, now, quiet

log = logging.getLogger(__name__)

FLOOR_FILE = "floor.json"


class PlannedRerun(BaseModel):
    """One rerun of a plan: ``same`` (the recorded seed) or ``varied`` (a derived one), its index and seed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["same", "varied"]
    index: int
    seed: int

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.index}"


class CalibrationPlan(BaseModel):
    """What every task of a mapped calibration reads: the pinned version, its reruns, where their results go."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    folder: str  # in the reports store
    runner: str | None
    same: list[PlannedRerun]
    varied: list[PlannedRerun]
    planned_at: str
    started: float  # time.time() at planning: the reduce says how long the whole spread took

    def key(self, name: str) -> str:
        return f"{self.folder}/{name}"

    def tickets(self, kind: Literal["same", "varied"]) -> list[dict[str, Any]]:
        """One ``{"planned", "item"}`` per rerun of ``kind``, JSON: the keyword arguments a DAG maps its rerun task over."""
        plan_json = self.model_dump(mode="json")
        return [{"planned": plan_json, "item": item.model_dump()} for item in (self.same if kind == "same" else self.varied)]


def plan(session: Any, model_ref: str, *, reruns: int, same_seed: int, runner: str | None, replace: bool,
         progress: Progress = quiet) -> CalibrationPlan:
    """Check what ``calibrate`` checks before its first rerun, then name every rerun and their folder."""
    from auditor.report.ledger import CALIBRATION_RERUNS
    from auditor.steps.calibrate import begin, calibration_seeds, check_counts

    check_counts(reruns, same_seed)
    session.runner(runner)  # an unknown runner is refused now, not in every mapped task
    info, record, _ = begin(session, model_ref, reruns=reruns, same_seed=same_seed, replace=replace, progress=progress)
    seed = record.seeds.seed
    folder = f"{CALIBRATION_RERUNS}{info.name}/{info.version}/{uuid.uuid4().hex}"
    made = CalibrationPlan(
        ref=info.ref, folder=folder, runner=runner, planned_at=now(), started=time.time(),
        same=[PlannedRerun(kind="same", index=i, seed=seed) for i in range(same_seed)],
        varied=[PlannedRerun(kind="varied", index=i, seed=s) for i, s in enumerate(calibration_seeds(seed, reruns))])
    log.info("calibrate %s: planned %d same-seed and %d seed-varied reruns into %s", info.ref, same_seed, reruns, folder)
    return made


def rerun(session: Any, planned: CalibrationPlan, item: PlannedRerun, progress: Progress = quiet) -> dict[str, Any]:
    """Run one planned rerun and store its result, unless an earlier try stored it; returns what was stored."""
    from auditor.rebuild.run import run_recipe
    from auditor.steps.reruns import children_cpu_s, rerun_decisions

    key = planned.key(f"{item.name}.json")
    if session.store.exists(key):
        log.info("calibrate %s: rerun %s is stored already (an earlier try): not rerun", planned.ref, item.name)
        return {"rerun": item.name, "stored": key, "reran": False}
    info = session.registry.resolve(planned.ref)
    record, diff = session.registry.load_record(info)
    tmp = session.scratch(f"rerun-{item.name}-")
    try:
        progress(f"{item.name} rerun of {planned.ref} (seed {item.seed})")
        log.info("calibrate %s: %s rerun (seed %s)", planned.ref, item.name, item.seed)
        workspace = session.prepare(record, diff, tmp / "workspace")
        run_with = session.runner(planned.runner)
        cpu = children_cpu_s()
        run = run_recipe(record, workspace, run_with, tmp / "out",
                         timeout_s=session.settings.rebuild_timeout_s, seed=item.seed if item.kind == "varied" else None)
        after = children_cpu_s()  # a container's CPU is the engine's: not counted (``steps.reruns.cost``)
        spent = round(after - cpu, 3) if None not in (cpu, after) and _runner_name(run_with) == "process" else None
        decided = rerun_decisions(run) if item.kind == "varied" else None
        stored = _store(session, planned, item, run, decided, spent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"rerun": item.name, "stored": key, "reran": True, "first": stored}


def _store(session: Any, planned: CalibrationPlan, item: PlannedRerun, run: RunResult, decided: Any,
           cpu_s: float | None) -> bool:
    """The model file (same-seed reruns; under its sha256, so two tries never clash), then the result: the
    result's key is written last, so a result names only files that are there. False: an earlier try won."""
    weights = None
    if item.kind == "same" and run.weights is not None and run.weights_sha256:
        weights = planned.key(f"models/{run.weights_sha256}/{run.weights.name}")
        session.store.write(weights, run.weights)
    result = {
        "rerun": item.name, "seed": item.seed, "metrics": run.metrics, "flavor": run.flavor, "weights": weights,
        "weights_sha256": run.weights_sha256, "canonical_sha256": run.canonical_sha256,
        "record": run.record.to_dict() if run.record is not None else None, "decisions": decided,
        "wall_s": run.wall_s, "accelerator_s": run.accelerator_s, "cpu_s": cpu_s,
    }
    first = _write_sealed(session, planned.key(f"{item.name}.json"), json.dumps(result, sort_keys=True).encode("utf-8"))
    if not first:
        log.warning("calibrate %s: rerun %s was stored by another try meanwhile; this one is not counted",
                    planned.ref, item.name)
    return first


def _load(session: Any, planned: CalibrationPlan, item: PlannedRerun, scratch: Path) -> tuple[RunResult, Any, float | None]:
    """A stored result as the ``RunResult`` the CLI's path would hold (model file downloaded), its decisions, CPU s."""
    from auditor.errors import NotFound
    from auditor.judge.weights import sha256_file
    from auditor.lineage.record import RunRecord

    store = session.store
    key = planned.key(f"{item.name}.json")
    try:
        data = json.loads(_read_sealed(session, key))
    except NotFound:
        raise InfrastructureError(f"calibration of {planned.ref}: rerun {item.name} left no result at {store.uri}/{key}",
                                  hint="retry its mapped task (it reruns only what is missing)") from None
    if data.get("rerun") != item.name or data.get("seed") != item.seed:
        raise InfrastructureError(f"calibration of {planned.ref}: {store.uri}/{key} holds rerun {data.get('rerun')} "
                                  f"seed {data.get('seed')}, not {item.name} seed {item.seed}; refused")
    weights = None
    if data.get("weights"):
        folder = scratch / item.name
        folder.mkdir(parents=True, exist_ok=True)
        weights = folder / data["weights"].rsplit("/", 1)[-1]
        store.download(data["weights"], weights)
        if sha256_file(weights) != data.get("weights_sha256"):
            raise Findings(f"calibration of {planned.ref} stopped: {store.uri}/{data['weights']} does not hash to the "
                           f"{data.get('weights_sha256')} rerun {item.name} recorded; it was replaced in the store")
    record = RunRecord.from_dict(data["record"], source=f"{key} record") if data.get("record") else None
    run = RunResult(output_dir=scratch / item.name, metrics=data["metrics"], weights=weights,
                    weights_sha256=data.get("weights_sha256"), record=record, wall_s=float(data["wall_s"]),
                    accelerator_s=data.get("accelerator_s"), log_tail="", flavor=data.get("flavor"),
                    canonical_sha256=data.get("canonical_sha256"))
    return run, data.get("decisions"), data.get("cpu_s")


def check(session: Any, planned: CalibrationPlan, progress: Progress = quiet) -> dict[str, Any]:
    """The same-seed floor from the stored same-seed results, judged (``Findings`` stop the calibration: nothing
    stored, no seed-varied rerun paid for) and stored once; returns its summary."""
    from auditor.judge.floors import SameSeedFloor
    from auditor.steps.calibrate import judge_same_seed

    key = planned.key(FLOOR_FILE)
    if session.store.exists(key):
        floor = SameSeedFloor.model_validate_json(_read_sealed(session, key))
        return {"stored": key, "bit_identical": floor.bit_identical}
    info = session.registry.resolve(planned.ref)
    record, diff = session.registry.load_record(info)
    tmp = session.scratch("calibrate-check-")
    try:
        same = [_load(session, planned, item, tmp)[0] for item in planned.same]
        progress(f"judging the {len(same)} same-seed reruns of {planned.ref}")
        floor = judge_same_seed(session, info, record, same, lambda: session.prepare(record, diff, tmp / "workspace"),
                                session.runner(planned.runner), tmp, progress)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _write_sealed(session, key, floor.model_dump_json().encode("utf-8"))
    return {"stored": key, "bit_identical": floor.bit_identical}


def reduce(session: Any, planned: CalibrationPlan, progress: Progress = quiet) -> Any:
    """The calibration from the stored floor and seed-varied results (exactly one each), stored as the CLI's."""
    from auditor.judge.floors import SameSeedFloor
    from auditor.steps.calibrate import finish

    info = session.registry.resolve(planned.ref)
    record, _ = session.registry.load_record(info)
    floor = SameSeedFloor.model_validate_json(_read_sealed(session, planned.key(FLOOR_FILE)))
    tmp = session.scratch("calibrate-reduce-")
    try:
        same = [_load(session, planned, item, tmp) for item in planned.same]
        varied = [_load(session, planned, item, tmp) for item in planned.varied]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    progress(f"reducing {len(varied)} seed-varied reruns of {planned.ref}")
    spent = _cost([*same, *varied], planned, _runner_name(session.runner(planned.runner)))
    return finish(session, info, record, floor, [(item.seed, run, decided) for item, (run, decided, _) in
                                                 zip(planned.varied, varied, strict=True)], spent)


def _seal_key(key: str, data: bytes) -> str:
    return f"{key}.{sha256_hex(data)}.dsse"


def _write_sealed(session: Any, key: str, data: bytes) -> bool:
    """``data`` under ``key`` (a conditional create: False when an earlier try wrote it), its seal first where the
    session signs."""
    if session.signer is not None:
        from auditor.report import attest

        doc = attest.statement({key: sha256_digest(data)}, {"folder": key.rsplit("/", 1)[0]},
                               predicate_type=attest.RERUN_PREDICATE_TYPE)
        session.store.write(_seal_key(key, data), attest.sign(doc, session.signer))
    return session.store.write(key, data)


def _read_sealed(session: Any, key: str) -> bytes:
    """The bytes under ``key``, their seal verified where the auditor signs (``Findings`` naming the file when it
    has none, or one another key made, or one over other bytes)."""
    from auditor.errors import NotFound
    from auditor.steps.calibrate import judge_key

    data = session.store.read(key)
    public = judge_key(session)
    if public is None:
        return data
    from auditor.report import attest

    where = f"{session.store.uri}/{_seal_key(key, data)}"
    try:
        doc = attest.verify(session.store.read(_seal_key(key, data)), public, where=where,
                            predicate_type=attest.RERUN_PREDICATE_TYPE)
    except NotFound:
        raise Findings(f"{session.store.uri}/{key} has no seal by the auditor's key ({where} is missing): it was not "
                       "written by a rerun of this calibration; refused", hint="re-run the calibration") from None
    if attest.subject_digests(doc).get(key) != sha256_digest(data):
        raise Findings(f"{where} seals other bytes than {session.store.uri}/{key} holds; refused",
                       hint="re-run the calibration")
    return data


def _runner_name(run_with: Any) -> str:
    return getattr(run_with, "name", None) or "process"


def _cost(loaded: list[tuple[RunResult, Any, float | None]], planned: CalibrationPlan, runner: str) -> dict[str, Any]:
    """What the reruns cost, in the CLI's words: summed over the tasks, each rerun's CPU its own task's children."""
    cpu = [c for _, _, c in loaded]
    device = [r.accelerator_s for r, _, _ in loaded if r.accelerator_s is not None]
    return {"reruns": len(loaded), "wall_s": round(sum(r.wall_s for r, _, _ in loaded), 3),
            "cpu_s": round(sum(cpu), 3) if cpu and None not in cpu else None,
            "accelerator_s": round(sum(device), 3) if device else None, "runner": runner,
            "workers": None, "mapped": True, "elapsed_s": round(time.time() - planned.started, 3)}


__all__ = ["FLOOR_FILE", "CalibrationPlan", "PlannedRerun", "check", "plan", "reduce", "rerun"]
