"""Usage errors behave like a CLI's: exit 2, a usage line, no traceback (the real console script, in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = [str(Path(sys.executable).with_name("repro-audit"))]

USAGE_ERRORS = [
    ("no arguments", []),
    ("unknown option", ["--nope"]),
    ("unknown command", ["nosuchcmd"]),
    ("unknown option of a verb", ["audit", "models:/m/1", "--nope"]),
    ("missing argument", ["audit"]),
    ("missing option value", ["audit", "models:/m/1", "--reruns"]),
    ("value of the wrong type", ["calibrate", "models:/m/1", "--reruns", "abc"]),
    ("value out of range", ["audit", "models:/m/1", "--reruns", "0"]),
    ("too few calibration reruns", ["calibrate", "models:/m/1", "--reruns", "2"]),
    ("extra argument", ["evidence", "verify", "a", "b"]),
    ("a date that is no date (nightly)", ["nightly", "--date", "2026-13-45"]),
    ("a date that is no date (audit)", ["audit", "models:/m/1", "--date", "2026-02-30"]),
    ("a date not spelled YYYY-MM-DD", ["nightly", "--date", "2026-5-1"]),
]


@pytest.mark.parametrize(("case", "argv"), USAGE_ERRORS, ids=[c for c, _ in USAGE_ERRORS])
def test_a_usage_error_exits_2_with_a_usage_line_and_no_traceback(case, argv, tmp_path):
    proc = subprocess.run(CLI + argv, capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, f"{case}: exit {proc.returncode}\n{out}"
    assert "Traceback" not in out
    assert "Usage:" in out or "error:" in out.lower()
    assert not (tmp_path / ".repro").exists(), "a usage error created state"


def test_version_and_help_exit_0():
    from auditor import __version__

    version = subprocess.run(CLI + ["--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"repro-audit {__version__}"
    helped = subprocess.run(CLI + ["audit", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "models:/NAME/VERSION" in helped.stdout
