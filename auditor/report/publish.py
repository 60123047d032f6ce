"""Publishing an audit: evidence, report, ledger entry and index, exactly once per (model version, audit id).

The steps, each safe to repeat and to race:

1. conditional create of ``<stem>.json`` (the evidence): the first publisher's
   evidence wins, and everything after is derived from the evidence *as
   stored*, so a second attempt (an Airflow retry, a concurrent twin) finishes
   the first one's work instead of writing its own;
2. conditional create of ``<stem>.html``, rendered from that stored evidence;
3. ``ledger.append``: one entry per stem (see ``auditor.report.ledger``);
4. rewrite ``ledger.jsonl`` and ``index.html`` from the entries.

A crash between any two steps leaves a state the next attempt completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auditor.errors import Findings
from auditor.judge.result import AuditResult
from auditor.report import ledger
from auditor.report.evidence import build_evidence, evidence_bytes, load_evidence, report_stem
from auditor.report.index import write_index
from auditor.report.lock import require_object_lock
from auditor.report.render import render_report_bytes
from auditor.settings import Settings, get_settings
from auditor.storage import BlobStore, open_store


@dataclass(frozen=True)
class Publication:
    """Where an audit was published and whether this call was the one that published it."""

    location: str
    stem: str
    report_key: str
    evidence_key: str
    seq: int
    entry_hash: str
    created: bool  # this call wrote the evidence; False: it was already published
    same_evidence: bool  # the stored evidence is the one this call built (False on a retry with new timings)


def entry_fields(doc: dict[str, Any], stem: str, evidence: bytes, report: bytes) -> dict[str, Any]:
    """What the ledger records about one published audit (enough to draw the index without opening reports)."""
    audit = doc["audit"]
    return {
        "audit": {"model": audit["model"]["name"], "version": audit["model"]["version"], "audit_id": audit["audit_id"]},
        "verdict": audit["verdict"],
        "date": audit.get("finished_at") or audit.get("started_at"),
        "report": {"key": f"{stem}.html", "sha256": ledger.sha256_of(report)},
        "evidence": {"key": f"{stem}.json", "sha256": ledger.sha256_of(evidence), "digest": doc["evidence_digest"]},
        "metrics": {
            m["name"]: {"distance": m.get("distance"), "inside": m.get("inside")} for m in audit.get("metrics") or []
        },
    }


def _create_or_read(store: BlobStore, key: str, data: bytes) -> tuple[bytes, bool]:
    if store.write(key, data):
        return data, True
    return store.read(key), False


def refresh(store: BlobStore) -> list[dict[str, Any]]:
    """Rewrite ``ledger.jsonl`` and ``index.html`` from the ledger entries; returns the entries."""
    return ledger.rewrite(store, also=write_index)


def publish(result: AuditResult, location: str | None = None, *, settings: Settings | None = None) -> Publication:
    """Publish one audit to ``location`` (default: ``settings.reports``); a repeat is a no-op that says so."""
    settings = settings or get_settings()
    store = open_store(location or settings.reports)
    if settings.require_object_lock:
        require_object_lock(store, settings.lock_retention_days)
    doc = build_evidence(result, settings=settings)
    stem = report_stem(result.model.name, result.model.version, result.audit_id)
    evidence_key, report_key = f"{stem}.json", f"{stem}.html"

    evidence, created = _create_or_read(store, evidence_key, evidence_bytes(doc))
    stored = load_evidence(evidence, source=f"{store.uri}/{evidence_key}")
    report, _ = _create_or_read(store, report_key, render_report_bytes(stored))
    entry, _ = ledger.append(store, entry_fields(stored, stem, evidence, report), identity=stem)
    if entry.get("evidence", {}).get("sha256") != ledger.sha256_of(evidence):
        raise Findings(
            f"{describe_entry(entry)} records other evidence than {store.uri}/{evidence_key} holds",
            hint="run repro-audit evidence verify",
        )
    refresh(store)
    return Publication(
        location=store.uri,
        stem=stem,
        report_key=report_key,
        evidence_key=evidence_key,
        seq=entry["seq"],
        entry_hash=entry["hash"],
        created=created,
        same_evidence=stored["evidence_digest"] == doc["evidence_digest"],
    )


def describe_entry(entry: dict[str, Any]) -> str:
    """``entry 4 (churn v3, audit a-1)``."""
    return ledger.describe(entry, entry.get("seq", -1))
