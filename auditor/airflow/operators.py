"""The audit and its verdict as two operators, on Airflow's public ``BaseOperator``.

- ``AuditOperator(model_ref=...)`` audits one model version through the one door, ``Session.audit``,
  and publishes it. It succeeds whatever the verdict, except an ERROR with retries left, which it
  raises so Airflow retries it (that try publishes nothing, ``last_try=False``, so the retry audits
  afresh; the last try publishes the ERROR). Its XCom is the audit's row (``{ref, verdict, report,
  error, skipped}``); each published report is an event of the asset alias ``REPORTS_ALIAS``; its
  links open the report and the model version; it implements the OpenLineage provider's
  ``get_openlineage_facets_on_*``: inputs the model version, its snapshots and image; outputs the
  report, its evidence and, when published, its attestation (``<stem>.intoto.json``).
- ``VerdictOperator(row=...)``, the task after it, never retried, turns the published verdict into its
  state through ``auditor.errors.task_outcome``: REPRODUCED_* succeeds; NOT_REPRODUCIBLE,
  OUT_OF_TOLERANCE and a published ERROR fail with ``AirflowFailException``. So the grid shows a
  non-reproduced verdict as a red ``verdict`` instance, while the audit that found it ends COMPLETE in
  OpenLineage with its report among its outputs (a failed task would end FAIL).

Both take only standard ``BaseOperator`` arguments beside their one field, and both map:
``AuditOperator.partial(task_id="audit", ...).expand(model_ref=refs)`` and
``VerdictOperator.partial().expand(row=audits.output)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from airflow.sdk import AssetAlias, BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from auditor.airflow import audit_timeout
from auditor.airflow.context import audit_date, audit_run, is_last_try
from auditor.airflow.hooks import AuditHook
from auditor.airflow.links import ModelVersionLink, ReportLink, file_uri, report_link
from auditor.airflow.notifications import failure_notifiers
from auditor.errors import BadInput, task_outcome
from auditor.settings import Settings

#: the asset alias every published report is an event of (one asset per report URI)
REPORTS_ALIAS = "repro-audit-reports"
#: the OpenLineage namespace of registered model versions (named ``models:/NAME/VERSION``)
MODEL_NAMESPACE = "mlflow"
#: names each mapped instance in the UI (``execute`` puts ``model_ref`` in the context)
MAP_INDEX_TEMPLATE = "{{ model_ref }}"


class AuditFailed(Exception):
    """An audit whose verdict is ERROR on a try with retries left (plain, so Airflow retries it)."""


def _audit_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.setdefault("outlets", [AssetAlias(REPORTS_ALIAS)])
    kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
    kwargs.setdefault("execution_timeout", audit_timeout())
    kwargs.setdefault("map_index_template", MAP_INDEX_TEMPLATE)
    return kwargs


def _verdict_defaults(kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs.setdefault("task_id", "verdict")
    kwargs.setdefault("map_index_template", MAP_INDEX_TEMPLATE)
    kwargs.setdefault("on_failure_callback", failure_notifiers("task"))
    kwargs["retries"] = 0  # a verdict is settled: no retry changes it
    # all_done: an audit that failed outright (it is red itself) must not hold back the other audits'
    # verdicts. Mapped over a mapped audit's results, Airflow maps one verdict per row that audit pushed,
    # so the verdict's index can differ from its audit's; each instance is named by its row's model ref.
    kwargs.setdefault("trigger_rule", "all_done")
    return kwargs


def verdict_message(row: Mapping[str, Any]) -> str:
    """``models:/NAME/V VERDICT: first line of the error (report URI)``: the failed task's exception and mail subject."""
    detail = (row.get("error") or "").splitlines()[0][:300] if row.get("error") else ""
    return f"{row['ref']} {row['verdict']}" + (f": {detail}" if detail else "") + (
        f" (report {row['report']})" if row.get("report") else "")


class AuditOperator(BaseOperator):
    """Audit and publish one model version (``model_ref``, templated): the one door, ``Session.audit``.

    Its XCom is the audit's row, whatever the verdict: the ``verdict`` task after it turns the verdict
    into a state. A DAG with ``runner`` and ``reruns`` params (the on-demand rebuild) passes them on.
    """

    template_fields = ("model_ref",)
    operator_extra_links = (ReportLink(), ModelVersionLink())
    ui_color = "#e8f1fb"

    def __init__(self, *, model_ref: str, **kwargs: Any) -> None:
        super().__init__(**_audit_defaults(kwargs))
        self.model_ref = model_ref
        self.audit_row: dict[str, Any] | None = None
        self.tracking_uri: str | None = None
        self.reports_url: str | None = None
        self.lineage_settings: Settings | None = None

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """``BaseOperator.partial`` with the audit's defaults (outlets, mail, timeout, instance names)."""
        return super().partial(**_audit_defaults(kwargs))

    def session(self, settings: Settings) -> Any:
        """The task's audit session (a test or a deployment overrides it to stand in a registry or runner)."""
        return AuditHook().session(settings)

    def execute(self, context: Any) -> dict[str, Any]:
        if not self.model_ref:
            raise BadInput("no model version to audit: model_ref rendered empty",
                           hint='an asset-triggered audit needs an event with extra {"model_uri": "models:/NAME/VERSION"}')
        context["model_ref"] = self.model_ref  # names the mapped instance in the UI
        last_try = is_last_try(context["ti"].try_number, self.retries)
        settings = AuditHook().get_conn()
        self.lineage_settings, self.tracking_uri, self.reports_url = settings, settings.tracking_uri, settings.reports_url
        params = context.get("params") or {}
        from auditor.steps import AuditOptions

        options = AuditOptions(task=True, last_try=last_try, date=audit_date(context), audit_run=audit_run(context),
                               runner=params.get("runner"), reruns=int(params.get("reruns") or 1))
        row = self.session(settings).audit(self.model_ref, options).row
        self.audit_row = row
        _emit_report_event(context, row, self.reports_url)
        if task_outcome(row["verdict"]) == "retry" and not last_try and not row.get("skipped"):
            raise AuditFailed(verdict_message(row))  # nothing was published: the retry audits afresh
        return row

    # OpenLineage (the provider's DefaultExtractor calls these)
    def get_openlineage_facets_on_start(self) -> Any:
        return audit_lineage(self, complete=False)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return audit_lineage(self, complete=True)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return audit_lineage(self, complete=True)


class VerdictOperator(BaseOperator):
    """The task after an audit: its state is the audit's verdict (``auditor.errors.task_outcome``), never retried.

    ``row`` (templated) is the audit's row, usually its XCom (``audit.output``). It succeeds for
    REPRODUCED_*, and fails with ``AirflowFailException`` for NOT_REPRODUCIBLE, OUT_OF_TOLERANCE and a
    published ERROR (the audit's own retries are spent by then). It carries the same links as the
    audit, so the red instance in the grid opens the report.
    """

    template_fields = ("row",)
    operator_extra_links = (ReportLink(), ModelVersionLink())

    def __init__(self, *, row: Any, **kwargs: Any) -> None:
        super().__init__(**_verdict_defaults(kwargs))
        self.row = row
        self.audit_row: dict[str, Any] | None = None
        self.tracking_uri: str | None = None
        self.reports_url: str | None = None

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        """``BaseOperator.partial`` with the verdict's defaults (``task_id="verdict"``, no retry, ``all_done``)."""
        return super().partial(**_verdict_defaults(kwargs))

    def execute(self, context: Any) -> dict[str, Any]:
        row = dict(self.row)
        self.audit_row = row
        context["model_ref"] = row.get("ref")  # names the mapped instance in the UI
        try:
            settings = AuditHook().get_conn()
            self.tracking_uri, self.reports_url = settings.tracking_uri, settings.reports_url
        except Exception:  # noqa: BLE001 - only the links need them; the audit resolved them already
            self.tracking_uri = self.reports_url = None
        if task_outcome(row["verdict"]) != "success":
            raise AirflowFailException(verdict_message(row))
        return row


# -- the report's asset event and lineage -------------------------------------------------------
def _emit_report_event(context: Any, row: Mapping[str, Any], reports_url: str | None = None) -> None:
    """The published report as an event of the asset alias ``REPORTS_ALIAS`` (extra: model, verdict, and the
    report's web address when ``REPRO_REPORTS_URL`` is set)."""
    if row.get("report"):
        from airflow.sdk import Asset

        extra = {"model": row["ref"], "verdict": row["verdict"]}
        if reports_url:
            extra["url"] = report_link(row["report"], reports_url)
        context["outlet_events"][AssetAlias(REPORTS_ALIAS)].add(Asset(file_uri(row["report"])), extra=extra)


def _dataset(namespace: str, name: str) -> Any:
    from openlineage.client.event_v2 import Dataset

    return Dataset(namespace=namespace, name=name)


def _redacted(uri: str) -> str:
    """A URI without userinfo (a namespace leaves the process: never a password)."""
    scheme, sep, rest = uri.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"


def audit_lineage(operator: AuditOperator, *, complete: bool) -> Any:
    """The audit's OpenLineage datasets: the model version in; at the end its evidence in, its report out."""
    from airflow.providers.openlineage.extractors import OperatorLineage

    settings = getattr(operator, "lineage_settings", None)
    inputs, outputs = [], []
    row = getattr(operator, "audit_row", None) or {}  # set by execute: absent when the START event is built
    ref = row.get("ref") or getattr(operator, "model_ref", None)
    if ref and "{{" not in ref:  # one namespace at START and at the end (the tracking URI is resolved only once the task runs)
        inputs.append(_dataset(MODEL_NAMESPACE, ref))
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


def retention_outcome(context: Any, report: Mapping[str, Any]) -> dict[str, Any]:
    """The retention task's state (``auditor.steps.retention``): its summary goes to XCom either way (counts, not the
    whole list: the coverage page has that), and the task fails without retry when an input of a production model is
    already lost: that model can no longer be reproduced, whatever its last verdict."""
    counts: dict[str, int] = {}
    for row in report.get("versions") or []:
        for item in row.get("items") or []:
            counts[item["status"]] = counts.get(item["status"], 0) + 1
    summary = {"checked_at": report.get("checked_at"), "years": report.get("years"), "horizon": report.get("horizon"),
               "versions": len(report.get("versions") or []), "items": counts, "red": list(report.get("red") or [])}
    if not summary["red"]:
        return summary
    context["ti"].xcom_push(key="return_value", value=summary)
    raise AirflowFailException(f"{len(summary['red'])} input(s) of production model(s) are lost: "
                               + "; ".join(summary["red"][:10]))


@contextlib.contextmanager
def reported_failure(context: Any) -> Iterator[None]:
    """Leave the error a night's task fails with in its XCom (``FAILURE_KEY``, redacted) before it propagates, so the
    night's publish, ``repro-audit demo`` and the index page name the task and its own error."""
    from auditor.errors import describe
    from auditor.steps.common import redacted
    from auditor.steps.nightly import FAILURE_KEY

    try:
        yield
    except Exception as exc:
        context["ti"].xcom_push(key=FAILURE_KEY, value=redacted(describe(exc)))
        raise


def night_inputs(context: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str | None]:
    """What the night's publish works from, read in its body (an argument of a failed upstream would fail it before
    it ran): the sample (None when ``sample`` failed), the audits' rows, and the error ``sample`` failed with."""
    from auditor.steps.nightly import FAILURE_KEY

    ti = context["ti"]
    chosen = ti.xcom_pull(task_ids="sample", key="sample")
    results = ti.xcom_pull(task_ids="audit") if chosen is not None else None
    if isinstance(results, Mapping):  # one mapped instance: Airflow returns its value alone, not a list of one
        results = [results]
    rows = [dict(r) for r in (results or []) if isinstance(r, Mapping)]
    return chosen, rows, ti.xcom_pull(task_ids="sample", key=FAILURE_KEY)


def night_outcome(context: Any, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The night's state, after its summary is published: the summary goes to XCom either way, and the task (the
    DAG's last) fails without retry when any sampled model did not reproduce (a red verdict, or an audit that
    failed outright): the DAG run is failed, so DAG-level alerting sees a red night."""
    if summary.get("failed"):
        context["ti"].xcom_push(key="return_value", value=dict(summary))
        raise AirflowFailException(f"the night of {summary.get('date')} failed before auditing: {summary['failed']}")
    red = [row for row in summary.get("audits") or [] if task_outcome(str(row.get("verdict"))) != "success"]
    if not red:
        return dict(summary)
    context["ti"].xcom_push(key="return_value", value=dict(summary))
    raise AirflowFailException(f"{len(red)} of {len(summary.get('audits') or [])} sampled version(s) did not reproduce: "
                               + ", ".join(f"{row.get('ref')} {row.get('verdict')}" for row in red[:10]))
