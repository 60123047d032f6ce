"""Calibrations as evidence: each one published to the reports store, signed and recorded in the ledger like an audit.

A calibration's evidence (every rerun's seed, weight digest and metrics, the same-seed floor) is the
file ``calibrations/<stem>.json``; with a signing key, an in-toto statement over it is signed beside it
(``<stem>.intoto.json``, predicate type ``CALIBRATION_PREDICATE_TYPE``); a ledger entry of kind
``calibration`` names both with their sha256. So the judge can hold a calibration to three things an
insider who writes to MLflow alone cannot make: a ledger entry in a chain that verifies, a file that
hashes to it, and a signature by the auditor's key. Deleting a calibration is deleting a ledger entry,
which ``evidence verify`` reports as a rollback (its anchors remember it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from auditor.digests import sha256_hex
from auditor.errors import Findings, NotFound
from auditor.report import attest, ledger
from auditor.storage.base import BlobStore

KIND = "calibration"
PREFIX = "calibrations/"


def is_calibration(entry: dict[str, Any]) -> bool:
    """Whether a ledger entry records a calibration (else it records an audit)."""
    return entry.get("kind") == KIND


def audits(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledger entries that record audits (what the index lists)."""
    return [e for e in entries if not is_calibration(e)]


def calibration_stem(model: str, version: str, sha256: str) -> str:
    """``calibrations/<model>_v<version>_<sha12>``: one file per (version, calibration evidence)."""
    exact = sha256_hex(json.dumps([model, str(version), sha256]).encode())[:12]
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in model)[:48] or "x"
    return f"{PREFIX}{safe}_v{''.join(c if c.isalnum() else '-' for c in str(version))[:16]}_{exact}"


@dataclass(frozen=True)
class PublishedCalibration:
    """Where a calibration was published: its ledger entry (as stored) and its files' keys."""

    entry: dict[str, Any]
    evidence_key: str
    attestation_key: str | None
    entry_version_id: str | None = None


def publish_calibration(store: BlobStore, data: bytes, *, model: str, version: str, sha256: str,
                        calibrated_at: str | None, key: Any) -> PublishedCalibration:
    """Publish one calibration's evidence (``data``, whose sha256 is ``sha256``), once; a repeat finishes it."""
    stem = calibration_stem(model, version, sha256)
    evidence_key = f"{stem}.json"
    if not store.write(evidence_key, data) and store.read(evidence_key) != data:
        raise Findings(f"{store.uri}/{evidence_key} holds other bytes than calibration {sha256}",
                       hint="run repro-audit evidence verify")
    attestation_key = attest.attestation_key(stem)
    attestation = None
    if key is not None:
        doc = attest.statement({evidence_key: sha256}, {
            "model": {"name": model, "version": str(version)}, "calibration_sha256": sha256,
            "calibrated_at": calibrated_at, "signer": key.signer_name, "auditor": {"name": "repro-audit"},
        }, predicate_type=attest.CALIBRATION_PREDICATE_TYPE)
        if not store.write(attestation_key, attest.sign(doc, key)):
            pass  # a retry: the first attempt's signature stands
        attestation = store.read(attestation_key)
    elif store.exists(attestation_key):
        attestation = store.read(attestation_key)
    versions = store.version_ids([evidence_key] + ([attestation_key] if attestation is not None else []))

    def part(k: str, blob: bytes) -> dict[str, Any]:
        out: dict[str, Any] = {"key": k, "sha256": ledger.sha256_of(blob)}
        if versions.get(k):
            out["version_id"] = versions[k]
        return out

    fields: dict[str, Any] = {
        "kind": KIND,
        "calibration": {"model": model, "version": str(version), "sha256": sha256, "calibrated_at": calibrated_at},
        "date": calibrated_at,
        "evidence": {**part(evidence_key, data), "digest": sha256},
    }
    if attestation is not None:
        fields["attestation"] = {**part(attestation_key, attestation), "keyids": attest.envelope_keyids(attestation)}
    entry, _ = ledger.append(store, fields, identity=stem)
    entry_version = store.version_ids([ledger.entry_key(entry["seq"])]).get(ledger.entry_key(entry["seq"]))
    return PublishedCalibration(entry=entry, evidence_key=evidence_key,
                                attestation_key=attestation_key if attestation is not None else None,
                                entry_version_id=entry_version)


@dataclass
class LedgeredCalibration:
    """A calibration the ledger records for a version, and whether the judge may use it (``problem`` None)."""

    sha256: str
    seq: int
    evidence_key: str
    data: bytes | None
    keyid: str | None  # the key whose signature verified (None: not signed, or not checked)
    signature: str  # "verified", "not checked (no signing key configured)", or why not
    problem: str | None = None

    def describe(self) -> str:
        return f"calibration {self.sha256} (ledger entry {self.seq}, {self.evidence_key})"


def ledgered_calibrations(store: BlobStore, model: str, version: str, public_key: Any) -> tuple[list[LedgeredCalibration], str | None]:
    """The version's calibrations as the ledger records them, oldest first, each checked; (found, why none can be read).

    A calibration is usable when its ledger entry sits in a chain that verifies, its evidence file hashes
    to what the entry records, and (with ``public_key``, the configured signer's) its attestation is signed
    by that key over that file. Without a key, signatures are not checked, and each says so.
    """
    try:
        entries = ledger.entries(store)
    except NotFound:
        return [], None
    except Findings as exc:
        return [], f"the ledger at {store.uri} does not verify ({exc}): no calibration recorded in it is used"
    found = []
    for entry in entries:
        cal = entry.get("calibration") or {}
        if not is_calibration(entry) or cal.get("model") != model or str(cal.get("version")) != str(version):
            continue
        part = entry.get("evidence") or {}
        item = LedgeredCalibration(sha256=str(cal.get("sha256")), seq=int(entry["seq"]), evidence_key=str(part.get("key")),
                                   data=None, keyid=None, signature="not checked (no signing key configured)")
        item.problem = _check(store, entry, item, public_key)
        found.append(item)
    return found, None


def _check(store: BlobStore, entry: dict[str, Any], item: LedgeredCalibration, public_key: Any) -> str | None:
    part = entry.get("evidence") or {}
    cal = entry.get("calibration") or {}
    own = calibration_stem(str(cal.get("model")), str(cal.get("version")), item.sha256) + ".json"
    if item.evidence_key != own:  # another version's (signed) evidence re-pointed at this one
        return f"its evidence {item.evidence_key} is not this version's calibration file ({own})"
    data = ledger.read_part(store, part)
    if data is None:
        return f"its evidence {item.evidence_key} is missing from {store.uri}"
    if ledger.sha256_of(data) != part.get("sha256") or part.get("sha256") != item.sha256:
        return f"its evidence {item.evidence_key} no longer hashes to the {item.sha256} its ledger entry records"
    item.data = data
    signed = entry.get("attestation") or {}
    if public_key is None:
        return None
    if not signed.get("key"):
        item.signature = "unsigned"
        return f"it is not signed, and the signing key {public_key.keyid} is configured"
    envelope = ledger.read_part(store, signed)
    if envelope is None or ledger.sha256_of(envelope) != signed.get("sha256"):
        item.signature = "attestation missing or changed"
        return f"its attestation {signed.get('key')} is missing or changed since it was published"
    try:
        doc = attest.verify(envelope, public_key, where=f"its attestation {signed['key']}",
                            predicate_type=attest.CALIBRATION_PREDICATE_TYPE)
    except Findings as exc:
        item.signature = "invalid"
        return str(exc)
    if attest.subject_digests(doc).get(item.evidence_key) != item.sha256:
        item.signature = "names other evidence"
        return f"its attestation does not name {item.evidence_key} with sha256 {item.sha256}"
    signed_model = (doc.get("predicate") or {}).get("model") or {}
    if (signed_model.get("name"), str(signed_model.get("version"))) != (cal.get("model"), str(cal.get("version"))):
        item.signature = "signed for another version"
        return (f"its attestation was signed for {signed_model.get('name')} version {signed_model.get('version')}, "
                f"not {cal.get('model')} version {cal.get('version')}")
    item.signature, item.keyid = "verified", public_key.keyid
    return None
