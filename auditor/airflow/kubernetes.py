"""The pod a rebuild task submits when ``REPRO_REBUILD_BACKEND=kubernetes``, as a plain dict.

One pod per audited model version, launched by ``KubernetesPodOperator`` with
``pod_template_dict=pod_template()``, ``cmds=pod_command()`` and ``arguments=pod_arguments(ref)``.
The run's date and id are Jinja templates in ``cmds``, a field of the operator's ``partial()``:
Airflow renders those, but not values mapped in from an upstream XCom (``arguments`` holds only
the model ref). The pod runs ``python -m auditor.airflow.pod_main``: the same
``Session.audit`` door the Celery route calls, so both routes publish
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auditor.airflow.context import AUDIT_RUN_TEMPLATE, DATE_TEMPLATE, LAST_TRY_TEMPLATE
from auditor.digests import is_digest_ref
from auditor.errors import BadInput
from auditor.settings import HOME, IMAGE, IMAGE_DIGEST, K8S_IMAGE, RUNNER, KubernetesSettings, Settings, get_settings

CONTAINER = "base"  # the name KubernetesPodOperator reconciles its own arguments into
UID = 10001  # the trainer image's non-root user (docker/Dockerfile)
APP_LABELS = {"app.kubernetes.io/name": "repro-audit", "app.kubernetes.io/component": "rebuild"}

# Templated by Airflow when the operator renders ``cmds``: the audit date and run (auditor.airflow.context).
POD_ENTRY_POINT = ("python", "-m", "auditor.airflow.pod_main")


@dataclass(frozen=True)
class PodSettings:
    """The Kubernetes route's settings, checked: the image is pinned by digest; the pod's deadline is set.

    Built from ``Settings.kubernetes`` (``REPRO_K8S_*``) and ``Settings.rebuild_timeout_s``; the
    defaults are the declarations' (``auditor.settings``).
    """

    image: str
    namespace: str = KubernetesSettings.namespace
    gpus: int = KubernetesSettings.gpus
    cpu: str = KubernetesSettings.cpu
    memory: str = KubernetesSettings.memory
    work_size: str = KubernetesSettings.work_size
    service_account: str = KubernetesSettings.service_account
    config_map: str = KubernetesSettings.config_map
    secret: str = KubernetesSettings.secret
    node_selector: dict[str, str] = field(default_factory=dict)
    priority_class: str | None = KubernetesSettings.priority_class
    image_pull_secret: str | None = KubernetesSettings.image_pull_secret
    timeout_s: int = Settings.rebuild_timeout_s

    def __post_init__(self) -> None:
        if not is_digest_ref(self.image):
            raise BadInput(
                f"trainer image {self.image!r} is not pinned by digest",
                hint=f"set {K8S_IMAGE.name} to REGISTRY/REPO@sha256:<64 hex> "
                "(docker buildx imagetools inspect prints it)",
            )

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> PodSettings:
        """The pod settings of ``settings`` (default ``get_settings()``); ``REPRO_K8S_IMAGE`` is required."""
        settings = settings or get_settings()
        k8s = settings.kubernetes
        if not k8s.image:
            raise BadInput(f"environment variable {K8S_IMAGE.name} is not set",
                           hint="set it to the trainer image by digest: REGISTRY/REPO@sha256:<64 hex>")
        return cls(
            image=k8s.image,
            namespace=k8s.namespace,
            gpus=k8s.gpus,
            cpu=k8s.cpu,
            memory=k8s.memory,
            work_size=k8s.work_size,
            service_account=k8s.service_account,
            config_map=k8s.config_map,
            secret=k8s.secret,
            node_selector=dict(k8s.node_selector),
            priority_class=k8s.priority_class,
            image_pull_secret=k8s.image_pull_secret,
            timeout_s=settings.rebuild_timeout_s,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, settings: Settings | None = None) -> PodSettings:
        """``from_settings`` of ``settings``, else of ``Settings.from_env(env)`` when ``env`` is given, else of
        ``get_settings()``."""
        if settings is None and env is not None:
            settings = Settings.from_env(env)
        return cls.from_settings(settings)


def pod_command(*, date: str = DATE_TEMPLATE, audit_run: str = AUDIT_RUN_TEMPLATE, last_try: str = LAST_TRY_TEMPLATE) -> list[str]:
    """The container's command: the entry point with the run's date, id and whether this try is the last
    (Airflow fills the templates; an ERROR is published on the last try only, as on the Celery route).

    Not in ``arguments``: the nightly maps those over the sample, and Airflow leaves a value that
    comes from an upstream XCom unrendered, so a template there would reach the pod as ``{{ … }}``.
    """
    return [*POD_ENTRY_POINT, "--date", date, "--audit-run", audit_run, "--last-try", last_try]


def pod_arguments(model_ref: str) -> list[str]:
    """The container's arguments for one model: the one value mapped over the sample."""
    return ["--ref", model_ref]


def pod_template(pod: PodSettings) -> dict[str, Any]:
    """The rebuild pod without per-model arguments: a ``V1Pod`` as a dict."""
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
        "containers": [_container(pod)],
        "volumes": _volumes(pod),
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


def _container(pod: PodSettings) -> dict[str, Any]:
    """The rebuild container: image by digest, GPU resources, settings and credentials by reference, locked down."""
    image_name, _, digest = pod.image.partition("@")
    resources = {"cpu": pod.cpu, "memory": pod.memory, "nvidia.com/gpu": str(pod.gpus)}
    return {
        "name": CONTAINER,
        "image": pod.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(POD_ENTRY_POINT),  # the operator's cmds (pod_command) take its place
        "env": [
            # The rebuild's own record names the image it ran in.
            {"name": IMAGE.name, "value": image_name},
            {"name": IMAGE_DIGEST.name, "value": digest},
            {"name": HOME.name, "value": "/work/.repro"},
            {"name": RUNNER.name, "value": "process"},
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


def _volumes(pod: PodSettings) -> list[dict[str, Any]]:
    """The pod's scratch space: ``emptyDir`` volumes, since the root filesystem is read-only."""
    return [
        {"name": "work", "emptyDir": {"sizeLimit": pod.work_size}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        # torch's DataLoader workers share tensors through /dev/shm; the runtime's default is 64 MiB.
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
    ]


def render_pod(model_ref: str, pod: PodSettings, *, date: str = DATE_TEMPLATE,
               audit_run: str = AUDIT_RUN_TEMPLATE) -> dict[str, Any]:
    """The whole pod one rebuild task submits for ``model_ref``."""
    rendered = copy.deepcopy(pod_template(pod))
    rendered["spec"]["containers"][0]["command"] = pod_command(date=date, audit_run=audit_run)
    rendered["spec"]["containers"][0]["args"] = pod_arguments(model_ref)
    return rendered


def operator_kwargs(pod: PodSettings, *, date: str = DATE_TEMPLATE, audit_run: str = AUDIT_RUN_TEMPLATE) -> dict[str, Any]:
    """Keyword arguments for ``KubernetesPodOperator.partial(...)``; map ``arguments`` over the picks.

    ``cmds`` carries the run's templates (``pod_command``), where Airflow renders them.

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
        "cmds": pod_command(date=date, audit_run=audit_run),
        "base_container_name": CONTAINER,
        "do_xcom_push": True,
        "xcom_sidecar_container_security_context": dict(template["spec"]["containers"][0]["securityContext"]),
        "get_logs": True,
        "reattach_on_restart": True,
        "on_finish_action": "delete_succeeded_pod",
        "startup_timeout_seconds": 900,  # pulling a CUDA image onto a fresh node takes minutes
    }


def pick_arguments(pick: Mapping[str, Any]) -> list[str]:
    """``pod_arguments`` of a sampled pick (what the nightly maps its pods over)."""
    return pod_arguments(str(pick["ref"]))


def audit_pods(picks: Any, pod: PodSettings, *, task_id: str = "audit", **kwargs: Any) -> Any:
    """The audit as one ``KubernetesPodOperator`` pod per pick, mapped over ``picks`` (an XComArg); its output.

    ``kwargs`` are further ``BaseOperator`` arguments (the pool). The provider is imported only here,
    when the route is configured.
    """
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    operator = KubernetesPodOperator.partial(task_id=task_id, **kwargs, **operator_kwargs(pod))
    return operator.expand(arguments=picks.map(pick_arguments)).output  # an XComArg, like AuditOperator's


# -- a mapped calibration's reruns, one pod each (issue 43): the same image, spec and deadline as an audit's pod --
RERUN_ENTRY_POINT = ("python", "-m", "auditor.airflow.rerun_pod")


def ticket_arguments(ticket: Mapping[str, Any]) -> list[str]:
    """The rerun pod's arguments: its ticket (``CalibrationPlan.tickets``: the plan and the one rerun), as JSON."""
    import json

    return ["--ticket", json.dumps(dict(ticket), sort_keys=True)]


def rerun_pods(tickets: Any, pod: PodSettings, *, task_id: str, **kwargs: Any) -> Any:
    """A calibration's reruns as one ``KubernetesPodOperator`` pod per ticket, mapped over ``tickets`` (an XComArg);
    each pod makes the Celery task's one call (``Session.calibrate_rerun``) through ``auditor.airflow.rerun_pod``."""
    from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

    options = {**operator_kwargs(pod), "name": "repro-rerun", "cmds": list(RERUN_ENTRY_POINT)}
    operator = KubernetesPodOperator.partial(task_id=task_id, **kwargs, **options)
    return operator.expand(arguments=tickets.map(ticket_arguments)).output
