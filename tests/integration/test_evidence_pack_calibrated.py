"""Both routes of the evidence pack on a pack whose ledger holds a calibration (issue 42, build point 6, acceptance 4).

The normal flow is calibrate, then audit: the ledger's first entry is the calibration's, and the audit's band names
the calibration run's evidence, which the pack holds under ``calibration/<run id>/<artifact>``. Before issue 42 the
shell route (VERIFY.md's sh blocks) matched ledger lines as text (``"seq":N,``) and rejected such a pack, since a
calibration entry ends ``"seq":0}``; once that was mended it passed a pack whose calibration file was dropped (with
SHA256SUMS rewritten), and its one-liner exited 0 when the path to the supervisor's VERIFY.md was wrong.

Here both routes run as a supervisor runs them: VERIFY.md's own one-liner through bash (``verify_md_route``) and the
supervisor's copy of verify_pack.py in a python holding ``cryptography`` and nothing of ours (``verifier_route``).
The untouched pack passes both; a dropped calibration file fails both; a wrong, empty, step-less or cut-short
VERIFY.md fails the one-liner; and every attack the Python route refuses (tests/integration/test_evidence_pack*.py),
applied to this pack, fails the shell route too. What is real: the calibration and the audit (the session's own
calibrate and audit, published signed, the in-memory registry twin, the fake training runner of
tests/unit/test_audit_outcomes.py), the ledger, the signatures, bash, coreutils, openssl and python3.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from auditor.report import attest
from auditor.report.pack import build_pack, fingerprint
from auditor.settings import Settings
from auditor.steps import AuditOptions
from auditor.storage import open_store
from tests.integration import test_evidence_pack as base
from tests.integration.test_evidence_pack import OWN_VERIFY_MD, unzip, verifier_route, verify_md_route
from tests.integration.test_evidence_pack_adversarial import resign, resum
from tests.integration.test_insider_tamper import _registry_of_three, _varying, session

published = base.published  # the module fixtures fresh_python builds on (three signed audits, no calibration)
fresh_python = base.fresh_python


@pytest.fixture(scope="module", autouse=True)
def _tools():
    missing = [t for t in ("bash", "sha256sum", "openssl", "python3", "cmp", "diff", "sed", "grep") if not shutil.which(t)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """Version 2 of model m calibrated (signed, ledgered), then audited and published signed, then packed twice: with
    the registry the calibration run is read from, and without one (its calibration left out, and said so)."""
    from auditor.registry.memory import MemoryRegistry

    root = tmp_path_factory.mktemp("calibrated-pack")
    registry, infos = _registry_of_three(f"calibrated-pack-{root.name}")
    key_path = root / "keys" / "signing.pem"
    public, _ = attest.generate_key(key_path)
    settings = Settings.from_env({"REPRO_HOME": str(root / "home"), "REPRO_REPORTS": str(root / "reports"),
                                  "MLFLOW_TRACKING_URI": registry.uri, "REPRO_SIGNING_KEY": str(key_path)})
    info = infos[1]
    bands = session(settings, _varying).calibrate(info.ref, reruns=3, same_seed=2)
    refs = {(b.evidence["run_id"], b.evidence["artifact"]) for b in bands.values() if b.evidence}
    assert len(refs) == 1, bands
    outcome = session(settings, _varying).audit(info.ref, AuditOptions(date="2026-06-03"))
    assert outcome.report and outcome.publish_failure is None, (outcome.error, outcome.publish_failure)
    store, stem = open_store(settings.reports), Path(outcome.report).name.removesuffix(".html")
    pack = build_pack(store, stem, public_key=public.read_bytes(), registry=registry)
    without = build_pack(store, stem, public_key=public.read_bytes())
    run_id, artifact = refs.pop()
    yield {"pack": pack, "without": without, "stem": stem, "fpr": fingerprint(public.read_bytes()),
           "calibration": f"calibration/{run_id}/{artifact}", "root": root}
    MemoryRegistry.forget(registry.uri)


@pytest.fixture()
def folder(world, tmp_path) -> Path:
    return unzip(world["pack"].data, tmp_path)


def _failed(run: subprocess.CompletedProcess) -> list[str]:
    """The lines naming a failure: the steps' own ``FAILED: <file>: …`` and sha256sum's ``<file>: FAILED``."""
    return [line for line in (run.stdout + run.stderr).splitlines() if "FAILED" in line]


LAST_LINE = "ok: key, files, signature, subjects, ledger chain, run record and calibration verified"


def _said_left_out(run: subprocess.CompletedProcess) -> str:
    """What verify_pack.py's success line says the pack left out ("" when it says nothing was)."""
    return run.stdout.partition("left out (the pack says): ")[2]


def _both(world: dict, folder: Path, python: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    pin = ("--trusted-fingerprint", world["fpr"])
    return verify_md_route(folder, world["fpr"]), verifier_route(python, folder, *pin)


# -- the untouched pack ------------------------------------------------------------------------------------------
def test_the_ledger_holds_the_calibration_entry_and_the_pack_its_file(world, folder):
    lines = (folder / "ledger.jsonl").read_bytes().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e.get("kind") for e in entries] == ["calibration", None]  # calibrate, then audit: the normal flow
    assert lines[0].endswith(b'"seq":0}')  # what a text match on `"seq":N,` could not find
    assert entries[0]["calibration"]["sha256"] == json.loads((folder / "pack.json").read_text())["calibration"][0]["sha256"]
    assert (folder / world["calibration"]).is_file()


def test_an_untouched_calibrated_pack_passes_both_routes(world, folder, fresh_python):
    shell, python = _both(world, folder, fresh_python)
    assert shell.returncode == 0, shell.stdout + shell.stderr
    assert not _failed(shell) and "ok: ledger.jsonl chains from genesis through 2 entries" in shell.stdout
    assert shell.stdout.rstrip().splitlines()[-1] == LAST_LINE
    assert python.returncode == 0 and "through 2 entries" in python.stdout, python.stderr


def test_a_pack_made_without_the_registry_passes_both_routes_and_each_says_the_calibration_is_left_out(
        world, tmp_path, fresh_python):
    folder = unzip(world["without"].data, tmp_path)
    assert not (folder / "calibration").exists()
    shell, python = _both(world, folder, fresh_python)
    assert shell.returncode == 0, shell.stdout + shell.stderr
    notes = [line for line in shell.stdout.splitlines() if line.startswith(f"note: {world['calibration']}: left out")]
    assert notes and "cannot be checked" in notes[0] and "no registry" in notes[0], shell.stdout
    assert python.returncode == 0 and "; calibration evidence" in _said_left_out(python), python.stderr


def test_the_shell_route_holds_the_ledger_to_the_head_it_was_given(world, folder):
    head = json.loads((folder / "pack.json").read_text())["ledger"]["entry_hash"]
    given = verify_md_route(folder, world["fpr"], TRUSTED_HEAD=head)
    assert given.returncode == 0 and f"(head {head})" in given.stdout, given.stdout + given.stderr
    other = verify_md_route(folder, world["fpr"], TRUSTED_HEAD="sha256:" + "1" * 64)
    assert other.returncode != 0 and _failed(other)[0].startswith(f"FAILED: ledger.jsonl: its head {head} is not"), other.stderr


# -- a dropped calibration file -------------------------------------------------------------------------------------
def test_a_dropped_calibration_file_fails_both_routes_naming_it(world, folder, fresh_python):
    (folder / world["calibration"]).unlink()
    resum(folder)  # the insider rewrites SHA256SUMS too
    shell, python = _both(world, folder, fresh_python)
    assert shell.returncode != 0 and _failed(shell)[0].startswith(f"FAILED: {world['calibration']}: "), shell.stderr
    assert python.returncode == 1 and python.stderr.startswith(f"FAILED: {world['calibration']}: "), python.stderr


@pytest.mark.parametrize("claim", ["pack.json lists no calibration", "pack.json lists none and says it was left out"])
def test_a_dropped_calibration_file_with_pack_json_rewritten_is_caught_or_said(claim, world, folder, fresh_python):
    """Dropping the file and the pack.json row: both routes refuse it. Dropping it and saying in pack.json (which is not
    signed) that it was left out: both routes pass it only as a pack whose band cannot be checked, and say so."""
    (folder / world["calibration"]).unlink()
    manifest = json.loads((folder / "pack.json").read_text())
    manifest["calibration"] = []
    run, artifact = world["calibration"].split("/")[1:]
    if claim.endswith("left out"):
        manifest["left_out"].append({"what": f"calibration evidence {artifact} of MLflow run {run}", "why": "gone"})
    (folder / "pack.json").write_text(json.dumps(manifest))
    resum(folder)
    shell, python = _both(world, folder, fresh_python)
    if not claim.endswith("left out"):
        assert shell.returncode != 0 and _failed(shell)[0].startswith(f"FAILED: {world['calibration']}: "), shell.stderr
        assert python.returncode == 1 and python.stderr.startswith("FAILED: pack.json: "), python.stderr
        return
    assert shell.returncode == 0 and f"note: {world['calibration']}: left out of the pack (pack.json says: gone)" in shell.stdout
    assert python.returncode == 0 and "; calibration evidence" in _said_left_out(python), python.stderr


# -- the one-liner's input --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("own", ["missing", "empty", "no steps", "cut short", "a folder"])
def test_a_wrong_verify_md_fails_the_one_liner(own, world, folder, tmp_path):
    path = {"missing": tmp_path / "nowhere" / "VERIFY.md", "empty": tmp_path / "empty.md", "no steps": tmp_path / "readme.md",
            "cut short": tmp_path / "short.md", "a folder": tmp_path}[own]
    text = OWN_VERIFY_MD.read_text()
    if own == "empty":
        path.write_text("")
    elif own == "no steps":
        path.write_text(text.replace("```sh\n", "```text\n"))
    elif own == "cut short":  # the first step and part of the second: what a truncated copy would run
        path.write_text(text[: text.index("sha256sum --quiet")])
    shell = verify_md_route(folder, world["fpr"], OWN_VERIFY_MD=str(path))  # the one-liner of the right copy, run on it
    assert shell.returncode != 0, (own, shell.stdout, shell.stderr)
    assert "ok: key, files" not in shell.stdout
    if own in ("missing", "empty", "a folder"):
        assert shell.stderr.startswith("FAILED: OWN_VERIFY_MD: "), shell.stderr
    if own == "cut short":
        assert "FAILED: VERIFY.md: the steps stopped before the last one" in shell.stderr, shell.stderr


def test_the_one_liner_is_the_one_readme_shows():
    readme = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "evidence-pack.md").read_text()
    block = OWN_VERIFY_MD.read_text().split("```text\n", 1)[1].split("\n```", 1)[0]
    command = next(line for line in block.splitlines() if "bash -e" in line)
    assert "set -o pipefail" in command and "bash -euo pipefail" in command
    assert 'test -f "$OWN_VERIFY_MD" && test -s "$OWN_VERIFY_MD"' in command
    assert command in readme


# -- every attack the Python route refuses, on this pack ---------------------------------------------------------------
def _flip(name: str) -> Callable[[Path, dict], None]:
    def flip(folder: Path, world: dict) -> None:
        path = folder / name.replace("STEM", world["stem"]).replace("CALIBRATION", world["calibration"])
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    return flip


def _and_resum(edit: Callable[[Path, dict], None]) -> Callable[[Path, dict], None]:
    def both(folder: Path, world: dict) -> None:
        edit(folder, world)
        resum(folder)
    return both


def _manifest(change: Callable[[dict, dict], None]) -> Callable[[Path, dict], None]:
    def edit(folder: Path, world: dict) -> None:
        manifest = json.loads((folder / "pack.json").read_text())
        change(manifest, world)
        (folder / "pack.json").write_text(json.dumps(manifest))
        resum(folder)
    return edit


def _write(name: str, data: bytes | None) -> Callable[[Path, dict], None]:
    def write(folder: Path, world: dict) -> None:
        path = folder / name.replace("CALIBRATION", world["calibration"])
        path.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)
        resum(folder)
    return write


def _record_edited(folder: Path, world: dict) -> None:
    record = json.loads((folder / "run_record.json").read_text())
    record["forged"] = True
    (folder / "run_record.json").write_text(json.dumps(record))
    resum(folder)


def _key_swapped(folder: Path, world: dict) -> None:
    other, _ = attest.generate_key(folder.parent / "other.pem")
    shutil.copy(other, folder / "key.pem")
    resum(folder)


def _resigned(folder: Path, world: dict) -> None:
    evil, _ = attest.generate_key(folder.parent / "evil.pem")
    resign(folder, folder.parent / "evil.pem", evil)


def _link(folder: Path, world: dict) -> None:
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(folder / "VERIFY.md")


def _calibration_entry_edited(folder: Path, world: dict) -> None:
    """The ledger's calibration entry (line 1) edited, its own hash recomputed, SHA256SUMS rewritten."""
    from auditor.report import ledger

    lines = (folder / "ledger.jsonl").read_bytes().splitlines()
    entry = json.loads(lines[0])
    entry["calibration"]["calibrated_at"] = "2020-01-01T00:00:00Z"
    entry["hash"] = ledger.entry_hash(entry)
    (folder / "ledger.jsonl").write_bytes(ledger.entry_bytes(entry) + lines[1] + b"\n")
    resum(folder)


def _entries_swapped(folder: Path, world: dict) -> None:
    lines = (folder / "ledger.jsonl").read_bytes().splitlines()
    (folder / "ledger.jsonl").write_bytes(b"\n".join(reversed(lines)) + b"\n")
    resum(folder)


FILES = ["README.md", "REGULATORY_MAP.md", "SHA256SUMS", "VERIFY.md", "CALIBRATION", "key.pem", "ledger.jsonl",
         "STEM.html", "STEM.intoto.json", "STEM.json", "pack.json", "pae.bin", "run_record.json", "sig.bin",
         "verify_pack.py"]
#: attack -> (the edit, the file(s) a FAILED line of each route may name; "" where the route names another in turn)
ATTACKS: dict[str, tuple[Callable[[Path, dict], None], tuple[str, ...]]] = {
    **{f"one byte of {name} flipped": (_flip(name), (name,)) for name in FILES},
    **{f"one byte of {name} flipped, SHA256SUMS rewritten": (_and_resum(_flip(name)), ("",))
       for name in ("STEM.html", "STEM.json", "STEM.intoto.json", "ledger.jsonl", "run_record.json", "CALIBRATION",
                    "pae.bin", "sig.bin")},
    "run record edited": (_record_edited, ("run_record.json",)),
    "run record removed": (_write("run_record.json", None), ("run_record.json",)),
    "calibration file dropped": (_write("CALIBRATION", None), ("CALIBRATION",)),
    "a second calibration file": (_write("CALIBRATION.bak", b"{}\n"), ("CALIBRATION.bak",)),
    "an extra file": (_write("notes.txt", b"forged statement\n"), ("notes.txt",)),
    "an extra file in a folder": (_write("sub/notes.txt", b"forged statement\n"), ("sub/notes.txt",)),
    "README.md a link": (_link, ("README.md",)),
    "key swapped, SHA256SUMS rewritten": (_key_swapped, ("key.pem",)),
    "whole pack re-signed with another key": (_resigned, ("key.pem",)),
    "verify_pack.py replaced": (_write("verify_pack.py", b"print('ok: all verified')\n"), ("verify_pack.py",)),
    "the calibration's ledger entry edited and re-hashed": (_calibration_entry_edited, ("ledger.jsonl",)),
    "the ledger's entries swapped": (_entries_swapped, ("ledger.jsonl",)),
    "pack.json: left_out emptied": (_manifest(lambda m, w: m.update(left_out=[])), ("pack.json",)),
    "pack.json: left_out invented": (_manifest(lambda m, w: m["left_out"].append({"what": "the golden set", "why": "big"})),
                                     ("pack.json",)),
    "pack.json: calibration row dropped": (_manifest(lambda m, w: m.update(calibration=[])), ("pack.json",)),
    "pack.json: an extra member": (_manifest(lambda m, w: m.update(compliant=True)), ("pack.json",)),
    "pack.json: another key id claimed": (_manifest(lambda m, w: m.update(key=dict(m["key"], keyid="0" * 64))),
                                          ("pack.json",)),
    "pack.json: the run record not named": (_manifest(lambda m, w: m.pop("run_record")), ("pack.json",)),
    "pack.json: another ledger head": (_manifest(lambda m, w: m["ledger"].update(entry_hash="sha256:" + "0" * 64)),
                                       ("pack.json", "ledger.jsonl")),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_attack_the_python_route_refuses_fails_the_shell_route_too(attack, world, folder, fresh_python):
    edit, names = ATTACKS[attack]
    edit(folder, world)
    shell, python = _both(world, folder, fresh_python)
    assert python.returncode == 1 and python.stderr.startswith("FAILED: "), (attack, python.stdout, python.stderr)
    failed = _failed(shell)
    assert shell.returncode != 0 and failed, (attack, shell.stdout, shell.stderr)
    assert "ok: key, files" not in shell.stdout
    named = [n.replace("STEM", world["stem"]).replace("CALIBRATION", world["calibration"]) for n in names]
    assert any(n in line for n in named for line in failed), (attack, failed)


def test_the_verifier_digest_in_verify_md_is_the_verifiers():
    """Step 1 compares the pack's verify_pack.py with the sha256 VERIFY.md holds: the template's own file's."""
    import hashlib

    digest = hashlib.sha256(base.OWN_VERIFIER.read_bytes()).hexdigest()
    assert f"VERIFIER_SHA256={digest}\n" in OWN_VERIFY_MD.read_text()
