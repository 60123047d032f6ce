"""``repro-audit report pdf`` and ``report coverage`` (issue 16, build point 5; acceptance 5).

The PDF is printed by Debian's headless Chromium through the real console script and read back by
poppler (``pdfinfo``, ``pdftotext``, ``pdftoppm``): pages, the running header, page numbers, a
rendered first page. Coverage runs against MLflow on SQLite and a real published report store.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.judge.result import Verdict
from auditor.report.publish import publish
from auditor.settings import Settings
from tests.fixtures.audits import make_audit
from tests.fixtures.browser import find_chromium

CLI = [str(Path(sys.executable).with_name("repro-audit"))]
POPPLER = ("pdfinfo", "pdftotext", "pdftoppm")


def _run(argv, cwd: Path, **env):
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    if "PYTHONPATH" in os.environ:  # a checkout other than the installed one (a worktree)
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(CLI + argv, capture_output=True, text=True, cwd=cwd, env={**base, **env}, timeout=300)


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (.ci/sysdeps installs chromium and poppler-utils)")


@pytest.mark.browser
def test_report_pdf_writes_a_paginated_pdf_with_running_headers_and_page_numbers(tmp_path):
    if find_chromium() is None:
        pytest.skip("not installed: chromium (.ci/sysdeps installs it)")
    _need(*POPPLER)
    reports = tmp_path / "reports"
    published = publish(make_audit(Verdict.NOT_REPRODUCIBLE), str(reports), settings=Settings(responsible_person="Dana Risk"))
    out = tmp_path / "out" / "report.pdf"
    proc = _run(["report", "pdf", published.stem, "-o", str(out), "--reports", str(reports)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = subprocess.run(["pdfinfo", str(out)], capture_output=True, text=True, check=True).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    assert pages >= 1
    text = subprocess.run(["pdftotext", "-layout", str(out), "-"], capture_output=True, text=True, check=True).stdout
    per_page = text.split("\f")
    assert all("repro-audit · churn v3 · NOT_REPRODUCIBLE" in page for page in per_page[:pages]), per_page[0][:400]
    assert f"page 1 of {pages}" in per_page[0] and f"page {pages} of {pages}" in per_page[pages - 1]
    assert "Not reproducible" in per_page[0]
    assert "file://" not in text  # Chromium's own header and footer (date, URL) are off
    subprocess.run(["pdftoppm", "-png", "-r", "40", "-f", "1", "-l", "1", str(out), str(tmp_path / "first")], check=True)
    png = next(tmp_path.glob("first*.png"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000

    by_path = _run(["report", "pdf", str(reports / published.report_key), "-o", str(tmp_path / "again.pdf"), "--json"], tmp_path)
    assert by_path.returncode == 0 and json.loads(by_path.stdout)["bytes"] > 0
    missing = _run(["report", "pdf", "no-such-stem", "-o", str(tmp_path / "x.pdf"), "--reports", str(reports)], tmp_path)
    assert missing.returncode == 2 and "no report no-such-stem.html in" in missing.stderr


def test_report_coverage_lists_every_version_never_overdue_and_current(sqlite_tracking_uri, tmp_path):
    from tests.fixtures.mlflow import seed_version

    for name in ("audited", "stale", "never"):
        seed_version(sqlite_tracking_uri, name, None, aliases=["champion"] if name == "never" else ())
    reports = tmp_path / "reports"
    settings = Settings(responsible_person="Dana Risk")
    publish(make_audit(Verdict.REPRODUCED_BITWISE, name="audited", version="1", audit_id="today",
                       finished_at="2999-01-01T00:00:00Z"), str(reports), settings=settings)
    publish(make_audit(Verdict.NOT_REPRODUCIBLE, name="stale", version="1", audit_id="old",
                       finished_at="2020-01-01T00:00:00Z"), str(reports), settings=settings)
    env = {"MLFLOW_TRACKING_URI": sqlite_tracking_uri, "REPRO_REPORTS": str(reports), "REPRO_OVERDUE_DAYS": "30"}
    proc = _run(["report", "coverage", "--json", "--write"], tmp_path, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    status = {(r["model"], r["version"]): (r["status"], r["verdict"]) for r in doc["versions"]}
    assert status == {("never", "1"): ("never audited", None), ("stale", "1"): ("overdue", "NOT_REPRODUCIBLE"),
                      ("audited", "1"): ("current", "REPRODUCED_BITWISE")}
    assert [r["model"] for r in doc["versions"]] == ["never", "stale", "audited"]  # what needs attention first
    page = (reports / "coverage.html").read_text()
    assert "never audited: 1" in page and "overdue (last audit over 30 days ago): 1" in page and "current: 1" in page
    assert 'href="coverage.html"' in (reports / "index.html").read_text()
    human = _run(["report", "coverage"], tmp_path, **env)
    assert human.returncode == 0 and "1 never audited, 1 overdue, 1 current" in human.stdout


def test_nightly_writes_the_coverage_page_beside_the_index(sqlite_tracking_uri, tmp_path):
    from tests.fixtures.mlflow import seed_version

    seed_version(sqlite_tracking_uri, "plain", None)  # no record: judged without a rebuild
    reports = tmp_path / "reports"
    env = {"MLFLOW_TRACKING_URI": sqlite_tracking_uri, "REPRO_REPORTS": str(reports), "REPRO_HOME": str(tmp_path / "home")}
    proc = _run(["nightly", "--date", "2026-05-03", "--json"], tmp_path, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["coverage"] == f"{reports}/coverage.html"
    assert [a["verdict"] for a in summary["audits"]] == ["NOT_REPRODUCIBLE"]
    page = (reports / "coverage.html").read_text()
    assert "never audited: 0" in page and "current: 1" in page
    assert 'href="coverage.html"' in (reports / "index.html").read_text()
