"""One fingerprint form for the pack's key (issue 32): sha256 of the DER SubjectPublicKeyInfo, as openssl prints it.

``repro-audit evidence fingerprint [KEY.pem]`` prints it from a public or a private key (default: the configured
signing key), ``evidence keygen`` prints it when it makes a key, ``--verifier`` prints the sha256 of the pack's two
verifiers; a team hands these to a supervisor out of band. And the regulatory map's Art. 31(8)(b) says what the
production check covers.
"""

from __future__ import annotations

import hashlib

import pytest

from auditor.cli import main
from auditor.errors import BadInput
from auditor.report import regmap
from auditor.report.attest import generate_key
from auditor.report.pack import fingerprint, verifier_digests
from auditor.settings import get_settings


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    captured = capsys.readouterr()
    return done.value.code, captured.out, captured.err


def test_the_fingerprint_is_openssls_from_the_public_or_the_private_key(tmp_path):
    public, _ = generate_key(tmp_path / "k.pem")
    fpr = fingerprint(public.read_bytes())
    assert fpr.startswith("sha256:") and len(fpr) == len("sha256:") + 64
    assert fingerprint((tmp_path / "k.pem").read_bytes()) == fpr
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key

    der = load_pem_public_key(public.read_bytes()).public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    assert fpr == "sha256:" + hashlib.sha256(der).hexdigest()  # openssl's: tests/integration/test_evidence_pack_adversarial
    with pytest.raises(BadInput, match="not a PEM key"):
        fingerprint(b"not a key", "x.pem")


def test_evidence_fingerprint_prints_it_for_a_key_file_or_the_configured_signing_key(tmp_path, capsys, monkeypatch):
    public, _ = generate_key(tmp_path / "k.pem")
    fpr = fingerprint(public.read_bytes())
    for path in (public, tmp_path / "k.pem"):
        code, out, _ = _run(capsys, "evidence", "fingerprint", str(path))
        assert code == 0 and out.strip() == fpr
    monkeypatch.setenv("REPRO_SIGNING_KEY", str(tmp_path / "k.pem"))
    monkeypatch.delenv("REPRO_SIGNING_PUBLIC_KEY", raising=False)
    get_settings.cache_clear()
    try:
        code, out, _ = _run(capsys, "evidence", "fingerprint")
        assert code == 0 and out.strip() == fpr
        monkeypatch.delenv("REPRO_SIGNING_KEY")
        get_settings.cache_clear()
        code, _, err = _run(capsys, "evidence", "fingerprint")
        assert code != 0 and "no signing key configured" in err
    finally:
        get_settings.cache_clear()


def test_keygen_prints_the_fingerprint_to_hand_a_supervisor(tmp_path, capsys):
    code, out, _ = _run(capsys, "evidence", "keygen", str(tmp_path / "new.pem"))
    assert code == 0
    assert fingerprint((tmp_path / "new.pem.pub").read_bytes()) in out and "out of band" in out


def test_evidence_fingerprint_verifier_prints_the_sha256_of_both_verifiers(capsys):
    code, out, _ = _run(capsys, "evidence", "fingerprint", "--verifier")
    assert code == 0
    digests = verifier_digests()
    assert set(digests) == {"VERIFY.md", "verify_pack.py"}
    for name, digest in digests.items():
        assert f"{digest}  {name}" in out


def test_art_31_8_b_says_what_the_production_check_covers_and_what_it_does_not():
    clause = next(c for c in regmap.clauses() if c.article == "Art. 31(8)(b)")
    evidence, missing = " ".join(clause.evidence), " ".join(clause.not_covered)
    assert "REPRO_DEPLOYED_ARTIFACTS" in evidence and "hashed against the audited artifact" in evidence
    assert "registry's copy" in evidence
    assert "golden-set predictions of the deployed model" in missing and "not named in settings" in missing
    assert "not with what a production system has loaded" not in missing
