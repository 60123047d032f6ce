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
"""

from __future__ import annotations

import pendulum
from airflow.sdk import Param, dag, task

from auditor.airflow import GPU_POOL, GPU_QUEUE, documented, parse_time_pod, task_defaults
from auditor.airflow.notifications import failure_notifiers


def rerun_each(rerun_task, tickets, task_id: str):
    """The reruns mapped over ``tickets`` by the configured route: the ``rerun`` task on the ``gpu`` queue, or
    (``REPRO_REBUILD_BACKEND=kubernetes``) one pod each in the GPU pool, as the nightly's audits."""
    pod = parse_time_pod()
    if pod is not None:
        from auditor.airflow.kubernetes import rerun_pods

        return rerun_pods(tickets, pod, task_id=task_id, pool=GPU_POOL, doc_md=RERUN_POD_DOC)
    return documented(rerun_task).override(task_id=task_id).expand_kwargs(tickets)


RERUN_POD_DOC = ("One rerun of the recorded recipe in a pod of its own (`python -m auditor.airflow.rerun_pod`), its result "
                 "stored once in the reports store: a retried pod whose result is stored reruns nothing.")


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

    @task(pool=GPU_POOL, queue=GPU_QUEUE, on_failure_callback=failure_notifiers("task"))
    def rerun(planned: dict, item: dict, **context) -> dict:
        """One rerun of the recorded recipe; its result stored once in the reports store (a retry of a stored one reruns nothing)."""
        from auditor.airflow.hooks import task_session
        from auditor.steps.mapped import CalibrationPlan, PlannedRerun

        return task_session(context).calibrate_rerun(CalibrationPlan.model_validate(planned), PlannedRerun.model_validate(item))

    @task(pool=GPU_POOL, queue=GPU_QUEUE, on_failure_callback=failure_notifiers("task"))
    def check_same_seed(same: list[dict], **context) -> list[dict]:
        """Judge the same-seed reruns as execution noise of the recipe before any seed-varied rerun is paid for."""
        from auditor.airflow.hooks import task_session
        from auditor.steps.mapped import CalibrationPlan

        planned = CalibrationPlan.model_validate(same[0]["planned"])
        task_session(context).calibrate_check(planned)
        return planned.tickets("varied")

    @task(on_failure_callback=failure_notifiers("task"))
    def reduce(varied: list[dict], **context) -> dict:
        """Floors, bands, lottery and multiplicity from the stored reruns; stored as `repro-audit calibrate` stores them."""
        from auditor.airflow.hooks import task_session
        from auditor.steps.mapped import CalibrationPlan

        planned = CalibrationPlan.model_validate(varied[0]["planned"])
        bands = task_session(context).calibrate_reduce(planned)
        return {"model_uri": planned.ref, "bands": {m: [b.lower, b.upper] for m, b in bands.items()}}

    same_tickets = plan()
    varied_tickets = check_same_seed(same_tickets)
    rerun_each(rerun, same_tickets, "rerun_same_seed") >> varied_tickets
    rerun_each(rerun, varied_tickets, "rerun_seed_varied") >> reduce(varied_tickets)


repro_calibrate_tolerance()
