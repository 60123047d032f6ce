"""repro_nightly_audit on a real distributed Airflow: CeleryExecutor, PostgreSQL, Redis, two Celery workers.

On loopback: an Airflow scheduler, DAG processor and API server; a Celery
worker on the ``default`` queue and one on ``gpu`` (distinct hostnames);
PostgreSQL holds Airflow's metadata and MLflow's registry, Redis is the broker,
and MLflow artifacts, snapshots and reports live on the S3-protocol server of
``s3_endpoint``. The registry is seeded by ``auditor.demo.seed`` (real training
of the reference model), pointed at PostgreSQL and S3.

While an audit is rebuilding (the training script is running under the gpu
worker), the gpu worker and every process under it are SIGKILLed, as when a
machine dies; a new gpu worker is started. Airflow notices the dead task by its
missing heartbeat and retries it on the new worker.

The whole run is one module-scoped fixture (the cluster costs most of the
time); the tests then read what it left: task placement from the metadata
database, and the published reports and ledger from S3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.cluster import (
    AirflowCluster,
    fresh_database,
    pg_url,
    placement_table,
    process_tree_cmdlines,
    require_cluster,
    wait_until,
)

pytestmark = [pytest.mark.distributed, pytest.mark.slow, pytest.mark.timeout(480)]

REPO = Path(__file__).resolve().parents[2]
DAG_ID = "repro_nightly_audit"
RUN_ID = "distributed-test"
LOGICAL_DATE = "2026-03-02T02:00:00+00:00"
AUDIT_DATE = "2026-03-02"
AUDIT_TASK = "audit"
DEFAULT_WORKER, GPU_WORKER, GPU_WORKER_RESTARTED = "worker-default", "worker-gpu", "worker-gpu-restarted"
GPU_WORKERS = {GPU_WORKER, GPU_WORKER_RESTARTED}
# a full rebuild (the one that gets killed) and a version with no record (audited without a rebuild)
VARIANTS = ("clean", "plain")

# Seeding runs in a subprocess: auditor.demo.seed sets MLflow's process-wide tracking URI, which must
# not leak into the rest of the session, and it then overlaps with the cluster's start-up.
SEED_SCRIPT = """
import json, sys
from pathlib import Path
from mlflow import MlflowClient
import auditor.demo as demo

root, env, artifacts = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
client = MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
for experiment in ("reference-model", "plain-mlflow"):  # seed() keeps experiments that exist
    client.create_experiment(experiment, artifact_location=f"{artifacts}/{experiment}")
variants = [v for v in demo.VARIANTS if v.key in sys.argv[4].split(",")]
# env: MLflow on PostgreSQL, snapshots and reports on S3
print(demo.seed(root, variants, epochs=2, env=env, progress=lambda m: print(m, file=sys.stderr, flush=True)).to_json())
"""


@dataclass
class NightlyRun:
    """What the distributed run left behind, for the tests to read."""

    state: str | None
    tries: list[dict[str, Any]]
    seeded: dict[str, str]
    killed_map_index: int | None
    killed_processes: list[str]
    entries: list[dict[str, Any]] = field(default_factory=list)
    report_keys: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    ledger_ok: bool = False
    ledger_problems: list[str] = field(default_factory=list)
    placement: str = ""
    timeline: list[str] = field(default_factory=list)


def _seed_in_background(root: Path, env: dict[str, str], artifacts: str) -> tuple[threading.Thread, dict]:
    outcome: dict[str, Any] = {}

    def work() -> None:
        log = root / "seed.log"
        with open(log, "w") as out:
            done = subprocess.run([sys.executable, "-c", SEED_SCRIPT, str(root / "world"), json.dumps(env), artifacts,
                                   ",".join(VARIANTS)], cwd=root, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                  stderr=out, text=True, timeout=300)
        outcome["rc"], outcome["stdout"], outcome["log"] = done.returncode, done.stdout, log

    thread = threading.Thread(target=work, name="seed", daemon=True)
    thread.start()
    return thread, outcome


def _running_audit(cluster: AirflowCluster) -> dict[str, Any] | None:
    """The audit task instance the gpu worker is rebuilding right now (its training script is running)."""
    worker = cluster.procs.get(GPU_WORKER)
    if worker is None or not any("train.py" in line for line in process_tree_cmdlines(worker.popen.pid)):
        return None
    running = [ti for ti in cluster.task_instances(DAG_ID, RUN_ID) if ti["task_id"] == AUDIT_TASK and ti["state"] == "running"]
    return running[0] if len(running) == 1 else None


def _read_reports(location: str) -> tuple[list[dict[str, Any]], list[str], dict | None, Any]:
    from auditor.report import ledger
    from auditor.report.verify import verify
    from auditor.storage import open_store

    store = open_store(location)
    keys = list(store.list(""))
    reports = [k for k in keys if k.endswith(".html") and k not in ("index.html", "coverage.html") and "/" not in k]
    summary_key = f"summaries/{AUDIT_DATE}.json"
    summary = json.loads(store.read(summary_key)) if store.exists(summary_key) else None
    return ledger.entries(store), reports, summary, verify(store)


@pytest.fixture(scope="module")
def nightly(s3_endpoint, tmp_path_factory) -> NightlyRun:
    require_cluster()
    import boto3

    started = time.monotonic()
    timeline: list[str] = []

    def mark(event: str) -> None:
        timeline.append(f"{time.monotonic() - started:6.1f}s  {event}")

    root = tmp_path_factory.mktemp("distributed")
    bucket = f"repro-dist-{uuid.uuid4().hex[:10]}"
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})

    with fresh_database("repro_dist_airflow") as airflow_db, fresh_database("repro_dist_mlflow") as mlflow_db:
        world = {
            "MLFLOW_TRACKING_URI": pg_url(mlflow_db),
            "MLFLOW_S3_ENDPOINT_URL": s3_endpoint,
            "REPRO_HOME": str(root / "home"),
            "REPRO_SNAPSHOT_STORE": f"s3://{bucket}/snapshots",
            "REPRO_REPORTS": f"s3://{bucket}/reports",
            "REPRO_NIGHTLY_MAX_MODELS": "20",
            "REPRO_NIGHTLY_BUDGET_HOURS": "100",
            "PYTHONHASHSEED": "0",
            "REPRO_TORCH_THREADS": "2",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
        }
        seeding, seeded = _seed_in_background(root, world, f"s3://{bucket}/mlartifacts")
        cluster = AirflowCluster(root=root / "cluster", dags_folder=REPO / "dags", database=airflow_db, extra_env={
            **world,
            "REPRO_RUNNER": "process",
            "REPRO_RETRY_DELAY_S": "1",
            # Only the triggered run: no scheduled run may add audits of another date.
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        })
        try:
            cluster.airflow("db", "migrate", timeout=300)
            mark("metadata database migrated")
            cluster.airflow("pools", "set", "repro_gpu", "1", "rebuilds, one per GPU")
            cluster.start_control_plane()
            cluster.start_worker(DEFAULT_WORKER, "default", concurrency=2)
            cluster.start_worker(GPU_WORKER, "gpu", concurrency=1)
            cluster.wait_api()
            for name in (DEFAULT_WORKER, GPU_WORKER):
                cluster.wait_worker(name)
            mark("API server and both workers up")
            wait_until(lambda: cluster.dag_parsed(DAG_ID), timeout=120, what=f"{DAG_ID} parsed", cluster=cluster)
            mark(f"{DAG_ID} parsed")
            seeding.join(timeout=300)
            mark("registry seeded")
            assert seeded.get("rc") == 0, f"seeding failed: {seeded.get('log') and Path(seeded['log']).read_text()[-3000:]}"
            versions = json.loads(seeded["stdout"])["versions"]

            mark("triggering the run")
            # Polling starts at once: the first rebuild may begin before the CLI has even exited.
            trigger = cluster.airflow_background("dags", "trigger", DAG_ID, "--run-id", RUN_ID, "--logical-date",
                                                 LOGICAL_DATE)
            killed = wait_until(lambda: _running_audit(cluster), timeout=180, interval=0.05,
                                what="an audit rebuilding on the gpu worker", cluster=cluster)
            mark(f"audit map index {killed['map_index']} is training on {GPU_WORKER}: killing the worker")
            killed_processes = cluster.kill(GPU_WORKER)
            output = trigger.communicate(timeout=120)[0]
            assert trigger.returncode == 0, f"airflow dags trigger failed:\n{output[-3000:]}"
            cluster.start_worker(GPU_WORKER_RESTARTED, "gpu", concurrency=1)
            cluster.wait_worker(GPU_WORKER_RESTARTED)
            mark(f"{GPU_WORKER_RESTARTED} up")
            state = wait_until(lambda: (s := cluster.run_state(DAG_ID, RUN_ID)) in ("success", "failed") and s,
                               timeout=240, what=f"{DAG_ID} run {RUN_ID} to finish", cluster=cluster)
            mark(f"run finished: {state}")
            tries = cluster.tries(DAG_ID, RUN_ID)
        finally:
            cluster.stop_all()
        run = NightlyRun(state=state, tries=tries, seeded=versions, killed_map_index=killed["map_index"],
                         killed_processes=killed_processes, placement=placement_table(tries), timeline=timeline)
        run.entries, run.report_keys, run.summary, verification = _read_reports(world["REPRO_REPORTS"])
        run.ledger_ok, run.ledger_problems = verification.ok, [str(p) for p in verification.problems]
        (root / "placement.txt").write_text(run.placement + "\n")
        return run


def _model_version(ref: str) -> tuple[str, str]:
    name, version = ref.removeprefix("models:/").rsplit("/", 1)
    return name, version


def test_the_log_shows_which_worker_ran_each_task(nightly, capsys):
    with capsys.disabled():
        print(f"\n{DAG_ID} on CeleryExecutor, task-to-worker placement (one line per try):\n{nightly.placement}")
        print("timeline:\n" + "\n".join(nightly.timeline))
    assert nightly.placement.count("\n") == len(nightly.tries) > 0
    assert DEFAULT_WORKER in nightly.placement and GPU_WORKER in nightly.placement


def test_the_nightly_run_ends_failed_exactly_when_a_verdict_is_red(nightly):
    """Every task ran to the end (the killed worker's audit retried); the run's state is the night's verdicts:
    the plain-MLflow version is NOT_REPRODUCIBLE, a red verdict, so publish (the last task) ends the run failed."""
    verdicts = [t for t in nightly.tries if t["task_id"] == "verdict"]
    assert len(verdicts) == len(VARIANTS) and all(t["state"] in ("success", "failed") for t in verdicts), nightly.placement
    red = any(t["state"] == "failed" for t in verdicts)
    assert red, nightly.placement  # "plain" cannot reproduce
    assert nightly.state == ("failed" if red else "success"), nightly.placement
    assert all(t["state"] == "success" for t in nightly.tries if t["task_id"] == "sample"), nightly.placement
    publish = [t for t in nightly.tries if t["task_id"] == "publish"]
    assert [t["state"] for t in publish] == ["failed" if red else "success"], nightly.placement  # after writing the summary


def test_every_rebuild_ran_on_the_gpu_worker(nightly):
    audits = [t for t in nightly.tries if t["task_id"] == AUDIT_TASK]
    assert len({t["map_index"] for t in audits}) == len(VARIANTS)
    for try_ in audits:
        assert try_["queue"] == "gpu", try_
        assert try_["hostname"] in GPU_WORKERS, try_


def test_nothing_but_rebuilds_ran_on_the_gpu_worker(nightly):
    others = [t for t in nightly.tries if t["task_id"] != AUDIT_TASK]
    assert {t["task_id"] for t in others} >= {"sample", "publish"}
    for try_ in others:
        assert try_["queue"] == "default", try_
        assert try_["hostname"] == DEFAULT_WORKER, try_


def test_the_gpu_worker_was_killed_while_a_rebuild_was_training(nightly):
    assert nightly.killed_map_index is not None
    assert any("train.py" in line for line in nightly.killed_processes), nightly.killed_processes


def test_the_killed_rebuild_was_retried_on_the_restarted_gpu_worker(nightly):
    tries = sorted((t for t in nightly.tries if t["task_id"] == AUDIT_TASK and t["map_index"] == nightly.killed_map_index),
                   key=lambda t: t["try_number"])
    assert [t["hostname"] for t in tries] == [GPU_WORKER, GPU_WORKER_RESTARTED], nightly.placement
    assert tries[0]["state"] != "success"
    assert tries[-1]["state"] == "success"


def test_every_audited_version_has_exactly_one_report_and_one_ledger_entry(nightly):
    expected = sorted(_model_version(ref) for ref in nightly.seeded.values())
    in_ledger = sorted((e["audit"]["model"], e["audit"]["version"]) for e in nightly.entries)
    assert in_ledger == expected
    assert len(nightly.report_keys) == len(expected)
    assert sorted(e["report"]["key"] for e in nightly.entries) == sorted(nightly.report_keys)


def test_the_published_ledger_verifies(nightly):
    assert nightly.ledger_ok, nightly.ledger_problems


def test_the_night_summary_lists_every_sampled_version_with_a_verdict(nightly):
    assert nightly.summary is not None
    audits = {row["ref"]: row for row in nightly.summary["audits"]}
    assert set(audits) == set(nightly.seeded.values())
    assert all(row["verdict"] for row in audits.values())
    assert audits[nightly.seeded["plain"]]["verdict"] == "NOT_REPRODUCIBLE"
    assert audits[nightly.seeded["clean"]]["verdict"].startswith("REPRODUCED")
