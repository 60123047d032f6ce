"""repro_calibrate_tolerance spread over two Celery gpu workers, one killed mid-rerun (issue 43, acceptance 1 and 3).

On loopback: Airflow's scheduler, DAG processor and API server, a ``default`` worker and two ``gpu`` workers;
PostgreSQL holds Airflow's metadata and MLflow's registry, Redis is the broker, and the reports store where
the reruns' results travel between workers is a bucket of the S3-protocol server. The tabular example
(XGBoost) is trained and registered, then calibrated by the DAG with 6 seed-varied reruns. While a seed-varied
rerun is training on ``worker-gpu-a``, that worker and every process under it are SIGKILLed, as when a machine
dies; Airflow notices the missing heartbeat and retries the rerun on a worker that is alive.

Then the same version is calibrated by ``repro-audit calibrate`` (the in-process path) and the two calibrations,
read back from the ledger where audits read them, must be the same: each seed counted once, the same model
digests, metrics, floors and bands. (The two-workers-against-one timing is ``bench/bench_mapped_calibration.py``:
never a timed assertion in a test.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.distributed.calibration_cluster import (
    DAG_ID,
    calibration_cluster,
    finished,
    ledgered,
    train_and_register,
    trigger,
    world_env,
)
from tests.distributed.cluster import (
    fresh_database,
    placement_table,
    process_tree_cmdlines,
    require_cluster,
    wait_until,
)

pytest.importorskip("xgboost")

# extended: a second cluster beside test_celery_nightly's costs CI about six minutes of its forty; `make test-all`
# runs it. In `make test`, tests/dags/test_mapped_calibration.py runs the same DAG (dag.test) against the CLI.
pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.extended, pytest.mark.timeout(900)]

RUN_ID = "mapped-calibration-test"
RERUNS, SAME_SEED = 6, 2
VICTIM, SURVIVOR, RESTARTED = "worker-gpu-a", "worker-gpu-b", "worker-gpu-a-restarted"


@dataclass
class Outcome:
    state: str
    tries: list[dict[str, Any]]
    killed: dict[str, Any]
    mapped: Any
    cli: Any
    stored_results: list[str]
    placement: str


def _varied_training_on(cluster, worker: str) -> dict[str, Any] | None:
    """The seed-varied rerun ``worker`` is training right now (its script is running), if any."""
    proc = cluster.procs.get(worker)
    if proc is None or not any("train.py" in line for line in process_tree_cmdlines(proc.popen.pid)):
        return None
    running = [ti for ti in cluster.task_instances(DAG_ID, RUN_ID)
               if ti["task_id"] == "rerun_seed_varied" and ti["state"] == "running" and ti["hostname"] == worker]
    return running[0] if len(running) == 1 else None


@pytest.fixture(scope="module")
def outcome(s3_endpoint, tmp_path_factory) -> Outcome:
    require_cluster()
    import boto3

    root = tmp_path_factory.mktemp("mapped-calibration")
    bucket = f"repro-mapped-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    with fresh_database("repro_mapped_mlflow") as mlflow_db:
        world = world_env(root, mlflow_db, reports=f"s3://{bucket}/reports", snapshots=f"s3://{bucket}/snapshots",
                          extra={"MLFLOW_S3_ENDPOINT_URL": s3_endpoint})
        ref = train_and_register(root, world, f"s3://{bucket}/mlartifacts")
        with calibration_cluster(root / "cluster", world, [VICTIM, SURVIVOR]) as cluster:
            started = trigger(cluster, RUN_ID, ref, reruns=RERUNS, same_seed=SAME_SEED)
            killed = wait_until(lambda: _varied_training_on(cluster, VICTIM), timeout=300, interval=0.05,
                                what=f"a seed-varied rerun training on {VICTIM}", cluster=cluster)
            cluster.kill(VICTIM)
            assert started.wait(timeout=120) == 0
            cluster.start_worker(RESTARTED, "gpu", concurrency=1)
            state = finished(cluster, RUN_ID, timeout=480)
            tries = cluster.tries(DAG_ID, RUN_ID)
        cli = subprocess.run([sys.executable, "-m", "auditor", "calibrate", ref, "--reruns", str(RERUNS), "--json"],
                             env={**os.environ, **world}, capture_output=True, text=True, timeout=600, check=False)
        assert cli.returncode == 0, cli.stdout[-2000:] + cli.stderr[-3000:]
        calibrations = ledgered(world, ref)
        s3 = boto3.client("s3", endpoint_url=s3_endpoint)
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="reports/calibration-reruns/").get("Contents", [])
        stored = sorted(o["Key"].rsplit("/", 1)[-1] for o in listed if o["Key"].endswith(".json"))
    assert len(calibrations) == 2, f"expected the DAG's and the CLI's calibration, found {len(calibrations)}"
    return Outcome(state=state, tries=tries, killed=killed, mapped=calibrations[0], cli=calibrations[1],
                   stored_results=stored, placement=placement_table(tries))


def test_the_calibration_completes_after_a_worker_is_killed_mid_rerun(outcome):
    print(outcome.placement)
    assert outcome.state == "success", outcome.placement
    index = outcome.killed["map_index"]
    retried = [t for t in outcome.tries if t["task_id"] == "rerun_seed_varied" and t["map_index"] == index]
    assert max(t["try_number"] for t in retried) >= 2, outcome.placement
    assert any(t["hostname"] in (SURVIVOR, RESTARTED) and t["state"] == "success" for t in retried), outcome.placement


def test_the_reruns_were_spread_over_both_gpu_workers(outcome):
    hosts = {t["hostname"] for t in outcome.tries if t["task_id"].startswith("rerun_") and t["hostname"]}
    assert {VICTIM, SURVIVOR} <= hosts, outcome.placement
    assert all(t["queue"] == "gpu" for t in outcome.tries if t["task_id"].startswith("rerun_"))


def test_each_seed_is_counted_once(outcome):
    seeds = [r.seed for r in outcome.mapped.seed_varied]
    assert len(seeds) == RERUNS == len(set(seeds))
    assert outcome.stored_results == sorted(["floor.json", *(f"same-{i}.json" for i in range(SAME_SEED)),
                                             *(f"varied-{i}.json" for i in range(RERUNS))])
    assert outcome.mapped.cost["reruns"] == RERUNS + SAME_SEED


def test_the_dag_stores_the_calibration_the_cli_stores(outcome):
    def essence(calibration):
        return json.loads(calibration.model_dump_json(exclude={"calibrated_at", "cost"}))

    assert essence(outcome.mapped) == essence(outcome.cli)
    assert outcome.mapped.cost["mapped"] is True and not outcome.cli.cost.get("mapped")
