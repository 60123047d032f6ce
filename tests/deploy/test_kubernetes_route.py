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
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "REPRO_REBUILD_BACKEND": backend, "REPRO_K8S_IMAGE": IMAGE}
    result = subprocess.run([sys.executable, "-c", PARSE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
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
