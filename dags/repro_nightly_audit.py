"""repro_nightly_audit: sample tonight's models, audit each in isolation, publish the summary and index.

Thin on purpose: each task is one call into an audit session (``auditor.steps``, the same
steps ``repro-audit nightly`` runs), imported inside the task so parsing this
file loads neither torch, mlflow nor boto3. Tasks are keyed on the model version
and the logical date, and pass refs and report URIs through XCom, never payloads.

Parsing reads only what cannot fail: the schedule, retry delay, rebuild timeout and
mail recipients through reads that fall back to the default with a warning, and the
route through ``parse_time_pod``, which falls back to celery. Each task resolves the
settings once, when it runs (the MLflow and S3 Connections over the environment,
``auditor.deploy.airflow.task_settings``), and passes them down.

Each audit is two tasks (``auditor.deploy.airflow``): ``audit`` publishes the
report and succeeds whatever the verdict (an ERROR with retries left is retried
afresh); ``verdict`` after it is the verdict as a state: green when reproduced,
failed without retry otherwise. ``publish`` runs after them whatever they did. Trigger params
(``date``, ``max_models``, ``budget_hours``, ``models``) override the logical date,
the budget and which models are sampled.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import Param, dag, get_current_context, task

from auditor.deploy import audit_date, check_route, parse_time_pod
from auditor.deploy.airflow import audit_task, audit_timeout, failure_notifiers, task_defaults, verdict_task
from auditor.settings import NIGHTLY_BUDGET_HOURS, NIGHTLY_MAX_MODELS, NIGHTLY_SCHEDULE

GPU_POOL = "repro_gpu"
GPU_QUEUE = "gpu"
# Tasks below that return a dict say multiple_outputs=False: Airflow infers True from a dict return
# annotation and would store every key as its own XCom beside the whole value.



def make_audit_task() -> Any:
    """The per-model audit, mapped over the sample.

    Kept in one function so a deployment can swap it (e.g. for a pod launched on
    an accelerator node) without touching the rest of the DAG.
    """

    @audit_task(task_id="audit", pool=GPU_POOL, queue=GPU_QUEUE, map_index_template="{{ model_ref }}",
                execution_timeout=audit_timeout())
    def audit(pick: dict, publish_error: bool = True, **context) -> dict:
        """Audit and publish one model; the ``verdict`` task after it turns the verdict into a state."""
        from auditor.deploy.airflow import audit_version, task_settings

        settings = task_settings()
        check_route("celery", settings)  # a kubernetes configuration the DAG file could not render fails here
        get_current_context()["model_ref"] = pick["ref"]  # names the mapped instance in the UI
        return audit_version(pick["ref"], context, publish_error=publish_error, settings=settings)

    return audit


def audit_each(picks: Any) -> Any:
    """The per-model audit mapped over the sample, by the configured route (``REPRO_REBUILD_BACKEND``).

    ``celery`` (default): a task in the GPU pool on the ``gpu`` queue, calling the audit door in place.
    ``kubernetes``: one pod per model, spec from ``auditor.deploy.kubernetes`` (the provider is
    imported only when this route is configured). Chosen at parse time without raising: a
    configuration that cannot be rendered logs a warning and builds the celery route, whose task
    then fails naming the variable.
    """
    pod = parse_time_pod()
    if pod is not None:
        from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator

        from auditor.deploy.kubernetes import operator_kwargs, pod_arguments

        def _arguments(pick: dict) -> list[str]:
            return pod_arguments(pick["ref"])

        operator = KubernetesPodOperator.partial(task_id="audit", pool=GPU_POOL, **operator_kwargs(pod))
        return operator.expand(arguments=picks.map(_arguments)).output  # an XComArg, like the decorated task's
    return make_audit_task().expand(pick=picks)


@dag(
    dag_id="repro_nightly_audit",
    description="Sample registered models under a budget, rebuild and judge each, publish reports and an index.",
    schedule=NIGHTLY_SCHEDULE.get_or_default(),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(),
    on_failure_callback=failure_notifiers("dag"),
    params={
        "date": Param(None, type=["null", "string"], format="date", description="audit as of this date (default: the logical date)"),
        "max_models": Param(None, type=["null", "integer"], minimum=1, description=f"models tonight (default {NIGHTLY_MAX_MODELS.name})"),
        "budget_hours": Param(None, type=["null", "number"], exclusiveMinimum=0, description=f"accelerator-hours tonight (default {NIGHTLY_BUDGET_HOURS.name})"),
        "models": Param(None, type=["null", "string"], description="only versions whose NAME or NAME/VERSION matches this shell pattern, e.g. credit-* or credit-scorer/3"),
    },
    tags=["repro-audit", "audit", "nightly"],
    doc_md=__doc__,
)
def repro_nightly_audit() -> None:
    @task
    def sample(**context) -> list[dict]:
        """Choose tonight's models; the same logical date always gives the same sample.

        Returns the picks (Airflow maps only over a task's return value); the whole
        sample, with what was skipped and why, goes to XCom key ``sample`` for publish.
        """
        from auditor.deploy.airflow import nightly_settings, task_session, task_settings

        params = context["params"]
        session = task_session(context, nightly_settings(params, task_settings()))
        chosen = session.sample(audit_date(context), models=params.get("models"))
        context["ti"].xcom_push(key="sample", value=chosen)
        return chosen["picks"]

    @task(trigger_rule="all_done", multiple_outputs=False)
    def publish(sample: dict, results: list[dict], **context) -> dict:
        """Write the run summary and refresh the index; a sampled model with no result is listed as an error."""
        from auditor.deploy.airflow import task_session

        return task_session(context).publish_summary(audit_date(context), sample, list(results))

    picks = sample()
    results = audit_each(picks)
    verdicts = verdict_task().expand(row=results)
    verdicts >> publish(picks["sample"], results)  # after the verdicts, so a red one does not end the run early


repro_nightly_audit()
