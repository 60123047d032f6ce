"""The audit and verdict tasks' extra links: the published report, and the model version in MLflow's UI.

Both read what the operator kept while it ran: ``audit_row`` (the audit's ``{ref, verdict, report,
error, skipped}`` row), ``tracking_uri`` and ``reports_url`` (the settings it resolved).
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

from auditor.uris import name_and_version


def file_uri(location: str) -> str:
    """A report location as a URI: a local path becomes ``file://``; URIs stay as they are."""
    if "://" in location:
        return location
    return "file://" + quote(os.path.abspath(location))


def report_link(report: str, reports_url: str | None) -> str:
    """Where a person opens a published report: its web address under ``REPRO_REPORTS_URL`` when the reports
    folder is served (``auditor.steps.publish.report_url``), else its storage location as a URI."""
    from auditor.steps.publish import report_url

    url = report_url(SimpleNamespace(reports_url=reports_url), report.rsplit("/", 1)[-1]) if reports_url else None
    return url or file_uri(report)


def model_version_url(tracking_uri: str | None, ref: str | None) -> str:
    """MLflow's page of ``models:/NAME/VERSION`` on ``tracking_uri``; empty when there is no web UI to link."""
    if not ref or not tracking_uri or not tracking_uri.startswith(("http://", "https://")):
        return ""
    name, version = name_and_version(ref)
    return f"{tracking_uri.rstrip('/')}/#/models/{quote(name, safe='')}/versions/{quote(version, safe='')}"


class ReportLink(BaseOperatorLink):
    """The task's link to its published report."""

    name = "Audit report"

    def get_link(self, operator, *, ti_key) -> str:
        report = (getattr(operator, "audit_row", None) or {}).get("report")
        return report_link(report, getattr(operator, "reports_url", None)) if report else ""


class ModelVersionLink(BaseOperatorLink):
    """The task's link to the audited model version in MLflow's UI (an http(s) tracking server)."""

    name = "Model version"

    def get_link(self, operator, *, ti_key) -> str:
        row = getattr(operator, "audit_row", None) or {}
        return model_version_url(getattr(operator, "tracking_uri", None), row.get("ref"))
