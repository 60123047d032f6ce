"""docker/compose.yaml up for real on this host: ``docker compose up --wait``, then the nightly through it.

The stack is compose.yaml with docker/compose.host.yaml over it (a host with no public registry, host
networking, every service on 127.0.0.1), on the session's private Docker engine, with the images
docker/images.py builds locally: the CPU Airflow image (the trainer plus Airflow, installed from a
wheelhouse of this environment's exact versions) for every Airflow component and MLflow, PostgreSQL and
Redis from Debian's packages, and moto's S3 server in place of MinIO. Every secret is generated for the
run and written only to a 0600 env file.

Once ``up --wait`` says every service is healthy, the registry is seeded through the stack (the
reference model trained on the host, registered in the stack's MLflow, its data snapshot in the stack's
S3; the git repository and signing key in a folder the workers mount read-only), and
``repro_nightly_audit`` is unpaused and triggered through Airflow's REST API v2. The tests then read
what happened: the run's state and every task instance's queue and worker from the API, the reports,
summary and ledger from the S3 store through boto3, and the workers' ``docker compose logs``.

Run it with ``make test-compose`` (``pytest -m compose_e2e tests/deploy/test_compose_up.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.cluster import placement_table
from tests.distributed.test_celery_nightly import AUDIT_DATE, AUDIT_TASK, DAG_ID, LOGICAL_DATE, VARIANTS
from tests.distributed.test_celery_nightly import _read_reports as read_reports
from tests.distributed.test_celery_nightly import _seed_in_background as seed_in_background
from tests.fixtures.compose import ComposeStack, compose_binary
from tests.fixtures.images import images_module, record_timing

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.compose_e2e, pytest.mark.timeout(3600)]

RUN_ID = "compose-e2e"
DEFAULT_WORKER, GPU_WORKER = "worker-default", "worker-gpu"  # REPRO_WORKER_NAME in compose.host.yaml
REPORTS_BUCKET, SNAPSHOTS_BUCKET = "repro-reports", "repro-snapshots"
REPRO_UID = 10001  # the images' user: the workers read the seeded world as it
SERVICES = {"postgres", "redis", "object-store", "mlflow", "airflow-api-server", "airflow-scheduler",
            "airflow-dag-processor", "airflow-triggerer", "airflow-worker", "airflow-worker-gpu"}


@dataclass
class ComposeNightly:
    """What the stack did, for the tests to read."""

    services: dict[str, dict[str, Any]]
    init_exit: int | None
    listening: list[str]
    listening_before: list[str]
    stack_ports: set[str]
    state: str | None = None
    tries: list[dict[str, Any]] = field(default_factory=list)
    seeded: dict[str, str] = field(default_factory=dict)
    s3_report_keys: list[str] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    report_keys: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None
    ledger_ok: bool = False
    ledger_problems: list[str] = field(default_factory=list)
    placement: str = ""
    worker_logs: dict[str, str] = field(default_factory=dict)
    secrets_in_logs: list[tuple[str, str, str]] = field(default_factory=list)  # (name, service, redacted line)
    # the S3 access key id is an identifier, not a secret (every signed request and presigned URL carries it)
    key_id_in_logs: list[tuple[str, str, str]] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)


class Api:
    """Airflow's REST API v2 on the stack's API server, with a token from ``/auth/token``."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.token: str | None = None

    def call(self, method: str, path: str, body: dict | None = None, *, timeout: float = 30) -> Any:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback only
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:2000]}") from None
        return json.loads(text) if text else None

    def login(self) -> None:
        # simple auth manager with all_admins (compose.host.yaml, REPRO_AIRFLOW_ALL_ADMINS): a token, no credentials
        self.token = self.call("GET", "/auth/token")["access_token"]


def _wait(check, *, timeout: float, what: str, interval: float = 2.0, stack: ComposeStack | None = None) -> Any:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - not there yet
            last = exc
        time.sleep(interval)
    logs = "" if stack is None else "\n" + stack.logs(tail=60)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}: {last!r}{logs}")


def _listening_ports() -> list[str]:
    """Every TCP listener of this host (its own network namespace is the containers' too)."""
    listeners = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                address, port = fields[1].rsplit(":", 1)
                listeners.append(f"{address}:{int(port, 16)}")
    return listeners


def _loopback_listener(hex_address: str) -> bool:
    return hex_address in {"0100007F", "00000000000000000000000001000000"}


def _service_states(stack: ComposeStack) -> dict[str, dict[str, Any]]:
    done = stack.run("ps", "--all", "--format", "json")
    text = done.stdout.strip()
    rows = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line]
    return {row["Service"]: row for row in rows}


def _task_instances(api: Api) -> list[dict[str, Any]]:
    page = api.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}/taskInstances?limit=100")
    return [{k: ti.get(k) for k in ("task_id", "map_index", "try_number", "state", "queue", "hostname", "pool")}
            for ti in page["task_instances"]]


_WORKLOAD = re.compile(r"^(\S+).*Executing workload in Celery:.*?\bti=TaskInstance\w*\((.*?)\) ")
_FIELD = re.compile(r"\b(task_id|dag_id|run_id|map_index|try_number|queue)=('[^']*'|-?\d+)")


def _placement_lines(log: str) -> list[str]:
    """Each workload of the run the worker's log says it executed: time, task, map index, try, queue.

    Airflow's Celery worker logs ``Executing workload in Celery: ... ti=TaskInstanceDTO(task_id=...,
    map_index=..., queue=...)``; only those fields are kept (the line also carries ids and context).
    """
    lines = []
    for line in log.splitlines():
        match = _WORKLOAD.search(line.split(" | ", 1)[-1])  # compose prefixes "service-1  | "
        if not match:
            continue
        fields = dict(_FIELD.findall(match.group(2)))
        if fields.get("dag_id") != f"'{DAG_ID}'" or fields.get("run_id") != f"'{RUN_ID}'":
            continue
        shown = " ".join(f"{k}={fields[k]}" for k in ("task_id", "map_index", "try_number", "queue") if k in fields)
        lines.append(f"{match.group(1)}  executing {shown}")
    return lines


@pytest.fixture(scope="module")
def nightly(docker_engine, compose_stack_images) -> ComposeNightly:
    binary = compose_binary()
    import boto3
    from mlflow import MlflowClient

    started = time.monotonic()
    timeline: list[str] = []

    def mark(event: str) -> None:
        timeline.append(f"{time.monotonic() - started:7.1f}s  {event}")

    images = images_module().stack_env(compose_stack_images)
    # The folder the workers mount read-only at the same path (REPRO_HOST_SHARE): the seeded world.
    share = Path(tempfile.mkdtemp(prefix="repro-compose-share-", dir="/tmp"))
    share.chmod(0o755)
    world = share / "world"
    from auditor.demo import base_env

    world_settings = base_env(world)
    stack = ComposeStack.create(binary, docker_engine.repro_docker_host, images, {
        "REPRO_HOST_SHARE": str(share),
        "REPRO_SIGNING_KEY": world_settings["REPRO_SIGNING_KEY"],
        "REPRO_SIGNER": world_settings["REPRO_SIGNER"],
        "REPRO_AIRFLOW_ALL_ADMINS": "True",
        "REPRO_USE_JOB_SCHEDULE": "False",  # only the triggered run: no scheduled one audits another date
        "REPRO_NIGHTLY_MAX_MODELS": "20",
        "REPRO_NIGHTLY_BUDGET_HOURS": "100",
        "REPRO_RETRY_DELAY_S": "5",
        "REPRO_RESPONSIBLE": "compose e2e test",
        "REPRO_DEFAULT_WORKER_CONCURRENCY": "1",  # two cores
        "REPRO_GPU_WORKER_CONCURRENCY": "1",
        "PYTHONHASHSEED": "0",
    })
    listening_before = _listening_ports()
    try:
        up_seconds = stack.up(timeout=900)
        record_timing("compose up --wait", up_seconds, f"({len(SERVICES)} services healthy, project {stack.project})")
        mark(f"docker compose up --wait returned: every service healthy ({up_seconds:.1f}s)")
        services = _service_states(stack)
        listening = _listening_ports()
        s3_endpoint = stack.url("s3")
        aws = {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": stack.secrets["S3_ACCESS_KEY_ID"],
               "AWS_SECRET_ACCESS_KEY": stack.secrets["S3_SECRET_ACCESS_KEY"], "AWS_DEFAULT_REGION": "us-east-1"}
        tracking = stack.url("mlflow")
        # The audits' experiment, made up front with the stack's proxied artifact store (demo.seed would
        # otherwise give it a file: location on this host, which the workers cannot write).
        MlflowClient(tracking_uri=tracking).create_experiment(
            "repro-audit-audits", artifact_location="mlflow-artifacts:/seed/repro-audit-audits")
        seed_env = {
            "MLFLOW_TRACKING_URI": tracking,
            "REPRO_HOME": str(share / "seed-home"),
            "REPRO_SNAPSHOT_STORE": f"s3://{SNAPSHOTS_BUCKET}/snapshots",
            "REPRO_REPORTS": f"s3://{REPORTS_BUCKET}/reports",
            "PYTHONHASHSEED": "0",
            "REPRO_TORCH_THREADS": "2",
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
            "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        }
        with pytest.MonkeyPatch.context() as patch:  # credentials by environment only, never on a command line
            for key, value in aws.items():
                patch.setenv(key, value)
            seeding, seeded = seed_in_background(share, seed_env, "mlflow-artifacts:/seed")
            seeding.join(timeout=600)
        assert seeded.get("rc") == 0, f"seeding failed: {seeded.get('log') and Path(seeded['log']).read_text()[-3000:]}"
        out = seeded["stdout"]  # the Seeded JSON, after whatever MLflow printed about its runs
        versions = json.loads(out[out.index("{") if out.startswith("{") else out.index("\n{") + 1:])["versions"]
        for path in [world, *world.rglob("*")]:
            os.lchown(path, REPRO_UID, REPRO_UID)  # the workers (uid 10001) clone the repository, read the key
        mark(f"registry seeded through the stack's MLflow: {', '.join(sorted(versions.values()))}")

        api = Api(stack.url("airflow"))
        api.login()
        _wait(lambda: api.call("GET", f"/api/v2/dags/{DAG_ID}"), timeout=300, what=f"{DAG_ID} parsed", stack=stack)
        api.call("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
        mark(f"{DAG_ID} parsed and unpaused")
        nightly_start = time.monotonic()
        api.call("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"dag_run_id": RUN_ID, "logical_date": LOGICAL_DATE,
                                                             "conf": {}})
        mark(f"run {RUN_ID} triggered through POST /api/v2/dags/{DAG_ID}/dagRuns")

        def finished() -> str | None:
            state = api.call("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{RUN_ID}")["state"]
            return state if state in ("success", "failed") else None

        state = _wait(finished, timeout=1200, what=f"{DAG_ID} run {RUN_ID} to finish", interval=3, stack=stack)
        nightly_seconds = time.monotonic() - nightly_start
        record_timing("compose nightly", nightly_seconds, f"({DAG_ID} {state}, {len(versions)} versions)")
        mark(f"run finished: {state} ({nightly_seconds:.1f}s)")
        tries = _task_instances(api)

        run = ComposeNightly(services=services, init_exit=None, listening=listening, listening_before=listening_before,
                             stack_ports={v for k, v in stack.settings.items() if k.endswith("_PORT")},
                             state=state, tries=tries, seeded=versions, placement=placement_table(tries),
                             timeline=timeline)
        init = stack.run("ps", "--all", "--format", "json", "repro-init").stdout.strip()
        rows = json.loads(init) if init.startswith("[") else [json.loads(line) for line in init.splitlines() if line]
        run.init_exit = rows[0].get("ExitCode") if rows else None
        s3 = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id=aws["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        listed = s3.list_objects_v2(Bucket=REPORTS_BUCKET, Prefix="reports/")
        run.s3_report_keys = sorted(obj["Key"] for obj in listed.get("Contents", []))
        with pytest.MonkeyPatch.context() as patch:
            for key, value in aws.items():
                patch.setenv(key, value)
            run.entries, run.report_keys, run.summary, verification = read_reports(f"s3://{REPORTS_BUCKET}/reports")
        run.ledger_ok, run.ledger_problems = verification.ok, [str(p) for p in verification.problems]
        for service in ("airflow-worker", "airflow-worker-gpu"):
            run.worker_logs[service] = stack.logs(service)
        everything = stack.run("logs", "--no-color", check=False, timeout=120)
        for line in (everything.stdout + everything.stderr).splitlines():
            for name, value in stack.secrets.items():
                if value in line:  # where, never the value: the line is kept with every secret redacted
                    found = (name, line.split(" | ", 1)[0].strip(), stack.redact(line.split(" | ", 1)[-1])[:300])
                    (run.key_id_in_logs if name == "S3_ACCESS_KEY_ID" else run.secrets_in_logs).append(found)
        return run
    finally:
        stack.down()
        shutil.rmtree(share, ignore_errors=True)


def test_compose_up_wait_brought_every_service_up_healthy(nightly):
    assert SERVICES <= set(nightly.services), sorted(nightly.services)
    for name in SERVICES:
        row = nightly.services[name]
        assert row["State"] == "running", (name, row["State"], row.get("Status"))
        assert row.get("Health") == "healthy", (name, row.get("Health"), row.get("Status"))
    assert nightly.init_exit == 0


def test_the_stack_listens_on_loopback_only(nightly):
    # host networking: the containers' sockets are this host's. Each of the stack's ports is bound to
    # 127.0.0.1 alone, and no new wildcard listener appeared (Airflow's log servers are off: 8793, 8794).
    on_ports = [e for e in nightly.listening if e.rsplit(":", 1)[1] in nightly.stack_ports]
    assert {e.rsplit(":", 1)[1] for e in on_ports} == nightly.stack_ports, (on_ports, nightly.stack_ports)
    assert all(_loopback_listener(e.rsplit(":", 1)[0]) for e in on_ports), on_ports
    new = set(nightly.listening) - set(nightly.listening_before)
    wildcard = sorted(e for e in new if not _loopback_listener(e.rsplit(":", 1)[0]))
    assert not [e for e in wildcard if e.rsplit(":", 1)[1] in {"8793", "8794", "9000", "9001", "5000", "8080"}], wildcard


def test_the_log_shows_which_worker_ran_each_task(nightly, capsys):
    with capsys.disabled():
        print(f"\n{DAG_ID} through docker compose (compose.yaml + compose.host.yaml), task placement:\n{nightly.placement}")
        for service, log in nightly.worker_logs.items():
            lines = _placement_lines(log)
            print(f"--- docker compose logs {service}: {len(lines)} lines naming a task of {DAG_ID}")
            print("\n".join(lines[:20]))
        print("timeline:\n" + "\n".join(nightly.timeline))
    gpu_lines = "\n".join(_placement_lines(nightly.worker_logs["airflow-worker-gpu"]))
    default_lines = "\n".join(_placement_lines(nightly.worker_logs["airflow-worker"]))
    assert f"task_id='{AUDIT_TASK}'" in gpu_lines, gpu_lines[-2000:]
    assert f"task_id='{AUDIT_TASK}'" not in default_lines, default_lines[-2000:]
    assert "task_id='sample'" in default_lines and "task_id='publish'" in default_lines, default_lines[-2000:]


def test_the_nightly_run_succeeds(nightly):
    assert nightly.state == "success", nightly.placement


def test_every_rebuild_ran_on_the_gpu_queue_worker(nightly):
    audits = [t for t in nightly.tries if t["task_id"] == AUDIT_TASK]
    assert len({t["map_index"] for t in audits}) == len(VARIANTS)
    for ti in audits:
        assert ti["queue"] == "gpu" and ti["hostname"] == GPU_WORKER and ti["state"] == "success", ti
        assert ti["pool"] == "repro_gpu", ti


def test_nothing_but_rebuilds_ran_on_the_gpu_worker(nightly):
    others = [t for t in nightly.tries if t["task_id"] != AUDIT_TASK]
    assert {t["task_id"] for t in others} >= {"sample", "publish"}
    for ti in others:
        if ti["state"] == "skipped":
            continue
        assert ti["queue"] == "default" and ti["hostname"] == DEFAULT_WORKER, ti


def test_the_reports_landed_in_the_s3_store(nightly):
    expected = sorted(nightly.seeded.values())
    html = [k for k in nightly.s3_report_keys if k.endswith(".html") and k.count("/") == 1 and not k.endswith("/index.html")]
    assert len(html) == len(expected), nightly.s3_report_keys
    assert f"reports/summaries/{AUDIT_DATE}.json" in nightly.s3_report_keys, nightly.s3_report_keys
    assert "reports/index.html" in nightly.s3_report_keys, nightly.s3_report_keys
    assert sorted(f"reports/{k}" for k in nightly.report_keys) == sorted(html)


def test_every_audited_version_has_one_ledger_entry_and_the_ledger_verifies(nightly):
    def version(ref: str) -> tuple[str, str]:
        name, number = ref.removeprefix("models:/").rsplit("/", 1)
        return name, number

    in_ledger = sorted((e["audit"]["model"], e["audit"]["version"]) for e in nightly.entries)
    assert in_ledger == sorted(version(ref) for ref in nightly.seeded.values())
    assert nightly.ledger_ok, nightly.ledger_problems


def test_the_night_summary_gives_every_version_its_verdict(nightly):
    assert nightly.summary is not None
    audits = {row["ref"]: row for row in nightly.summary["audits"]}
    assert set(audits) == set(nightly.seeded.values())
    assert audits[nightly.seeded["plain"]]["verdict"] == "NOT_REPRODUCIBLE"
    assert audits[nightly.seeded["clean"]]["verdict"].startswith("REPRODUCED"), audits[nightly.seeded["clean"]]


def test_no_service_logged_a_secret(nightly, capsys):
    if nightly.key_id_in_logs:
        with capsys.disabled():
            print(f"\nthe S3 access key id (not a secret) appears in {len(nightly.key_id_in_logs)} log lines, e.g.:")
            for _name, service, line in nightly.key_id_in_logs[:3]:
                print(f"  {service}: {line}")
    assert nightly.secrets_in_logs == []
