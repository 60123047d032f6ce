"""Issue 27, acceptance 6, the pure core: with no key given or configured, ``verify`` pins the public key the first
signed entry records (trust on first use of the key, not of a key id) and checks every later signature with it.

Real parts: ``report.publish`` (a local reports folder), securesystemslib's signer and DSSE envelopes, the ledger and
``verify``. No MLflow: anchors are not what this checks (``--no-anchors`` / ``anchors=None``).
"""

from __future__ import annotations

import pytest

from auditor.judge.result import Verdict
from auditor.report import attest, ledger
from auditor.report.publish import publish, refresh
from auditor.report.rotation import publish_rotation
from auditor.report.verify import verify
from auditor.settings import Settings
from auditor.storage import open_store
from tests.fixtures.audits import make_audit

SETTINGS = Settings()


def _key(path) -> attest.SigningKey:
    attest.generate_key(path)
    return attest.load_signing_key(str(path))


def _impostor(own: attest.SigningKey, copied_keyid: str) -> attest.SigningKey:
    """The forger's fresh key dressed in the genuine key id: its envelopes name ``copied_keyid``."""
    from securesystemslib.signer import CryptoSigner, SSlibKey

    real = own.signer.public_key
    dressed = SSlibKey(copied_keyid, real.keytype, real.scheme, dict(real.keyval))
    return attest.SigningKey(signer=CryptoSigner(own.signer._private_key, dressed), keyid=copied_keyid, signer_name="")


def _publish(root, key, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        audit = make_audit(Verdict.REPRODUCED_BITWISE, name="m", version=str(i + 1), audit_id=f"a-{i}",
                           finished_at=f"2026-04-{i + 1:02d}T02:00:00Z")
        assert publish(audit, str(root), settings=SETTINGS, key=key).entry_hash


def _messages(result) -> str:
    return "\n".join(str(p) for p in result.problems)


@pytest.fixture()
def genuine(tmp_path):
    key = _key(tmp_path / "keys" / "a.pem")
    root = tmp_path / "reports"
    _publish(root, key, 2)
    return root, key


def test_with_no_key_the_first_entrys_recorded_key_is_pinned_and_every_signature_checked(genuine):
    root, key = genuine
    result = verify(open_store(str(root)))
    assert result.ok, _messages(result)
    assert result.pinned_key is not None and result.pinned_key.keyid == key.keyid and result.pinned_at == 0
    assert (result.signed, result.unchecked) == (2, 0)


def test_a_forged_entry_signed_by_a_fresh_key_copying_the_key_id_fails_with_no_key(genuine, tmp_path):
    root, key = genuine
    mallory = _key(tmp_path / "mallory.pem")
    forged = _impostor(mallory, key.keyid)
    _publish(root, forged, 1, start=2)
    entry = ledger.entries(open_store(str(root)))[2]
    assert entry["attestation"]["keyids"] == [key.keyid]  # the envelope claims the genuine key id
    result = verify(open_store(str(root)))
    assert not result.ok and result.first.seq == 2, _messages(result)
    text = str(result.first)
    assert f"no valid signature by key {key.keyid}" in text and mallory.keyid in text, text
    assert result.signed == 2
    # the configured key (the CLI's default when one is set) is as strict
    strict = verify(open_store(str(root)), public_key=key.signer.public_key, since_signing=True)
    assert not strict.ok and strict.first.seq == 2


def test_a_forged_first_entry_is_caught_by_its_own_recorded_key(tmp_path):
    """A forger cannot even start a ledger with a copied key id: the recorded key must verify its own envelope."""
    genuine, mallory = _key(tmp_path / "a.pem"), _key(tmp_path / "m.pem")
    root = tmp_path / "reports"
    _publish(root, _impostor(mallory, genuine.keyid), 1)
    result = verify(open_store(str(root)))
    assert not result.ok and result.first.seq == 0 and "no valid signature" in str(result.first), _messages(result)


def test_a_rotation_signed_by_both_keys_moves_the_pinned_key_and_a_one_sided_one_does_not(genuine, tmp_path):
    root, old = genuine
    new = _key(tmp_path / "keys" / "b.pem")
    store = open_store(str(root))
    publish_rotation(store, old, new)
    _publish(root, new, 1, start=2)
    result = verify(open_store(str(root)))
    assert result.ok, _messages(result)
    assert (result.rotations, result.pinned_key.keyid, result.signed) == (1, new.keyid, 3)

    mallory = _key(tmp_path / "m.pem")
    publish_rotation(store, _impostor(mallory, new.keyid), _key(tmp_path / "m2.pem"))  # claims the held key
    refresh(store)
    result = verify(open_store(str(root)))
    assert not result.ok and result.first.seq == 4 and "not signed by both" in str(result.first), _messages(result)


def _unrecorded(data: bytes, key: attest.SigningKey) -> bytes:
    """The envelope as signed before statements recorded their signer's key: the same statement, no key in it."""
    import base64
    import json

    from securesystemslib.dsse import Envelope

    from auditor.canonical import canonical_json

    doc = json.loads(base64.b64decode(json.loads(data)["payload"]))
    del doc["predicate"][attest.SIGNING_KEY_FIELD]
    envelope = Envelope(canonical_json(doc), attest.PAYLOAD_TYPE, {})
    envelope.sign(key.signer)
    return canonical_json(envelope.to_dict()) + b"\n"


def _strip_recorded_keys(root, key: attest.SigningKey) -> None:
    """The ledger as the release before this one wrote it: envelopes whose statements record no key."""
    store = open_store(str(root))
    prev = ledger.GENESIS
    for entry in ledger.entries(store):
        part = entry["attestation"]
        legacy = _unrecorded(store.read(part["key"]), key)
        assert attest.recorded_key(legacy) is None
        store.write(part["key"], legacy, overwrite=True)
        entry = {**entry, "attestation": {**part, "sha256": ledger.sha256_of(legacy)}, "prev": prev}
        entry["hash"] = prev = ledger.entry_hash(entry)
        store.write(ledger.entry_key(entry["seq"]), ledger.entry_bytes(entry), overwrite=True)
    refresh(store)


def test_a_ledger_signed_before_keys_were_recorded_says_its_signatures_were_not_checked(genuine):
    """Envelopes whose statements record no key (signed before this release): the first key id is pinned and their
    signatures counted as not checked; a later entry recording the key of that very id pins the key from there on."""
    root, key = genuine
    _strip_recorded_keys(root, key)
    result = verify(open_store(str(root)))
    assert result.ok, _messages(result)
    assert (result.pinned_key, result.pinned_keyid, result.unchecked, result.signed) == (None, key.keyid, 2, 0)
    _publish(root, key, 1, start=2)  # this release: the entry records its key, whose id is the pinned one
    result = verify(open_store(str(root)))
    assert result.ok, _messages(result)
    assert (result.pinned_key.keyid, result.pinned_at, result.unchecked, result.signed) == (key.keyid, 2, 2, 1)


def test_the_default_second_anchor_holds_some_heads_each_of_which_must_still_be_in_the_ledger(genuine):
    """The default second anchor (under one home) holds the heads published from that home: an entry published elsewhere
    is no finding, a head it holds beyond the ledger's end (a rollback) or unlike the entry (a re-chain) is, named."""
    from auditor.report.verify import Anchor, Anchors

    root, _ = genuine
    store = open_store(str(root))
    heads = [e["hash"] for e in ledger.entries(store)]
    source = "the second anchor /home/anchors (the default)"

    def check(*anchors: Anchor):
        return verify(store, anchors=Anchors(anchors, sources=[source], partial={source}))

    assert check(Anchor(1, heads[1], "h/1", source=source)).ok  # entry 0 was published from another home
    assert check().ok  # nothing published from this home
    rolled = check(Anchor(1, heads[1], "h/1", source=source), Anchor(2, "sha256:" + "1" * 64, "h/2", source=source))
    assert not rolled.ok and "entry 2 is anchored in h/2" in str(rolled.first) and "rolled back" in str(rolled.first)
    rechained = check(Anchor(0, "sha256:" + "2" * 64, "h/0", source=source))
    assert not rechained.ok and "re-chained" in str(rechained.first)
    strict = verify(store, anchors=Anchors([Anchor(1, heads[1], "h/1", source=source)], sources=[source]))
    assert not strict.ok and "entry 0" in str(strict.first)  # a configured store must anchor every entry


def test_on_a_ledger_signed_before_keys_were_recorded_a_forger_recording_another_key_still_fails(genuine, tmp_path):
    root, key = genuine
    _strip_recorded_keys(root, key)
    _publish(root, _impostor(_key(tmp_path / "m.pem"), key.keyid), 1, start=2)  # copies the key id, records its own key
    result = verify(open_store(str(root)))
    assert not result.ok and result.first.seq == 2 and "the signing key changed" in str(result.first), _messages(result)


def test_the_promotion_gates_comparisons_beside_the_reports_are_not_files_added_by_hand(genuine):
    """``repro-audit compare`` writes its comparison and thresholds under ``comparisons/`` of the reports store: not
    ledgered (not an audit), and not "added by hand"; anything else no entry names still is."""
    root, _ = genuine
    (root / "comparisons" / "m").mkdir(parents=True)
    (root / "comparisons" / "m" / "v2-vs-m-v1-20260401.json").write_text("{}")
    assert verify(open_store(str(root))).ok
    (root / "notes.html").write_text("<p>hand-made</p>")
    assert "notes.html has no ledger entry" in _messages(verify(open_store(str(root))))
