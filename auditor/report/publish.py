"""Publishing an audit: evidence, report, ledger entry and index, exactly once per (model version, audit id).

The steps, each safe to repeat and to race:

1. conditional create of ``<stem>.json`` (the evidence): the first publisher's
   evidence wins, and everything after is derived from the evidence *as
   stored*, so a second attempt (an Airflow retry, a concurrent twin) finishes
   the first one's work instead of writing its own;
2. conditional create of ``<stem>.html``, rendered from that stored evidence;
3. with a signing key, conditional create of ``<stem>.intoto.json``: an in-toto
   statement over the weights, report and evidence, signed (``auditor.report.attest``);
4. ``ledger.append``: one entry per stem (see ``auditor.report.ledger``), naming every
   file this audit published with its sha256 (and, on a versioned bucket, its version id);
5. rewrite ``ledger.jsonl`` and ``index.html`` from the entries.

A crash between any two steps leaves a state the next attempt completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auditor.canonical import digest
from auditor.contract import WEIGHTS_FILE
from auditor.errors import Findings
from auditor.judge.result import AuditResult
from auditor.report import attest, ledger
from auditor.report.evidence import build_evidence, evidence_bytes, load_evidence, report_stem
from auditor.report.index import write_index
from auditor.report.lock import require_object_lock
from auditor.report.render import render_report_bytes
from auditor.settings import Settings
from auditor.storage import BlobStore, open_store
from auditor.uris import model_uri


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
    attestation_key: str | None = None
    entry: dict[str, Any] | None = None  # the ledger entry, as stored
    files: dict[str, bytes] | None = None  # key -> bytes of what this audit published (report, evidence, attestation)
    entry_version_id: str | None = None  # on a versioned bucket: the version of the (retained) entry object


def entry_fields(
    doc: dict[str, Any], stem: str, evidence: bytes, report: bytes, attestation: bytes | None = None,
    versions: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """What the ledger records about one published audit (enough to draw the index without opening reports).

    ``report``, ``evidence`` and ``attestation`` are this audit's manifest: every file it
    wrote, with its sha256 and (on a versioned bucket) the version id to read it back by.
    """
    audit = doc["audit"]
    versions = versions or {}

    def part(key: str, data: bytes) -> dict[str, Any]:
        out: dict[str, Any] = {"key": key, "sha256": ledger.sha256_of(data)}
        if versions.get(key):
            out["version_id"] = versions[key]
        return out

    fields = {
        "audit": {"model": audit["model"]["name"], "version": audit["model"]["version"], "audit_id": audit["audit_id"]},
        "verdict": audit["verdict"],
        "date": audit.get("finished_at") or audit.get("started_at"),
        "record_digest": (doc.get("digests") or {}).get("record"),
        "report": part(f"{stem}.html", report),
        "evidence": {**part(f"{stem}.json", evidence), "digest": doc["evidence_digest"]},
        "metrics": {
            m["name"]: {"distance": m.get("distance"), "inside": m.get("inside")} for m in audit.get("metrics") or []
        },
    }
    if attestation is not None:
        fields["attestation"] = {**part(attest.attestation_key(stem), attestation),
                                 "keyids": attest.envelope_keyids(attestation)}
    return fields


def _statement(doc: dict[str, Any], stem: str, evidence: bytes, report: bytes) -> dict[str, Any]:
    """The in-toto statement of a published audit: weights, report and evidence, and the result."""
    audit = doc["audit"]
    model = audit["model"]
    subjects = {f"{stem}.html": ledger.sha256_of(report), f"{stem}.json": ledger.sha256_of(evidence)}
    weights = (doc.get("digests") or {}).get("weights.registered")
    if weights:
        subjects[f"{model_uri(model['name'], model['version'])}/{WEIGHTS_FILE}"] = weights
    bands = [m.get("band") for m in audit.get("metrics") or [] if m.get("band")]
    env = (audit.get("record") or {}).get("environment") or {}
    predicate = {
        "model": {"name": model["name"], "version": model["version"], "run_id": model.get("run_id")},
        "audit_id": audit["audit_id"],
        "verdict": audit["verdict"],
        "tiers": {name: tier.get("status") for name, tier in (audit.get("tiers") or {}).items()},
        "record_digest": (doc.get("digests") or {}).get("record"),
        "evidence_digest": doc["evidence_digest"],
        "bands_digest": digest(bands) if bands else None,
        "calibration_digests": sorted({b["evidence"]["sha256"] for b in bands if (b.get("evidence") or {}).get("sha256")}),
        "environment": {k: env.get(k) for k in ("image_digest", "python", "cuda", "accelerator", "platform") if env.get(k)},
        "started_at": audit.get("started_at"),
        "finished_at": audit.get("finished_at"),
        "responsible_person": doc.get("responsible_person"),
        "signer": (doc.get("signing") or {}).get("signer"),
        "auditor": _auditor(doc),
    }
    if audit.get("assumptions"):  # a rebuilt plain-MLflow version's (``auditor.adopt.rebuild``): signed with the verdict
        predicate["assumptions"] = list(audit["assumptions"])
    return attest.statement(subjects, predicate)


def _auditor(doc: dict[str, Any]) -> dict[str, Any]:
    """The statement's ``auditor``: name and version, and what the evidence records of its environment and lock."""
    itself = doc.get("auditor") or {}
    found = {"name": "repro-audit", "version": doc.get("tool_version"),
             "environment_digest": itself.get("environment_digest"), "matches_lock": (itself.get("lock") or {}).get("matches")}
    return {k: v for k, v in found.items() if v is not None or k == "version"}


def _create_or_read(store: BlobStore, key: str, data: bytes) -> tuple[bytes, bool]:
    if store.write(key, data):
        return data, True
    return store.read(key), False


def refresh(store: BlobStore) -> list[dict[str, Any]]:
    """Rewrite ``ledger.jsonl`` and ``index.html`` from the ledger entries; returns the entries."""
    from auditor.report.calibrations import audits

    return ledger.rewrite(store, also=lambda s, entries: write_index(s, audits(entries)))


_FROM_SETTINGS: Any = object()


def publish(result: AuditResult, location: str | BlobStore, *, settings: Settings, key: Any = _FROM_SETTINGS) -> Publication:
    """Publish one audit to ``location`` (a store or its URI); a repeat is a no-op that says so.

    ``key`` is the signing key an audit session opened once (None: unsigned); by default the settings' key.
    """
    store = open_store(location) if isinstance(location, str) else location
    if settings.require_object_lock:
        require_object_lock(store, settings.lock_retention_days)
    if key is _FROM_SETTINGS:
        key = signing_key(settings)
    signing = {"keyid": key.keyid, "signer": key.signer_name} if key else None
    doc = build_evidence(result, settings=settings, signing=signing)
    stem = report_stem(result.model.name, result.model.version, result.audit_id)
    evidence_key, report_key = f"{stem}.json", f"{stem}.html"

    evidence, created = _create_or_read(store, evidence_key, evidence_bytes(doc))
    stored = load_evidence(evidence, source=f"{store.uri}/{evidence_key}")
    report, _ = _create_or_read(store, report_key, render_report_bytes(stored))
    attestation_key = attest.attestation_key(stem)
    attestation = None
    if key is not None:
        attestation, _ = _create_or_read(store, attestation_key, attest.sign(_statement(stored, stem, evidence, report), key))
    elif store.exists(attestation_key):  # a retry without the key finishes a signed publish
        attestation = store.read(attestation_key)
    written = [report_key, evidence_key] + ([attestation_key] if attestation is not None else [])
    versions = store.version_ids(written)
    entry, _ = ledger.append(store, entry_fields(stored, stem, evidence, report, attestation, versions), identity=stem)
    if entry.get("evidence", {}).get("sha256") != ledger.sha256_of(evidence):
        raise Findings(
            f"{describe_entry(entry)} records other evidence than {store.uri}/{evidence_key} holds",
            hint="run repro-audit evidence verify",
        )
    refresh(store)
    entry_version = store.version_ids([ledger.entry_key(entry["seq"])]).get(ledger.entry_key(entry["seq"]))
    return Publication(
        location=store.uri,
        stem=stem,
        report_key=report_key,
        evidence_key=evidence_key,
        seq=entry["seq"],
        entry_hash=entry["hash"],
        created=created,
        same_evidence=stored["evidence_digest"] == doc["evidence_digest"],
        attestation_key=attestation_key if attestation is not None else None,
        entry=entry,
        files={report_key: report, evidence_key: evidence, **({attestation_key: attestation} if attestation else {})},
        entry_version_id=entry_version,
    )


def signing_key(settings: Settings) -> attest.SigningKey | None:
    """The configured signer (``REPRO_SIGNING_KEY``), or None when audits are published unsigned."""
    if not settings.signing_key:
        return None
    return attest.load_signing_key(
        settings.signing_key, public_key=settings.signing_public_key, signer_name=settings.signer or settings.responsible_person
    )


def describe_entry(entry: dict[str, Any]) -> str:
    """``entry 4 (churn v3, audit a-1)``."""
    return ledger.describe(entry, entry.get("seq", -1))
