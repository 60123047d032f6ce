"""Airflow for the DAG tests, kept out of the pytest process.

Airflow reads its configuration once, at import, into process-wide state (and
writes ``airflow.cfg`` under ``AIRFLOW_HOME``). So nothing here imports Airflow:
``airflow_env`` builds the environment (a temporary ``AIRFLOW_HOME``, the repo's
``dags/`` folder, no examples, SQLite metadata), ``airflow_db`` runs
``airflow db migrate`` once per session, and ``run_in_airflow`` runs a script
in a fresh interpreter with that environment and returns the JSON it leaves in
``$PROBE_OUT``. The rest of the suite never sees Airflow's globals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags"
AIRFLOW_BIN = Path(sys.executable).with_name("airflow")

# Variables of the outer environment that would point Airflow or the auditor somewhere else.
_SCRUB = ("AIRFLOW", "REPRO_", "MLFLOW_")


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for a subprocess that imports Airflow: its own home, this repo's DAGs, no examples."""
    home = tmp_path_factory.mktemp("airflow-home")
    env = _base_env()
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            # dag.test() honours retries and their delay; the DAGs read it from here.
            "REPRO_RETRY_DELAY_S": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
        }
    )
    return env


@pytest.fixture(scope="session")
def airflow_db(airflow_env: dict[str, str]) -> dict[str, str]:
    """``airflow_env`` with its SQLite metadata database migrated (once per session, about 10-20 s)."""
    proc = subprocess.run(
        [str(AIRFLOW_BIN), "db", "migrate"], env=airflow_env, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        pytest.fail(f"airflow db migrate failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return airflow_env


class AirflowRunner:
    """Runs a script in a fresh interpreter with an Airflow environment; returns the JSON it left in ``$PROBE_OUT``."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch

    def __call__(self, script: str, env: Mapping[str, str], *, cwd: Path | None = None, timeout: float = 600) -> Any:
        out = self.scratch / f"probe-{os.urandom(4).hex()}.json"
        proc = subprocess.run(
            [sys.executable, "-c", script],
            env={**env, "PROBE_OUT": str(out)},
            cwd=cwd or self.scratch,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0 or not out.exists():
            # The Airflow error is in its output; show the tail rather than a bare exit code.
            pytest.fail(f"Airflow subprocess exited {proc.returncode}:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
        return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def run_in_airflow(tmp_path_factory: pytest.TempPathFactory) -> AirflowRunner:
    """``run_in_airflow(script, env, cwd=...)`` -> the JSON the script wrote to ``$PROBE_OUT``."""
    return AirflowRunner(tmp_path_factory.mktemp("airflow-probes"))
