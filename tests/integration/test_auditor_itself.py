"""The auditor records itself (issue 38, acceptance 5): every evidence file and its signed statement carry the
auditor's version and the digest of the environment it ran in, held to the committed lock; ``evidence verify``
prints them. Real parts: MLflow on SQLite, the CLI in a subprocess, an Ed25519 key.
"""

from __future__ import annotations

import base64
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


def test_evidence_and_statement_name_the_auditor_and_verify_prints_it(sqlite_tracking_uri, tmp_path):
    from tests.fixtures.mlflow import seed_version

    seed_version(sqlite_tracking_uri, "plain-a", None)
    reports = tmp_path / "reports"
    key = tmp_path / "keys" / "signing.pem"
    public, _ = generate_key(key)
    env = {"MLFLOW_TRACKING_URI": sqlite_tracking_uri, "REPRO_REPORTS": str(reports), "REPRO_HOME": str(tmp_path / "home"),
           "REPRO_SIGNING_KEY": str(key)}
    night = _run(["nightly", "--date", "2026-05-03", "--json"], tmp_path, env)
    assert night.returncode in (0, 1), night.stdout + night.stderr

    mine = auditor_itself()
    evidence = [json.loads(p.read_text()) for p in reports.glob("*.json") if p.name.startswith("plain-a") and not p.name.endswith(".intoto.json")]
    assert evidence, sorted(p.name for p in reports.iterdir())
    recorded = evidence[0]["auditor"]
    assert recorded["version"] == mine["version"] and recorded["environment_digest"].startswith("sha256:")
    assert recorded["environment_digest"] == mine["environment_digest"], "the CLI subprocess ran in this environment"
    assert recorded["lock"]["file"] == "requirements/dev.lock.txt" and isinstance(recorded["lock"]["matches"], bool)
    print("auditor recorded:", json.dumps(recorded)[:400])

    statements = list(reports.glob("plain-a*.intoto.json"))
    assert statements, sorted(str(p.relative_to(reports)) for p in reports.rglob("*"))
    envelope = json.loads(statements[0].read_text())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    assert payload["predicate"]["auditor"]["environment_digest"] == recorded["environment_digest"]

    verified = _run(["evidence", "verify", str(reports), "--public-key", str(public)], tmp_path, env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"published by repro-audit {mine['version']}, environment {recorded['environment_digest']}" in verified.stdout, verified.stdout
