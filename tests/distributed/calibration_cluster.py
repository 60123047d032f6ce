"""A mapped calibration on a real Celery cluster: the world, the cluster, and one triggered run (issue 43).

Shared by ``tests/distributed/test_celery_mapped_calibration.py`` (a worker killed mid-rerun) and
``bench/bench_mapped_calibration.py`` (one gpu worker against two). The world: the tabular example
(``examples/tabular``, XGBoost) in a git repository, trained once and registered in MLflow on a fresh
PostgreSQL database; the reports store (where the reruns' results travel between workers) and the
snapshots are wherever ``world_env`` points them (the S3-protocol server in the test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.distributed.cluster import AirflowCluster, fresh_database, pg_url, wait_until

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tabular"
DAG_ID = "repro_calibrate_tolerance"
MODEL = "mapped-calibration"


def train_and_register(root: Path, env: Mapping[str, str], artifacts: str, *, overrides: tuple[str, ...] = ()) -> str:
    """Train the tabular example once in a fresh git repository and register it; returns ``models:/NAME/VERSION``."""
    from mlflow import MlflowClient

    import auditor
    from tests.fixtures.gitrepo import init_repo

    files = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
    project = init_repo(root / "project", {**files, ".gitignore": ".repro/\nmlruns/\n__pycache__/\n"})
    client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    if client.get_experiment_by_name("tabular") is None:
        client.create_experiment("tabular", artifact_location=f"{artifacts}/tabular")
    done = subprocess.run([sys.executable, "train.py", "model=xgboost", *overrides], cwd=project, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = client.search_runs([client.get_experiment_by_name("tabular").experiment_id], max_results=1)[0]
    version = auditor.register_model(run.info.run_id, MODEL, tracking_uri=env["MLFLOW_TRACKING_URI"])
    return f"models:/{MODEL}/{version}"


def world_env(root: Path, mlflow_db: str, *, reports: str, snapshots: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What points the auditor, the training script and every worker at one world."""
    from auditor.demo import base_env

    env = base_env(root)
    env.pop("REPRO_TORCH_THREADS", None)
    env.update({"MLFLOW_TRACKING_URI": pg_url(mlflow_db), "REPRO_REPORTS": reports, "REPRO_SNAPSHOT_STORE": snapshots,
                "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", **(extra or {})})
    return env


@contextmanager
def calibration_cluster(root: Path, world: Mapping[str, str], gpu_workers: list[str],
                        airflow: Mapping[str, str] | None = None) -> Iterator[AirflowCluster]:
    """A scheduler, DAG processor, API server, a ``default`` worker and ``gpu_workers`` (one slot each, a GPU pool
    as wide as the workers), on a fresh metadata database; stopped and dropped afterwards. ``airflow``: Airflow
    settings over the test cluster's (which re-parse the DAG folder every few seconds, for a test's speed)."""
    with fresh_database("repro_mapped_airflow") as airflow_db:
        cluster = AirflowCluster(root=root, dags_folder=REPO / "dags", database=airflow_db, extra_env={
            **world, "REPRO_RUNNER": "process", "REPRO_RETRY_DELAY_S": "1",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False", **(airflow or {})})
        try:
            cluster.airflow("db", "migrate", timeout=300)
            cluster.airflow("pools", "set", "repro_gpu", str(len(gpu_workers)), "rebuilds, one per GPU")
            cluster.start_control_plane()
            cluster.start_worker("worker-default", "default", concurrency=2)
            for name in gpu_workers:
                cluster.start_worker(name, "gpu", concurrency=1)
            cluster.wait_api()
            for name in ("worker-default", *gpu_workers):
                cluster.wait_worker(name)
            wait_until(lambda: cluster.dag_parsed(DAG_ID), timeout=180, what=f"{DAG_ID} parsed", cluster=cluster)
            yield cluster
        finally:
            cluster.stop_all()


def trigger(cluster: AirflowCluster, run_id: str, ref: str, *, reruns: int, same_seed: int = 2) -> subprocess.Popen:
    """``airflow dags trigger`` of the calibration DAG, not waited for (the CLI alone takes seconds to import)."""
    conf = json.dumps({"model_uri": ref, "reruns": reruns, "same_seed": same_seed})
    return cluster.airflow_background("dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", conf)


def finished(cluster: AirflowCluster, run_id: str, timeout: float) -> str:
    """The run's end state, waited for."""
    return wait_until(lambda: (s := cluster.run_state(DAG_ID, run_id)) in ("success", "failed") and s,
                      timeout=timeout, interval=0.5, what=f"{DAG_ID} run {run_id} to finish", cluster=cluster)


def ledgered(world: Mapping[str, str], ref: str) -> list[Any]:
    """The version's calibrations as the ledger holds them (where audits read them), oldest first."""
    from auditor.judge.floors import calibration_from_json
    from auditor.report.calibrations import ledgered_calibrations
    from auditor.settings import Settings
    from auditor.steps import Session

    session = Session(Settings.from_env({**os.environ, **world}))
    info = session.registry.resolve(ref)
    found, problem = ledgered_calibrations(session.store, info.name, str(info.version), None)
    assert problem is None, problem
    return [calibration_from_json(c.data, source=c.describe()) for c in found]


__all__ = ["DAG_ID", "calibration_cluster", "finished", "ledgered", "train_and_register", "trigger", "world_env"]
