"""Screenshot of an audit's MLflow run (issue 16, acceptance 5): `mlflow server` on loopback over the demo's
database, headless Chromium on the run's page.

    PYTHONPATH=. .venv/bin/python docs/screenshots/mlflow_run.py .repro docs/screenshots
"""

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from mlflow import MlflowClient

home = Path(sys.argv[1]).resolve()  # the demo's .repro folder
out = Path(sys.argv[2]).resolve()
uri = f"sqlite:///{home / 'mlflow.db'}"
client = MlflowClient(tracking_uri=uri)
experiment = client.get_experiment_by_name("repro-audit-audits")
runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
# the demo's out-of-tolerance audit (rebuilt metrics and a red verdict) when there is one, else the first
runs = [r for r in runs if r.data.tags.get("repro.run_kind") == "audit"] or runs
run = next((r for r in runs if r.data.tags.get("repro.audit.verdict") == "OUT_OF_TOLERANCE"), runs[0])
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
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
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            break
        except OSError:
            time.sleep(1)
    for name, path in [
        ("mlflow-audit-run.png", f"#/experiments/{experiment.experiment_id}/runs/{run.info.run_id}"),
        (
            "mlflow-audit-run-artifacts.png",
            f"#/experiments/{experiment.experiment_id}/runs/{run.info.run_id}/artifacts",
        ),
    ]:
        subprocess.run(
            [
                "chromium",
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--screenshot={out / name}",
                "--window-size=1500,1700",
                "--virtual-time-budget=30000",
                f"http://127.0.0.1:{port}/{path}",
            ],
            check=True,
            timeout=180,
            capture_output=True,
        )
    print(run.info.run_id, dict(run.data.tags))
finally:
    server.terminate()
    server.wait(30)
