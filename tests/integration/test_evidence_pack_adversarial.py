"""The evidence pack against an insider who rewrites it (issue 32, a reviewer's attacks).

Whoever makes a pack can rewrite every file in it, SHA256SUMS and the verifiers included, and re-sign it with a
key of their own. So both routes pin the key (a fingerprint the supervisor was given apart from the pack) and fail
without it; both refuse files outside the pack format's names; both run the supervisor's own copy of the
verifiers; the shell route checks the run record and the calibration files itself. Last, a pack of an audit the
demo world published (a real rebuild in MLflow) is verified by both routes in a python without repro-audit.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from auditor.canonical import canonical_json
from auditor.report import ledger
from auditor.report.attest import generate_key
from auditor.report.pack import build_pack, fingerprint, public_pem, sums, verifier_digests
from tests.integration import test_evidence_pack as base
from tests.integration.test_evidence_pack import (
    CALIBRATION_RUN,
    OWN_VERIFIER,
    pinned,
    unzip,
    verifier_route,
    verify_md_route,
)

published = base.published  # the same module fixtures: three signed audits, a python with cryptography only
fresh_python = base.fresh_python


@pytest.fixture()
def folder(published, tmp_path) -> Path:
    return unzip(published["pack"].data, tmp_path)


def resum(folder: Path) -> None:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
             if p.is_file() and p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_bytes(sums(files))


def _bytes(value) -> bytes:
    out = canonical_json(value)
    return out if isinstance(out, bytes) else out.encode("utf-8")


def resign(folder: Path, private: Path, public: Path) -> None:
    """The whole-pack forgery: the report edited, the envelope, pae.bin, sig.bin and key.pem re-made with another
    key, the ledger re-hashed from genesis, SHA256SUMS rewritten. Everything the pack holds is consistent."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import CryptoSigner

    envelope_file = next(folder.glob("*.intoto.json"))
    stem = envelope_file.name.removesuffix(".intoto.json")
    html = folder / f"{stem}.html"
    html.write_text(html.read_text().replace("pass", "PASS", 1))
    new_sha = hashlib.sha256(html.read_bytes()).hexdigest()
    envelope = json.loads(envelope_file.read_text())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    for subject in payload["subject"]:
        if subject["name"] == html.name:
            subject["digest"]["sha256"] = new_sha
    forged = Envelope(payload=_bytes(payload), payload_type=envelope["payloadType"], signatures={})
    forged.sign(CryptoSigner(load_pem_private_key(private.read_bytes(), None)))
    raw = _bytes(forged.to_dict())
    envelope_file.write_bytes(raw)
    (folder / "pae.bin").write_bytes(forged.pae())
    (folder / "sig.bin").write_bytes(bytes.fromhex(next(iter(forged.signatures.values())).signature))
    (folder / "key.pem").write_bytes(public.read_bytes())
    entries = [json.loads(line) for line in (folder / "ledger.jsonl").read_bytes().splitlines()]
    entries[-1]["report"]["sha256"] = "sha256:" + new_sha
    entries[-1]["attestation"]["sha256"] = "sha256:" + hashlib.sha256(raw).hexdigest()
    prev, out = "sha256:" + "0" * 64, b""
    for entry in entries:
        entry["prev"] = prev
        entry.pop("hash", None)
        entry["hash"] = prev = "sha256:" + hashlib.sha256(_bytes(entry)).hexdigest()
        out += ledger.entry_bytes(entry)
    (folder / "ledger.jsonl").write_bytes(out)
    manifest = json.loads((folder / "pack.json").read_text())
    manifest["ledger"]["entry_hash"] = prev
    manifest["key"] = {"file": "key.pem", "keyid": public_pem(public.read_bytes(), "key")[1],
                       "fingerprint": fingerprint(public.read_bytes())}
    (folder / "pack.json").write_text(json.dumps(manifest))
    resum(folder)


def _failed(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("FAILED")]


# -- 1. the key is pinned --------------------------------------------------------------------------------------------
def test_without_a_trusted_fingerprint_both_routes_fail_and_say_how_to_get_one(published, folder, fresh_python):
    shell = verify_md_route(folder)
    assert shell.returncode != 0, shell.stdout + shell.stderr
    assert _failed(shell)[0].startswith("FAILED: key.pem: no trusted key fingerprint")
    assert "repro-audit evidence fingerprint" in shell.stderr and "TRUSTED_FPR" in shell.stderr
    python = verifier_route(fresh_python, folder)
    assert python.returncode == 1 and python.stderr.startswith("FAILED: key.pem: no trusted key given"), python.stderr
    assert "--trusted-fingerprint" in python.stderr and "repro-audit evidence fingerprint" in python.stderr
    garbage = verify_md_route(folder, "sha256:not-hex")
    assert garbage.returncode != 0 and "no trusted key fingerprint" in garbage.stderr


def test_no_key_check_passes_but_its_last_line_says_the_key_was_the_packs_own(published, folder, fresh_python):
    python = verifier_route(fresh_python, folder, "--no-key-check")
    assert python.returncode == 0, python.stderr
    assert python.stdout.strip().splitlines()[-1].endswith(
        "signature checked against the key IN THE PACK, not against a key you trust")
    both = verifier_route(fresh_python, folder, "--no-key-check", *pinned(published))
    assert both.returncode == 1 and "one of the key options" in both.stderr


def test_a_whole_pack_resigned_with_another_key_fails_both_routes_given_the_trusted_fingerprint(published, folder,
                                                                                                 fresh_python, tmp_path):
    evil_public, _ = generate_key(tmp_path / "evil.pem")
    resign(folder, tmp_path / "evil.pem", evil_public)
    unpinned = verifier_route(fresh_python, folder, "--no-key-check")  # consistent in itself: only the pin catches it
    assert unpinned.returncode == 0 and "IN THE PACK" in unpinned.stdout, unpinned.stderr
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode != 0 and _failed(shell)[0].startswith("FAILED: key.pem: its fingerprint "), shell.stderr
    assert fingerprint(evil_public.read_bytes()) in shell.stderr
    for option in (pinned(published), ("--trusted-key", str(published["public"]))):
        python = verifier_route(fresh_python, folder, *option)
        assert python.returncode == 1 and python.stderr.startswith("FAILED: key.pem: its fingerprint "), python.stderr


def test_the_fingerprint_is_the_one_openssl_prints_from_a_public_or_a_private_key(published, folder):
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", str(folder / "key.pem"), "-outform", "DER"],
                         capture_output=True, check=True).stdout
    assert published["fpr"] == "sha256:" + hashlib.sha256(der).hexdigest()
    private = published["public"].with_name("audit.pem")
    assert fingerprint(private.read_bytes()) == published["fpr"]
    assert json.loads((folder / "pack.json").read_text())["key"]["fingerprint"] == published["fpr"]


# -- 2. only the format's files; evidence and explanation --------------------------------------------------------------
@pytest.mark.parametrize("name", ["notes.txt", "sub/notes.txt", f"calibration/{CALIBRATION_RUN}/x.json"])
def test_an_extra_file_fails_both_routes_naming_it_even_with_SHA256SUMS_rewritten(name, published, folder,
                                                                                  fresh_python):
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("forged statement\n")
    resum(folder)
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode != 0 and _failed(shell)[0].startswith(f"FAILED: {name}: "), shell.stdout + shell.stderr
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1 and python.stderr.startswith(f"FAILED: {name}: "), python.stderr


def test_a_link_in_the_pack_fails_both_routes(published, folder, fresh_python):
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(folder / "VERIFY.md")
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode != 0 and _failed(shell)[0].startswith("FAILED: README.md: a link"), shell.stderr
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1 and python.stderr.startswith("FAILED: README.md: is a link"), python.stderr


def test_verify_md_and_the_readme_say_which_files_are_evidence_and_which_only_explain(folder):
    verify = (folder / "VERIFY.md").read_text()
    evidence = verify.split("- EVIDENCE", 1)[1].split("- EXPLANATION", 1)[0]
    explanation = verify.split("- EXPLANATION", 1)[1].split("\n\n", 1)[0]
    for name in ("<stem>.html", "<stem>.json", "<stem>.intoto.json", "run_record.json", "calibration/", "ledger.jsonl",
                 "key.pem"):
        assert name in evidence, name
    for name in ("README.md", "REGULATORY_MAP.md", "pack.json", "SHA256SUMS", "this file", "verify_pack.py"):
        assert name in explanation, name
    assert "not evidence" in explanation
    readme = (folder / "README.md").read_text()
    assert "EXPLANATION, not evidence" in readme and "YOUR OWN copy" in readme


@pytest.mark.parametrize("edit", ["left_out emptied", "left_out invented", "calibration row dropped", "extra member"])
def test_pack_json_is_recomputed_from_the_signed_files_by_the_python_route(edit, published, folder, fresh_python):
    manifest = json.loads((folder / "pack.json").read_text())
    if edit == "left_out emptied":
        manifest["left_out"] = []
    elif edit == "left_out invented":
        manifest["left_out"].append({"what": "the golden set", "why": "too big"})
    elif edit == "calibration row dropped":
        manifest["calibration"] = []
    else:
        manifest["compliant"] = True
    (folder / "pack.json").write_text(json.dumps(manifest))
    resum(folder)
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1 and python.stderr.startswith("FAILED: pack.json: its "), python.stderr


def test_readme_and_regulatory_map_edits_pass_because_they_are_explanation_and_say_so(published, folder, fresh_python):
    """What the verifiers cannot recompute without repro-audit: README.md and REGULATORY_MAP.md. An edit passes both
    routes; VERIFY.md (the supervisor's copy) says they are not evidence (the test above)."""
    for name in ("README.md", "REGULATORY_MAP.md"):
        (folder / name).write_text((folder / name).read_text().replace("Not covered", "Covered"))
    resum(folder)
    assert verify_md_route(folder, published["fpr"]).returncode == 0
    assert verifier_route(fresh_python, folder, *pinned(published)).returncode == 0


# -- 3. the supervisor's own verifiers ------------------------------------------------------------------------------
def test_every_pack_holds_the_same_verifiers_whose_sha256_the_cli_prints(published, folder, capsys):
    digests = verifier_digests()
    for name in ("VERIFY.md", "verify_pack.py"):
        assert "sha256:" + hashlib.sha256((folder / name).read_bytes()).hexdigest() == digests[name]
    assert (folder / "verify_pack.py").read_bytes() == OWN_VERIFIER.read_bytes()
    from auditor.cli import main

    with pytest.raises(SystemExit) as done:
        main(["evidence", "fingerprint", "--verifier"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert all(f"{digest}  {name}" in out for name, digest in digests.items()), out


def test_a_replaced_verifier_in_the_pack_fails_the_supervisors_own(published, folder, fresh_python):
    (folder / "verify_pack.py").write_text("print('ok: all verified')\n")
    resum(folder)
    own = verifier_route(fresh_python, folder, *pinned(published))
    assert own.returncode == 1 and own.stderr.startswith("FAILED: verify_pack.py: is not the verifier you are running")
    theirs = verifier_route(fresh_python, folder, own=None)  # what the pack's own "verifier" would say
    assert theirs.returncode == 0 and theirs.stdout.startswith("ok")


def test_an_edited_verify_md_fails_the_shell_route_run_from_the_supervisors_copy(published, folder):
    text = (folder / "VERIFY.md").read_text()
    (folder / "VERIFY.md").write_text(text.replace("```sh\n", "```sh\nexit 0\n", 1))
    resum(folder)
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode != 0 and _failed(shell)[0].startswith("FAILED: VERIFY.md: "), shell.stdout + shell.stderr


def test_the_shell_route_runs_no_script_of_the_pack(published, folder):
    """The shell steps come from the supervisor's copy of VERIFY.md and run no file of the pack: without the pack's
    verify_pack.py they pass, and the steps name no pack file to execute."""
    (folder / "verify_pack.py").unlink()
    resum(folder)
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode == 0, shell.stdout + shell.stderr
    steps = "\n".join(block.split("\n```", 1)[0] for block in (folder / "VERIFY.md").read_text().split("```sh\n")[1:])
    # verify_pack.py is read (its sha256 compared with the one this VERIFY.md's version ships, issue 42), never run
    assert not re.search(r"(python3?|bash|sh|source|exec|\.)\s+(\./)?verify_pack\.py|\./verify_pack\.py", steps)
    assert "sha256sum < verify_pack.py" in steps and "bash VERIFY" not in steps
    assert "source " not in steps and ". ./" not in steps


# -- 4. the shell route checks the run record and the calibration --------------------------------------------------------
@pytest.mark.parametrize("name", ["run_record.json", f"calibration/{CALIBRATION_RUN}/calibration.json"])
def test_the_shell_route_catches_an_edited_run_record_or_calibration_file_with_SHA256SUMS_rewritten(
        name, published, folder):
    path = folder / name
    if name == "run_record.json":
        record = json.loads(path.read_text())
        record["forged"] = True
        path.write_text(json.dumps(record))
    else:
        path.write_bytes(path.read_bytes() + b" ")
    resum(folder)
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode != 0 and _failed(shell)[0].startswith(f"FAILED: {name}: "), shell.stdout + shell.stderr


# -- 5. a pack of the demo world ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_pack(tmp_path_factory) -> dict:
    """The demo's reference model, trained and registered in MLflow, audited through the one door and published
    signed (as tests/integration/test_production_check.py builds it, without its serving bucket), then packed."""
    from auditor.demo import Variant, seed
    from auditor.settings import Settings
    from auditor.steps import Session
    from auditor.steps.options import AuditOptions

    root = tmp_path_factory.mktemp("demo-pack")
    public, _ = generate_key(root / "audit.pem")
    seeded = seed(root, [Variant("clean", "a clean run", alias="champion")], epochs=2, progress=lambda _m: None)
    settings = Settings.from_env({**seeded.env, "REPRO_SIGNING_KEY": str(root / "audit.pem"),
                                  "REPRO_RESPONSIBLE_PERSON": "Dana Risk"})
    session = Session(settings)
    outcome = session.audit(seeded.versions["clean"], AuditOptions(date="2026-07-01"))
    assert outcome.report and outcome.result is not None, outcome.error
    stem = Path(outcome.report).name
    pack = build_pack(session.store, stem, public_key=public.read_bytes(), registry=lambda: session.registry)
    again = build_pack(session.store, stem, public_key=public.read_bytes(), registry=lambda: session.registry)
    return {"pack": pack, "again": again, "public": public, "fpr": fingerprint(public.read_bytes()), "root": root}


@pytest.mark.slow
def test_a_pack_of_the_demo_verifies_without_repro_audit_and_fails_when_flipped_or_resigned(demo_pack, fresh_python,
                                                                                              tmp_path):
    assert demo_pack["pack"].data == demo_pack["again"].data  # packing twice: the same bytes
    no_repro = subprocess.run([str(fresh_python), "-c", "import auditor"], cwd=tmp_path, capture_output=True, text=True)
    assert no_repro.returncode != 0
    folder = unzip(demo_pack["pack"].data, tmp_path / "ok")
    pin = ("--trusted-fingerprint", demo_pack["fpr"])
    shell = verify_md_route(folder, demo_pack["fpr"])
    assert shell.returncode == 0 and shell.stdout.rstrip().splitlines()[-1].startswith("ok: key, files"), shell.stderr
    python = verifier_route(fresh_python, folder, *pin)
    assert python.returncode == 0 and "the key you trust" in python.stdout, python.stderr
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert "run_record.json" in names
    for i, name in enumerate(names):
        flipped = unzip(demo_pack["pack"].data, tmp_path / f"flip{i}")
        data = bytearray((flipped / name).read_bytes())
        data[len(data) // 2] ^= 0x01
        (flipped / name).write_bytes(bytes(data))
        shell = verify_md_route(flipped, demo_pack["fpr"])
        marked = [line for line in (shell.stdout + shell.stderr).splitlines() if "FAILED" in line]  # sha256sum's too
        assert shell.returncode != 0 and any(name in line for line in marked), (name, shell.stdout + shell.stderr)
        python = verifier_route(fresh_python, flipped, *pin)
        assert python.returncode == 1 and python.stderr.startswith("FAILED: "), (name, python.stderr)
        assert name in python.stderr or (name == "SHA256SUMS" and "SHA256SUMS" in python.stderr), (name, python.stderr)
    forged = unzip(demo_pack["pack"].data, tmp_path / "forged")
    evil, _ = generate_key(tmp_path / "evil.pem")
    resign(forged, tmp_path / "evil.pem", evil)
    shell = verify_md_route(forged, demo_pack["fpr"])
    assert shell.returncode != 0 and _failed(shell)[0].startswith("FAILED: key.pem: its fingerprint"), shell.stderr
    python = verifier_route(fresh_python, forged, *pin)
    assert python.returncode == 1 and python.stderr.startswith("FAILED: key.pem: its fingerprint"), python.stderr
