"""The evidence pack (issue 32, build points 1 and 2; acceptance 1 and 2).

A signed audit is published, packed twice (the same bytes), unzipped, and checked by both routes a
supervisor has: VERIFY.md's shell blocks (``sha256sum -c``, ``openssl pkeyutl -verify``, coreutils) and
``verify_pack.py`` run by a fresh virtual environment that holds ``cryptography`` and nothing of ours.
Then one byte of each file is flipped in turn, and the public key swapped: every route fails, naming the
file. The regulatory map: each clause has its citation and a "not covered" line.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib.util import find_spec
from pathlib import Path

import pytest

from auditor.digests import sha256_digest
from auditor.errors import BadInput, Findings
from auditor.report import regmap
from auditor.report.attest import generate_key
from auditor.report.pack import TEMPLATES, build_pack, fingerprint, sums
from auditor.report.publish import publish
from auditor.settings import Settings
from auditor.storage import open_store
from tests.fixtures.audits import make_audit

CALIBRATION = b'{"calibrated_at": "2026-02-01T00:00:00Z", "seed_varied": []}\n'
CALIBRATION_RUN = "cal0123"


class OneRunRegistry:
    """The registry reader's one method the pack uses: a run artifact's bytes (None when absent)."""

    def __init__(self, files: dict[tuple[str, str], bytes]) -> None:
        self.files = files

    def read_run_file(self, run_id: str, path: str) -> bytes | None:
        return self.files.get((run_id, path))


def _calibrated_audit(audit_id: str):
    audit = make_audit(audit_id=audit_id)
    band = audit.metrics[0].band
    band.evidence = {"run_id": CALIBRATION_RUN, "sha256": sha256_digest(CALIBRATION), "artifact": "calibration.json"}
    return audit


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> dict:
    """Three signed audits in one store; the second names a calibration run."""
    root = tmp_path_factory.mktemp("pack")
    public, keyid = generate_key(root / "audit.pem")
    settings = Settings(responsible_person="Dana Risk", signing_key=str(root / "audit.pem"))
    reports = str(root / "reports")
    stems = [publish(audit, reports, settings=settings).stem
             for audit in (make_audit(audit_id="a-0"), _calibrated_audit("a-1"), make_audit(audit_id="a-2"))]
    other, _ = generate_key(root / "other.pem")
    registry = OneRunRegistry({(CALIBRATION_RUN, "calibration.json"): CALIBRATION})
    pack = build_pack(open_store(reports), stems[1], public_key=public.read_bytes(), registry=registry)
    return {"root": root, "reports": reports, "stems": stems, "public": public, "keyid": keyid, "other": other,
            "registry": registry, "pack": pack, "fpr": fingerprint(public.read_bytes())}


@pytest.fixture(scope="module")
def fresh_python(published) -> Path:
    """A fresh venv (no pip, no repro-audit) whose only extra packages are cryptography and what it needs (cffi)."""
    root = published["root"]
    only = root / "only-cryptography"
    only.mkdir()
    for name in ("cryptography", "cffi", "_cffi_backend", "pycparser"):
        spec = find_spec(name)
        if spec is not None and spec.origin:
            origin = Path(spec.origin)
            source = origin.parent if origin.name == "__init__.py" else origin
            (only / source.name).symlink_to(source)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "only-cryptography.pth").write_text(f"{only}\n")
    return venv / "bin" / "python"


def unzip(data: bytes, where: Path) -> Path:
    """The pack's folder, extracted under ``where`` (writable, so a test can tamper with it)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(where)
        top = {name.split("/", 1)[0] for name in archive.namelist()}
    assert len(top) == 1
    return where / top.pop()


#: the supervisor's own copies of the two verifiers: the project's, never the pack's (the pack's are the same bytes)
OWN_VERIFY_MD = TEMPLATES / "pack_verify.md"
OWN_VERIFIER = TEMPLATES / "verify_pack.py.txt"


def verify_md_route(folder: Path, fpr: str | None = None, *, own: Path = OWN_VERIFY_MD,
                    **env_extra: str) -> subprocess.CompletedProcess:
    """VERIFY.md's own command for running every sh block (its first text block), with ``own`` as the supervisor's
    copy of VERIFY.md and ``fpr`` as TRUSTED_FPR (unset when None), in the pack folder."""
    text = own.read_text()
    block = text.split("```text\n", 1)[1].split("\n```", 1)[0]
    command = next(line for line in block.splitlines() if "bash -e" in line)
    assert '"$OWN_VERIFY_MD"' in command and "TRUSTED_FPR=" in block and "OWN_VERIFY_MD=" in block
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(folder.parent), "HOME": str(folder.parent), "OWN_VERIFY_MD": str(own),
           **env_extra}
    if fpr is not None:
        env["TRUSTED_FPR"] = fpr
    return subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True, env=env, timeout=60)


def verifier_route(python: Path, folder: Path, *extra: str, own: Path | None = OWN_VERIFIER) -> subprocess.CompletedProcess:
    """``own`` (the supervisor's copy of verify_pack.py; None: the pack's own) run on ``folder`` with ``extra``."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder.parent)}
    script = str(own) if own is not None else "verify_pack.py"
    return subprocess.run([str(python), script, str(folder), *extra], cwd=folder, capture_output=True, text=True,
                          env=env, timeout=60)


def pinned(published: dict) -> tuple[str, str]:
    """verify_pack.py's options pinning the key the fixture signed with."""
    return "--trusted-fingerprint", published["fpr"]


@pytest.fixture()
def folder(published, tmp_path) -> Path:
    return unzip(published["pack"].data, tmp_path)


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")


# -- building --------------------------------------------------------------------------------------------------
def test_packing_the_same_audit_twice_gives_the_same_bytes(published, tmp_path):
    again = build_pack(open_store(published["reports"]), published["stems"][1] + ".html",
                       public_key=published["public"].read_bytes(), registry=published["registry"])
    assert again.data == published["pack"].data
    import auditor.cli.pack  # noqa: F401 - registers `evidence pack` (the lead wires it into _COMMAND_MODULES)
    from auditor.cli import main

    outs = [tmp_path / f"{i}.zip" for i in range(2)]
    for out in outs:
        with pytest.raises(SystemExit) as done:
            main(["evidence", "pack", published["stems"][0], "-o", str(out), "--reports", published["reports"],
                  "--public-key", str(published["public"])])
        assert done.value.code == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()
    infos = zipfile.ZipFile(outs[0]).infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {(i.date_time, i.external_attr >> 16) for i in infos} == {((1980, 1, 1, 0, 0, 0), 0o100644)}


def test_the_pack_holds_the_audit_its_key_ledger_and_calibration(published, folder):
    stem, pack = published["stems"][1], published["pack"]
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert names == {f"{stem}.html", f"{stem}.json", f"{stem}.intoto.json", "key.pem", "pae.bin", "sig.bin",
                     "run_record.json", f"calibration/{CALIBRATION_RUN}/calibration.json", "ledger.jsonl", "pack.json",
                     "README.md", "VERIFY.md", "REGULATORY_MAP.md", "verify_pack.py", "SHA256SUMS"}
    assert len((folder / "ledger.jsonl").read_bytes().splitlines()) == 2  # genesis to this audit, not after
    assert (folder / f"calibration/{CALIBRATION_RUN}/calibration.json").read_bytes() == CALIBRATION
    assert pack.keyid == published["keyid"]
    readme = (folder / "README.md").read_text()
    assert "PDF" in readme and "browser" in readme  # left out, and said why
    assert "Art. 31(8)(b)" in (folder / "REGULATORY_MAP.md").read_text()


def test_without_a_registry_the_calibration_is_left_out_and_said_so(published, tmp_path):
    pack = build_pack(open_store(published["reports"]), published["stems"][1], public_key=published["public"].read_bytes())
    folder = unzip(pack.data, tmp_path)
    assert not (folder / "calibration").exists()
    left = json.loads((folder / "pack.json").read_text())["left_out"]
    assert any(CALIBRATION_RUN in x["what"] and "no registry" in x["why"] for x in left)
    assert CALIBRATION_RUN in (folder / "README.md").read_text()


def test_an_altered_calibration_or_another_key_is_refused(published):
    store = open_store(published["reports"])
    altered = OneRunRegistry({(CALIBRATION_RUN, "calibration.json"): CALIBRATION + b" "})
    with pytest.raises(Findings, match="altered"):
        build_pack(store, published["stems"][1], public_key=published["public"].read_bytes(), registry=altered)
    with pytest.raises(BadInput, match="was signed by"):
        build_pack(store, published["stems"][1], public_key=published["other"].with_name("other.pem.pub").read_bytes())


# -- the two routes -----------------------------------------------------------------------------------------------
def test_both_routes_verify_an_untouched_pack_without_repro_audit(published, folder, fresh_python):
    _need("bash", "sha256sum", "openssl", "base64", "cmp", "grep")
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode == 0, shell.stdout + shell.stderr
    assert "Signature Verified Successfully" in shell.stdout
    assert f"ok: key.pem is the key you trust ({published['fpr']})" in shell.stdout
    assert shell.stdout.rstrip().endswith("ok: key, files, signature, subjects, ledger chain, run record and calibration verified")
    no_repro = subprocess.run([str(fresh_python), "-c", "import auditor"], cwd=folder, capture_output=True, text=True)
    assert no_repro.returncode != 0 and "No module named 'auditor'" in no_repro.stderr
    python = verifier_route(fresh_python, folder, "--trusted-key", str(published["public"]))
    assert python.returncode == 0, python.stderr
    assert python.stdout.startswith("ok: 14 files match SHA256SUMS") and ", the key you trust)" in python.stdout
    assert "WARNING" not in python.stdout
    by_fingerprint = verifier_route(fresh_python, folder, *pinned(published))
    assert by_fingerprint.returncode == 0 and by_fingerprint.stdout == python.stdout, by_fingerprint.stderr


FILES = sorted({"HTML", "JSON", "INTOTO", "key.pem", "pae.bin", "sig.bin", "run_record.json", "CALIBRATION",
                "ledger.jsonl", "pack.json", "README.md", "VERIFY.md", "REGULATORY_MAP.md", "verify_pack.py", "SHA256SUMS"})


def _name(label: str, stem: str) -> str:
    return {"HTML": f"{stem}.html", "JSON": f"{stem}.json", "INTOTO": f"{stem}.intoto.json",
            "CALIBRATION": f"calibration/{CALIBRATION_RUN}/calibration.json"}.get(label, label)


@pytest.mark.parametrize("label", FILES)
def test_flipping_one_byte_of_any_file_fails_each_route_naming_it(label, published, folder, fresh_python):
    _need("bash", "sha256sum", "openssl")
    name = _name(label, published["stems"][1])
    path = folder / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))  # both routes run the supervisor's own copies, not the pack's
    shell = verify_md_route(folder, published["fpr"])
    failed = [line for line in (shell.stdout + shell.stderr).splitlines() if "FAILED" in line]
    assert shell.returncode != 0 and any(name in line for line in failed), shell.stdout + shell.stderr
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1, python.stdout + python.stderr
    named = f"FAILED: {name}: " if name != "SHA256SUMS" else "SHA256SUMS"  # a flipped sum names its line's file
    assert python.stderr.startswith("FAILED: ") and named in python.stderr, python.stderr


@pytest.mark.parametrize("resum", [False, True], ids=["key-swapped", "key-swapped-and-SHA256SUMS-rewritten"])
def test_swapping_the_public_key_fails_each_route_naming_it(resum, published, folder, fresh_python):
    _need("bash", "sha256sum", "openssl")
    other = published["other"].with_name("other.pem.pub")
    shutil.copy(other, folder / "key.pem")
    if resum:  # an insider who also rewrites the sums: the signature still does not verify with their key
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
                 if p.is_file() and p.name != "SHA256SUMS"}
        (folder / "SHA256SUMS").write_bytes(sums(files))
    shell = verify_md_route(folder, published["fpr"])
    failed = [line for line in (shell.stdout + shell.stderr).splitlines() if "FAILED" in line]
    assert shell.returncode != 0 and any("key.pem" in line for line in failed), shell.stdout + shell.stderr
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1 and python.stderr.startswith("FAILED: key.pem: "), python.stderr
    unpinned = verifier_route(fresh_python, folder, "--no-key-check")  # even against its own key, the signature fails
    assert unpinned.returncode == 1 and unpinned.stderr.startswith("FAILED: key.pem: "), unpinned.stderr


def test_a_pack_signed_by_a_key_other_than_the_trusted_one_fails(published, folder, fresh_python):
    other = published["other"].with_name("other.pem.pub")
    python = verifier_route(fresh_python, folder, "--trusted-key", str(other))
    assert python.returncode == 1 and "FAILED: key.pem: its fingerprint" in python.stderr, python.stderr
    assert "the pack was signed by another key" in python.stderr
    shell = verify_md_route(folder, fingerprint(other.read_bytes()))
    assert shell.returncode != 0 and "FAILED: key.pem: its fingerprint" in shell.stderr, shell.stdout + shell.stderr


def test_an_unsigned_audit_is_not_packed(tmp_path):
    reports = str(tmp_path / "reports")
    stem = publish(make_audit(audit_id="unsigned"), reports, settings=Settings()).stem
    other, _ = generate_key(tmp_path / "k.pem")
    with pytest.raises(BadInput, match="unsigned"):
        build_pack(open_store(reports), stem, public_key=other.read_bytes())


# -- the regulatory map ---------------------------------------------------------------------------------------------
EXPECTED = {"Art. 3(1)(d)(ii)", "Art. 31(6)(b)", "Art. 31(8)(b)", "Art. 175", "Annex IV, point 2(g)", "Art. 12",
            "Art. 18", "Art. 19", "ongoing monitoring"}


def test_each_clause_has_its_citation_and_what_is_not_covered(published, folder):
    clauses = regmap.clauses()
    assert {next(e for e in EXPECTED if c.article.startswith(e)) for c in clauses} == EXPECTED
    for clause in clauses:
        assert clause.document and clause.article in clause.citation and clause.document in clause.citation
        assert clause.not_covered, f"{clause.key} says nothing of what the audit does not cover"
        assert clause.evidence, f"{clause.key} maps to no part of the evidence"
        if clause.quote:
            assert f'"{clause.quote}"' in clause.citation
    by_key = {c.key: c for c in clauses}
    assert any("realised defaults" in line for line in by_key["us-sr-26-2-ongoing-monitoring"].not_covered)
    assert by_key["eu-2022-439-art-3-1-d-ii"].quote == "replicate the model development"
    assert by_key["ai-act-annex-iv-2-g"].quote == "test logs and all test reports dated and signed by the responsible persons"
    text = (folder / "REGULATORY_MAP.md").read_text()
    assert "not a claim of compliance" in text and text.count("- Not covered: ") == sum(len(c.not_covered) for c in clauses)
    for clause in clauses:
        assert clause.citation in text
    rows = regmap.for_report(json.loads((folder / f"{published['stems'][1]}.json").read_text()))["clauses"]
    assert all(r["backing"].startswith("passed: ") for r in rows if r["tiers"])  # make_audit's tiers all pass
    assert not any("complies" in r["citation"] + " ".join(r["evidence"]) for r in rows)


def test_the_verifier_runs_nothing_of_ours():
    source = (Path(__file__).resolve().parents[2] / "auditor/report/templates/verify_pack.py.txt").read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines() if line.strip().startswith(("import ", "from "))}
    assert imports <= {"__future__", "base64", "hashlib", "json", "sys", "pathlib", "cryptography"}, imports
    assert os.path.basename(__file__).startswith("test_")


BOUND = {"HTML": "both", "JSON": "both", "INTOTO": "both", "ledger.jsonl": "both", "run_record.json": "both",
         "CALIBRATION": "both"}


@pytest.mark.parametrize("label", sorted(BOUND))
def test_an_edit_with_SHA256SUMS_rewritten_is_still_caught_by_the_signature_or_the_ledger(label, published, folder,
                                                                                          fresh_python):
    """An insider who edits a file and rewrites SHA256SUMS: what the signature and the ledger bind still fails."""
    _need("bash", "sha256sum", "openssl")
    name = _name(label, published["stems"][1])
    data = bytearray((folder / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (folder / name).write_bytes(bytes(data))
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_bytes(sums(files))
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1 and python.stderr.startswith("FAILED: "), python.stderr
    if BOUND[label] == "both":
        shell = verify_md_route(folder, published["fpr"])
        assert shell.returncode != 0 and "FAILED" in shell.stdout + shell.stderr, shell.stdout + shell.stderr
        if label in ("run_record.json", "CALIBRATION"):  # the shell route's own check of them (step 6)
            assert f"FAILED: {name}: " in shell.stderr, shell.stderr


def test_the_report_partial_renders_the_map_with_the_reports_own_environment(published, folder):
    """``templates/regmap.html.j2`` is what report.html.j2 includes; every clause and not-covered line shows."""
    from auditor.report.render import environment

    doc = json.loads((folder / f"{published['stems'][1]}.json").read_text())
    html = environment().get_template("regmap.html.j2").render(regmap=regmap.for_report(doc))
    assert 'id="regulatory-map"' in html and "not a claim of compliance" in html
    for clause in regmap.clauses():
        assert clause.article in html
        for line in clause.not_covered:
            assert line.replace('"', "&#34;").replace("'", "&#39;") in html


def test_an_unsigned_manifest_cannot_switch_a_check_off_or_name_another_signer(published, folder, fresh_python):
    """pack.json and SHA256SUMS are not signed: dropping the run record from pack.json does not stop its check, and
    the key id the success line names is computed from key.pem, never taken from pack.json (adversarial review)."""
    record = folder / "run_record.json"
    doc = json.loads(record.read_text())
    doc["forged"] = True
    record.write_text(json.dumps(doc))
    manifest = json.loads((folder / "pack.json").read_text())
    manifest.pop("run_record", None)
    claimed = dict(manifest["key"], keyid="0" * 64)
    manifest["key"] = claimed
    (folder / "pack.json").write_text(json.dumps(manifest))
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_bytes(sums(files))
    edited = verifier_route(fresh_python, folder, *pinned(published))
    assert edited.returncode == 1 and "run_record.json" in edited.stderr, edited.stderr
    record.unlink()  # and with the record removed too
    files.pop("run_record.json")
    (folder / "SHA256SUMS").write_bytes(sums(files))
    removed = verifier_route(fresh_python, folder, *pinned(published))
    assert removed.returncode == 1 and "run_record.json" in removed.stderr, removed.stderr


def test_the_success_line_names_the_key_that_signed(published, folder, fresh_python):
    manifest = json.loads((folder / "pack.json").read_text())
    manifest["key"] = dict(manifest["key"], keyid="0" * 64)  # a claim in the unsigned manifest
    (folder / "pack.json").write_text(json.dumps(manifest))
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_bytes(sums(files))
    ok = verifier_route(fresh_python, folder, *pinned(published))
    assert ok.returncode == 1 and ok.stderr.startswith("FAILED: pack.json: its 'key' is not what the signed files say")
    assert published["keyid"] in ok.stderr  # the key id computed from key.pem, not pack.json's claim


def test_a_pack_with_the_pdf_is_reproducible_and_verifies(published, tmp_path, fresh_python):
    """``--pdf``: the report printed by headless Chromium, its dates set from the audit, so packing twice gives the same
    bytes; the PDF is explanation (the HTML is signed), named in pack.json, and both routes accept it."""
    from auditor.report.pdf import find_chromium

    if find_chromium() is None:
        pytest.skip("no Chromium to print the PDF")
    _need("bash", "sha256sum", "openssl")
    store = open_store(published["reports"])
    packs = [build_pack(store, published["stems"][1], public_key=published["public"].read_bytes(),
                        registry=published["registry"], pdf=True) for _ in range(2)]
    assert packs[0].data == packs[1].data
    stem = published["stems"][1]
    folder = unzip(packs[0].data, tmp_path)
    pdf = (folder / f"{stem}.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/CreationDate (D:2026" in pdf
    manifest = json.loads((folder / "pack.json").read_text())
    assert manifest["pdf"] == f"{stem}.pdf" and not any("PDF" in x["what"] for x in manifest["left_out"])
    shell = verify_md_route(folder, published["fpr"])
    assert shell.returncode == 0, shell.stdout + shell.stderr
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 0, python.stderr
    (folder / f"{stem}.pdf").unlink()  # dropped, with the sums rewritten: pack.json still names it
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    (folder / "SHA256SUMS").write_bytes(sums(files))
    python = verifier_route(fresh_python, folder, *pinned(published))
    assert python.returncode == 1 and python.stderr.startswith("FAILED: pack.json: its 'pdf'"), python.stderr
