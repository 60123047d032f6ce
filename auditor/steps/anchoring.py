"""Anchoring a ledger head outside the reports folder: the second anchor store and the MLflow params.

One home for both publish paths (an audit's, ``auditor.steps.publish``; a calibration's, ``auditor.steps.calibrate``),
so neither imports the other.
"""

from __future__ import annotations

from typing import Any


def anchor_params(session: Any, entry: dict[str, Any], entry_version_id: str | None) -> dict[str, str]:
    """Anchor ``entry``'s head outside the reports folder: in the second anchor store when one is configured
    (``REPRO_LEDGER_ANCHOR``, written first and once), and as the MLflow params this returns (location,
    ledger id, seq, head), which the caller logs on its run."""
    from auditor import tags as t
    from auditor.report.anchors import ledger_id, write_anchor

    store = session.store
    lid = ledger_id(store)
    second = second_anchor_store(session)
    if second is not None:
        write_anchor(second, location=store.identity, lid=lid, entry=entry, entry_version=entry_version_id)
    params = {t.PARAM_LEDGER_LOCATION: store.identity, t.PARAM_LEDGER_SEQ: str(entry["seq"]), t.PARAM_LEDGER_HEAD: entry["hash"]}
    if lid:
        params[t.PARAM_LEDGER_ID] = lid
    if entry_version_id:
        params[t.PARAM_LEDGER_ENTRY_VERSION] = entry_version_id
    return params


def second_anchor_store(session: Any) -> Any:
    """The store ``REPRO_LEDGER_ANCHOR`` names (locked like the reports when Object Lock is required), or None."""
    uri = session.settings.ledger_anchor
    if not uri:
        return None
    from auditor.report.lock import require_object_lock
    from auditor.storage import open_store

    store = open_store(uri)
    if session.settings.require_object_lock:
        require_object_lock(store, session.settings.lock_retention_days)
    return store
