"""Issue 25, acceptance 2: the CLI, the three auditing DAGs and the rebuild pod reach an audit through one call.

Real parts: Airflow (``dag.test()`` of the nightly and the on-demand rebuild DAG on SQLite metadata, in a fresh
interpreter, see conftest), the CLI's and the pod's own ``main``. The one stand-in, said here: the door itself,
``auditor.steps.session.Session.audit`` (a public method), is replaced in that child process by a recorder that
returns a fixed verdict, and the nightly's sample is fixed (``Session.sample``), so no model is rebuilt: what is
under test is which call each entry point makes, not the audit (the audit's own tests are tests/integration).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DATE = "2026-07-05"

PROBE = r"""
import json, os, sys, types
sys.path.insert(0, os.environ["PROBE_REPO"])
import pendulum
import auditor.steps.session as session_module
from auditor.steps.options import AuditOutcome
from tests.fixtures.audits import make_audit

calls = []
entry = {"now": None}

def recording_audit(self, ref, options=None, *, progress=None):
    calls.append({"entry": entry["now"], "ref": ref, "task": options.task, "last_try": options.last_try,
                  "date": options.date, "publish": options.publish})
    return AuditOutcome(ref=ref, result=make_audit(name="door", version=ref.rsplit("/", 1)[-1]))

session_module.Session.audit = recording_audit
session_module.Session.sample = lambda self, date, models=None: {
    "picks": [{"ref": "models:/door/2", "reason": "probe"}], "skipped": [], "hours": 0.0}
session_module.Session.publish_night = lambda self, date, sample, results, failure: {"date": date, "audits": list(results)}
session_module.Session.retention = lambda self, *a, **k: {"versions": [], "red": []}  # the retention task: not this test's door

from airflow.dag_processing.dagbag import DagBag
bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
date = pendulum.parse(os.environ["PROBE_DATE"])
states = {}

entry["now"] = "repro_rebuild_model"
states[entry["now"]] = str(bag.get_dag("repro_rebuild_model").test(logical_date=date, run_conf={"model_uri": "models:/door/1"}).state)
entry["now"] = "repro_nightly_audit"
states[entry["now"]] = str(bag.get_dag("repro_nightly_audit").test(logical_date=date).state)

# The asset-triggered DAG cannot be given a triggering event by dag.test(): its audit task, the same operator,
# is executed with the ref its template would render from the event.
entry["now"] = "repro_audit_registered_version"
dag = bag.get_dag("repro_audit_registered_version")
task = dag.get_task("audit")
task.model_ref = "models:/door/3"
context = {"ti": types.SimpleNamespace(try_number=1), "dag": dag, "run_id": "probe", "params": {}, "ds": os.environ["PROBE_DATE"],
           "outlet_events": {}}
try:
    task.execute(context)
except Exception as exc:  # after the audit call: only the report's asset event needs a real task instance
    states[entry["now"]] = f"after the call: {type(exc).__name__}"
operator_classes = sorted({type(bag.get_dag(d).get_task(t)).__name__ for d, t in
                          [("repro_rebuild_model", "rebuild"), ("repro_audit_registered_version", "audit")]})

entry["now"] = "cli"
from auditor.cli import main as cli_main
try:
    cli_main(["audit", "models:/door/4", "--date", os.environ["PROBE_DATE"], "--json"])
except SystemExit as exc:
    states["cli"] = exc.code

entry["now"] = "pod"
from auditor.airflow import pod_main
states["pod"] = pod_main.main(["--ref", "models:/door/5", "--date", os.environ["PROBE_DATE"], "--audit-run", "probe/pod"])

json.dump({"calls": calls, "states": states, "operators": operator_classes}, open(os.environ["PROBE_OUT"], "w"))
"""


def test_the_cli_the_three_dags_and_the_pod_audit_through_the_one_door(airflow_db, run_in_airflow, tmp_path):
    env = {**airflow_db, "PROBE_DATE": DATE, "PROBE_REPO": str(REPO), "REPRO_HOME": str(tmp_path / "home"),
           "REPRO_REPORTS": str(tmp_path / "reports")}
    probe = run_in_airflow(PROBE, env, cwd=tmp_path)
    by_entry = {call["entry"]: call for call in probe["calls"]}
    assert sorted(by_entry) == sorted(["repro_rebuild_model", "repro_nightly_audit", "repro_audit_registered_version", "cli", "pod"]), probe
    assert [by_entry[e]["ref"] for e in ("repro_rebuild_model", "repro_nightly_audit", "repro_audit_registered_version", "cli", "pod")] == [
        f"models:/door/{n}" for n in range(1, 6)]
    assert all(by_entry[e]["date"] == DATE for e in by_entry), by_entry
    # orchestrators call as a task (an unresolvable ref is a row, a failed publish is retried); the CLI does not
    assert {e: by_entry[e]["task"] for e in by_entry} == {
        "repro_rebuild_model": True, "repro_nightly_audit": True, "repro_audit_registered_version": True, "cli": False, "pod": True}
    assert all(call["publish"] for call in probe["calls"])
    assert probe["operators"] == ["AuditOperator"]  # the same operator class serves every auditing DAG
    assert probe["states"]["cli"] == 0 and probe["states"]["pod"] == 0, probe["states"]
    assert probe["states"]["repro_rebuild_model"].endswith("success"), probe["states"]
    assert probe["states"]["repro_nightly_audit"].endswith("success"), probe["states"]
