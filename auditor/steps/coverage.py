"""Coverage: every registered version against the ledger (audited, overdue, never), as rows and as a page."""

from __future__ import annotations

import datetime as dt
from typing import Any


def registry_versions(session: Any) -> list[dict[str, Any]]:
    """The registry's listing as the coverage rows need it (plain rows: the page's stored inputs)."""
    from auditor.sampling import is_retired

    return [
        {"model": v.name, "version": str(v.version), "aliases": list(v.aliases), "tag_audit_at": v.last_audit_at,
         "tag_verdict": v.last_verdict, "retired": is_retired(dict(v.tags or {}))}
        for v in session.registry.list_versions()
    ]


def checks(session: Any, now: dt.datetime) -> dict[str, Any]:
    """The production and retention checks the page shows under the table; one that cannot run says why on the page
    (the page, the night's summary and the index are still published)."""
    import logging

    found: dict[str, Any] = {}
    for name, call in (("production", session.production), ("retention", lambda: session.retention(now=now))):
        try:
            found[name] = call()
        except Exception as exc:  # noqa: BLE001 - any failure of a check is shown on the page, never a lost page
            logging.getLogger(__name__).warning("coverage: the %s check could not run: %s", name, exc)
            from auditor.lineage.redact import redact_text

            found[name] = {"error": redact_text(f"the {name} check could not run: {type(exc).__name__}: {exc}")}
    return found


def coverage(session: Any, *, now: dt.datetime | None = None, write: bool = False) -> tuple[list[dict[str, Any]], str]:
    """The rows and the store's URI; with ``write``, ``coverage.html`` (and the inputs it was rendered from,
    ``coverage.json``) is published beside the index (and the index relinked), and the URI is the page's."""
    from auditor.lineage.redact import redact_text
    from auditor.report import ledger
    from auditor.report.index import coverage as coverage_rows
    from auditor.report.index import write_coverage
    from auditor.report.publish import refresh

    now = now or dt.datetime.now(dt.UTC)
    store, versions = session.store, registry_versions(session)
    entries = ledger.entries(store)
    if not write:
        return coverage_rows(versions, entries, now=now, overdue_days=session.settings.overdue_days), store.uri
    key, rows = write_coverage(store, versions, entries, now=now, overdue_days=session.settings.overdue_days,
                               registry=redact_text(session.settings.tracking_uri), checks=checks(session, now))
    refresh(store)
    return rows, f"{store.uri.rstrip('/')}/{key}"
