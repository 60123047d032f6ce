"""Issue 29, acceptance 2: the pages our own commands write never trip our own tamper check, and an edit still does.

Issue 38, acceptance 5: every evidence file and its signed statement carry the auditor's version and the digest of
the environment it ran in, held to the committed lock; ``evidence verify`` prints them.

Real parts: MLflow on SQLite, the CLI in a subprocess (``nightly``, ``report coverage --write``, ``evidence verify``),
an Ed25519 signing key, the ledger's MLflow anchors. ``coverage.html`` is derived: ``evidence verify`` renders it again
from ``coverage.json`` (the registry's listing when it was written) and the ledger entries up to the head it names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from auditor.report.attest import generate_key
from auditor.report.itself import auditor_itself

CLI = [sys.executable, "-m", "auditor"]


def _run(argv, cwd: Path, env: dict[str, str]):
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    if "PYTHONPATH" in os.environ:
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(CLI + argv, capture_output=True, text=True, cwd=cwd, env={**base, **env}, timeout=300)


def test_nightly_and_coverage_pages_verify_and_an_edit_of_either_still_fails(sqlite_tracking_uri, tmp_path):
    from tests.fixtures.mlflow import seed_version

    for name in ("plain-a", "plain-b"):
        seed_version(sqlite_tracking_uri, name, None)  # no record: judged without a rebuild
    reports = tmp_path / "reports"
    key = tmp_path / "keys" / "signing.pem"
    public, _ = generate_key(key)
    env = {"MLFLOW_TRACKING_URI": sqlite_tracking_uri, "REPRO_REPORTS": str(reports), "REPRO_HOME": str(tmp_path / "home"),
           "REPRO_SIGNING_KEY": str(key)}
    night = _run(["nightly", "--date", "2026-05-03", "--json"], tmp_path, env)
    assert night.returncode == 0, night.stdout + night.stderr
    again = _run(["report", "coverage", "--write", "--json"], tmp_path, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (reports / "coverage.html").is_file() and (reports / "coverage.json").is_file()

    verify = ["evidence", "verify", str(reports), "--public-key", str(public), "--json"]
    clean = _run(verify, tmp_path, env)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout)["ok"] is True
    _the_auditor_recorded_itself(reports, public, tmp_path, env)

    page = reports / "coverage.html"
    original = page.read_bytes()
    page.write_bytes(original.replace(b"NOT_REPRODUCIBLE", b"REPRODUCED_BITWISE", 1))
    edited = _run(verify, tmp_path, env)
    assert edited.returncode == 1 and "coverage.html" in edited.stdout, edited.stdout
    page.write_bytes(original)
    assert _run(verify, tmp_path, env).returncode == 0

    inputs = reports / "coverage.json"
    saved = inputs.read_bytes()
    inputs.unlink()  # a page with nothing to render it from was not written by us
    orphan = _run(verify, tmp_path, env)
    assert orphan.returncode == 1 and "coverage.json" in orphan.stdout, orphan.stdout
    inputs.write_bytes(saved)
    doc = json.loads(saved)
    doc["ledger_seq"] = -1  # claims the page was written before any audit: it no longer renders to the page
    inputs.write_text(json.dumps(doc))
    rewound = _run(verify, tmp_path, env)
    assert rewound.returncode == 1 and "coverage.html" in rewound.stdout, rewound.stdout


def _the_auditor_recorded_itself(reports: Path, public: Path, cwd: Path, env: dict[str, str]) -> None:
    import base64

    mine = auditor_itself()
    stems = sorted(p.name.removesuffix(".intoto.json") for p in reports.glob("*.intoto.json"))
    assert stems, sorted(p.name for p in reports.iterdir())
    recorded = json.loads((reports / f"{stems[0]}.json").read_text())["auditor"]
    assert recorded["version"] == mine["version"] and recorded["environment_digest"] == mine["environment_digest"], recorded
    assert recorded["lock"]["file"] == "requirements/dev.lock.txt" and isinstance(recorded["lock"]["matches"], bool)
    print("auditor recorded:", json.dumps(recorded)[:400])
    statement = json.loads(base64.b64decode(json.loads((reports / f"{stems[0]}.intoto.json").read_text())["payload"]))
    assert statement["predicate"]["auditor"]["environment_digest"] == recorded["environment_digest"]
    verified = _run(["evidence", "verify", str(reports), "--public-key", str(public)], cwd, env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"published by repro-audit {mine['version']}, environment {recorded['environment_digest']}" in verified.stdout, verified.stdout
