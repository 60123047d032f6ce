"""``evidence verify``'s signatures: each ledger entry's in-toto attestation checked with the configured key (and the
keys its recorded rotations hand over from), or, with no key, with the key pinned on first use (``auditor.report.verify``).

Each check answers a problem (a sentence, None where there is none) and counts what it saw in the ``Verification``."""

from __future__ import annotations

import json
from typing import Any

from auditor.errors import Findings
from auditor.report import attest
from auditor.report.calibrations import is_calibration
from auditor.report.ledger import read_part
from auditor.report.verification import Verification
from auditor.storage.base import BlobStore


def load_object(obj_raw: bytes | None) -> Any:
    """An entry object parsed (None when absent or not JSON; it may still be JSON of another shape)."""
    try:
        return json.loads(obj_raw) if obj_raw is not None else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def rotations(store: BlobStore, objects: dict[int, bytes], public_key: Any) -> tuple[list[tuple[int, Any]], dict[int, str]]:
    """Walk the recorded key rotations back from ``public_key``: ([(seq, the key held before it)], newest first) and
    the rotations that move nothing, with why (signed by one key only, or to a key not held at that point)."""
    from auditor.report.rotation import accepted, is_rotation

    boundaries: list[tuple[int, Any]] = []
    problems: dict[int, str] = {}
    holder = public_key
    for seq in sorted(objects, reverse=True):
        entry = load_object(objects[seq])
        if not isinstance(entry, dict) or not is_rotation(entry):
            continue
        data = read_part(store, entry.get("attestation") or {}) if (entry.get("attestation") or {}).get("key") else None
        old, why = accepted(entry, data, holder)
        if old is not None:
            boundaries.append((seq, old))
            holder = old
        else:
            problems[seq] = why or (f"it rotates key {(entry.get('rotation') or {}).get('old_keyid')} to "
                                    f"{(entry.get('rotation') or {}).get('new_keyid')}, not to the key held at that point "
                                    f"({holder.keyid}): a rotation the verifying key never accepted")
    return boundaries, problems


def key_at(seq: int, public_key: Any, boundaries: list[tuple[int, Any]]) -> Any:
    """The key entry ``seq`` must be signed by: the held key, or the old key of every accepted rotation after it."""
    key = public_key
    for boundary, old in boundaries:  # newest first
        if seq < boundary:
            key = old
    return key


def key_problem(entry: dict[str, Any], files: dict[str, bytes], public_key: Any, since_signing: bool,
                 out: Verification, rotation_problem: str | None = None) -> str | None:
    """The entry's signature checked with ``public_key``; without one, held to the pinned first key id."""
    from auditor.report.rotation import is_rotation

    if public_key is None:
        return _pinned_key_problem(entry, files, out)
    if is_rotation(entry):
        out.seen_signed = True
        out.rotations += rotation_problem is None
        return rotation_problem
    signed = bool((entry.get("attestation") or {}).get("key"))
    if since_signing and not signed and not out.seen_signed:
        out.unsigned_before_signing += 1  # published before signing was configured: accepted, and counted
        return None
    out.seen_signed = out.seen_signed or signed
    problem = _signature_problem(entry, files, public_key)
    out.signed += problem is None
    return problem


def _pinned_key_problem(entry: dict[str, Any], files: dict[str, bytes], out: Verification) -> str | None:
    """Without a public key, trust on first use of a *key*, not of a key id: the first signed entry's statement
    records its signer's public key (``attest.recorded_key``); it is pinned, and every later signature is checked with
    it cryptographically, like a configured key's (a forged envelope that copies the key id fails). An unsigned entry
    after a signed one is a finding; so is a change of key, unless a key rotation from the pinned key, signed by both
    keys it names, is recorded before it (``auditor.report.rotation.handed_over``), which pins the new key.

    A ledger signed before entries recorded their key pins the first key id only: those signatures are counted in
    ``unchecked`` (key ids are claims) until an entry records the key of that very id (a key id is the hash of its key)."""
    from auditor.report.rotation import handed_over, is_rotation

    part = entry.get("attestation") or {}
    data = files.get(part.get("key") or "")
    if is_rotation(entry):
        new, why = handed_over(entry, data, out.pinned_key, out.pinned_keyid)
        if new is None:
            return why
        out.pinned_key, out.pinned_keyid, out.pinned_at = new, new.keyid, entry.get("seq")
        out.rotations += 1
        return None
    if not part.get("key"):
        if out.pinned_keyid is None:
            return None  # published before signing was switched on
        return f"is not signed, though the ledger's entries are signed by key {out.pinned_keyid} from the first signed one on"
    if data is None:
        return None  # reported as missing or changed already
    recorded = attest.recorded_key(data)
    if out.pinned_keyid is None and recorded is not None:
        out.pinned_key, out.pinned_keyid, out.pinned_at = recorded, recorded.keyid, entry.get("seq")
    elif out.pinned_keyid is None:
        out.pinned_keyid = next(iter(attest.envelope_keyids(data)), None)
    elif out.pinned_key is None and recorded is not None and recorded.keyid == out.pinned_keyid:
        out.pinned_key, out.pinned_at = recorded, entry.get("seq")  # the pinned key id's own key, recorded at last
    if out.pinned_key is None:
        out.unchecked += 1
        keyids = attest.envelope_keyids(data)
        if recorded is not None and recorded.keyid != out.pinned_keyid:  # a key recorded, and not the pinned id's
            return (f"records its signer's key {recorded.keyid} (its signatures claim key id {', '.join(keyids) or 'none'}), "
                    f"but the ledger's first signed entry by key {out.pinned_keyid}: the signing key changed and no "
                    "rotation is recorded")
        if out.pinned_keyid not in keyids:
            return (f"is signed by key {', '.join(keyids) or 'nobody'}, but the ledger's first signed entry by key "
                    f"{out.pinned_keyid}: the signing key changed and no rotation is recorded")
        return None
    problem = _signature_problem(entry, files, out.pinned_key)
    if problem is not None and recorded is not None and recorded.keyid != out.pinned_key.keyid:
        problem += (f"; it records key {recorded.keyid}, not the ledger's key {out.pinned_key.keyid}: the signing key "
                    "changed and no rotation signed by the ledger's key names the new one")
    out.signed += problem is None
    return problem


def _signature_problem(entry: dict[str, Any], files: dict[str, bytes], public_key: Any) -> str | None:
    """Whether the entry's attestation is signed by ``public_key`` and says what the entry says."""
    part = entry.get("attestation") or {}
    if not part.get("key"):
        return "is not signed: it has no attestation"
    data = files.get(part["key"])
    if data is None:
        return None  # reported as missing or changed already
    calibration = is_calibration(entry)
    try:
        doc = attest.verify(data, public_key, where=f"its attestation {part['key']}",
                            predicate_type=attest.CALIBRATION_PREDICATE_TYPE if calibration else attest.PREDICATE_TYPE)
    except Findings as exc:
        return str(exc)
    subjects = attest.subject_digests(doc)
    if calibration:
        mine = entry.get("evidence") or {}
        if subjects.get(mine.get("key")) != mine.get("sha256"):
            return f"its attestation does not name its calibration evidence {mine.get('key')} with sha256 {mine.get('sha256')}"
        return None
    for label in ("report", "evidence"):
        mine = entry.get(label) or {}
        if subjects.get(mine.get("key")) != mine.get("sha256"):
            return f"its attestation does not name its {label} {mine.get('key')} with sha256 {mine.get('sha256')}"
    predicate = doc.get("predicate") or {}
    if predicate.get("verdict") != entry.get("verdict"):
        return f"its attestation says {predicate.get('verdict')}, the entry says {entry.get('verdict')}"
    if predicate.get("evidence_digest") != (entry.get("evidence") or {}).get("digest"):
        return "its attestation names other evidence than the entry"
    return None
