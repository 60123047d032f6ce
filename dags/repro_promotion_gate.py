"""repro_promotion_gate: when a production alias moves in MLflow, is the new version better beyond seed noise?

Runs when MLflow's signed webhook reports an alias move (``REPRO_REGISTRY_EVENTS=webhook``), else polls the registry's
production aliases (``REPRO_PRODUCTION_ALIASES``) every ten minutes, and compares them with
the state last seen (an Airflow Variable): ``alias_moved`` (an ``AliasMoveSensor``, ``auditor.airflow.promotion``)
succeeds with the moves, or is skipped when nothing moved. A moved version with no stored calibration is
calibrated first, its reruns spread over the gpu workers (``plan_missing``, then ``auditor.airflow.calibration``'s
mapped tasks, as ``repro_calibrate_tolerance``). For each move, ``compare`` is one call into ``Session.compare``
(what ``repro-audit compare`` runs, reusing the stored calibrations), which publishes the comparison and its MLflow
``MetricThreshold``s;
``gate`` is the comparison as a state: red unless the candidate is an improvement beyond seed noise;
``remember`` keeps the aliases seen once every move was compared (a crashed comparison is tried again).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task

from auditor.airflow import GPU_POOL, GPU_QUEUE, documented, task_defaults
from auditor.airflow.calibration import calibration_tasks
from auditor.airflow.notifications import failure_notifiers
from auditor.airflow.promotion import AliasMoveSensor, PromotionGate, RememberAliases, promotion_schedule


@dag(
    dag_id="repro_promotion_gate",
    description="When a production alias moves, compare the new version with the one it replaced, through seed-varied reruns.",
    schedule=promotion_schedule(),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(),
    on_failure_callback=failure_notifiers("dag"),
    tags=["repro-audit", "promotion", "on-alias-move"],
    doc_md=__doc__,
)
def repro_promotion_gate() -> None:
    moved = AliasMoveSensor(
        doc_md="Compare the registry's production aliases with the state last seen (an Airflow Variable): succeeds with "
        "the moves in XCom, skipped when nothing moved. Waits in reschedule mode, its slot free between pokes.",
    )

    @task(on_failure_callback=failure_notifiers("task"))
    def plan_missing(moves: list[dict], **context) -> list[dict]:
        """Plan a calibration of each moved version (candidate or incumbent) that has none, as mapped reruns."""
        from auditor.airflow.hooks import task_session

        refs = [move[side] for move in moves for side in ("candidate", "incumbent")]
        return [t for planned in task_session(context).calibrate_plan_missing(refs) for t in planned.tickets("same")]

    @task(pool=GPU_POOL, queue=GPU_QUEUE, on_failure_callback=failure_notifiers("task"))
    def compare(move: dict, **context) -> dict:
        """Compare the alias's new version with the one it left; XCom gets the gate and where it was published."""
        from auditor.airflow.hooks import task_session
        from auditor.airflow.promotion import compared_row

        session = task_session(context)  # a move that can never be compared is a settled red gate, not retried each poll
        return compared_row(move, lambda: session.compare(move["candidate"], move["incumbent"]))

    calibrated = calibration_tasks(documented(plan_missing)(moved.output))  # the reruns spread over the gpu workers
    compared = documented(compare).expand(move=moved.output)
    calibrated >> compared
    PromotionGate.partial(
        doc_md="One move's comparison as this task's state, never retried: green when the candidate is better than the "
        "version it replaced beyond seed noise, red otherwise (not better beyond noise, or not comparable).",
    ).expand(row=compared)
    # every move compared (red or green): remembered
    compared >> RememberAliases(
        sensor_task_id=moved.task_id,
        doc_md="Once every move was compared (green or red), the aliases the sensor saw become the state last seen, so "
        "each move is compared once; when a comparison crashed this does not run, and the next run compares it again.",
    )


repro_promotion_gate()
