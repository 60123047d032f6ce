"""The pod a rebuild task submits when ``REPRO_REBUILD_BACKEND=kubernetes``, as a plain dict.

One pod per audited model version, launched by ``KubernetesPodOperator`` with
``pod_template_dict=pod_template()`` and ``arguments=pod_arguments(ref)``. The
pod runs ``python -m auditor.deploy.pod_main``: the same
``pipeline.audit_and_publish`` the Celery route calls, so both routes publish
the same evidence, exactly once per (model version, date).

What the spec holds, and why:

- the trainer image **by digest** (a tag can move under a published report);
- an ``nvidia.com/gpu`` limit (and the same request) so the scheduler places the
  pod on an accelerator node, with the toleration GPU node pools usually carry;
- a locked-down security context: non-root, read-only root filesystem, no
  privilege escalation, every capability dropped, the runtime's seccomp profile,
  no service-account token (a rebuild never talks to the Kubernetes API);
- no host network, ports, PID or IPC, no extra DNS, no annotations or labels
  beyond the app's own: the namespace's network policies apply unchanged;
- scratch space as ``emptyDir`` volumes (``/work``, ``/tmp``, ``/dev/shm``),
  because the root filesystem is read-only;
- settings from a ConfigMap and credentials from a Secret the platform team
  creates: nothing secret is rendered into the spec.

Airflow, not the kubelet, retries (``restartPolicy: Never``), and a pod that
outlives the rebuild timeout is stopped by ``activeDeadlineSeconds``.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auditor.errors import BadInput
from auditor.settings import Settings

CONTAINER = "base"  # the name KubernetesPodOperator reconciles its own arguments into
UID = 10001  # the trainer image's non-root user (docker/Dockerfile)
DIGEST_REF = re.compile(r"^[^\s@]+@sha256:[0-9a-f]{64}$")
APP_LABELS = {"app.kubernetes.io/name": "repro-audit", "app.kubernetes.io/component": "rebuild"}

# Templated by Airflow when the operator renders ``arguments``: the task's logical date and run.
DATE_TEMPLATE = "{{ ds }}"
AUDIT_RUN_TEMPLATE = "{{ dag.dag_id }}/{{ run_id }}"


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name) or ""
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise BadInput(f"environment variable {name}={raw!r} is not a positive integer", hint=f"set {name} to e.g. {default}")
    return int(raw)


def _selector(env: Mapping[str, str], name: str) -> dict[str, str]:
    raw = (env.get(name) or "").strip()
    if not raw:
        return {}
    pairs = {}
    for item in raw.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or not key:
            raise BadInput(f"environment variable {name}={raw!r} is not key=value[,key=value]",
                           hint=f"e.g. {name}=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
        pairs[key] = value
    return pairs


@dataclass(frozen=True)
class PodSettings:
    """What a platform team provides for the Kubernetes route (``REPRO_K8S_*``)."""

    image: str
    namespace: str = "repro-audit"
    gpus: int = 1
    cpu: str = "4"
    memory: str = "16Gi"
    work_size: str = "50Gi"
    service_account: str = "repro-rebuild"
    config_map: str = "repro-audit-settings"
    secret: str = "repro-audit-credentials"
    node_selector: dict[str, str] = field(default_factory=dict)
    priority_class: str | None = None
    image_pull_secret: str | None = None
    timeout_s: int = 3600

    def __post_init__(self) -> None:
        if not DIGEST_REF.match(self.image):
            raise BadInput(
                f"trainer image {self.image!r} is not pinned by digest",
                hint="set REPRO_K8S_IMAGE to REGISTRY/REPO@sha256:<64 hex> (docker buildx imagetools inspect prints it)",
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, settings: Settings | None = None) -> PodSettings:
        """Read ``REPRO_K8S_*``; ``REPRO_K8S_IMAGE`` is required, the rest have defaults."""
        env = os.environ if env is None else env
        image = env.get("REPRO_K8S_IMAGE") or ""
        if not image:
            raise BadInput("environment variable REPRO_K8S_IMAGE is not set",
                           hint="set it to the trainer image by digest: REGISTRY/REPO@sha256:<64 hex>")
        settings = settings or Settings.from_env(env)
        return cls(
            image=image,
            namespace=env.get("REPRO_K8S_NAMESPACE") or cls.namespace,
            gpus=_int(env, "REPRO_K8S_GPUS", cls.gpus),
            cpu=env.get("REPRO_K8S_CPU") or cls.cpu,
            memory=env.get("REPRO_K8S_MEMORY") or cls.memory,
            work_size=env.get("REPRO_K8S_WORK_SIZE") or cls.work_size,
            service_account=env.get("REPRO_K8S_SERVICE_ACCOUNT") or cls.service_account,
            config_map=env.get("REPRO_K8S_CONFIGMAP") or cls.config_map,
            secret=env.get("REPRO_K8S_SECRET") or cls.secret,
            node_selector=_selector(env, "REPRO_K8S_NODE_SELECTOR"),
            priority_class=env.get("REPRO_K8S_PRIORITY_CLASS") or None,
            image_pull_secret=env.get("REPRO_K8S_IMAGE_PULL_SECRET") or None,
            timeout_s=settings.rebuild_timeout_s,
        )


def pod_arguments(model_ref: str, *, date: str = DATE_TEMPLATE, audit_run: str = AUDIT_RUN_TEMPLATE) -> list[str]:
    """The container's arguments for one model (Airflow fills the templates when the task runs)."""
    return ["--ref", model_ref, "--date", date, "--audit-run", audit_run]


def pod_template(pod: PodSettings) -> dict[str, Any]:
    """The rebuild pod without per-model arguments: a ``V1Pod`` as a dict."""
    image_name, _, digest = pod.image.partition("@")
    resources = {"cpu": pod.cpu, "memory": pod.memory, "nvidia.com/gpu": str(pod.gpus)}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": pod.timeout_s + 600,  # the rebuild's own timeout, plus fetching and publishing
        "serviceAccountName": pod.service_account,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": UID,
            "runAsGroup": UID,
            "fsGroup": UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": CONTAINER,
                "image": pod.image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python", "-m", "auditor.deploy.pod_main"],
                "env": [
                    # The rebuild's own record names the image it ran in.
                    {"name": "REPRO_IMAGE", "value": image_name},
                    {"name": "REPRO_IMAGE_DIGEST", "value": digest},
                    {"name": "REPRO_HOME", "value": "/work/.repro"},
                    {"name": "REPRO_RUNNER", "value": "process"},
                ],
                "envFrom": [{"configMapRef": {"name": pod.config_map}}, {"secretRef": {"name": pod.secret}}],
                "resources": {"requests": dict(resources), "limits": dict(resources)},
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "privileged": False,
                    "readOnlyRootFilesystem": True,
                    "runAsNonRoot": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "work", "mountPath": "/work"},
                    {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 - an emptyDir, private to the pod
                    {"name": "shm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "work", "emptyDir": {"sizeLimit": pod.work_size}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            # torch's DataLoader workers share tensors through /dev/shm; the runtime's default is 64 MiB.
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        ],
    }
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.priority_class:
        spec["priorityClassName"] = pod.priority_class
    if pod.image_pull_secret:
        spec["imagePullSecrets"] = [{"name": pod.image_pull_secret}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": pod.namespace, "labels": dict(APP_LABELS)},
        "spec": spec,
    }


def render_pod(model_ref: str, pod: PodSettings, *, date: str = DATE_TEMPLATE,
               audit_run: str = AUDIT_RUN_TEMPLATE) -> dict[str, Any]:
    """The whole pod one rebuild task submits for ``model_ref``."""
    rendered = copy.deepcopy(pod_template(pod))
    rendered["spec"]["containers"][0]["args"] = pod_arguments(model_ref, date=date, audit_run=audit_run)
    return rendered


def operator_kwargs(pod: PodSettings) -> dict[str, Any]:
    """Keyword arguments for ``KubernetesPodOperator.partial(...)``; map ``arguments`` over the picks.

    XCom is on, so the DAG's publish step gets each audit's result as on the
    Celery route: the pod writes it to ``/airflow/xcom/return.json`` and the
    operator's sidecar (the provider pins its image by exact version; the
    connection's ``xcom_sidecar_container_image`` can pin it by digest) hands it
    over. The sidecar gets the same locked-down security context.
    """
    template = pod_template(pod)
    return {
        "namespace": pod.namespace,
        "name": "repro-rebuild",
        "pod_template_dict": template,
        "base_container_name": CONTAINER,
        "do_xcom_push": True,
        "xcom_sidecar_container_security_context": dict(template["spec"]["containers"][0]["securityContext"]),
        "get_logs": True,
        "reattach_on_restart": True,
        "on_finish_action": "delete_succeeded_pod",
        "startup_timeout_seconds": 900,  # pulling a CUDA image onto a fresh node takes minutes
    }
