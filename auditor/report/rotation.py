"""A recorded key rotation: the auditor's signing key handed over from an old key to a new one, in the ledger.

``evidence verify`` holds every entry to one key; a change of key is a finding unless a rotation was
recorded: an in-toto statement naming both public keys, signed by **both** (the old key hands over, the
new key accepts), published as ``keys/rotation-<old>-<new>.intoto.json`` with a ledger entry of kind
``key_rotation`` (anchored like any entry). Verify with a key walks the rotations back from the key it holds
(``accepted``): entries before a rotation its key accepted are held to that rotation's old key. Verify with no
key walks forward from the key the first signed entry records (``handed_over``): a rotation whose old key is
the pinned one, signed by both, pins its new key. A rotation signed by one key only, or by keys other than the
ones it names, moves nothing.
"""

from __future__ import annotations

from typing import Any

from auditor.canonical import canonical_json
from auditor.errors import Findings
from auditor.report import attest, ledger
from auditor.storage.base import BlobStore

KIND = "key_rotation"


def is_rotation(entry: dict[str, Any]) -> bool:
    return entry.get("kind") == KIND


def publish_rotation(store: BlobStore, old: attest.SigningKey, new: attest.SigningKey) -> dict[str, Any]:
    """Record the hand-over from ``old`` to ``new`` (once); returns its ledger entry."""
    if old.keyid == new.keyid:
        raise Findings(f"the old and the new signing key are the same key ({old.keyid}): nothing to rotate")
    key = f"keys/rotation-{old.keyid[:16]}-{new.keyid[:16]}{attest.SUFFIX}"
    records = {"old": attest.key_record(old.signer.public_key), "new": attest.key_record(new.signer.public_key)}
    subject = {f"keys/{new.keyid}.json": ledger.sha256_of(canonical_json(records["new"]))}  # the key handed over to
    doc = attest.statement(subject, {"old_key": records["old"], "new_key": records["new"], "auditor": {"name": "repro-audit"}},
                           predicate_type=attest.ROTATION_PREDICATE_TYPE)
    store.write(key, attest.sign_all(doc, [old, new]))
    data = store.read(key)
    fields = {"kind": KIND, "rotation": {"old_keyid": old.keyid, "new_keyid": new.keyid},
              "attestation": {"key": key, "sha256": ledger.sha256_of(data), "keyids": attest.envelope_keyids(data)}}
    entry, _ = ledger.append(store, fields, identity=key)
    return entry


def accepted(entry: dict[str, Any], data: bytes | None, holder: Any) -> tuple[Any, str | None]:
    """(the old public key, None) when ``holder`` (the key verify holds at this point) signed this rotation as its new
    key and the old key it names signed it too; else (None, why not)."""
    rotation = entry.get("rotation") or {}
    if data is None:
        return None, "its rotation statement is missing"
    if holder is None or rotation.get("new_keyid") != holder.keyid:
        return None, None  # not a rotation to the key held here: it moves nothing
    try:
        doc = attest.verify(data, holder, where=f"key rotation {entry['attestation']['key']}",
                            predicate_type=attest.ROTATION_PREDICATE_TYPE)
        predicate = doc.get("predicate") or {}
        old = attest.key_from_record(predicate.get("old_key") or {})
        if old.keyid != rotation.get("old_keyid") or (predicate.get("new_key") or {}).get("keyid") != holder.keyid:
            return None, (f"the key rotation is not signed by both keys it names: its statement's old key is {old.keyid}, "
                          f"its ledger entry names {rotation.get('old_keyid')}")
        attest.verify(data, old, where=f"key rotation {entry['attestation']['key']}", predicate_type=attest.ROTATION_PREDICATE_TYPE)
    except (Findings, ValueError, KeyError, TypeError) as exc:
        return None, f"the key rotation is not signed by both keys it names ({exc})"
    return old, None


def handed_over(entry: dict[str, Any], data: bytes | None, held: Any, held_keyid: str | None) -> tuple[Any, str | None]:
    """Trust on first use, forward: (the new public key, None) when this rotation's statement names the key held so far
    as its old key (``held``, or only its id ``held_keyid`` on a ledger signed before keys were recorded: a key id is
    the hash of its key, so the statement's old key, its id recomputed, must match it) and both keys it names signed
    it; else (None, why not). With no key held yet (a rotation before any signed entry), its old key is taken on
    first use like the first signed entry's."""
    rotation = entry.get("rotation") or {}
    where = f"key rotation {(entry.get('attestation') or {}).get('key')}"
    if data is None:
        return None, "its rotation statement is missing"
    try:
        predicate = attest.payload(data, where=where, predicate_type=attest.ROTATION_PREDICATE_TYPE).get("predicate") or {}
        old = attest.key_from_record(predicate.get("old_key") or {})
        new = attest.key_from_record(predicate.get("new_key") or {})
    except (Findings, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"the key rotation is not signed by both keys it names: its statement does not name two keys ({exc})"
    expected = held.keyid if held is not None else held_keyid
    if expected is not None and old.keyid != expected:
        return None, (f"the key rotation is not signed by both keys it names: its statement hands over from key {old.keyid}, "
                      f"but the ledger's key is {expected} (its entry names {rotation.get('old_keyid')})")
    if (rotation.get("old_keyid"), rotation.get("new_keyid")) != (old.keyid, new.keyid):
        return None, (f"the key rotation is not signed by both keys it names: its entry names {rotation.get('old_keyid')} to "
                      f"{rotation.get('new_keyid')}, its statement {old.keyid} to {new.keyid}")
    try:
        for key in (old, new):
            attest.verify(data, key, where=where, predicate_type=attest.ROTATION_PREDICATE_TYPE)
    except Findings as exc:
        return None, f"the key rotation is not signed by both keys it names ({exc})"
    return new, None
