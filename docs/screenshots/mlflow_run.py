"""Screenshot of an audit's MLflow run (issue 16, acceptance 5): `mlflow server` on loopback over the demo's
database, headless Chromium on the run's page.

    PYTHONPATH=. .venv/bin/python docs/screenshots/mlflow_run.py .repro docs/screenshots
"""

import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient
from shots import free_port, screenshot, wait_http

home = Path(sys.argv[1]).resolve()  # the demo's .repro folder
out = Path(sys.argv[2]).resolve()
uri = f"sqlite:///{home / 'mlflow.db'}"
client = MlflowClient(tracking_uri=uri)
experiment = client.get_experiment_by_name("repro-audit-audits")
runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
# the demo's out-of-tolerance audit (rebuilt metrics and a red verdict) when there is one, else the first
runs = [r for r in runs if r.data.tags.get("repro.run_kind") == "audit"] or runs
run = next((r for r in runs if r.data.tags.get("repro.audit.verdict") == "OUT_OF_TOLERANCE"), runs[0])
port = free_port()
server = subprocess.Popen(
    [
        str(Path(sys.executable).with_name("mlflow")),
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ],
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
try:
    wait_http(f"http://127.0.0.1:{port}/health")
    for name, path in [
        ("mlflow-audit-run.png", f"#/experiments/{experiment.experiment_id}/runs/{run.info.run_id}"),
        (
            "mlflow-audit-run-artifacts.png",
            f"#/experiments/{experiment.experiment_id}/runs/{run.info.run_id}/artifacts",
        ),
    ]:
        screenshot(f"http://127.0.0.1:{port}/{path}", out / name, size="1500,1700")
    print(run.info.run_id, dict(run.data.tags))
finally:
    server.terminate()
    server.wait(30)
