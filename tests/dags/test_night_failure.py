"""A night that fails before auditing fails loudly (issue 38, acceptance 2).

The demo's world points at a registry that cannot be opened (its MLflow database is missing), so the nightly's
``sample`` task raises before any audit. ``repro-audit demo`` must exit non-zero naming that task and its own
error, and the index and its page must say the night failed, never "0 audits of 0 models" alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor import settings as S
from auditor.demo import Seeded, base_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_a_night_whose_sample_raises_fails_the_demo_and_says_so(tmp_path):
    root, reports = tmp_path / "world", tmp_path / "reports"
    root.mkdir()
    env = base_env(root)
    env[S.TRACKING_URI.name] = f"sqlite:///{tmp_path / 'gone' / 'mlflow.db'}"  # the registry cannot be opened
    env[S.REPORTS.name] = str(reports)
    (root / "seeded.json").write_text(Seeded(root=root, env=env, versions={}).to_json())  # the demo reuses this world
    outer = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "REPRO_", "MLFLOW_"))}
    proc = subprocess.run([str(Path(sys.executable).with_name("repro-audit")), "demo", "--root", str(root), "--reports", str(reports)],
                          capture_output=True, text=True, cwd=tmp_path, env=outer, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, f"exit {proc.returncode}\n{out[-4000:]}"
    assert "the night failed before auditing" in out and "sample:" in out, out[-4000:]
    assert "mlflow.db" in out and "does not exist" in out, "the failing task's own error is printed"
    assert "Traceback" not in out, out[-4000:]
    index = (reports / "index.html").read_text()
    assert "failed before auditing" in index and "does not exist" in index, index[:3000]
