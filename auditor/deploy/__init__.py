"""Deployment configuration: which route rebuild tasks take, and what each route submits.

Two routes run GPU work under Airflow (docker/README.md):

``celery``      the rebuild task runs on a Celery worker that listens on the ``gpu`` queue
                (the compose stack); nothing to render, the task calls the pipeline in place;
``kubernetes``  the rebuild task launches one pod per model through ``KubernetesPodOperator``,
                its spec rendered by ``auditor.deploy.kubernetes``.

Chosen by ``REPRO_REBUILD_BACKEND`` (default ``celery``). Nothing here imports Airflow or the
Kubernetes client: the spec is a plain dict, checkable without a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from auditor.errors import BadInput

BACKENDS = ("celery", "kubernetes")


def rebuild_backend(env: Mapping[str, str] | None = None) -> str:
    """The configured route for rebuild tasks: ``celery`` or ``kubernetes``."""
    env = os.environ if env is None else env
    raw = (env.get("REPRO_REBUILD_BACKEND") or "celery").strip().lower()
    if raw not in BACKENDS:
        raise BadInput(
            f"environment variable REPRO_REBUILD_BACKEND={raw!r} is not one of {', '.join(BACKENDS)}",
            hint="set REPRO_REBUILD_BACKEND=celery (gpu queue) or kubernetes (one pod per rebuild)",
        )
    return raw
