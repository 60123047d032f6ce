"""repro_rebuild_model: rebuild one historical model on demand, judge it, publish its report.

Triggered by hand with params ``model_uri`` (``models:/NAME/VERSION`` or
``models:/NAME@ALIAS``), ``reruns`` and ``runner``. One task, one call into
``auditor.deploy.airflow.audit_version`` (the one audit door (what ``repro-audit audit`` runs); the
rebuilt artifact is kept with the report's evidence. Idempotent per model
version and logical date: a second trigger for the same day publishes nothing new.
Parsing reads only the retry delay, rebuild timeout, mail recipients and the runner
param's default, through reads that cannot fail; the task resolves the settings (and
the MLflow and S3 Connections) when it runs. The ``verdict`` task after it is the
verdict as a state, as in the nightly audit (``auditor.deploy.airflow.VerdictOperator``).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag

from auditor.deploy.airflow import audit_task, audit_timeout, failure_notifiers, task_defaults, verdict_task
from auditor.settings import RUNNER

GPU_POOL = "repro_gpu"
GPU_QUEUE = "gpu"



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
        "runner": Param(RUNNER.get_or_default(), type="string", enum=["process", "docker"], description="how to run"),
    },
    tags=["repro-audit", "audit", "on-demand"],
    doc_md=__doc__,
)
def repro_rebuild_model() -> None:
    @audit_task(pool=GPU_POOL, queue=GPU_QUEUE, execution_timeout=audit_timeout())
    def rebuild(publish_error: bool = True, **context) -> dict:
        """Rebuild, judge and publish; returns the verdict and the report's URI (the ``verdict`` task judges it)."""
        from auditor.deploy.airflow import audit_version

        params = context["params"]
        return audit_version(params["model_uri"], context, publish_error=publish_error, runner=params["runner"],
                             reruns=int(params["reruns"]))

    verdict_task()(rebuild())


repro_rebuild_model()
