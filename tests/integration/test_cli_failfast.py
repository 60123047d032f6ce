"""Fail fast, and never silently (issue 16, build point 2; acceptance 2).

Each case runs the real console script in a subprocess against real parts: MLflow on SQLite (a copy
of the session's migrated template), a local report store, a closed loopback port for an
unreachable tracking server. Each asserts its exit code and the message a person would read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.common import free_port
from tests.fixtures.mlflow import seed_version
from tests.fixtures.records import complete_record

CLI = [str(Path(sys.executable).with_name("repro-audit"))]


def _run(argv, cwd: Path, **env):
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "REPRO_HOME": str(cwd / "home"), "REPRO_REPORTS": str(cwd / "reports")}
    if "PYTHONPATH" in os.environ:  # a checkout other than the installed one (a worktree)
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(CLI + argv, capture_output=True, text=True, cwd=cwd, env={**base, **env}, timeout=300)


READING_VERBS = [
    ["audit", "models:/m/1", "--no-publish"],
    ["audit", "models:/m/1"],
    ["rebuild", "models:/m/1", "--out", "out"],
    ["calibrate", "models:/m/1"],
    ["nightly"],
    ["lineage", "show", "models:/m/1"],
]


@pytest.mark.parametrize("argv", READING_VERBS, ids=[" ".join(a[:2]) for a in READING_VERBS])
def test_a_mistyped_sqlite_uri_is_refused_naming_the_file_and_creates_nothing(argv, tmp_path):
    typo = tmp_path / "mlfow.db"
    proc = _run(argv, tmp_path, MLFLOW_TRACKING_URI=f"sqlite:///{typo}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the MLflow database {typo} named by the tracking URI sqlite:///{typo} does not exist" in proc.stderr
    assert not typo.exists() and not (tmp_path / "reports").exists() and "Traceback" not in proc.stderr


def test_tracking_uri_flag_is_checked_the_same_way(tmp_path):
    typo = tmp_path / "nope.db"
    proc = _run(["lineage", "show", "models:/m/1", "--tracking-uri", f"sqlite:///{typo}"], tmp_path)
    assert proc.returncode == 2 and str(typo) in proc.stderr and not typo.exists()


def test_nightly_over_a_registry_without_models_says_so_and_exits_1(sqlite_tracking_uri, tmp_path):
    proc = _run(["nightly", "--date", "2026-05-01"], tmp_path, MLFLOW_TRACKING_URI=sqlite_tracking_uri)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"the registry at {sqlite_tracking_uri} has no registered model versions: nothing to audit" in proc.stderr
    assert not (tmp_path / "reports" / "summaries").exists()  # no empty night was published


def test_a_malformed_band_is_exit_2_at_once_on_stderr_pointing_at_the_band_format(sqlite_tracking_uri, tmp_path):
    seed_version(sqlite_tracking_uri, "banded", complete_record(), weights=b"w",
                 tags={"repro.bands": json.dumps({"schema": "repro.bands/1", "bands": {"auc": {"lower": 0.9}}})})
    proc = _run(["audit", "models:/banded/1"], tmp_path, MLFLOW_TRACKING_URI=sqlite_tracking_uri)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "models:/banded/1 tag repro.bands" in proc.stderr and "'upper'" in proc.stderr
    assert 'docs/reference/formats.md, "Band format"' in proc.stderr
    assert proc.stdout == ""  # no verdict: nothing was judged
    assert "preparing the workspace" not in proc.stderr and "started" not in proc.stderr  # no rebuild began
    page = (Path(__file__).parents[2] / "docs" / "reference" / "formats.md").read_text()
    assert re.search(r"^## Band format$", page, re.M)


def test_a_report_store_that_is_a_file_is_refused_before_the_audit(sqlite_tracking_uri, tmp_path):
    seed_version(sqlite_tracking_uri, "plain", None)
    store = tmp_path / "reports-file"
    store.write_text("not a folder")
    proc = _run(["audit", "models:/plain/1"], tmp_path, MLFLOW_TRACKING_URI=sqlite_tracking_uri, REPRO_REPORTS=str(store))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the report store {store} is a file, not a folder" in proc.stderr
    assert "started" not in proc.stderr


def test_a_failed_publish_still_prints_the_verdict_and_exits_with_the_publish_error(sqlite_tracking_uri, tmp_path):
    seed_version(sqlite_tracking_uri, "plain", None)  # no record: NOT_REPRODUCIBLE without a rebuild
    env = {"MLFLOW_TRACKING_URI": sqlite_tracking_uri}
    first = _run(["audit", "models:/plain/1", "--date", "2026-05-02"], tmp_path, **env)
    assert first.returncode == 1 and "NOT_REPRODUCIBLE" in first.stdout, first.stdout + first.stderr
    # The evidence files go, the ledger entry stays: the next publish of the same audit conflicts with it.
    for path in (tmp_path / "reports").glob("plain_v1_2026-05-02_*"):
        path.unlink()
    again = _run(["audit", "models:/plain/1", "--date", "2026-05-02", "--json"], tmp_path, **env)
    assert again.returncode == 1, again.stdout + again.stderr
    doc = json.loads(again.stdout)
    assert doc["verdict"] == "NOT_REPRODUCIBLE" and doc["report"] is None
    assert "records other evidence" in doc["error"] and doc["exit_code"] == 1
    assert "records other evidence" in again.stderr
    human = _run(["audit", "models:/plain/1", "--date", "2026-05-02"], tmp_path, **env)
    assert human.returncode == 1
    assert "NOT_REPRODUCIBLE" in human.stdout and "the report was NOT published" in human.stdout
    assert "records other evidence" in human.stderr


def test_an_unreachable_tracking_server_fails_after_bounded_retries_each_shown(tmp_path):
    port = free_port()  # nothing listens there
    proc = _run(["audit", "models:/m/1", "--no-publish"], tmp_path, MLFLOW_TRACKING_URI=f"http://127.0.0.1:{port}",
                REPRO_MLFLOW_HTTP_RETRIES="2")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    retries = re.findall(r"^\S+Z WARNING urllib3\.connectionpool: Retrying \(Retry\(total=(\d)", proc.stderr, re.M)
    assert retries == ["1", "0"], proc.stderr
    assert f"could not reach MLflow at http://127.0.0.1:{port}" in proc.stderr or f"MLflow at http://127.0.0.1:{port} failed" in proc.stderr
