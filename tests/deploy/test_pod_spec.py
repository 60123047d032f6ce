"""The pod a rebuild task submits on the Kubernetes route, checked without a cluster.

The spec is rendered by ``auditor.airflow.kubernetes`` and then built into a
``V1Pod`` by the real ``KubernetesPodOperator`` (its ``dry_run`` build needs no
cluster and no kube config), so what is checked is what the operator would send.
"""

from __future__ import annotations

import json
import os

import pytest

from auditor.airflow import DATE_TEMPLATE, rebuild_backend
from auditor.airflow.context import LAST_TRY_TEMPLATE
from auditor.airflow.kubernetes import PodSettings, operator_kwargs, pod_arguments, pod_command, render_pod
from auditor.errors import BadInput

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example/ml/repro-trainer@{DIGEST}"
ENV = {"REPRO_K8S_IMAGE": IMAGE, "REPRO_K8S_GPUS": "2", "REPRO_K8S_NODE_SELECTOR": "pool=gpu-h100",
       "REPRO_REBUILD_TIMEOUT_S": "1800"}
REF = "models:/churn/3"


def _container(pod: dict) -> dict:
    """The rebuild's container (the operator may add its XCom sidecar beside it)."""
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "base"]
    return container


@pytest.fixture()
def pod() -> dict:
    return render_pod(REF, PodSettings.from_env(ENV), date="2026-03-02", audit_run="repro_nightly_audit/run-1")


def test_the_rebuild_pod_asks_for_gpus_as_a_limit_and_an_equal_request(pod):
    resources = _container(pod)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "2"
    assert resources["requests"]["nvidia.com/gpu"] == "2"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu-h100"}


def test_the_rebuild_pod_runs_the_trainer_image_by_digest_and_records_it(pod):
    container = _container(pod)
    assert container["image"] == IMAGE
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["REPRO_IMAGE"] == "registry.example/ml/repro-trainer"
    assert env["REPRO_IMAGE_DIGEST"] == DIGEST


@pytest.mark.parametrize("image", ["registry.example/ml/repro-trainer:1.0", "repro-trainer",
                                   "repro-trainer@sha256:abc", "repro-trainer:latest@sha256:" + "AB" * 32])
def test_a_trainer_image_without_a_full_digest_is_refused(image):
    with pytest.raises(BadInput, match="not pinned by digest"):
        PodSettings.from_env({"REPRO_K8S_IMAGE": image})


def test_a_missing_trainer_image_names_the_variable_to_set():
    with pytest.raises(BadInput, match="REPRO_K8S_IMAGE"):
        PodSettings.from_env({})


def test_the_rebuild_pod_is_locked_down(pod):
    spec, container = pod["spec"], _container(pod)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    context = container["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["privileged"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert spec["restartPolicy"] == "Never"
    assert spec["activeDeadlineSeconds"] >= 1800


def test_the_rebuild_pod_asks_for_no_network_or_host_exceptions(pod):
    spec, container = pod["spec"], _container(pod)
    assert not spec["hostNetwork"] and not spec["hostPID"] and not spec["hostIPC"]
    assert "ports" not in container and "hostAliases" not in spec and "dnsConfig" not in spec
    assert "annotations" not in pod["metadata"]
    assert set(pod["metadata"]["labels"]) == {"app.kubernetes.io/name", "app.kubernetes.io/component"}
    assert all(set(volume) <= {"name", "emptyDir"} for volume in spec["volumes"]), "only emptyDir scratch, no hostPath"


def test_the_rebuild_pod_holds_no_secret_only_references_to_one():
    env = {**ENV, "AWS_SECRET_ACCESS_KEY": "planted-secret-value", "MLFLOW_TRACKING_PASSWORD": "planted-password"}
    rendered = json.dumps(render_pod(REF, PodSettings.from_env(env)))
    assert "planted-" not in rendered
    assert {"secretRef": {"name": "repro-audit-credentials"}} in _container(json.loads(rendered))["envFrom"]


def test_the_arguments_carry_the_model_and_airflows_date_and_run_templates():
    # the date is the Celery tasks' rule as a template (tests/unit/test_audit_date.py renders both); the
    # templates ride in the command, a field of the operator's partial, which Airflow renders; the mapped
    # arguments come from an upstream XCom, which Airflow never renders, so they hold the ref alone
    assert pod_command() == ["python", "-m", "auditor.airflow.pod_main", "--date", DATE_TEMPLATE,
                             "--audit-run", "{{ dag.dag_id }}/{{ run_id }}", "--last-try", LAST_TRY_TEMPLATE]
    assert pod_arguments(REF) == ["--ref", REF]
    assert "params.get('date')" in DATE_TEMPLATE and "ds" in DATE_TEMPLATE


def test_kubernetes_pod_operator_builds_the_same_locked_down_gpu_pod():
    pod_module = pytest.importorskip("airflow.providers.cncf.kubernetes.operators.pod",
                                     reason="apache-airflow-providers-cncf-kubernetes is not installed")
    from kubernetes.client import ApiClient

    settings = PodSettings.from_env(ENV)
    operator = pod_module.KubernetesPodOperator(
        task_id="audit", arguments=pod_arguments(REF),
        **operator_kwargs(settings, date="2026-03-02", audit_run="repro_nightly_audit/run-1"))
    built = ApiClient().sanitize_for_serialization(operator.build_pod_request_obj(dry_run=True))
    expected = render_pod(REF, settings, date="2026-03-02", audit_run="repro_nightly_audit/run-1")
    container = _container(built)
    assert container["image"] == IMAGE
    assert container["args"] == _container(expected)["args"]
    assert container["command"] == _container(expected)["command"] == [
        "python", "-m", "auditor.airflow.pod_main", "--date", "2026-03-02", "--audit-run", "repro_nightly_audit/run-1",
        "--last-try", LAST_TRY_TEMPLATE]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["securityContext"] == _container(expected)["securityContext"]
    assert built["spec"]["securityContext"] == expected["spec"]["securityContext"]
    assert built["spec"]["automountServiceAccountToken"] is False
    assert not built["spec"].get("hostNetwork")
    assert built["spec"]["restartPolicy"] == "Never"
    assert built["metadata"]["namespace"] == "repro-audit"
    # the XCom sidecar that hands the result to the DAG is locked down the same way, its image pinned
    (sidecar,) = [c for c in built["spec"]["containers"] if c["name"] != "base"]
    assert sidecar["securityContext"] == _container(expected)["securityContext"]
    tag = sidecar["image"].rpartition(":")[2]
    assert "@sha256:" in sidecar["image"] or (tag.count(".") == 2 and tag != "latest"), sidecar["image"]


def test_the_rebuild_route_is_chosen_by_configuration():
    assert rebuild_backend({}) == "celery"
    assert rebuild_backend({"REPRO_REBUILD_BACKEND": "kubernetes"}) == "kubernetes"
    with pytest.raises(BadInput, match="REPRO_REBUILD_BACKEND"):
        rebuild_backend({"REPRO_REBUILD_BACKEND": "slurm"})


def test_the_pods_entry_point_reports_a_model_level_failure_as_a_verdict_and_exits_0(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "MLFLOW_TRACKING_URI": "memory://empty", "REPRO_REPORTS": str(tmp_path / "reports"),
           "REPRO_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-m", "auditor.airflow.pod_main", "--ref", "models:/absent/1", "--date",
                           "2026-03-02", "--audit-run", "repro_nightly_audit/run-1"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["verdict"] == "ERROR" and "absent" in result["error"] and result["report"] is None
