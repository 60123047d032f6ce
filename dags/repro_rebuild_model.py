"""repro_rebuild_model: rebuild one historical model on demand, judge it, publish its report.

Triggered by hand with params ``model_uri`` (``models:/NAME/VERSION`` or
``models:/NAME@ALIAS``), ``reruns`` and ``runner``. One ``AuditOperator``
(``auditor.airflow.operators``), one call into the audit door (``Session.audit``, what
``repro-audit audit`` runs), with the run's ``runner`` and ``reruns``; the rebuilt artifact is
kept with the report's evidence. Idempotent per model version and logical date: a second
trigger for the same day publishes nothing new. Parsing reads only the retry delay, rebuild
timeout, mail recipients and the runner param's default, through reads that cannot fail; the
task resolves the settings (and the MLflow and S3 Connections) when it runs. The ``verdict``
task after it is the verdict as a state, as in the nightly audit
(``auditor.airflow.operators.VerdictOperator``).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag

from auditor.airflow import GPU_POOL, GPU_QUEUE, VERDICT_DOC, default_runner, task_defaults
from auditor.airflow.notifications import failure_notifiers
from auditor.airflow.operators import AuditOperator, VerdictOperator


@dag(
    dag_id="repro_rebuild_model",
    description="Rebuild one registered model version from its record, judge it and publish the report.",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=task_defaults(),
    on_failure_callback=failure_notifiers("dag"),
    params={
        "model_uri": Param(
            type="string", pattern=r"^models:/.+", description="models:/NAME/VERSION or models:/NAME@ALIAS"
        ),
        "reruns": Param(1, type="integer", minimum=1, description="rebuilds to run and compare"),
        "runner": Param(default_runner(), type="string", enum=["process", "docker"], description="how to run"),
    },
    tags=["repro-audit", "audit", "on-demand"],
    doc_md=__doc__,
)
def repro_rebuild_model() -> None:
    rebuild = AuditOperator(
        task_id="rebuild", model_ref="{{ params.model_uri }}", pool=GPU_POOL, queue=GPU_QUEUE,
        doc_md="Rebuild the trigger's `model_uri` with its `runner` and `reruns`, judge it and publish the report (the "
        "rebuilt artifact is kept with its evidence). Succeeds whatever the verdict; a second trigger for the same "
        "version and day publishes nothing new. In the `repro_gpu` pool, on the `gpu` queue.",
    )
    VerdictOperator(row=rebuild.output, doc_md=VERDICT_DOC)


repro_rebuild_model()
