"""Issue 27, acceptance 6 (second half): a recorded key rotation verifies; an unrecorded or one-sided one does not.

The ledger of test_insider_tamper's ``signed`` fixture (three audits signed with key A, anchored in the
registry twin) gets ``repro-audit evidence rotate A B``, then an audit signed with B. ``evidence verify``
run the default way (the configured key B) and with no key at all (the first key pinned) accepts it.
A rotation the insider records with a fresh key of their own (signed by that key only, or claiming the
old key's id) moves nothing, and the entries signed after it fail.
"""

from __future__ import annotations

import json

import pytest

from auditor.report import attest, ledger
from auditor.report.rotation import KIND
from auditor.settings import Settings
from auditor.steps import AuditOptions
from auditor.storage import open_store
from tests.integration.test_insider_tamper import session, signed  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


def _cli(monkeypatch, capsys, env: dict[str, str], *args: str) -> tuple[int, str]:
    from auditor.cli import main
    from auditor.settings import get_settings

    for name in ("REPRO_SIGNING_KEY", "REPRO_SIGNING_PUBLIC_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    with pytest.raises(SystemExit) as done:
        main(list(args))
    get_settings.cache_clear()
    captured = capsys.readouterr()
    return done.value.code, captured.out + ("" if done.value.code in (0, 1) else captured.err)


def _rotated(signed, tmp_path, monkeypatch, capsys):  # noqa: F811
    registry, infos, settings, public, keyid = signed
    new_key = tmp_path / "keys" / "b.pem"
    _, new_id = attest.generate_key(new_key)
    env = {"MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_REPORTS": settings.reports, "REPRO_HOME": str(settings.home)}
    code, out = _cli(monkeypatch, capsys, env, "evidence", "rotate", settings.signing_key, str(new_key))
    assert code == 0, out
    assert f"{keyid}" in out and new_id in out and str(new_key) in out
    after = Settings.from_env({**env, "REPRO_SIGNING_KEY": str(new_key)})
    assert session(after).audit(infos[2].ref, AuditOptions(date="2026-05-09", audit_run="cli")).publish_failure is None
    return env, new_key, new_id


def test_a_recorded_rotation_verifies_the_default_way_and_with_no_key(signed, tmp_path, monkeypatch, capsys):  # noqa: F811
    _, _, settings, _, keyid = signed
    env, new_key, new_id = _rotated(signed, tmp_path, monkeypatch, capsys)
    entries = ledger.entries(open_store(settings.reports))
    assert [e.get("kind") for e in entries] == [None, None, None, KIND, None]
    for configured in ({"REPRO_SIGNING_KEY": str(new_key)}, {}):
        code, out = _cli(monkeypatch, capsys, {**env, **configured}, "evidence", "verify", "--json")
        doc = json.loads(out)
        assert code == 0 and doc["ok"], doc
        assert doc["key_rotations"] == 1 and set(doc["anchor_sources"].values()) == {5}  # MLflow's and the second anchor's
        assert doc["signatures_checked_with"] == new_id
        if configured:
            assert doc["signed"] == 4 and doc["key_source"] == "configured"  # three by the old key, through the rotation
        else:  # the first entry's recorded key pinned, moved to the new key by the rotation, every signature checked
            assert doc["pinned_keyid"] == new_id and doc["key_source"] == "pinned from entry 3" and doc["signed"] == 4
    # the old key alone no longer verifies what the new key signed
    code, out = _cli(monkeypatch, capsys, {**env, "REPRO_SIGNING_KEY": settings.signing_key}, "evidence", "verify", "--json")
    doc = json.loads(out)
    assert code == 1 and any(p["entry"] == 4 and f"no valid signature by key {keyid}" in p["message"] for p in doc["problems"])


def test_a_rotation_signed_by_the_insiders_key_alone_moves_nothing(signed, tmp_path, monkeypatch, capsys):  # noqa: F811
    """The insider has the reports folder and MLflow, not the old key: they record 'A hands over to M' signed by M
    (twice, or once), anchor it, then publish an audit signed by M."""
    from auditor.report.rotation import publish_rotation

    registry, infos, settings, public, keyid = signed
    mallory_path = tmp_path / "mallory.pem"
    _, mallory_id = attest.generate_key(mallory_path)
    mallory = attest.load_signing_key(str(mallory_path))
    impostor = attest.SigningKey(signer=mallory.signer, keyid=keyid, signer_name="")  # claims the old key's id
    store = open_store(settings.reports)
    entry = publish_rotation(store, impostor, mallory)
    assert entry["rotation"]["old_keyid"] == keyid
    from auditor.report.publish import refresh

    refresh(store)
    forger = Settings.from_env({"REPRO_HOME": str(settings.home), "REPRO_REPORTS": settings.reports,
                                "MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_SIGNING_KEY": str(mallory_path)})
    assert session(forger).audit(infos[2].ref, AuditOptions(date="2026-05-10", audit_run="cli")).publish_failure is None
    env = {"MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_REPORTS": settings.reports, "REPRO_HOME": str(settings.home)}
    for configured in ({"REPRO_SIGNING_KEY": settings.signing_key}, {"REPRO_SIGNING_KEY": str(mallory_path)}, {}):
        code, out = _cli(monkeypatch, capsys, {**env, **configured}, "evidence", "verify", "--json")
        doc = json.loads(out)
        assert code == 1, (configured, doc)
        text = "\n".join(p["message"] for p in doc["problems"] if p["entry"] in (3, 4))
        if configured.get("REPRO_SIGNING_KEY") == str(mallory_path):  # the insider's own key: the rotation is one-sided
            assert "not signed by both keys" in text, text
        elif configured:
            assert "not to the key held at that point" in text and f"no valid signature by key {keyid}" in text, text
        else:
            assert "not signed by both" in text, text
