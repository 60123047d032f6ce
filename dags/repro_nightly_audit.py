"""repro_nightly_audit: sample tonight's models, audit each in isolation, publish the summary and index.

Thin on purpose: ``sample`` and ``publish`` are one call each into an audit session
(``auditor.steps``, the same steps ``repro-audit nightly`` runs), imported inside the task so
parsing this file loads neither torch, mlflow nor boto3; each audit is one ``AuditOperator``
(``auditor.airflow.operators``), mapped over the sample's model refs. Tasks are keyed on the model
version and the logical date, and pass refs and report URIs through XCom, never payloads.

Parsing reads only what cannot fail: the schedule, retry delay, rebuild timeout and
mail recipients through reads that fall back to the default with a warning, and the
route through ``parse_time_pod``, which falls back to celery. Each task resolves the
settings once, when it runs (the MLflow and S3 Connections over the environment,
``auditor.airflow.hooks.AuditHook``), and passes them down.

Each audit is two tasks: ``audit`` publishes the report and succeeds whatever the verdict (an
ERROR with retries left is retried afresh); ``verdict`` after it is the verdict as a state:
green when reproduced, failed without retry otherwise. ``publish`` runs after them whatever
they did. ``retention`` runs beside them (``repro-audit retention check``): red, without retry, when
an input of a production model is already lost. Trigger params (``date``, ``max_models``, ``budget_hours``, ``models``) override the
logical date, the budget and which models are sampled.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from auditor.airflow import (
    GPU_POOL,
    GPU_QUEUE,
    VERDICT_DOC,
    audit_date,
    check_celery_route,
    documented,
    nightly_schedule,
    parse_time_pod,
    pick_ref,
    task_defaults,
)
from auditor.airflow.notifications import failure_notifiers
from auditor.airflow.operators import AuditOperator, VerdictOperator


def audit_each(picks: Any) -> Any:
    """The per-model audit mapped over the sample, by the configured route (``REPRO_REBUILD_BACKEND``).

    ``celery`` (default): an ``AuditOperator`` in the GPU pool on the ``gpu`` queue, calling the audit
    door in place (it first checks that the workers' settings still choose this route).
    ``kubernetes``: one pod per model, spec from ``auditor.airflow.kubernetes`` (the provider is
    imported only when this route is configured). Chosen at parse time without raising: a
    configuration that cannot be rendered logs a warning and builds the celery route, whose task
    then fails naming the variable.
    """
    doc = ("Audit one model of tonight's sample (mapped over `sample`'s picks, each instance named by its model ref): "
           "rebuild it from its record, judge it, publish its report. Succeeds whatever the verdict; its XCom is the "
           "audit's row. An `ERROR` with retries left is retried afresh, nothing published. In the `repro_gpu` pool, "
           "on the `gpu` queue (celery) or as one pod per model (kubernetes), the route chosen when the file was parsed.")
    pod = parse_time_pod()
    if pod is not None:
        from auditor.airflow.kubernetes import audit_pods

        return audit_pods(picks, pod, task_id="audit", pool=GPU_POOL, doc_md=doc)
    audits = AuditOperator.partial(task_id="audit", pool=GPU_POOL, queue=GPU_QUEUE, pre_execute=check_celery_route,
                                   doc_md=doc)
    return audits.expand(model_ref=picks.map(pick_ref)).output


@dag(
    dag_id="repro_nightly_audit",
    description="Sample registered models under a budget, rebuild and judge each, publish reports and an index.",
    schedule=nightly_schedule(),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(),
    on_failure_callback=failure_notifiers("dag"),
    params={
        "date": Param(None, type=["null", "string"], format="date", description="audit as of this date (default: the logical date)"),
        "max_models": Param(None, type=["null", "integer"], minimum=1, description="models tonight (default REPRO_NIGHTLY_MAX_MODELS)"),
        "budget_hours": Param(None, type=["null", "number"], exclusiveMinimum=0, description="accelerator-hours tonight (default REPRO_NIGHTLY_BUDGET_HOURS)"),
        "models": Param(None, type=["null", "string"], description="only versions whose NAME or NAME/VERSION matches this shell pattern, e.g. credit-* or credit-scorer/3"),
    },
    tags=["repro-audit", "audit", "nightly"],
    doc_md=__doc__,
)
def repro_nightly_audit() -> None:
    # Tasks below that return a dict say multiple_outputs=False: Airflow infers True from a dict return
    # annotation and would store every key as its own XCom beside the whole value.
    @task
    def sample(**context) -> list[dict]:
        """Choose tonight's models; the same logical date always gives the same sample.

        Returns the picks (Airflow maps only over a task's return value); the whole
        sample, with what was skipped and why, goes to XCom key ``sample`` for publish.
        An error is left in XCom (``failure``) for publish, which says the night failed before auditing.
        """
        from auditor.airflow import nightly_settings
        from auditor.airflow.hooks import task_session, task_settings
        from auditor.airflow.operators import reported_failure

        with reported_failure(context):
            params = context["params"]
            session = task_session(context, nightly_settings(params, task_settings()))
            chosen = session.sample(audit_date(context), models=params.get("models"))
        context["ti"].xcom_push(key="sample", value=chosen)
        return chosen["picks"]

    @task(trigger_rule="all_done", multiple_outputs=False)
    def publish(**context) -> dict:
        """Write the run summary, the coverage page and the index (a sampled model with no result is listed as an error);
        then fail, without retry, when any model did not reproduce: the run's state is the night's. When ``sample``
        failed, the index and coverage pages say the night failed before auditing, with its error, and this fails too.
        Its inputs are read from XCom in the body: an argument from a failed upstream would fail it before it ran."""
        from auditor.airflow.hooks import task_session
        from auditor.airflow.operators import night_inputs, night_outcome, reported_failure

        with reported_failure(context):
            summary = task_session(context).publish_night(audit_date(context), *night_inputs(context))
        return night_outcome(context, summary)

    @task(multiple_outputs=False)
    def retention(**context) -> dict:
        """What of each production or audited version will stop being reproducible, and when (also on the coverage
        page); fails without retry when an input of a production model is already lost."""
        from auditor.airflow.hooks import task_session
        from auditor.airflow.operators import reported_failure, retention_outcome

        with reported_failure(context):  # an error of its own, not a lost input: named as the night's failure
            checked = task_session(context).retention()
        return retention_outcome(context, checked)

    documented(retention)()
    picks = documented(sample)()
    results = audit_each(picks)
    verdicts = VerdictOperator.partial(doc_md=VERDICT_DOC).expand(row=results)
    # publish is last and is the night's state: it fails, after publishing, when a model did not reproduce
    [picks, results, verdicts] >> documented(publish)()


repro_nightly_audit()
