"""repro-audit for Airflow, laid out as a provider: hooks, operators, links, notifications, the pod route.

- ``auditor.airflow.hooks``: ``AuditHook``, a task's settings with the MLflow and S3 Connections over the environment;
- ``auditor.airflow.operators``: ``AuditOperator`` (audit one ``model_ref`` through the one door,
  ``Session.audit``) and ``VerdictOperator`` (the task whose state is the verdict);
- ``auditor.airflow.links``, ``auditor.airflow.notifications``: the tasks' extra links and failure mail;
- ``auditor.airflow.context``: the audit date, the audit run and the last try, from the task context;
- ``auditor.airflow.kubernetes``, ``auditor.airflow.pod_main``: the Kubernetes route's pod and its entry point.

This module holds what the DAG files read while Airflow parses them: the pool and queue of rebuilding
tasks, the owner, schedules and retry policy from the settings (through reads that never raise), and the
route rebuild tasks take. It imports neither Airflow nor the Kubernetes client (the pod's entry point
loads it too); the pod spec is a plain dict, checkable without a cluster.

Two routes run GPU work under Airflow (docker/README.md), chosen by ``REPRO_REBUILD_BACKEND``
(default ``celery``; declared in ``auditor.settings``):

``celery``      the audit task runs on a Celery worker that listens on the ``gpu`` queue (the compose
                stack); nothing to render, the task calls the audit door in place;
``kubernetes``  the audit task launches one pod per model through ``KubernetesPodOperator``, its spec
                rendered by ``auditor.airflow.kubernetes``.

A DAG file picks its route while Airflow parses it, where nothing may raise: ``parse_time_pod`` never
does. A malformed or incomplete configuration logs a warning there and builds the celery route; the
task then fails when it runs, naming the variable (``check_route``), instead of the DAG file failing to
import.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from auditor.airflow.context import DATE_TEMPLATE as DATE_TEMPLATE  # re-exported for the DAG files
from auditor.airflow.context import REGISTERED_VERSION_TEMPLATE as REGISTERED_VERSION_TEMPLATE
from auditor.airflow.context import audit_date as audit_date
from auditor.errors import BadInput
from auditor.settings import (
    DAG_OWNER,
    NIGHTLY_SCHEDULE,
    REBUILD_BACKEND,
    REBUILD_TIMEOUT_S,
    RETRY_DELAY_S,
    RUNNER,
    TRAINING_ASSET,
    KubernetesSettings,
    Settings,
    get_settings,
)

if TYPE_CHECKING:
    from auditor.airflow.kubernetes import PodSettings

# DAG files import this module while Airflow parses them, so it loads nothing beyond settings; its
# messages pass the redactor explicitly (and auditor.lineage.redact's sweep adds its filter later).
log = logging.getLogger(__name__)

#: the pool and queue of every task that rebuilds (the accelerator workers listen on the queue)
GPU_POOL = "repro_gpu"
GPU_QUEUE = "gpu"
BACKENDS = REBUILD_BACKEND.choices


# -- parse-time values: read without raising --------------------------------------------------
def nightly_schedule() -> str:
    """The nightly audit's schedule (``REPRO_NIGHTLY_SCHEDULE``)."""
    return NIGHTLY_SCHEDULE.get_or_default()


def default_runner() -> str:
    """The rebuild DAG's ``runner`` param default (``REPRO_RUNNER``)."""
    return RUNNER.get_or_default()


def training_asset() -> Any:
    """The Asset a training DAG updates (``REPRO_TRAINING_ASSET``), for a DAG's schedule (``asset_of``)."""
    return asset_of(TRAINING_ASSET)


def asset_of(setting: Any) -> Any:
    """The Asset an asset setting names (``REPRO_TRAINING_ASSET``, ``REPRO_ALIAS_ASSET``): the DAG scheduled on it and
    the registry webhook that updates it read it alike. A value Airflow refuses as an Asset URI (a reserved scheme,
    blank, too long) logs a warning and gives the default, so that the DAG still parses; the warning names the
    variable."""
    from airflow.sdk import Asset

    uri = setting.get_or_default()
    try:
        return Asset(uri)
    except (TypeError, ValueError) as exc:
        from auditor.lineage.redact import redact_text  # only on this path: parsing a DAG file stays light

        log.warning("%s is not an Asset URI Airflow accepts (%s); using the default %r", setting.name,
                    redact_text(f"{uri!r}: {exc}"), setting.default)
        return Asset(setting.default)


def task_defaults() -> dict[str, Any]:
    """Every task's owner (``REPRO_DAG_OWNER``, a team's name) and retry policy: two retries, exponential backoff
    from ``REPRO_RETRY_DELAY_S``, capped at 16x."""
    delay = RETRY_DELAY_S.get_or_default()
    return {"owner": DAG_OWNER.get_or_default(), "retries": 2, "retry_delay": timedelta(seconds=delay),
            "retry_exponential_backoff": True, "max_retry_delay": timedelta(seconds=16 * delay)}


#: the ``verdict`` task's ``doc_md``, the same in every DAG that audits
VERDICT_DOC = """The audit's verdict as this task's state, never retried.

Green for `REPRODUCED_BITWISE` and `REPRODUCED_WITHIN_TOLERANCE`; red for `OUT_OF_TOLERANCE`, `NOT_REPRODUCIBLE`
and a published `ERROR` (the audit's own retries are spent by then). Its *Audit report* and *Model version* links open
the same pages as the audit's."""


def documented(decorated: Any) -> Any:
    """A TaskFlow task (``@task``) whose docstring, dedented, is its ``doc_md`` in Airflow's UI, mapped or not.

    Airflow copies the docstring only when the task is called plainly, not when it is ``expand``-ed, and keeps its
    indentation, which Markdown shows as code.
    """
    import inspect

    return decorated.override(doc_md=inspect.cleandoc(decorated.function.__doc__ or ""))


def audit_timeout() -> timedelta:
    """An auditing task's ``execution_timeout``: three runs of the entrypoint, each bounded by ``REPRO_REBUILD_TIMEOUT_S``.

    An audit runs the recipe up to three times (the registered weights re-evaluated, the rebuild, and
    one rerun of a crashed rebuild); the task's deadline leaves room for all three and no more.
    """
    return timedelta(seconds=3 * REBUILD_TIMEOUT_S.get_or_default())


def nightly_settings(params: Mapping[str, Any], settings: Settings) -> Settings:
    """``settings`` with the nightly trigger's budget params (``max_models``, ``budget_hours``) over them."""
    import dataclasses

    overrides = {"nightly_max_models": params.get("max_models"), "nightly_budget_hours": params.get("budget_hours")}
    return dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v is not None})


def pick_ref(pick: Mapping[str, Any]) -> str:
    """A sampled pick's model ref: what the nightly maps its ``AuditOperator`` over (``picks.map(pick_ref)``)."""
    return str(pick["ref"])


# -- the route --------------------------------------------------------------------------------
def rebuild_backend(env: Mapping[str, str] | None = None, *, settings: Settings | None = None) -> str:
    """The configured route for rebuild tasks: ``celery`` or ``kubernetes``.

    From ``settings`` when given, else from ``env`` when given (only ``REPRO_REBUILD_BACKEND`` is
    read), else from ``get_settings()``. ``BadInput`` names a malformed value.
    """
    if settings is not None:
        return settings.rebuild_backend
    if env is not None:
        return REBUILD_BACKEND.get(env)
    return get_settings().rebuild_backend


def parse_time_pod(env: Mapping[str, str] | None = None) -> PodSettings | None:
    """For a DAG file at parse time: the pod settings when the kubernetes route is configured, else ``None``.

    Never raises. ``None`` (the celery route) also when the backend is malformed or the pod's
    settings are (no ``REPRO_K8S_IMAGE``, an image not pinned by digest, a malformed
    ``REPRO_K8S_*``): a warning is logged, and the task fails at run time with the reason
    (``check_route``). Reads only the backend, the ``REPRO_K8S_*`` variables and the rebuild
    timeout, so another malformed setting does not change the route. ``env=None``: the
    environment over the configuration file (``auditor.settings``).
    """
    if REBUILD_BACKEND.get_or_default(env) != "kubernetes":
        return None
    from auditor.airflow.kubernetes import PodSettings

    try:
        settings = Settings(kubernetes=KubernetesSettings.from_env(env), rebuild_timeout_s=REBUILD_TIMEOUT_S.get(env))
        return PodSettings.from_settings(settings)
    except BadInput as exc:
        from auditor.lineage.redact import redact_text  # only on this path: parsing a DAG file stays light

        log.warning("%s=kubernetes, but the rebuild pod cannot be rendered: %s; building the celery route, whose "
                    "task will fail with this error", REBUILD_BACKEND.name, redact_text(str(exc)))
        return None


def check_route(route: str, settings: Settings | None = None) -> None:
    """At run time, in a task the DAG file built for ``route``: ``BadInput`` unless the settings choose it.

    The task of a DAG file that fell back to celery (``parse_time_pod``) calls this first, so a
    kubernetes configuration that could not be rendered fails the task with the reason, instead
    of rebuilding on the celery workers.
    """
    settings = settings or get_settings()
    configured = settings.rebuild_backend
    if configured == route:
        return
    if configured == "kubernetes":
        from auditor.airflow.kubernetes import PodSettings

        PodSettings.from_settings(settings)  # raises the reason the DAG file could not render the pod
    raise BadInput(
        f"{REBUILD_BACKEND.name}={configured} here, but the DAG file was parsed with the {route} route",
        hint="give the DAG processor and the workers the same settings",
    )


def check_celery_route(context: Mapping[str, Any]) -> None:
    """A ``pre_execute`` hook for an audit the DAG file built for the celery route: ``check_route("celery")``."""
    check_route("celery")
