"""A real Airflow cluster on loopback: CeleryExecutor, PostgreSQL metadata, Redis broker, two Celery workers.

Everything is a separate OS process started the way a platform team starts it
(``airflow scheduler``, ``airflow dag-processor``, ``airflow api-server``,
``airflow celery worker -q ...``), each in its own session so that one can be
killed as a machine dies: the whole process group, task processes included.

Isolation from anything else on the machine: a fresh PostgreSQL database per
cluster (dropped at the end), and a Redis key prefix per cluster (Celery's
queues and unacked messages live under it), so two runs never share a queue.

The two workers run on one host, so each gets its own name through Airflow's
``[core] hostname_callable``: a tiny module written into the cluster's folder
returns ``$REPRO_WORKER_NAME``. That is the name Airflow records as the task
instance's ``hostname``, which is what the placement assertions read.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fixtures.common import free_port, wait_for

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"

_HOSTNAME_MODULE = '''"""Airflow's hostname_callable for workers sharing one host: each names itself."""
import os
import socket


def worker_name() -> str:
    return os.environ.get("REPRO_WORKER_NAME") or socket.getfqdn()
'''


def _venv_bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _pg_ready() -> bool:
    import psycopg2

    with psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", connect_timeout=2):
        return True


def ensure_postgres() -> str | None:
    """Start this machine's PostgreSQL cluster when it is not running; None when up, else why it cannot be."""
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 is not installed (pip install psycopg2-binary)"
    try:
        return None if _pg_ready() else "PostgreSQL did not answer"
    except Exception:  # noqa: BLE001 - not running yet: try to start it below
        pass
    versions = sorted(Path("/etc/postgresql").glob("*")) if Path("/etc/postgresql").is_dir() else []
    if not versions or shutil.which("pg_ctlcluster") is None:
        return "PostgreSQL is not installed here (apt-get install postgresql)"
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1].name, "main", "start"],
                   check=False, capture_output=True, timeout=60)
    try:
        wait_for(_pg_ready, timeout=30, what="PostgreSQL on 127.0.0.1:5432")
    except TimeoutError as exc:
        return str(exc)
    return None


def _redis_ready() -> bool:
    import redis

    return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=2).ping())


def ensure_redis() -> str | None:
    """Start a Redis server on 127.0.0.1:6379 when none answers; None when up, else why it cannot be."""
    try:
        import redis  # noqa: F401
    except ImportError:
        return "the redis client is not installed (pip install apache-airflow-providers-celery)"
    try:
        if _redis_ready():
            return None
    except Exception:  # noqa: BLE001 - not running yet: try to start it below
        pass
    if shutil.which("redis-server") is None:
        return "redis-server is not installed here (apt-get install redis-server)"
    for folder in ("/var/lib/redis", "/var/log/redis"):
        Path(folder).mkdir(parents=True, exist_ok=True)
    subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379",
                    "--save", "", "--appendonly", "no", "--dir", "/var/lib/redis",
                    "--logfile", "/var/log/redis/ci.log"], check=False, capture_output=True, timeout=30)
    try:
        wait_for(_redis_ready, timeout=30, what="Redis on 127.0.0.1:6379")
    except TimeoutError as exc:
        return str(exc)
    return None


def _require(reason: str | None) -> None:
    if reason is None:
        return
    import pytest

    if os.environ.get("REPRO_REQUIRE_DISTRIBUTED") == "1":
        pytest.fail(f"distributed test required but cannot run: {reason}")
    pytest.skip(reason)


def require_cluster() -> None:
    """Skip (or, with ``REPRO_REQUIRE_DISTRIBUTED=1``, fail) naming what a cluster lacks here; start PostgreSQL and Redis."""
    for module, package in (("psycopg2", "psycopg2-binary"), ("asyncpg", "asyncpg"), ("redis", "redis"),
                            ("airflow.providers.celery", "apache-airflow-providers-celery")):
        try:
            __import__(module)
        except ImportError:
            _require(f"{package} is not installed")
    _require(ensure_postgres())
    _require(ensure_redis())


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """A new PostgreSQL database for one run; dropped (connections and all) afterwards. Yields its name."""
    import psycopg2

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres")
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def pg_url(database: str, driver: str = "postgresql+psycopg2") -> str:
    return f"{driver}://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


@dataclass
class Proc:
    """One started component: its process (a session leader) and its log."""

    name: str
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (read from /proc), children first found first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_tree_cmdlines(pid: int) -> list[str]:
    """The command lines of ``pid``'s live descendants (to tell when a worker is inside a given step)."""
    lines = []
    for child in _descendants(pid):
        try:
            lines.append((Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return lines


@dataclass
class AirflowCluster:
    """Scheduler, DAG processor, API server and named Celery workers sharing one environment."""

    root: Path
    dags_folder: Path
    database: str
    extra_env: Mapping[str, str] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    api_port: int = 0
    env: dict[str, str] = field(default_factory=dict)
    dead: list[Proc] = field(default_factory=list)
    key_prefix: str = ""

    def __post_init__(self) -> None:
        home = self.root / "airflow-home"
        home.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        shim = self.root / "shim"
        shim.mkdir(exist_ok=True)
        (shim / "repro_worker_name.py").write_text(_HOSTNAME_MODULE)
        self.api_port = free_port()
        repo_root = Path(__file__).resolve().parents[2]
        python_path = os.pathsep.join(p for p in (str(shim), str(repo_root), os.environ.get("PYTHONPATH", "")) if p)
        self.key_prefix = f"repro-{uuid.uuid4().hex[:8]}:"
        key_prefix = self.key_prefix
        self.env = {
            **os.environ,
            "PYTHONPATH": python_path,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "repro_worker_name.worker_name",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.api_port}/execution/",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg_url(self.database),
            "AIRFLOW__CELERY__BROKER_URL": REDIS_URL,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + pg_url(self.database),
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__GLOBAL_KEYPREFIX": key_prefix,
            # Generated per run and handed to each process by environment, as in production.
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            # A killed worker's task must be noticed in seconds, not the default five minutes.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "15",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.root / "task-logs"),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            **self.extra_env,
        }

    # --- lifecycle -------------------------------------------------------------------------------

    def airflow(self, *args: str, timeout: float = 180, env: Mapping[str, str] | None = None) -> str:
        """Run one ``airflow`` CLI command to completion; returns its output, raises with it on failure."""
        done = subprocess.run([_venv_bin("airflow"), *args], env={**self.env, **(env or {})}, capture_output=True,
                              text=True, timeout=timeout, cwd=self.root)
        if done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout

    def airflow_background(self, *args: str) -> subprocess.Popen:
        """Start one ``airflow`` CLI command without waiting (the CLI alone takes seconds to import)."""
        return subprocess.Popen([_venv_bin("airflow"), *args], env=self.env, cwd=self.root, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def start(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> Proc:
        """Start ``airflow <args>`` in its own session, logging to ``logs/<name>.log``."""
        starts = 1 + sum(p.name == name for p in self.dead)
        log = self.root / "logs" / (f"{name}.log" if starts == 1 else f"{name}.{starts}.log")
        with open(log, "wb") as out:
            popen = subprocess.Popen([_venv_bin("airflow"), *args], env={**self.env, **(env or {})}, cwd=self.root,
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = Proc(name, popen, log)
        return self.procs[name]

    def start_worker(self, name: str, queue: str, concurrency: int = 1) -> Proc:
        """A Celery worker serving ``queue`` whose task instances record ``name`` as their hostname."""
        return self.start(name, "celery", "worker", "-q", queue, "-c", str(concurrency), "-H", f"{name}@%h",
                          "--skip-serve-logs", "--without-gossip", "--without-mingle",
                          env={"REPRO_WORKER_NAME": name})

    def start_control_plane(self) -> None:
        self.start("api-server", "api-server", "--host", "127.0.0.1", "--port", str(self.api_port), "--workers", "1")
        self.start("scheduler", "scheduler")
        self.start("dag-processor", "dag-processor")

    def wait_api(self, timeout: float = 120) -> None:
        import urllib.request

        def up() -> bool:
            self.check_alive("api-server")
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/api/v2/monitor/health", timeout=2) as resp:  # noqa: S310 - loopback
                return resp.status == 200

        wait_for(up, timeout=timeout, interval=0.5, what=f"the Airflow API server ({self.procs['api-server'].log})")

    def wait_worker(self, name: str, timeout: float = 120) -> None:
        """Until the worker's Celery consumer is ready (it says so in its log)."""
        proc = self.procs[name]

        def ready() -> bool:
            self.check_alive(name)
            return " ready." in proc.tail(20000)

        wait_for(ready, timeout=timeout, interval=0.5, what=f"Celery worker {name} ({proc.log})")

    def check_alive(self, *names: str) -> None:
        for name in names or tuple(self.procs):
            proc = self.procs[name]
            if not proc.alive():
                raise RuntimeError(f"{name} exited with {proc.popen.returncode}; its log ends:\n{proc.tail()}")

    def kill(self, name: str) -> list[str]:
        """SIGKILL a component and every process under it, as if its machine died; returns what was running."""
        proc = self.procs[name]
        running = process_tree_cmdlines(proc.popen.pid)
        victims = [proc.popen.pid, *_descendants(proc.popen.pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.popen.wait(timeout=10)
        self.dead.append(self.procs.pop(name))
        return running

    def stop(self, name: str, grace: float = 10) -> None:
        proc = self.procs[name]
        if not proc.alive():
            return
        try:
            os.killpg(proc.popen.pid, signal.SIGTERM)
            proc.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill(name)
        except ProcessLookupError:
            pass

    def stop_all(self) -> None:
        """Stop every component, then drop this cluster's queues and unacked messages from Redis."""
        for name in reversed(list(self.procs)):
            self.stop(name)
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
        keys = list(client.scan_iter(match=f"{self.key_prefix}*", count=500))
        if keys:
            client.delete(*keys)

    # --- reading the metadata database ----------------------------------------------------------

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg2

        with psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=self.database) as conn:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall()

    def dag_parsed(self, dag_id: str) -> bool:
        return bool(self.query("SELECT 1 FROM serialized_dag WHERE dag_id = %s", (dag_id,)))

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", (dag_id, run_id))
        return rows[0][0] if rows else None

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Each task instance of the run: id, map index, state, queue, hostname and try number."""
        rows = self.query(
            "SELECT task_id, map_index, state, queue, hostname, try_number, pool FROM task_instance"
            " WHERE dag_id = %s AND run_id = %s ORDER BY task_id, map_index", (dag_id, run_id))
        keys = ("task_id", "map_index", "state", "queue", "hostname", "try_number", "pool")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def tries(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every finished or interrupted try (Airflow keeps them in ``task_instance_history``) plus the current ones."""
        rows = self.query(
            "SELECT task_id, map_index, try_number, state, queue, hostname FROM task_instance_history"
            " WHERE dag_id = %s AND run_id = %s ORDER BY task_id, map_index, try_number", (dag_id, run_id))
        keys = ("task_id", "map_index", "try_number", "state", "queue", "hostname")
        history = [dict(zip(keys, row, strict=True)) for row in rows]
        current = [{k: ti[k] for k in keys} for ti in self.task_instances(dag_id, run_id)]
        return history + current


def placement_table(tries: list[dict[str, Any]]) -> str:
    """The task-to-worker placement as an aligned text table, one line per try."""
    header = ("task", "map", "try", "state", "queue", "worker")
    rows = [header] + [(t["task_id"], str(t["map_index"]), str(t["try_number"]), str(t["state"]), str(t["queue"]),
                        str(t["hostname"] or "-")) for t in tries]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)


def wait_until(check, *, timeout: float, what: str, cluster: AirflowCluster | None = None, interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy (and return that), failing with the cluster's logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster is not None:
            cluster.check_alive()
        value = check()
        if value:
            return value
        time.sleep(interval)
    logs = "" if cluster is None else "\n".join(f"--- {p.name}\n{p.tail(1500)}" for p in cluster.procs.values())
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{logs}")
