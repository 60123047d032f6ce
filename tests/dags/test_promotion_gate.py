"""The promotion gate DAG (issue 31, build point 2 from Airflow): an alias move in MLflow triggers the comparison.

Real parts: Airflow 3 ``dag.test()`` on SQLite (in a child process, see conftest) running the real DAG file,
its sensor reading and writing the real Airflow Variable, the session's calibration, comparison and reports
store. Stubbed, and why: the registry is the in-memory twin and the runner and workspace are the fakes of
tests/unit/test_compare.py (a per-version quality plus seed-driven noise), handed in through a stand-in for
the public ``auditor.steps.Session`` in the child process (as tests/dags/test_airflow_outcomes.py does),
because this test is about the DAG noticing the move and showing the gate, not about training.

The champion alias is seen at v1; it moves to v2 (the same recipe, another seed: within seed noise, a red
``gate``), then to v4 while the worker crashes (v4's calibration fails, so no comparison runs and the move is
not remembered), the next run compares that same move (worse: red), then to v3 (a better recipe than v4: green).
Each version is calibrated by the gate itself, as mapped reruns, the first time it is compared.
"""

from __future__ import annotations

import json
from pathlib import Path

REGISTRY = "memory://promotion-gate"

GATE = r"""
import json, os
import pendulum

import auditor.steps
import auditor.steps.session
from auditor.registry.memory import MemoryRegistry
from tests.unit.test_compare import QUALITY, SeedRunner, prepare, registration

registry = MemoryRegistry.named(os.environ["PROBE_REGISTRY"])
for i, variant in enumerate(QUALITY):  # v1 incumbent, v2 twin, v3 better, v4 worse
    record, weights = registration(i, variant)
    registry.register_record("m", record, weights=weights)

class CrashingRunner(SeedRunner):
    # crashes while the flag file exists: a comparison that never finished

    def run(self, spec):
        if os.path.exists(os.environ["PROBE_CRASH_FLAG"]):
            raise RuntimeError("the worker died")
        return super().run(spec)

class StandInSession(auditor.steps.session.Session):
    def __init__(self, settings, **kwargs):
        kwargs.setdefault("prepare", prepare)
        kwargs.setdefault("runner", CrashingRunner())
        super().__init__(settings, **kwargs)

auditor.steps.Session = auditor.steps.session.Session = StandInSession

from airflow.dag_processing.dagbag import DagBag
from airflow.models import Variable
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select
from auditor.airflow.promotion import ALIAS_STATE_VARIABLE

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
dag = bag.get_dag("repro_promotion_gate")
Variable.set(ALIAS_STATE_VARIABLE, json.dumps({"m": {"champion": "1"}}))  # last seen: champion at v1
out = {}
flag = os.environ["PROBE_CRASH_FLAG"]
for day, version, crash in (("2026-09-01", "2", False), ("2026-09-02", "4", True), ("2026-09-03", "4", False),
                            ("2026-09-04", "3", False)):
    registry.set_alias("m", "champion", version)
    if crash:
        open(flag, "w").close()
    elif os.path.exists(flag):
        os.remove(flag)
    run = dag.test(logical_date=pendulum.parse(day))
    with create_session() as session:
        rows = session.scalars(select(XComModel).where(XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id)).all()
        xcom = {f"{x.task_id}[{x.map_index}].{x.key}": XComModel.deserialize_value(x) for x in rows}
    out[day] = {"state": str(run.state), "xcom": xcom,
                    "tis": {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()},
                    "seen": json.loads(Variable.get(ALIAS_STATE_VARIABLE))}
json.dump(out, open(os.environ["PROBE_OUT"], "w"))
"""


CALIBRATION_TASKS = ("plan_missing", "rerun_same_seed", "check_same_seed", "rerun_seed_varied", "reduce")


def _gate_tasks(tis: dict[str, str]) -> dict[str, str]:
    """The gate's own task instances, without those of the calibrations it runs first."""
    return {k: v for k, v in tis.items() if not k.startswith(CALIBRATION_TASKS)}


def test_an_alias_move_is_compared_and_a_candidate_within_noise_is_a_red_gate(airflow_db, run_in_airflow, tmp_path):
    env = {**airflow_db, "PROBE_REGISTRY": REGISTRY, "REPRO_HOME": str(tmp_path / "home"),
           "REPRO_REPORTS": str(tmp_path / "reports"), "REPRO_RETRY_DELAY_S": "0",
           "PROBE_CRASH_FLAG": str(tmp_path / "crash"),
           "AIRFLOW_CONN_REPRO_MLFLOW": json.dumps({"conn_type": "generic", "extra": {"tracking_uri": REGISTRY}})}
    out = run_in_airflow(GATE, env, cwd=tmp_path)
    twin, crashed, again, better = (out[d] for d in ("2026-09-01", "2026-09-02", "2026-09-03", "2026-09-04"))
    # v2 and v1 have no calibration: the gate calibrates both first, as mapped reruns (issue 43)
    assert _gate_tasks(twin["tis"]) == {"alias_moved[-1]": "success", "compare[0]": "success", "gate[0]": "failed",
                                        "remember[-1]": "success"}, twin["tis"]
    assert {s for k, s in twin["tis"].items() if k.startswith(CALIBRATION_TASKS)} == {"success"}, twin["tis"]
    assert {t["planned"]["ref"] for t in twin["xcom"]["plan_missing[-1].return_value"]} == {"models:/m/1", "models:/m/2"}
    assert twin["xcom"]["alias_moved[-1].return_value"] == [
        {"model": "m", "alias": "champion", "candidate": "models:/m/2", "incumbent": "models:/m/1"}]
    row = twin["xcom"]["compare[0].return_value"]
    assert row["gate"] == "within_noise" and row["words"] == "within seed noise"
    # the comparison crashed: the move stays unseen and the next run compares it
    # (here v4's calibration reruns crash: no comparison can run, and the move is not remembered either)
    assert "failed" in {s for k, s in crashed["tis"].items() if k.startswith("rerun_")}, crashed["tis"]
    assert crashed["tis"]["remember[-1]"] == "upstream_failed", crashed["tis"]
    assert {s for k, s in crashed["tis"].items() if k.startswith("compare")} <= {"failed", "upstream_failed"}
    assert crashed["seen"] == {"m": {"champion": "2"}}
    assert again["xcom"]["alias_moved[-1].return_value"][0]["incumbent"] == "models:/m/2"
    assert again["xcom"]["compare[0].return_value"]["gate"] == "worse" and again["tis"]["gate[0]"] == "failed"
    assert _gate_tasks(better["tis"]) == {"alias_moved[-1]": "success", "compare[0]": "success", "gate[0]": "success",
                                          "remember[-1]": "success"}, better["tis"]
    assert better["xcom"]["compare[0].return_value"]["incumbent"] == "models:/m/4"  # the version the alias left
    assert (twin["seen"], again["seen"], better["seen"]) == (
        {"m": {"champion": "2"}}, {"m": {"champion": "4"}}, {"m": {"champion": "3"}})
    published = sorted(p.name for p in Path(tmp_path / "reports" / "comparisons" / "m").iterdir())
    assert len(published) == 6 and sum(p.endswith(".thresholds.json") for p in published) == 3
    thresholds = json.loads(next(p for p in (tmp_path / "reports/comparisons/m").iterdir() if p.name.endswith("thresholds.json")).read_text())
    assert thresholds["auc"]["greater_is_better"] is True
