"""Screenshots of the nightly DAG's grid after a run with a NOT_REPRODUCIBLE verdict (issue 16, acceptance 5).

Runs the outcomes probe of tests/dags/test_airflow_outcomes.py (real DAG, dag.test(), in-memory registry,
fake runner) into a SQLite Airflow database, serves it with `airflow api-server` on loopback, and takes a
headless Chromium screenshot of the grid and of the verdict task's mapped instances.

    PYTHONPATH=. .venv/bin/python docs/screenshots/airflow_grid.py . docs/screenshots
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(sys.argv[1]).resolve()
OUT = Path(sys.argv[2]).resolve()  # a folder: airflow-grid.png, airflow-verdicts.png
work = Path(tempfile.mkdtemp(prefix="repro-airflow-grid-"))
shutil.rmtree(work, ignore_errors=True)
work.mkdir(parents=True)
sys.path.insert(0, str(REPO))
from shots import free_port, screenshot, wait_http  # noqa: E402 - beside this script

from tests.dags.test_airflow_outcomes import DATE, NIGHTLY, REGISTRY  # noqa: E402 - after the path entry

airflow = Path(sys.executable).with_name("airflow")
env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "REPRO_", "MLFLOW_"))}
env.update(
    {
        "AIRFLOW_HOME": str(work),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{work / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        "REPRO_RETRY_DELAY_S": "1",
        "PYTHONPATH": str(REPO),
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "PROBE_DATE": DATE,
        "PROBE_REGISTRY": REGISTRY,
        "REPRO_HOME": str(work / "home"),
        "REPRO_REPORTS": str(work / "reports"),
        "PROBE_OUT": str(work / "probe.json"),
        "AIRFLOW_CONN_REPRO_MLFLOW": json.dumps({"conn_type": "generic", "extra": {"tracking_uri": REGISTRY}}),
    }
)
subprocess.run([str(airflow), "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
subprocess.run([sys.executable, "-c", NIGHTLY], env=env, check=True, cwd=work, timeout=900)
probe = json.loads((work / "probe.json").read_text())
print(json.dumps(probe["tis"], indent=1))
port = free_port()
server = subprocess.Popen(
    [str(airflow), "api-server", "--host", "127.0.0.1", "--port", str(port)],
    env=env,
    stdout=open(work / "api.log", "w"),
    stderr=subprocess.STDOUT,
)
try:
    wait_http(f"http://127.0.0.1:{port}/api/v2/monitor/health")
    import sqlite3
    from urllib.parse import quote

    run_id = (
        sqlite3.connect(work / "airflow.db")
        .execute("select run_id from dag_run where dag_id='repro_nightly_audit'")
        .fetchone()[0]
    )
    base = f"http://127.0.0.1:{port}/dags/repro_nightly_audit"
    for name, url in [
        ("airflow-grid.png", base),
        ("airflow-verdicts.png", f"{base}/runs/{quote(run_id, safe='')}/tasks/verdict/mapped"),
    ]:
        screenshot(url, OUT / name)
finally:
    server.terminate()
    server.wait(30)
