"""Coverage: every registered version against the ledger (audited, overdue, never), as rows and as a page."""

from __future__ import annotations

import datetime as dt
from typing import Any


def coverage_rows(session: Any, *, now: dt.datetime) -> list[dict[str, Any]]:
    """The coverage rows for the session's registry and reports store."""
    from auditor.report import ledger
    from auditor.report.index import coverage
    from auditor.sampling import is_retired

    versions = [
        {"model": v.name, "version": str(v.version), "aliases": list(v.aliases), "tag_audit_at": v.last_audit_at,
         "tag_verdict": v.last_verdict, "retired": is_retired(dict(v.tags or {}))}
        for v in session.registry.list_versions()
    ]
    return coverage(versions, ledger.entries(session.store), now=now, overdue_days=session.settings.overdue_days)


def coverage(session: Any, *, now: dt.datetime | None = None, write: bool = False) -> tuple[list[dict[str, Any]], str]:
    """The rows and the store's URI; with ``write``, ``coverage.html`` is published beside the index (and the
    index relinked), and the URI is the page's."""
    from auditor.lineage.redact import redact_text
    from auditor.report.index import write_coverage
    from auditor.report.publish import refresh

    now = now or dt.datetime.now(dt.UTC)
    rows = coverage_rows(session, now=now)
    store = session.store
    if not write:
        return rows, store.uri
    key = write_coverage(store, rows, overdue_days=session.settings.overdue_days, as_of=now.strftime("%Y-%m-%d %H:%M UTC"),
                         registry=redact_text(session.settings.tracking_uri))
    refresh(store)
    return rows, f"{store.uri.rstrip('/')}/{key}"
