"""What an audit task reads from Airflow's task context: its date, and whether this try is the last.

One rule each, as a function for a task that runs in Airflow (the Celery route) and as a Jinja
template for a pod's command (the Kubernetes route, rendered by Airflow). A test renders each
template beside its function, for each case.

- The audit date: the nightly's ``date`` param when given, else the run's logical date, else (a
  manual run with no logical date) the date of its stored ``run_after``; never the wall clock, so
  that a retry, the summary and every mapped audit of one run agree.
- The last try: ``try_number`` (1 on the first try) above the task's ``retries``. Only the last
  try publishes an ERROR verdict; an earlier one raises, so that Airflow's retry audits afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: :func:`audit_date` as Airflow renders it for a templated field (``ds`` is absent without a logical date)
DATE_TEMPLATE = "{{ params.get('date') or (ds if ds is defined and ds else dag_run.run_after.strftime('%Y-%m-%d')) }}"
#: :func:`is_last_try` as Airflow renders it: ``true`` or ``false``
LAST_TRY_TEMPLATE = "{{ 'true' if ti.try_number > (task.retries or 0) else 'false' }}"


def audit_date(context: Mapping[str, Any]) -> str:
    """The ``date`` param, else the logical date as YYYY-MM-DD, else the stored ``run_after``'s date."""
    return (context.get("params") or {}).get("date") or context.get("ds") or context["dag_run"].run_after.date().isoformat()


def is_last_try(try_number: int, retries: int | None) -> bool:
    """Whether try ``try_number`` (1-based) of a task with ``retries`` retries is its last."""
    return try_number > (retries or 0)
