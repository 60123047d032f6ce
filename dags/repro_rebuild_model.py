"""repro_rebuild_model: rebuild one historical model on demand, judge it, publish its report.

Triggered by hand with params ``model_uri`` (``models:/NAME/VERSION`` or
``models:/NAME@ALIAS``), ``reruns`` and ``runner``. One task, one call into
``auditor.pipeline.audit_and_publish`` (what ``repro-audit audit`` runs); the
rebuilt artifact is kept with the report's evidence. Idempotent per model
version and logical date: a second trigger for the same day publishes nothing new.
Parsing reads only the retry delay and the runner param's default, through reads that
cannot fail; the task resolves the settings when it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from auditor.settings import RETRY_DELAY_S, RUNNER, get_settings

GPU_POOL = "repro_gpu"
GPU_QUEUE = "gpu"


def _date(context: Mapping[str, Any]) -> str:
    """The logical date as YYYY-MM-DD; a manual run without one falls back to its stored run_after, never now()."""
    return context.get("ds") or context["dag_run"].run_after.date().isoformat()


@dag(
    dag_id="repro_rebuild_model",
    description="Rebuild one registered model version from its record, judge it and publish the report.",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=RETRY_DELAY_S.get_or_default())},
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
    @task(pool=GPU_POOL, queue=GPU_QUEUE, multiple_outputs=False)
    def rebuild(**context) -> dict:
        """Rebuild, judge and publish; returns the verdict and the report's URI (a failed rebuild is verdict ERROR)."""
        from auditor import pipeline

        settings = get_settings()
        params = context["params"]
        return pipeline.audit_and_publish(
            params["model_uri"],
            date=_date(context),
            audit_run=f"{context['dag'].dag_id}/{context['run_id']}",
            runner=params["runner"],
            reruns=int(params["reruns"]),
            settings=settings,
        )

    rebuild()


repro_rebuild_model()
