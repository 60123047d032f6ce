"""Issue 30, acceptance 4: ``repro-audit adopt --assess-only`` over a whole registry of plain versions.

The registry is made through MLflow's client API by ``tests.fixtures.plain_registry`` (no training): 400
versions over 20 runs, a tenth with no run at all. The command runs as a user runs it, in a fresh interpreter,
and must cover every version with the right classes. Its time is not asserted here (speed lives in ``bench/``):
``bench/bench_adopt.py`` times it over 2,000 versions beside MLflow's own ``search_model_versions`` listing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.fixtures.plain_registry import plain_versions

VERSIONS = 400


@pytest.fixture(scope="module")
def registry(tmp_path_factory, _mlflow_sqlite_template) -> str:
    root = tmp_path_factory.mktemp("adopt-scale")
    shutil.copyfile(_mlflow_sqlite_template, root / "mlflow.db")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    plain_versions(uri, root, VERSIONS, runs=20)
    return uri


def test_assess_only_covers_every_version_of_the_registry(registry):
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([sys.executable, "-m", "auditor", "adopt", "--assess-only", "--json", "--tracking-uri", registry],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]  # LINEAGE_INSUFFICIENT: an assessment is never a pass
    out = json.loads(done.stdout)
    assert out["versions"] == VERSIONS
    no_run = VERSIONS // 10
    assert out["counts"]["code"] == {"named but mutable": VERSIONS - no_run, "missing": no_run}
    # every other run reads a Delta table at a version, the rest a CSV path; seeds: two runs in three are seeded
    assert out["counts"]["data"]["pinned"] + out["counts"]["data"]["named but mutable"] == VERSIONS - no_run
    assert out["counts"]["data"]["missing"] == no_run
    assert not any(r["verdict"].startswith("REPRODUCED") for r in out["rows"])
