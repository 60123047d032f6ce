"""Mail on failure: SMTP notifiers for a failed audit or verdict task and for a failed DAG run.

``failure_notifiers`` gives the SMTP provider's ``SmtpNotifier`` (through the Connection
``REPRO_SMTP_CONN_ID``), to ``REPRO_NOTIFY_EMAIL``; none when it is unset. Read while a DAG file
is parsed, so through reads that never raise.
"""

from __future__ import annotations

from typing import Any

from auditor.settings import NOTIFY_EMAIL, SMTP_CONN_ID


def recipients() -> list[str]:
    """``REPRO_NOTIFY_EMAIL``, split on commas (empty when unset or malformed)."""
    raw = NOTIFY_EMAIL.get_or_default() or ""
    return [r.strip() for r in raw.split(",") if r.strip()]


def failure_notifiers(kind: str) -> list[Any]:
    """SMTP notifiers for a failed ``task`` (the audit: a non-reproduced verdict) or a failed ``dag`` run.

    No ``REPRO_NOTIFY_EMAIL``, no notifier. The sender is the SMTP Connection's ``from_email`` (its extra).
    """
    to = recipients()
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
