"""repro_calibrate_tolerance: rerun one model's training to measure, and store, its tolerance band.

Triggered by hand with params ``model_uri`` and ``reruns``; the runner comes from
``REPRO_RUNNER``. One task, one call into ``Session.calibrate`` (``auditor.steps``) (what
``repro-audit calibrate`` runs), which stores the band where later audits read it.
Parsing reads only the retry delay, through a read that cannot fail; the task resolves
the settings when it runs (``auditor.airflow.hooks.AuditHook``).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from auditor.airflow import GPU_POOL, GPU_QUEUE, task_defaults
from auditor.airflow.notifications import failure_notifiers


@dag(
    dag_id="repro_calibrate_tolerance",
    description="Rerun a model's training N times and store each metric's tolerance band.",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    default_args=task_defaults(),
    on_failure_callback=failure_notifiers("dag"),
    params={
        "model_uri": Param(
            type="string", pattern=r"^models:/.+", description="models:/NAME/VERSION or models:/NAME@ALIAS"
        ),
        "reruns": Param(5, type="integer", minimum=3, description="seed-varied reruns behind the bands (3-4 give a weak band)"),
    },
    tags=["repro-audit", "calibration", "on-demand"],
    doc_md=__doc__,
)
def repro_calibrate_tolerance() -> None:
    @task(pool=GPU_POOL, queue=GPU_QUEUE, multiple_outputs=False, on_failure_callback=failure_notifiers("task"))
    def calibrate(**context) -> dict:
        """Calibrate and store the bands; XCom gets each metric's [lower, upper], not the runs behind them."""
        from auditor.airflow.hooks import task_session

        params = context["params"]
        bands = task_session(context).calibrate(params["model_uri"], reruns=int(params["reruns"]))
        return {"model_uri": params["model_uri"], "bands": {m: [b.lower, b.upper] for m, b in bands.items()}}

    calibrate()


repro_calibrate_tolerance()
