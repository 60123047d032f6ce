"""The audit date of a DAG run: one rule, as a function for a running task and as a template for a pod.

The nightly's ``date`` param when given, else the run's logical date, else (a manual run with no
logical date) the date of its stored ``run_after``; never the wall clock, so that a retry, the
summary and every mapped audit of one run agree. The Celery tasks call :func:`audit_date`; a
``KubernetesPodOperator`` renders :data:`DATE_TEMPLATE` into the pod's arguments. A test renders the
template with Jinja's strict undefined beside the function, for each case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: :func:`audit_date` as Airflow renders it for a templated field (``ds`` is absent without a logical date)
DATE_TEMPLATE = "{{ params.get('date') or (ds if ds is defined and ds else dag_run.run_after.strftime('%Y-%m-%d')) }}"


def audit_date(context: Mapping[str, Any]) -> str:
    """The ``date`` param, else the logical date as YYYY-MM-DD, else the stored ``run_after``'s date."""
    return (context.get("params") or {}).get("date") or context.get("ds") or context["dag_run"].run_after.date().isoformat()
