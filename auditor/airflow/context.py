"""What an audit task reads from Airflow's task context: its date, its run, and whether this try is the last.

One rule each, as a function for a task that runs in Airflow (the Celery route) and as a Jinja
template for a pod's command (the Kubernetes route, rendered by Airflow). A test renders each
template beside its function, for each case.

- The audit date: the nightly's ``date`` param when given, else the run's logical date, else (a
  manual run with no logical date) the date of its stored ``run_after``; never the wall clock, so
  that a retry, the summary and every mapped audit of one run agree.
- The audit run: ``DAG_ID/RUN_ID``, the Airflow run that asked for the audit.
- The last try: ``try_number`` (1 on the first try) above the task's ``retries``. Only the last
  try publishes an ERROR verdict; an earlier one raises, so that Airflow's retry audits afresh.
- The registered version (``REGISTERED_VERSION_TEMPLATE``): the ``model_uri`` of the newest
  triggering asset event that names one, for the ``model_ref`` of an asset-scheduled audit.

Nothing here imports Airflow: the pod's entry point and the DAG files' parse load it for free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: :func:`audit_date` as Airflow renders it for a templated field (``ds`` is absent without a logical date)
DATE_TEMPLATE = "{{ params.get('date') or (ds if ds is defined and ds else dag_run.run_after.strftime('%Y-%m-%d')) }}"
#: :func:`audit_run` as Airflow renders it
AUDIT_RUN_TEMPLATE = "{{ dag.dag_id }}/{{ run_id }}"
#: :func:`is_last_try` as Airflow renders it: ``true`` or ``false``
LAST_TRY_TEMPLATE = "{{ 'true' if ti.try_number > (task.retries or 0) else 'false' }}"
#: the ``model_uri`` of the newest triggering asset event that names one; empty when none does. The training
#: DAG names the version it registered in its event's extra (``{"model_uri": "models:/NAME/VERSION"}``);
#: several events folded into one run: the newest is audited, the others are never-audited versions,
#: which the nightly samples first.
REGISTERED_VERSION_TEMPLATE = (
    "{%- set found = namespace(ref='', at=none) -%}"
    "{%- if triggering_asset_events is defined and triggering_asset_events -%}"
    "{%- for events in triggering_asset_events.values() -%}{%- for event in events -%}"
    "{%- if (event.extra or {}).get('model_uri') and (found.at is none or event.timestamp > found.at) -%}"
    "{%- set found.ref = event.extra['model_uri'] -%}{%- set found.at = event.timestamp -%}"
    "{%- endif -%}"
    "{%- endfor -%}{%- endfor -%}"
    "{%- endif -%}"
    "{{ found.ref }}"
)


def audit_date(context: Mapping[str, Any]) -> str:
    """The ``date`` param, else the logical date as YYYY-MM-DD, else the stored ``run_after``'s date."""
    return (context.get("params") or {}).get("date") or context.get("ds") or context["dag_run"].run_after.date().isoformat()


def audit_run(context: Mapping[str, Any]) -> str:
    """``DAG_ID/RUN_ID``: the Airflow run that asked for the audit (recorded with its verdict)."""
    return f"{context['dag'].dag_id}/{context['run_id']}"


def is_last_try(try_number: int, retries: int | None) -> bool:
    """Whether try ``try_number`` (1-based) of a task with ``retries`` retries is its last."""
    return try_number > (retries or 0)


def registered_version(context: Mapping[str, Any]) -> str | None:
    """:data:`REGISTERED_VERSION_TEMPLATE` as a function: the newest triggering event's ``model_uri``, else None."""
    events = [e for evs in (context.get("triggering_asset_events") or {}).values() for e in evs]
    for event in sorted(events, key=lambda e: e.timestamp, reverse=True):
        uri = (event.extra or {}).get("model_uri")
        if uri:
            return str(uri)
    return None
