"""A calibration as mapped tasks, for every DAG that calibrates (``repro_calibrate_tolerance``, ``repro_promotion_gate``).

``calibration_tasks(same_tickets)`` wires, after a task that returns the same-seed tickets of one or more plans
(``Session.calibrate_plan``/``calibrate_plan_missing`` and ``CalibrationPlan.tickets``):

    rerun_same_seed (mapped) -> check_same_seed -> rerun_seed_varied (mapped) -> reduce

Each task is one call into the step layer (``auditor.steps.mapped``); each rerun is a task on the ``gpu`` queue, or
with ``REPRO_REBUILD_BACKEND=kubernetes`` a pod (``auditor.airflow.kubernetes.rerun_pods``). No ticket (every
version calibrated already) maps no rerun: ``check_same_seed`` and ``reduce`` then run on nothing and return nothing
(``none_failed_min_one_success``), so what follows still runs. Imported by DAG files at parse time: light.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import task

from auditor.airflow import GPU_POOL, GPU_QUEUE, documented, parse_time_pod
from auditor.airflow.notifications import failure_notifiers

#: run when nothing failed upstream and something succeeded: a mapping over no ticket is skipped, not failed
AFTER_RERUNS = "none_failed_min_one_success"
RERUN_POD_DOC = ("One rerun of the recorded recipe in a pod of its own (`python -m auditor.airflow.rerun_pod`), its result "
                 "stored once in the reports store: a retried pod whose result is stored reruns nothing.")


@task(pool=GPU_POOL, queue=GPU_QUEUE, on_failure_callback=failure_notifiers("task"))
def rerun(planned: dict, item: dict, **context) -> dict:
    """One rerun of the recorded recipe; its result stored once in the reports store (a retry of a stored one reruns nothing)."""
    from auditor.airflow.hooks import task_session
    from auditor.steps.mapped import CalibrationPlan, PlannedRerun

    return task_session(context).calibrate_rerun(CalibrationPlan.model_validate(planned), PlannedRerun.model_validate(item))


@task(pool=GPU_POOL, queue=GPU_QUEUE, trigger_rule=AFTER_RERUNS, on_failure_callback=failure_notifiers("task"))
def check_same_seed(same: list[dict], **context) -> list[dict]:
    """Judge each plan's same-seed reruns as execution noise of the recipe before any seed-varied rerun is paid for."""
    from auditor.airflow.hooks import task_session
    from auditor.steps.mapped import plans_of

    return task_session(context).calibrate_check(plans_of(same))


@task(trigger_rule=AFTER_RERUNS, on_failure_callback=failure_notifiers("task"))
def reduce(varied: list[dict], **context) -> dict:
    """Floors, bands, lottery and multiplicity from the stored reruns; stored as `repro-audit calibrate` stores them."""
    from auditor.airflow.hooks import task_session
    from auditor.steps.mapped import plans_of

    stored = task_session(context).calibrate_reduce(plans_of(varied))
    return {ref: {m: [b.lower, b.upper] for m, b in bands.items()} for ref, bands in stored.items()}


def rerun_each(tickets: Any, task_id: str) -> Any:
    """The reruns mapped over ``tickets`` by the configured route: the ``rerun`` task on the ``gpu`` queue, or
    (``REPRO_REBUILD_BACKEND=kubernetes``) one pod each in the GPU pool, as the nightly's audits."""
    pod = parse_time_pod()
    if pod is not None:
        from auditor.airflow.kubernetes import rerun_pods

        return rerun_pods(tickets, pod, task_id=task_id, pool=GPU_POOL, doc_md=RERUN_POD_DOC)
    return documented(rerun).override(task_id=task_id).expand_kwargs(tickets)


def calibration_tasks(same_tickets: Any) -> Any:
    """The mapped reruns, the check between them and the reduce, after ``same_tickets``; returns ``reduce``'s output
    (``{ref: {metric: [lower, upper]}}``), for what must wait for the calibrations."""
    varied_tickets = documented(check_same_seed)(same_tickets)
    rerun_each(same_tickets, "rerun_same_seed") >> varied_tickets
    done = documented(reduce)(varied_tickets)
    rerun_each(varied_tickets, "rerun_seed_varied") >> done
    return done


__all__ = ["AFTER_RERUNS", "calibration_tasks", "rerun_each"]
