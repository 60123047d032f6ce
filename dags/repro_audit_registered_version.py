"""repro_audit_registered_version: audit a model version as soon as a training DAG registers it.

Scheduled on the training DAG's asset (``REPRO_TRAINING_ASSET``, default
``mlflow://models``): the training DAG declares it as an outlet and names the version
it registered in the event's extra, ``{"model_uri": "models:/NAME/VERSION"}``. One
``AuditOperator`` (``auditor.airflow.operators``), one call into the audit door (``Session.audit``,
what ``repro-audit audit`` runs) for the newest event's version, then the ``verdict`` task whose
state is the verdict, as in the nightly audit. Parsing reads only settings through reads that
cannot fail; the task resolves the rest when it runs.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from auditor.airflow import GPU_POOL, GPU_QUEUE, REGISTERED_VERSION_TEMPLATE, VERDICT_DOC, task_defaults, training_asset
from auditor.airflow.notifications import failure_notifiers
from auditor.airflow.operators import AuditOperator, VerdictOperator


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
    audit = AuditOperator(
        task_id="audit", model_ref=REGISTERED_VERSION_TEMPLATE, pool=GPU_POOL, queue=GPU_QUEUE,
        doc_md="Audit the version the newest training-asset event names (its extra's `model_uri`): rebuild it from its "
        "record, judge it, publish the report. Succeeds whatever the verdict; its XCom is the audit's row (verdict, "
        "report). An `ERROR` with retries left is retried afresh, nothing published. In the `repro_gpu` pool, on the "
        "`gpu` queue.",
    )
    VerdictOperator(row=audit.output, doc_md=VERDICT_DOC)


repro_audit_registered_version()
