"""repro_audit_registered_version: audit a model version as soon as a training DAG registers it.

Scheduled on the training DAG's asset (``REPRO_TRAINING_ASSET``, default
``mlflow://models``): the training DAG declares it as an outlet and names the version
it registered in the event's extra, ``{"model_uri": "models:/NAME/VERSION"}``. One
task, one call into the audit door (``auditor.deploy.airflow.audit_version`` (what ``repro-audit audit``
runs), then the ``verdict`` task whose state is the verdict, as in the nightly audit. Parsing reads only
settings through reads that cannot fail; the task resolves the rest when it runs.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from auditor.deploy.airflow import (
    audit_task,
    audit_timeout,
    failure_notifiers,
    task_defaults,
    training_asset,
    verdict_task,
)

GPU_POOL = "repro_gpu"
GPU_QUEUE = "gpu"


@dag(
    dag_id="repro_audit_registered_version",
    description="Audit the model version a training DAG has just registered (its asset event names it).",
    schedule=[training_asset()],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=task_defaults(),
    on_failure_callback=failure_notifiers("dag"),
    tags=["repro-audit", "audit", "on-registration"],
    doc_md=__doc__,
)
def repro_audit_registered_version() -> None:
    @audit_task(pool=GPU_POOL, queue=GPU_QUEUE, execution_timeout=audit_timeout())
    def audit(publish_error: bool = True, **context) -> dict:
        """Audit and publish the newly registered version (the ``verdict`` task after it judges the verdict)."""
        from auditor.deploy.airflow import audit_version, registered_version

        return audit_version(registered_version(context), context, publish_error=publish_error)

    verdict_task()(audit())


repro_audit_registered_version()
