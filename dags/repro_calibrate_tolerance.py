"""repro_calibrate_tolerance: rerun one model's training to measure, and store, its tolerance band.

Triggered by hand with params ``model_uri``, ``reruns`` and ``same_seed``; the runner comes from
``REPRO_RUNNER``. The reruns are spread over the ``gpu`` workers, one mapped task each, and every
task is one call into the step layer (``auditor.steps.mapped``, the same doors ``repro-audit
calibrate`` ends in):

1. ``plan`` checks what the CLI checks before a rerun and names each rerun and its seed;
2. ``rerun_same_seed`` (mapped) reruns under the recorded seed and stores each result in the
   reports store, written once: a retried task whose earlier try stored its result reruns nothing;
3. ``check_same_seed`` judges them as the CLI does (execution noise of the recipe, a claimed noise
   source verified) before any seed-varied rerun is paid for;
4. ``rerun_seed_varied`` (mapped) reruns under the derived seeds;
5. ``reduce`` computes the floors, bands, lottery and multiplicity from exactly one stored result
   per planned rerun and stores the calibration where later audits read it, as the CLI stores it.

With ``REPRO_REBUILD_BACKEND=kubernetes`` each rerun is a pod instead (``auditor.airflow.kubernetes``,
the audit pod's image and spec, running ``auditor.airflow.rerun_pod``: the same one call), mapped the
same way; the other tasks stay on Celery. Parsing reads only the retry delay and the route, through
reads that cannot fail; each task resolves the settings when it runs (``auditor.airflow.hooks.AuditHook``).
The tasks after ``plan`` are ``auditor.airflow.calibration``'s, which the promotion gate shares.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from auditor.airflow import documented, task_defaults
from auditor.airflow.calibration import calibration_tasks
from auditor.airflow.notifications import failure_notifiers


@dag(
    dag_id="repro_calibrate_tolerance",
    description="Rerun a model's training N times, one task per rerun, and store each metric's tolerance band.",
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
        "same_seed": Param(2, type="integer", minimum=2, description="reruns under the recorded seed (the execution-noise floor)"),
    },
    tags=["repro-audit", "calibration", "on-demand"],
    doc_md=__doc__,
)
def repro_calibrate_tolerance() -> None:
    @task(on_failure_callback=failure_notifiers("task"))
    def plan(**context) -> list[dict]:
        """Check the version as `repro-audit calibrate` does, pin it, and name every rerun and its seed."""
        from auditor.airflow.hooks import task_session

        params = context["params"]
        made = task_session(context).calibrate_plan(params["model_uri"], reruns=int(params["reruns"]),
                                                    same_seed=int(params["same_seed"]))
        return made.tickets("same")

    calibration_tasks(documented(plan)())


repro_calibrate_tolerance()
