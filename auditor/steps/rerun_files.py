"""A mapped calibration's plan (``CalibrationPlan``, its ``PlannedRerun``s) and its working files in the reports store.

Each rerun's result (``same-I.json``, ``varied-I.json``) and the same-seed floor (``floor.json``) are written once, as
conditional creates, under the plan's folder. They are read back as evidence, by other workers, so every one carries:

- a **tag**: an empty object ``NAME.<HMAC-SHA256 of the key and the bytes under the plan's nonce>.mac``. The nonce
  is made at planning and travels only in the plan (Airflow's XCom, a pod's arguments), never in the store: someone
  who can write to the store but not to Airflow cannot make a tag, so a result planted before the real rerun wrote
  (the real one then loses the conditional create) or replaced after it is refused, signing key or not;
- where the auditor signs, a **seal**: ``NAME.<sha256 hex>.dsse``, a DSSE envelope over the file's sha256 by the
  worker's key, which must be the key the plan was made under (every worker the same signing key).

A same-seed model file (the floor compares them pairwise) is stored by its sha256 and must hash to what its tagged
result says. ``verify_plan`` holds what a plan from XCom says against what it must be (the folder of this version,
the seeds derived from the record, the counts, the store, the key), so an edited plan is refused too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from auditor.digests import sha256_digest, sha256_hex
from auditor.errors import Findings, InfrastructureError, NotFound
from auditor.rebuild.run import RunResult

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
    store: str  # the reports store's identity: every worker must keep the reruns in the same one
    runner: str  # the runner's name, resolved at planning
    keyid: str | None  # the signing key the plan was made under (None: unsigned); every worker must sign with it
    nonce: str  # hex: the key of the working files' tags (``rerun_files``); never written to the store
    replace: bool
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


def signer_keyid(session: Any) -> str | None:
    """The key id this worker signs with (None: it does not sign)."""
    return session.signer.keyid if session.signer is not None else None


def verify_plan(session: Any, planned: CalibrationPlan, info: Any, record: Any) -> None:
    """The plan is this version's, as ``plan`` made it, and this worker can keep to it (``Findings`` or
    ``InfrastructureError`` naming what differs)."""
    from auditor.report.ledger import CALIBRATION_RERUNS
    from auditor.settings import REPORTS, SIGNING_KEY
    from auditor.steps.calibrate import calibration_seeds, check_counts

    where = f"the calibration plan of {planned.ref}"
    seed = record.seeds.seed if record.seeds else None
    if planned.ref != info.ref or not planned.folder.startswith(f"{CALIBRATION_RERUNS}{info.name}/{info.version}/"):
        raise Findings(f"{where} names folder {planned.folder} of another version than {info.ref}; refused")
    check_counts(len(planned.varied), len(planned.same))
    if [r.seed for r in planned.same] != [seed] * len(planned.same) or \
            [r.seed for r in planned.varied] != calibration_seeds(seed, len(planned.varied)):
        raise Findings(f"{where}: its seeds are not the recorded seed {seed} and the ones derived from it; refused")
    if session.store.identity != planned.store:
        raise InfrastructureError(f"{where} keeps its reruns at {planned.store}, and this worker's reports store is "
                                  f"{session.store.identity}", hint=f"give every worker the same {REPORTS.name}")
    if signer_keyid(session) != planned.keyid:
        raise InfrastructureError(f"{where} was made under signing key {planned.keyid or 'none'}, and this worker "
                                  f"signs with {signer_keyid(session) or 'none'}",
                                  hint=f"give every worker the same {SIGNING_KEY.name}, then re-run the calibration")


def _tag(planned: CalibrationPlan, key: str, data: bytes) -> str:
    mac = hmac.new(bytes.fromhex(planned.nonce), key.encode("utf-8") + b"\0" + data, hashlib.sha256).hexdigest()
    return f"{key}.{mac}.mac"


def _seal_key(key: str, data: bytes) -> str:
    return f"{key}.{sha256_hex(data)}.dsse"


def write(session: Any, planned: CalibrationPlan, key: str, data: bytes) -> bool:
    """``data`` under ``key`` (a conditional create: False when an earlier try wrote it), after its tag and seal."""
    session.store.write(_tag(planned, key, data), b"")
    if session.signer is not None:
        from auditor.report import attest

        doc = attest.statement({key: sha256_digest(data)}, {"folder": planned.folder},
                               predicate_type=attest.RERUN_PREDICATE_TYPE)
        session.store.write(_seal_key(key, data), attest.sign(doc, session.signer))
    return session.store.write(key, data)


def read(session: Any, planned: CalibrationPlan, key: str) -> bytes:
    """The bytes under ``key``, refused (``Findings`` naming the file) without the plan's tag or, where the plan was
    made under a key, the seal by it; ``NotFound`` when nothing is there."""
    store = session.store
    data = store.read(key)
    if not store.exists(_tag(planned, key, data)):
        raise Findings(f"{store.uri}/{key} is not one this calibration wrote (no tag under its plan): it was put in "
                       "the store by hand, or changed there; refused", hint="re-run the calibration")
    if planned.keyid is None:
        return data
    from auditor.report import attest
    from auditor.steps.calibrate import judge_key

    where = f"{store.uri}/{_seal_key(key, data)}"
    try:
        doc = attest.verify(store.read(_seal_key(key, data)), judge_key(session), where=where,
                            predicate_type=attest.RERUN_PREDICATE_TYPE)
    except NotFound:
        raise Findings(f"{store.uri}/{key} has no seal by the auditor's key ({where} is missing); refused",
                       hint="re-run the calibration") from None
    if attest.subject_digests(doc).get(key) != sha256_digest(data):
        raise Findings(f"{where} seals other bytes than {store.uri}/{key} holds; refused", hint="re-run the calibration")
    return data


def store_result(session: Any, planned: CalibrationPlan, item: PlannedRerun, run: RunResult, decided: Any,
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
    first = write(session, planned, planned.key(f"{item.name}.json"), json.dumps(result, sort_keys=True).encode("utf-8"))
    if not first:
        log.warning("calibrate %s: rerun %s was stored by another try meanwhile; this one is not counted",
                    planned.ref, item.name)
    return first


def load_result(session: Any, planned: CalibrationPlan, item: PlannedRerun, scratch: Path) -> tuple[RunResult, Any, float | None]:
    """A stored result as the ``RunResult`` the CLI's path would hold (model file downloaded), its decisions, CPU s."""
    from auditor.judge.weights import sha256_file
    from auditor.lineage.record import RunRecord

    store = session.store
    key = planned.key(f"{item.name}.json")
    try:
        data = json.loads(read(session, planned, key))
    except NotFound:
        raise InfrastructureError(f"calibration of {planned.ref}: rerun {item.name} left no result at {store.uri}/{key}",
                                  hint="retry its mapped task (it reruns only what is missing)") from None
    if data.get("rerun") != item.name or data.get("seed") != item.seed:
        raise Findings(f"calibration of {planned.ref}: {store.uri}/{key} holds rerun {data.get('rerun')} "
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


def one_platform(planned: CalibrationPlan, runs: list[tuple[str, RunResult]], expected: dict[str, Any] | None = None) -> None:
    """Every rerun ran on one platform (and, given, on ``expected``'s): the CLI reruns on one machine, and a floor or a
    band measured across unlike workers would count their difference as noise. ``Findings`` naming the reruns."""
    from auditor.judge.floors import platform_differences, platform_fingerprint

    seen = [(name, platform_fingerprint(run.record.environment if run.record else None)) for name, run in runs]
    reference = expected if expected is not None else (seen[0][1] if seen else {})
    for name, platform in seen:
        differences = platform_differences(reference, platform)
        if differences:
            raise Findings(f"calibration of {planned.ref} stopped: rerun {name} ran on another platform than the "
                           f"same-seed reruns ({'; '.join(differences)}): a spread across unlike workers is no noise "
                           "floor", hint="route the gpu queue to one kind of worker, or calibrate with the CLI on one")


__all__ = ["FLOOR_FILE", "CalibrationPlan", "PlannedRerun", "load_result", "one_platform", "read", "signer_keyid", "store_result", "verify_plan", "write"]
