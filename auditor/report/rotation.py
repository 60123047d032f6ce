"""A recorded key rotation: the auditor's signing key handed over from an old key to a new one, in the ledger.

``evidence verify`` holds every entry to one key; a change of key is a finding unless a rotation was
recorded: an in-toto statement naming both public keys, signed by **both** (the old key hands over, the
new key accepts), published as ``keys/rotation-<old>-<new>.intoto.json`` with a ledger entry of kind
``key_rotation`` (anchored like any entry). Verify walks the rotations back from the key it holds: entries
before a rotation its key accepted are held to that rotation's old key. A rotation signed by one key only,
or by keys other than the ones it names, moves nothing.
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
