"""Deployment configuration: which route rebuild tasks take, and what each route submits.

Two routes run GPU work under Airflow (docker/README.md):

``celery``      the rebuild task runs on a Celery worker that listens on the ``gpu`` queue
                (the compose stack); nothing to render, the task calls the audit door in place;
``kubernetes``  the rebuild task launches one pod per model through ``KubernetesPodOperator``,
                its spec rendered by ``auditor.deploy.kubernetes``.

Chosen by ``REPRO_REBUILD_BACKEND`` (default ``celery``; declared in ``auditor.settings``).
Nothing here imports Airflow or the Kubernetes client: the spec is a plain dict, checkable
without a cluster.

A DAG file picks its route while Airflow parses it, where nothing may raise: ``parse_time_pod``
never does. A malformed or incomplete configuration logs a warning there and builds the celery
route; the task then fails when it runs, naming the variable (``check_route``), instead of the
DAG file failing to import.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from auditor.deploy.context import DATE_TEMPLATE as DATE_TEMPLATE  # re-exported for the DAG files
from auditor.deploy.context import audit_date as audit_date
from auditor.errors import BadInput
from auditor.settings import REBUILD_BACKEND, REBUILD_TIMEOUT_S, KubernetesSettings, Settings, get_settings

if TYPE_CHECKING:
    from auditor.deploy.kubernetes import PodSettings

# DAG files import this module while Airflow parses them, so it loads nothing beyond settings; its one
# message passes the redactor explicitly (and auditor.lineage.redact's sweep adds its filter later).
log = logging.getLogger(__name__)

BACKENDS = REBUILD_BACKEND.choices


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
    timeout, so another malformed setting does not change the route.
    """
    env = os.environ if env is None else env
    if REBUILD_BACKEND.get_or_default(env) != "kubernetes":
        return None
    from auditor.deploy.kubernetes import PodSettings

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
        from auditor.deploy.kubernetes import PodSettings

        PodSettings.from_settings(settings)  # raises the reason the DAG file could not render the pod
    raise BadInput(
        f"{REBUILD_BACKEND.name}={configured} here, but the DAG file was parsed with the {route} route",
        hint="give the DAG processor and the workers the same settings",
    )
