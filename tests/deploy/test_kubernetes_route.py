"""With REPRO_REBUILD_BACKEND=kubernetes the nightly DAG launches each audit as a pod (parsed for real, no cluster)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.example/repro-trainer@sha256:" + "ab" * 32

PARSE = r"""
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag("dags")
task = bag.dags["repro_nightly_audit"].get_task("audit")
print(json.dumps({"errors": {str(k): v[-400:] for k, v in bag.import_errors.items()}, "class": task.operator_class.__name__ if hasattr(task, "operator_class") else type(task).__name__, "pool": task.pool, "retries": task.retries}))
"""


def _parse(tmp_path, backend):
    return _probe(tmp_path, backend, PARSE)


def _probe(tmp_path, backend, script):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",  # a loaded CI machine, not a slow DAG file
           "REPRO_REBUILD_BACKEND": backend, "REPRO_K8S_IMAGE": IMAGE}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_kubernetes_route_makes_the_audit_a_pod_in_the_gpu_pool(tmp_path):
    parsed = _parse(tmp_path, "kubernetes")
    assert parsed["errors"] == {}
    assert parsed["class"] == "KubernetesPodOperator"
    assert parsed["pool"] == "repro_gpu" and parsed["retries"] >= 2


def test_the_default_route_keeps_the_audit_a_python_task(tmp_path):
    parsed = _parse(tmp_path, "celery")
    assert parsed["errors"] == {} and parsed["class"] != "KubernetesPodOperator"


# The mapped pod task rendered as Airflow renders it when a try starts: unmapped with its mapped value
# (which came from the sample's XCom, so Airflow leaves it as it is), then render_template_fields.
RENDER = r"""
import datetime as dt, json
from types import SimpleNamespace
from airflow.dag_processing.dagbag import DagBag
dag = DagBag("dags").dags["repro_nightly_audit"]
task = dag.get_task("audit")
run = SimpleNamespace(run_after=dt.datetime(2026, 3, 4, 23, 59, tzinfo=dt.UTC))
cases = {"scheduled": ({"ds": "2026-03-01", "params": dag.params}, 1),
         "date param": ({"ds": "2026-03-01", "params": {"date": "2026-01-02"}}, 1),
         "no logical date": ({"params": dag.params}, 1),
         "last try": ({"ds": "2026-03-01", "params": dag.params}, 3)}
out = {"mapped": sorted(task.expand_input.value), "retries": task.partial_kwargs["retries"], "rendered": {}}
for case, (extra, try_number) in cases.items():
    op = task.unmap({"arguments": ["--ref", "models:/m/1"]})
    context = {"dag": dag, "run_id": "manual__1", "dag_run": run, "ti": SimpleNamespace(try_number=try_number), "task": op}
    op.render_template_fields({**context, **extra})
    out["rendered"][case] = op.cmds + op.arguments
print(json.dumps(out))
"""


def test_the_pods_date_run_and_last_try_are_rendered_by_airflow_for_every_kind_of_run(tmp_path):
    """The templates ride in the partial's cmds: a template in the mapped arguments would reach the pod as text."""
    out = _probe(tmp_path, "kubernetes", RENDER)
    assert out["mapped"] == ["arguments"]
    assert out["retries"] == 2  # so try 3 is the last: only it publishes an ERROR, as on the Celery route
    entry = ["python", "-m", "auditor.airflow.pod_main"]
    run = ["--audit-run", "repro_nightly_audit/manual__1"]
    ref = ["--ref", "models:/m/1"]
    assert out["rendered"] == {
        "scheduled": [*entry, "--date", "2026-03-01", *run, "--last-try", "false", *ref],
        "date param": [*entry, "--date", "2026-01-02", *run, "--last-try", "false", *ref],
        "no logical date": [*entry, "--date", "2026-03-04", *run, "--last-try", "false", *ref],
        "last try": [*entry, "--date", "2026-03-01", *run, "--last-try", "true", *ref],
    }


# Issue 43: the calibration's reruns take the same route, one pod per rerun through the same mapped task shape.
CALIBRATION = r"""
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag("dags")
dag = bag.dags["repro_calibrate_tolerance"]
out = {"errors": {str(k): v[-400:] for k, v in bag.import_errors.items()}, "tasks": {}}
ticket = {"planned": {"ref": "models:/m/1"}, "item": {"kind": "varied", "index": 0, "seed": 7}}
for task in dag.tasks:
    entry = {"class": getattr(task, "operator_class", type(task)).__name__, "pool": task.pool, "queue": task.queue,
             "upstream": sorted(task.upstream_task_ids)}
    if entry["class"] == "KubernetesPodOperator":
        op = task.unmap({"arguments": ["--ticket", json.dumps(ticket, sort_keys=True)]})
        entry.update(cmds=op.cmds, arguments=op.arguments, image=op.pod_template_dict["spec"]["containers"][0]["image"],
                     mapped=sorted(task.expand_input.value), retries=task.partial_kwargs["retries"])
    out["tasks"][task.task_id] = entry
print(json.dumps(out))
"""


def test_on_the_kubernetes_route_each_calibration_rerun_is_a_pod_in_the_gpu_pool(tmp_path):
    out = _probe(tmp_path, "kubernetes", CALIBRATION)
    assert out["errors"] == {}
    tasks = out["tasks"]
    for task_id, upstream in (("rerun_same_seed", ["plan"]), ("rerun_seed_varied", ["check_same_seed"])):
        pod = tasks[task_id]
        assert pod["class"] == "KubernetesPodOperator" and pod["pool"] == "repro_gpu" and pod["retries"] >= 2
        assert pod["mapped"] == ["arguments"] and pod["upstream"] == upstream and pod["image"] == IMAGE
        assert pod["cmds"] == ["python", "-m", "auditor.airflow.rerun_pod"]
        assert pod["arguments"][0] == "--ticket" and json.loads(pod["arguments"][1])["item"]["seed"] == 7
    # the plan, the check and the reduce stay Celery tasks: only the reruns need an accelerator node
    assert {tasks[t]["class"] for t in ("plan", "check_same_seed", "reduce")} == {"_PythonDecoratedOperator"}


def test_on_the_celery_route_each_calibration_rerun_is_a_mapped_task_on_the_gpu_queue(tmp_path):
    out = _probe(tmp_path, "celery", CALIBRATION)
    assert out["errors"] == {}
    for task_id in ("rerun_same_seed", "rerun_seed_varied"):
        assert out["tasks"][task_id]["pool"] == "repro_gpu" and out["tasks"][task_id]["queue"] == "gpu"
        assert out["tasks"][task_id]["class"] == "_PythonDecoratedOperator"
