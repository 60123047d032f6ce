"""``REPRO_EVIDENCE_PACKS`` (issue 32, build point 1: a pack on every publish when a setting asks for it): the
publish step writes the audit's pack, the same bytes ``repro-audit evidence pack`` gives, once, outside the
reports store (whose every file a ledger entry names, so ``evidence verify`` still passes)."""

from __future__ import annotations

import zipfile

from auditor.judge.result import Verdict
from auditor.registry.memory import MemoryRegistry
from auditor.report import attest
from auditor.report.pack import build_pack, settings_public_key
from auditor.report.publish import publish
from auditor.report.verify import verify
from auditor.settings import Settings
from auditor.steps import Session
from auditor.steps.publish import write_evidence_pack
from auditor.storage import open_store
from tests.fixtures.audits import make_audit


def _session(tmp_path, **more):
    key = tmp_path / "keys" / "a.pem"
    attest.generate_key(key)
    registry = MemoryRegistry.named(f"memory://packs-{tmp_path.name}")
    env = {"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"), "REPRO_SIGNING_KEY": str(key),
           "MLFLOW_TRACKING_URI": registry.uri, **more}
    return Session(Settings.from_env(env), registry=registry)


def test_each_publish_writes_its_pack_once_and_the_reports_still_verify(tmp_path):
    session = _session(tmp_path, REPRO_EVIDENCE_PACKS=str(tmp_path / "packs"))
    audit = make_audit(Verdict.REPRODUCED_BITWISE, name="m", version="1", audit_id="a-1", finished_at="2026-04-01T02:00:00Z")
    publication = publish(audit, session.settings.reports, settings=session.settings, key=session.signer)
    where = write_evidence_pack(session, publication.stem, lambda _m: None)
    path = tmp_path / "packs" / f"{publication.stem}.zip"
    assert where.endswith(f"{publication.stem}.zip") and path.is_file()
    made = path.read_bytes()
    again = build_pack(session.store, publication.stem, public_key=settings_public_key(session.settings),
                       registry=lambda: session.registry)
    assert made == again.data  # what `repro-audit evidence pack` writes
    assert "SHA256SUMS" in {n.rsplit("/", 1)[-1] for n in zipfile.ZipFile(path).namelist()}
    path.write_bytes(b"kept")  # a pack already there is kept: never rewritten
    write_evidence_pack(session, publication.stem, lambda _m: None)
    assert path.read_bytes() == b"kept"
    assert verify(open_store(session.settings.reports)).ok


def test_unsigned_audits_get_no_pack_and_say_why(tmp_path, caplog):
    session = _session(tmp_path, REPRO_EVIDENCE_PACKS=str(tmp_path / "packs"))
    unsigned = Session(Settings.from_env({**{k: str(v) for k, v in {
        "REPRO_HOME": tmp_path / "home", "REPRO_REPORTS": tmp_path / "reports2",
        "REPRO_EVIDENCE_PACKS": tmp_path / "packs"}.items()}, "MLFLOW_TRACKING_URI": session.registry.uri}),
        registry=session.registry)
    audit = make_audit(Verdict.REPRODUCED_BITWISE, name="m", version="1", audit_id="a-1", finished_at="2026-04-01T02:00:00Z")
    publication = publish(audit, unsigned.settings.reports, settings=unsigned.settings, key=None)
    assert write_evidence_pack(unsigned, publication.stem, lambda _m: None) is None
    assert "REPRO_EVIDENCE_PACKS is set but no signing key" in caplog.text
