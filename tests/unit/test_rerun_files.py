"""A mapped calibration's working files (``auditor.steps.rerun_files``): what is refused when read back.

The store is the in-memory one, the plan a real ``CalibrationPlan``, the session a small stand-in holding the store
and no signer (the signed path, with a real rerun, is ``tests/dags/test_mapped_calibration.py``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from auditor.errors import Findings, InfrastructureError
from auditor.lineage.record import EnvironmentInfo, RunRecord
from auditor.rebuild.run import RunResult
from auditor.steps import rerun_files as files
from auditor.steps.calibrate import calibration_seeds
from auditor.steps.mapped import CalibrationPlan, PlannedRerun
from auditor.storage.memory import MemoryStore

SEED = 7


@dataclass
class _Session:  # what rerun_files reads of a session: its store and its signer
    store: MemoryStore
    signer: object = None


def _plan(store: MemoryStore, **changes) -> CalibrationPlan:
    base = dict(ref="models:/m/3", folder="calibration-reruns/m/3/abc", store=store.identity, runner="process", keyid=None,
                nonce=secrets.token_hex(32), replace=False, planned_at="2026-12-05T00:00:00Z", started=0.0,
                same=[PlannedRerun(kind="same", index=i, seed=SEED) for i in range(2)],
                varied=[PlannedRerun(kind="varied", index=i, seed=s) for i, s in enumerate(calibration_seeds(SEED, 3))])
    return CalibrationPlan(**{**base, **changes})


def _record() -> SimpleNamespace:
    return SimpleNamespace(seeds=SimpleNamespace(seed=SEED))


INFO = SimpleNamespace(ref="models:/m/3", name="m", version="3")


def test_a_file_written_by_the_calibration_reads_back_and_one_put_there_by_hand_does_not():
    session = _Session(MemoryStore(secrets.token_hex(4)))
    planned = _plan(session.store)
    assert files.write(session, planned, planned.key("varied-0.json"), b'{"ok": 1}')
    assert files.read(session, planned, planned.key("varied-0.json")) == b'{"ok": 1}'
    assert session.store.write(planned.key("varied-1.json"), b'{"metrics": {"auc": 0.5}}')  # planted, no tag
    with pytest.raises(Findings, match=r"varied-1\.json is not one this calibration wrote"):
        files.read(session, planned, planned.key("varied-1.json"))
    other = planned.model_copy(update={"nonce": secrets.token_hex(32)})  # the same folder under another plan's key
    with pytest.raises(Findings, match="not one this calibration wrote"):
        files.read(session, other, planned.key("varied-0.json"))


def test_a_retry_never_replaces_what_an_earlier_try_stored():
    session = _Session(MemoryStore(secrets.token_hex(4)))
    planned = _plan(session.store)
    key = planned.key("same-0.json")
    assert files.write(session, planned, key, b"first") is True
    assert files.write(session, planned, key, b"second") is False
    assert files.read(session, planned, key) == b"first"


@pytest.mark.parametrize("changes, words", [
    ({"folder": "calibration-reruns/other/1/abc"}, "of another version"),
    ({"ref": "models:/m/4"}, "of another version"),
    ({"varied": [PlannedRerun(kind="varied", index=i, seed=1000 + i) for i in range(3)]}, "seeds are not the recorded"),
    ({"same": [PlannedRerun(kind="same", index=i, seed=SEED + 1) for i in range(2)]}, "seeds are not the recorded"),
    ({"varied": [PlannedRerun(kind="varied", index=0, seed=calibration_seeds(SEED, 1)[0])]}, "at least"),
])
def test_a_plan_edited_in_xcom_is_refused(changes, words):
    session = _Session(MemoryStore(secrets.token_hex(4)))
    with pytest.raises(Exception, match=words):
        files.verify_plan(session, _plan(session.store, **changes), INFO, _record())
    files.verify_plan(session, _plan(session.store), INFO, _record())  # the plan as made passes


def test_a_worker_on_another_store_or_key_is_told_which():
    session = _Session(MemoryStore(secrets.token_hex(4)))
    with pytest.raises(InfrastructureError, match="same REPRO_REPORTS"):
        files.verify_plan(session, _plan(MemoryStore("elsewhere")), INFO, _record())
    with pytest.raises(InfrastructureError, match="same REPRO_SIGNING_KEY"):
        files.verify_plan(session, _plan(session.store, keyid="abc123"), INFO, _record())


def _run(cpu: str) -> RunResult:
    record = RunRecord.model_construct(environment=EnvironmentInfo.model_construct(machine="x86_64", cpu_model=cpu))
    return RunResult(output_dir=Path("."), metrics={}, weights=None, weights_sha256=None, record=record, wall_s=1.0,
                     accelerator_s=None, log_tail="")


def test_reruns_on_unlike_workers_are_no_noise_floor():
    planned = _plan(MemoryStore(secrets.token_hex(4)))
    files.one_platform(planned, [("same-0", _run("Xeon A")), ("same-1", _run("Xeon A"))])
    with pytest.raises(Findings, match=r"rerun same-1 ran on another platform.*one kind of worker"):
        files.one_platform(planned, [("same-0", _run("Xeon A")), ("same-1", _run("EPYC B"))])
