"""What the DAGs need of Airflow beyond ``@task``: outcomes, notifications, connections, assets, links, lineage.

Imported by the DAG files and run by Airflow; nothing here runs at parse time beyond building
objects (the settings it reads while parsing go through ``Setting.get_or_default``, which never raises).

- **Outcomes.** An audit is two tasks. ``AuditOperator`` (the decorator ``audit_task``) runs the audit and
  publishes it; it succeeds whatever the verdict, except an ERROR with retries left, which it raises so
  Airflow retries it (that try publishes nothing, ``publish_error=False``, so the retry audits afresh; the
  last try publishes the ERROR). ``VerdictOperator`` (``verdict_task``, the task after it, never retried)
  turns the published verdict into its state through ``auditor.errors.task_outcome``: REPRODUCED_* succeeds;
  NOT_REPRODUCIBLE, OUT_OF_TOLERANCE and a published ERROR fail with ``AirflowFailException``. So the
  grid shows a non-reproduced verdict as a red ``verdict`` instance, while the audit that found it ends
  COMPLETE in OpenLineage with its report among its outputs (a failed task would end FAIL).
- **Notifications.** ``failure_notifiers`` gives SMTP notifiers (the SMTP provider's ``SmtpNotifier``,
  through the Connection ``REPRO_SMTP_CONN_ID``) for a failed verdict or audit task and a failed DAG run, to
  ``REPRO_NOTIFY_EMAIL``; none when it is unset.
- **Connections.** ``task_settings`` resolves, when the task runs, the MLflow tracking URI from the
  Connection ``REPRO_MLFLOW_CONN_ID`` and S3's endpoint and credentials from ``REPRO_S3_CONN_ID``;
  without them, the environment.
- **Assets.** Each published report is an asset event on the alias ``REPORTS_ALIAS``.
- **Links.** ``ReportLink`` and ``ModelVersionLink``: the audit and verdict tasks' extra links.
- **Lineage.** ``AuditOperator`` implements the OpenLineage provider's ``get_openlineage_facets_on_*``:
  inputs the model version, its snapshots and image; outputs the report, its evidence and, when
  published, its attestation (``<stem>.intoto.json``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from airflow.providers.standard.decorators.python import _PythonDecoratedOperator
from airflow.sdk import AssetAlias, BaseOperatorLink
from airflow.sdk.bases.decorator import task_decorator_factory
from airflow.sdk.exceptions import AirflowFailException

from auditor.deploy.context import is_last_try
from auditor.errors import task_outcome
from auditor.settings import MLFLOW_CONN_ID, NOTIFY_EMAIL, S3_CONN_ID, SMTP_CONN_ID, TRACKING_URI, Settings

log = logging.getLogger(__name__)

#: the asset alias every published report is an event of (one asset per report URI)
REPORTS_ALIAS = "repro-audit-reports"
#: the OpenLineage namespace of registered model versions (named ``models:/NAME/VERSION``)
MODEL_NAMESPACE = "mlflow"


class AuditFailed(Exception):
    """An audit whose verdict is ERROR on the task's last try (plain, so Airflow counts it as a failure)."""


# -- connections ------------------------------------------------------------------------------
def _connection(conn_id: str | None):
    """The Airflow Connection ``conn_id``, or None when it is not defined (then the environment applies)."""
    if not conn_id:
        return None
    from airflow.sdk import Connection
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return Connection.get(conn_id)
    except AirflowNotFoundException:
        return None


def tracking_uri_of(conn) -> str:
    """A Connection's MLflow tracking URI: ``extra.tracking_uri``, else ``schema://host:port/path``."""
    extra = conn.extra_dejson or {}
    if extra.get("tracking_uri"):
        return str(extra["tracking_uri"])
    scheme = conn.schema or "http"
    port = f":{conn.port}" if conn.port else ""
    path = extra.get("path", "")
    return f"{scheme}://{conn.host}{port}{path}"


def _s3_env(conn) -> dict[str, str]:
    """The ``AWS_*`` variables boto3 reads, from an aws-type Connection (login/password, extra endpoint_url)."""
    extra = conn.extra_dejson or {}
    env = {}
    if conn.login:
        env["AWS_ACCESS_KEY_ID"] = conn.login
    if conn.password:
        env["AWS_SECRET_ACCESS_KEY"] = conn.password
    endpoint = extra.get("endpoint_url") or (conn.host if conn.host and "://" in conn.host else None)
    if endpoint:
        env["AWS_ENDPOINT_URL"] = str(endpoint)
    if extra.get("region_name"):
        env["AWS_DEFAULT_REGION"] = str(extra["region_name"])
    return env


def task_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The settings of a running task: the environment, with the MLflow and S3 Connections over it.

    The S3 credentials go into this process's environment (boto3 reads them there; they never leave
    the task's process); the tracking URI into the settings. A Connection that is not defined leaves
    the environment as it is.
    """
    env = dict(os.environ if env is None else env)
    mlflow = _connection(MLFLOW_CONN_ID.get(env))
    if mlflow is not None:
        env[TRACKING_URI.name] = tracking_uri_of(mlflow)
    s3 = _connection(S3_CONN_ID.get(env))
    if s3 is not None:
        aws = _s3_env(s3)
        os.environ.update(aws)
        env.update(aws)
    return Settings.from_env(env)


# -- notifications ----------------------------------------------------------------------------
def _recipients() -> list[str]:
    raw = NOTIFY_EMAIL.get_or_default() or ""
    return [r.strip() for r in raw.split(",") if r.strip()]


def failure_notifiers(kind: str) -> list:
    """SMTP notifiers for a failed ``task`` (the audit: a non-reproduced verdict) or a failed ``dag`` run.

    Read while parsing, so without raising: no ``REPRO_NOTIFY_EMAIL``, no notifier. The sender is
    the SMTP Connection's ``from_email`` (its extra).
    """
    to = _recipients()
    if not to:
        return []
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    conn_id = SMTP_CONN_ID.get_or_default()
    if kind == "task":
        return [SmtpNotifier(
            to=to, smtp_conn_id=conn_id,
            subject="[repro-audit] {{ exception | string | truncate(180) }}",
            html_content="<p>{{ exception | e }}</p><p>task {{ ti.task_id }} [{{ ti.map_index }}] of "
                         "{{ ti.dag_id }}, run {{ ti.run_id }}, try {{ ti.try_number }}</p>",
        )]
    return [SmtpNotifier(
        to=to, smtp_conn_id=conn_id,
        subject="[repro-audit] DAG {{ dag.dag_id }} run {{ run_id }} failed",
        html_content="<p>DAG {{ dag.dag_id }} run {{ run_id }} failed: {{ reason | default('') | e }}</p>",
    )]


# -- links ------------------------------------------------------------------------------------
def _file_uri(location: str) -> str:
    """A report location as a URI: a local path becomes ``file://``; URIs stay as they are."""
    if "://" in location:
        return location
    return "file://" + quote(os.path.abspath(location))


class ReportLink(BaseOperatorLink):
    """The audit task's link to its published report."""

    name = "Audit report"

    def get_link(self, operator, *, ti_key) -> str:
        report = (getattr(operator, "audit_row", None) or {}).get("report")
        return _file_uri(report) if report else ""


class ModelVersionLink(BaseOperatorLink):
    """The audit task's link to the audited model version in MLflow's UI (an http(s) tracking server)."""

    name = "Model version"

    def get_link(self, operator, *, ti_key) -> str:
        row = getattr(operator, "audit_row", None) or {}
        return model_version_url(getattr(operator, "tracking_uri", None), row.get("ref"))


def model_version_url(tracking_uri: str | None, ref: str | None) -> str:
    """MLflow's page of ``models:/NAME/VERSION`` on ``tracking_uri``; empty when there is no web UI to link."""
    if not ref or not tracking_uri or not tracking_uri.startswith(("http://", "https://")):
        return ""
    name, _, version = ref.removeprefix("models:/").rpartition("/")
    return f"{tracking_uri.rstrip('/')}/#/models/{quote(name, safe='')}/versions/{quote(version, safe='')}"


# -- the audit operator -----------------------------------------------------------------------
def _dataset(namespace: str, name: str):
    from openlineage.client.event_v2 import Dataset

    return Dataset(namespace=namespace, name=name)


def _redacted(uri: str) -> str:
    """A URI without userinfo (a namespace leaves the process: never a password)."""
    scheme, sep, rest = uri.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"


def _emit_report_event(context, row: Mapping[str, Any]) -> None:
    """The published report as an event of the asset alias ``REPORTS_ALIAS`` (extra: model, verdict)."""
    if row.get("report"):
        from airflow.sdk import Asset

        context["outlet_events"][AssetAlias(REPORTS_ALIAS)].add(
            Asset(_file_uri(row["report"])), extra={"model": row["ref"], "verdict": row["verdict"]})


class AuditOperator(_PythonDecoratedOperator):
    """A ``@task`` whose return value is an audit row (``auditor.deploy.airflow.audit_version``): the audit, not its verdict.

    The decorated function calls the one audit door and returns its row; ``execute`` then records the row
    (links, lineage), emits the report's asset event and returns the row, whatever the verdict: the
    ``verdict`` task after it turns the verdict into a state. The one exception is an ERROR that was
    not published (a try with retries left: the function gets ``publish_error=False``), raised so
    Airflow retries the audit afresh.
    """

    custom_operator_name = "@audit_task"
    operator_extra_links = (ReportLink(), ModelVersionLink())

    def execute(self, context):
        ti = context["ti"]
        last_try = is_last_try(ti.try_number, self.retries)
        self.op_kwargs = {**self.op_kwargs, "publish_error": last_try}
        self.tracking_uri = None
        self.audit_row = None
        row = super().execute(context)
        self.audit_row = row
        _emit_report_event(context, row)
        if task_outcome(row["verdict"]) == "retry" and not last_try and not row.get("skipped"):
            raise AuditFailed(_verdict_message(row))  # nothing was published: the retry audits afresh
        return row

    # OpenLineage (the provider's DefaultExtractor calls these)
    def _model_ref(self) -> str | None:
        row = getattr(self, "audit_row", None)  # set by execute: absent when the START event is built
        if row:
            return row.get("ref")
        pick = (self.op_kwargs or {}).get("pick")
        if isinstance(pick, Mapping):
            return pick.get("ref")
        return (self.op_kwargs or {}).get("model_ref")

    def _lineage(self, *, complete: bool):
        from airflow.providers.openlineage.extractors import OperatorLineage

        settings = getattr(self, "lineage_settings", None)
        inputs, outputs = [], []
        ref = self._model_ref()
        if ref:  # one namespace at START and at the end (the tracking URI is resolved only once the task runs)
            inputs.append(_dataset(MODEL_NAMESPACE, ref))
        row = getattr(self, "audit_row", None) or {}
        if complete and row.get("report") and settings is not None:
            evidence, present = _published(row["report"], settings)
            store = _redacted(settings.snapshot_store)
            inputs += [_dataset(store, f"{k.removeprefix('snapshot.')}@{v}")
                       for k, v in sorted(evidence.items()) if k.startswith("snapshot.")]
            if evidence.get("image"):
                inputs.append(_dataset("oci", evidence["image"]))
            location, _, report_key = row["report"].rpartition("/")
            outputs += [_dataset(_redacted(location), key) for key in [report_key, *present]]
        return OperatorLineage(inputs=inputs, outputs=outputs)

    def get_openlineage_facets_on_start(self):
        return self._lineage(complete=False)

    def get_openlineage_facets_on_complete(self, task_instance):
        return self._lineage(complete=True)

    def get_openlineage_facets_on_failure(self, task_instance):
        return self._lineage(complete=True)


def _verdict_message(row: Mapping[str, Any]) -> str:
    """``models:/NAME/V VERDICT: first line of the error (report URI)``: the failed task's exception and mail subject."""
    detail = (row.get("error") or "").splitlines()[0][:300] if row.get("error") else ""
    return f"{row['ref']} {row['verdict']}" + (f": {detail}" if detail else "") + (
        f" (report {row['report']})" if row.get("report") else "")


class VerdictOperator(_PythonDecoratedOperator):
    """The task after an audit: its state is the audit's verdict (``auditor.errors.task_outcome``), never retried.

    It succeeds for REPRODUCED_*, and fails with ``AirflowFailException`` for NOT_REPRODUCIBLE,
    OUT_OF_TOLERANCE and a published ERROR (the audit's own retries are spent by then). It carries the
    same links as the audit, so the red instance in the grid opens the report.
    """

    custom_operator_name = "@verdict_task"
    operator_extra_links = (ReportLink(), ModelVersionLink())

    def execute(self, context):
        row = super().execute(context)
        self.audit_row = row
        context["model_ref"] = row.get("ref")  # names the mapped instance in the UI
        try:
            self.tracking_uri = task_settings().tracking_uri
        except Exception:  # noqa: BLE001 - only the "Model version" link needs it; the audit resolved them already
            self.tracking_uri = None
        if task_outcome(row["verdict"]) != "success":
            raise AirflowFailException(_verdict_message(row))
        return row


def _pass_row(row: dict) -> dict:
    """The audit's row, passed on unchanged (``VerdictOperator`` judges it)."""
    return row


def verdict_task(**kwargs):
    """The ``verdict`` task to call on an audit's row (``verdict_task()(audit())``, or ``.expand(row=...)``)."""
    kwargs.setdefault("task_id", "verdict")
    kwargs.setdefault("multiple_outputs", False)
    kwargs.setdefault("map_index_template", "{{ model_ref }}")
    kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
    kwargs["retries"] = 0  # a verdict is settled: no retry changes it
    # all_done: an audit that failed outright (it is red itself) must not hold back the other audits'
    # verdicts. Mapped over a mapped audit's results, Airflow maps one verdict per row that audit pushed,
    # so the verdict's index can differ from its audit's; each instance is named by its row's model ref.
    kwargs.setdefault("trigger_rule", "all_done")
    return task_decorator_factory(python_callable=_pass_row, decorated_operator_class=VerdictOperator, **kwargs)


def _published(report: str, settings: Settings) -> tuple[dict[str, str], list[str]]:
    """A published report's evidence ids (snapshots, image) and which of its evidence and attestation exist."""
    from auditor.report.attest import SUFFIX as ATTESTATION_SUFFIX
    from auditor.report.evidence import audit_of, load_evidence
    from auditor.storage import open_store

    location, _, key = report.rpartition("/")
    stem = key.removesuffix(".html")
    store = open_store(location or settings.reports)
    present = [k for k in (f"{stem}.json", f"{stem}{ATTESTATION_SUFFIX}") if store.exists(k)]
    evidence = {}
    if f"{stem}.json" in present:
        evidence = dict(audit_of(load_evidence(store.read(f"{stem}.json"), source=f"{store.uri}/{stem}.json")).evidence)
    return evidence, present


def audit_task(python_callable=None, **kwargs):
    """``@task`` for an audit: the function returns ``auditor.deploy.airflow.audit_version``'s row (see ``AuditOperator``)."""
    kwargs.setdefault("multiple_outputs", False)
    kwargs.setdefault("outlets", [AssetAlias(REPORTS_ALIAS)])
    kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
    return task_decorator_factory(python_callable=python_callable, decorated_operator_class=AuditOperator, **kwargs)


def remember_settings(context: Mapping[str, Any], settings: Settings) -> Settings:
    """Keep a task's resolved settings on its operator (for its links and lineage); returns them."""
    task = context["task"]
    task.lineage_settings = settings
    task.tracking_uri = settings.tracking_uri
    return settings


def task_session(context: Mapping[str, Any], settings: Settings | None = None) -> Any:
    """The task's one audit session: its settings resolved once (Connections over the environment), kept on the operator."""
    from auditor.steps import Session

    return Session(remember_settings(context, settings or task_settings()))


def audit_version(ref: str, context: Mapping[str, Any], *, publish_error: bool = True, runner: str | None = None,
                  reruns: int = 1, settings: Settings | None = None) -> dict[str, Any]:
    """What every auditing task runs: the one door (``Session.audit``) as an orchestrator calls it; returns its row.

    Keyed on (version, audit date): a retry finishes the first try's publish. ``publish_error=False`` (retries
    left) raises for an ERROR verdict instead of publishing it.
    """
    from auditor.deploy.context import audit_date
    from auditor.steps import AuditOptions

    options = AuditOptions(date=audit_date(context), audit_run=f"{context['dag'].dag_id}/{context['run_id']}", runner=runner,
                           reruns=reruns, task=True, last_try=publish_error)
    return task_session(context, settings).audit(ref, options).row


# -- parse-time values and params ---------------------------------------------------------------
def training_asset():
    """The Asset a training DAG updates (``REPRO_TRAINING_ASSET``), for a DAG's schedule at parse time.

    A value Airflow refuses as an Asset URI (a reserved scheme, blank, too long) logs a warning and
    gives the default, so that the DAG still parses; the warning names the variable.
    """
    from airflow.sdk import Asset

    from auditor.settings import TRAINING_ASSET

    uri = TRAINING_ASSET.get_or_default()
    try:
        return Asset(uri)
    except (TypeError, ValueError) as exc:
        from auditor.lineage.redact import redact_text  # only on this path: parsing a DAG file stays light

        log.warning("%s is not an Asset URI Airflow accepts (%s); using the default %r", TRAINING_ASSET.name,
                    redact_text(f"{uri!r}: {exc}"), TRAINING_ASSET.default)
        return Asset(TRAINING_ASSET.default)


def task_defaults() -> dict[str, Any]:
    """Every task's retry policy: two retries, exponential backoff from ``REPRO_RETRY_DELAY_S``, capped at 16x."""
    from datetime import timedelta

    from auditor.settings import RETRY_DELAY_S

    delay = RETRY_DELAY_S.get_or_default()
    return {"retries": 2, "retry_delay": timedelta(seconds=delay), "retry_exponential_backoff": True,
            "max_retry_delay": timedelta(seconds=16 * delay)}


def audit_timeout():
    """A rebuilding task's ``execution_timeout``: three runs of the entrypoint, each bounded by ``REPRO_REBUILD_TIMEOUT_S``.

    An audit runs the recipe up to three times (the registered weights re-evaluated, the rebuild, and
    one rerun of a crashed rebuild); the task's deadline leaves room for all three and no more.
    """
    from datetime import timedelta

    from auditor.settings import REBUILD_TIMEOUT_S

    return timedelta(seconds=3 * REBUILD_TIMEOUT_S.get_or_default())


def nightly_settings(params: Mapping[str, Any], settings: Settings) -> Settings:
    """``settings`` with the nightly trigger's budget params (``max_models``, ``budget_hours``) over them."""
    import dataclasses

    overrides = {"nightly_max_models": params.get("max_models"), "nightly_budget_hours": params.get("budget_hours")}
    return dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v is not None})


def registered_version(context: Mapping[str, Any]) -> str:
    """The ``model_uri`` of the newest training asset event that triggered this run.

    The training DAG names the registered version in its event's extra (``{"model_uri":
    "models:/NAME/VERSION"}``). Several events folded into one run: the newest is audited here; the
    others are never-audited versions, which the nightly samples first.
    """
    from auditor.errors import BadInput

    events = [e for evs in (context.get("triggering_asset_events") or {}).values() for e in evs]
    for event in sorted(events, key=lambda e: e.timestamp, reverse=True):
        uri = (event.extra or {}).get("model_uri")
        if uri:
            return str(uri)
    raise BadInput("no triggering asset event names a model_uri",
                   hint='the training DAG adds extra {"model_uri": "models:/NAME/VERSION"} to its asset event')
