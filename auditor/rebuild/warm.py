"""Warm rebuilds: each rebuild forked from a worker that has already imported what the entry script imports first.

A small tabular model trains in a second or two; a fresh interpreter spends as long again importing NumPy, the SDK
and torch (which the SDK's seeding imports wherever it is installed). The process runner therefore keeps, per
environment, a **warm worker** (:mod:`auditor.rebuild.zygote`, a fork server) and forks each rebuild from it: a
fresh process per rebuild, set up as ``python SCRIPT ARGS`` would be (its own session, the recorded environment
variables and working directory, the log, no network where the spec says so: the worker itself starts inside the
network namespace), so the isolation, tracing and fingerprints are those of a fresh interpreter.

What the worker imports is chosen so that the rebuild sees what a fresh interpreter would:

* the script's **leading imports** (the unconditional ``import`` statements before its first other statement,
  stopping at a module of the project itself, whose code must not run outside the rebuild), because the script
  imports them before anything else happens;
* where those include ``auditor``, the SDK's own modules and torch with the module its deterministic switch loads
  (``SDK_PRELOAD``): the SDK's seeding imports torch as a run begins wherever torch is installed. Not where the
  script touches ``os.environ`` or ``putenv`` (a variable it sets may be meant for torch's import).

A library imported later (inside a function, after other statements) is not imported early: the SDK notes what was
imported after a run began, and a warm worker must not change that. A worker serves one key: the interpreter, the
network switch, the preload list and every environment variable but those the runner sets per run
(``contract.RUN_TIME_VARS``); the worker's own ``HOME`` is a folder of its own. A rebuild whose ``PYTHONHASHSEED``
is not pinned runs in a fresh interpreter: a forked one would share its parent's string-hash salt with every other
rebuild, so same-seed reruns would agree where fresh processes might not. Forms other than ``python SCRIPT`` and
``python -m MODULE`` (options to the interpreter, a shell script) run in a fresh process too.
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

from auditor.contract import is_run_time_var
from auditor.errors import InfrastructureError
from auditor.settings import WARM_REBUILD

ZYGOTE = Path(__file__).with_name("zygote.py")
#: the SDK's modules a run imports as it begins, and torch with what ``torch.use_deterministic_algorithms`` loads
#: (the SDK's seeding imports torch wherever it is installed); none of them imports a library whose import the SDK
#: notes (tests/unit/test_warm.py)
SDK_PRELOAD = ("auditor.sdk.run", "auditor.sdk.capture", "auditor.sdk.consumed", "auditor.sdk.forms", "auditor.sdk.models",
               "auditor.lineage.gather", "auditor.seeds", "auditor.flavors.predictions", "torch", "torch._inductor.config")
MAX_WORKERS = 2  # warm workers kept per process (each holds its imports' memory); the least recently used goes first


def leading_imports(script: Path, project: Path) -> list[str]:
    """The modules ``script`` imports before its first other statement (a docstring and ``__future__`` aside),
    stopping at one of the project's own; then ``SDK_PRELOAD`` when ``auditor`` is among them (see the module doc)."""
    try:
        source = script.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        found = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else None)
        if found is None or any(_is_local(name, project, script.parent) for name in found):
            break
        names += [name for name in found if name not in names]
    if any(name.split(".")[0] == "auditor" for name in names):
        names += [name for name in SDK_PRELOAD if not name.startswith("torch") or "environ" not in source and "putenv" not in source]
    return names


def _is_local(name: str, *folders: Path) -> bool:
    top = name.split(".")[0]
    return any((folder / top).is_dir() or (folder / f"{top}.py").exists() for folder in folders)


class WarmProcess:
    """A forked rebuild, with the part of ``subprocess.Popen`` the runner uses: ``pid``, ``returncode``, ``wait``."""

    def __init__(self, worker: Worker, pid: int) -> None:
        self.worker, self.pid, self.returncode = worker, pid, None
        self.args = ["warm", str(pid)]

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: the signal); ``subprocess.TimeoutExpired`` as ``Popen.wait`` raises it."""
        if not self.worker.wait_exit(self.pid, timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.returncode = self.worker.exits.pop(self.pid)
        return self.returncode


class Worker:
    """One warm worker process and the thread that reads its answers."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], modules: Sequence[str]) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="repro-warm-"))
        self.process = subprocess.Popen(  # noqa: S603 - our own worker, under the rebuild's interpreter
            [*argv, str(ZYGOTE), json.dumps(list(modules))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env={**env, "HOME": str(self.home)}, cwd=self.home, start_new_session=True)
        self.lock, self.changed = threading.Lock(), threading.Condition()
        self.pids: dict[int, int] = {}
        self.exits: dict[int, int] = {}
        self.failed: list[str] | None = None
        self.modules = list(modules)
        self.alive, self.next_id = True, 0
        threading.Thread(target=self._read, name="repro-warm-worker", daemon=True).start()

    def fork(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path, timeout_s: float) -> WarmProcess:
        """Start one rebuild; ``InfrastructureError`` when the worker is gone or has not started it in ``timeout_s``
        (its imports hang: it is ended)."""
        with self.lock:
            self.next_id += 1
            request = self.next_id
            line = json.dumps({"id": request, "argv": list(argv), "cwd": str(cwd), "env": dict(env), "log": str(log)})
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(line.encode() + b"\n")
                self.process.stdin.flush()
            except (OSError, ValueError) as exc:
                self.alive = False
                raise InfrastructureError(f"the warm rebuild worker is gone ({exc})") from None
        with self.changed:
            self.changed.wait_for(lambda: request in self.pids or not self.alive, timeout_s)
            if request not in self.pids:
                self.process.kill()
                raise InfrastructureError(
                    f"the warm rebuild worker did not start the rebuild (its imports of {', '.join(self.modules) or 'nothing'} "
                    f"{'ended it' if not self.alive else f'took over {timeout_s:.0f} s'})",
                    hint=f"{WARM_REBUILD.name}=false starts every rebuild as a fresh interpreter")
            return WarmProcess(self, self.pids.pop(request))

    def wait_exit(self, pid: int, timeout: float | None) -> bool:
        with self.changed:
            done = self.changed.wait_for(lambda: pid in self.exits or not self.alive, timeout)
            if done and pid not in self.exits:
                raise InfrastructureError(f"the warm rebuild worker ended while rebuild process {pid} ran")
            return bool(done)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            message = json.loads(raw)
            with self.changed:
                if "ready" in message:
                    self.failed = message["failed"]
                elif "id" in message:
                    self.pids[message["id"]] = message["pid"]
                else:
                    self.exits[message["pid"]] = message["status"]
                self.changed.notify_all()
        with self.changed:
            self.alive = False
            self.changed.notify_all()
        self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)

    def retire(self) -> None:
        """End of input: the worker reports the children still running, then exits (its answers are still read)."""
        with self.lock:
            try:
                if self.process.stdin is not None:
                    self.process.stdin.close()
            except OSError:
                pass

    def close(self, timeout_s: float = 5.0) -> None:
        """Retire and wait for the worker's end (killed after ``timeout_s``: the process is exiting)."""
        self.retire()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()


class WarmPool:
    """The warm workers of one process, by key (see the module doc); at most ``MAX_WORKERS``, least recently used out."""

    def __init__(self) -> None:
        self.workers: OrderedDict[tuple, Worker] = OrderedDict()
        self.lock = threading.Lock()

    def start(self, prefix: Sequence[str], python: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
              log: Path, timeout_s: float) -> WarmProcess | None:
        """Fork ``argv`` (``[python, SCRIPT|-m MODULE, ...]``) from a warm worker; None where it must run cold."""
        if not hasattr(os, "fork") or not _pinned_hash(env) or len(argv) < 2:
            return None
        if argv[1] == "-m" and len(argv) >= 3:
            modules: list[str] = []
        elif argv[1].startswith("-") or not argv[1].endswith(".py") or not (cwd / argv[1]).is_file():
            return None
        else:
            modules = leading_imports(cwd / argv[1], cwd)
        import_env = {name: value for name, value in env.items() if not is_run_time_var(name)}
        key = (tuple(prefix), python, tuple(sorted(import_env.items())), tuple(modules))
        return self._worker(key, [*prefix, python], import_env, modules).fork(argv[1:], cwd, env, log, timeout_s)

    def _worker(self, key: tuple, argv: list[str], env: Mapping[str, str], modules: Sequence[str]) -> Worker:
        with self.lock:
            worker = self.workers.get(key)
            if worker is not None and worker.alive:
                self.workers.move_to_end(key)
                return worker
            self.workers[key] = worker = Worker(argv, env, modules)
            while len(self.workers) > MAX_WORKERS:
                self.workers.popitem(last=False)[1].retire()
            return worker

    def close(self) -> None:
        with self.lock:
            workers, self.workers = list(self.workers.values()), OrderedDict()
        for worker in workers:
            worker.close()


def _pinned_hash(env: Mapping[str, str]) -> bool:
    return env.get("PYTHONHASHSEED", "random") not in ("random", "")


_POOL: WarmPool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> WarmPool:
    """This process's pool, closed when the process exits."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = WarmPool()
        return _POOL


@atexit.register
def _close_at_exit() -> None:
    if _POOL is not None:
        _POOL.close()


def _forget_in_child() -> None:
    """A forked auditor (a Celery or Airflow task process) starts a pool of its own: the workers it inherited answer
    a reader thread that the fork did not copy."""
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_in_child)
