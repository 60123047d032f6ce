"""Warm rebuilds: each rebuild forked from a worker that has already imported what the entry script imports first.

A small tabular model trains in a second or two; a fresh interpreter spends as long again importing NumPy, the SDK
and torch (which the SDK's seeding imports wherever it is installed). The process runner therefore keeps a **warm
worker** (:mod:`auditor.rebuild.zygote`, a fork server) per workspace and environment and forks each rebuild from
it: a fresh process per rebuild, set up as ``python SCRIPT ARGS`` would be (its own session, the recorded
environment variables and working directory, the log, no network where the spec says so: the worker itself starts
inside the network namespace), so the isolation, tracing and fingerprints are those of a fresh interpreter.

What the worker imports (``Preload``) is chosen so that the rebuild sees what a fresh interpreter would:

* the script's **leading imports** (the unconditional ``import`` statements before its first other statement,
  stopping at a module of the project itself or a recorded local package, whose code must not run outside the
  rebuild), each only where installed in the interpreter's own folders (``zygote._installed``);
* where those include ``auditor``, the SDK's own modules (``SDK_PRELOAD``), and for a seeded run torch
  (``SEEDING_PRELOAD``): the SDK's seeding imports it as a run begins wherever torch is installed. Neither where the
  script may set a variable before that (one it sets may be meant for torch's or NumPy's import):
  ``_may_set_variables``.

A worker whose imports read a variable that a rebuild sets otherwise (a per-run one: the worker has none) sends
that rebuild to a fresh interpreter; so does one whose script folder holds a module named as one the worker holds
(``zygote._shadowed``).

A library imported later (inside a function, after other statements) is not imported early: the SDK notes what was
imported after a run began, and a warm worker must not change that. A worker serves one key: the interpreter, the
network switch, the working directory, the preload and every environment variable but those the runner sets per
run (``contract.RUN_TIME_VARS``; HOME is in the key, read by some libraries as they are imported). A rebuild whose
``PYTHONHASHSEED`` is not pinned, or whose spec asks for it (``RunSpec.fresh``), runs in a fresh interpreter, and so
does one the worker cannot take (``Cold``); forms other than ``python SCRIPT`` and ``python -m MODULE`` (options to
the interpreter, a shell script) run in a fresh process too.
"""

from __future__ import annotations

import ast
import atexit
import functools
import json
import logging
import os
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from auditor.contract import ENV_SEED, is_run_time_var

logger = logging.getLogger(__name__)

ZYGOTE = Path(__file__).with_name("zygote.py")
#: the SDK's modules a run imports as it begins; none of them imports a library whose import the SDK notes
#: (tests/integration/test_warm_rebuild.py)
SDK_PRELOAD = ("auditor.sdk.run", "auditor.sdk.capture", "auditor.sdk.consumed", "auditor.sdk.forms", "auditor.sdk.models",
               "auditor.lineage.gather", "auditor.seeds", "auditor.flavors.predictions")
#: what the SDK's seeding imports where torch is installed, when the run has a seed (its deterministic switch leaves
#: the compiler to the script's first use of it: ``auditor.seeds.use_deterministic_algorithms``)
SEEDING_PRELOAD = ("torch",)
#: the auditor's own distribution (pyproject's name), recorded as a local package where it is installed editable: its
#: modules are the SDK's, never a project's code a module named at run time could be
OWN_DISTRIBUTION = "repro-audit"
MAX_WORKERS = 2  # warm workers kept per process (each holds its imports' memory); the least recently used goes first
START_LIMIT_S = 600.0  # the longest a worker may take to import before its rebuild starts fresh instead


@dataclass(frozen=True)
class Preload:
    """What a worker imports: the SDK's modules (as they are), then libraries (where installed, ``zygote._installed``)."""

    sdk: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return [*self.sdk, *self.libraries]


def leading_imports(script: Path, project: Path, *, seeded: bool = True, local: Collection[str] = (),
                    pythonpath: str | None = None) -> Preload:
    """The modules ``script`` imports before its first other statement (a docstring and ``__future__`` aside),
    stopping at one of the project's own or a ``local`` package's (recorded ``environment.local_packages``); with
    ``auditor`` among them, ``SDK_PRELOAD``, and ``SEEDING_PRELOAD`` when the run is ``seeded`` and the script cannot
    set a variable before its run begins (``_may_set_variables``; see the module doc)."""
    try:
        source = script.read_text(encoding="utf-8")
        with _PARSING:  # CPython 3.11's ast.parse is not thread-safe (SystemError: AST constructor recursion depth)
            tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError, SystemError):
        return Preload()
    names: list[str] = []
    own = {_normal(name) for name in local}

    def is_own(name: str) -> bool:  # a module of the project, or of a recorded local package
        return _is_local(name, project, script.parent) or _normal(name.split(".")[0]) in own

    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        found = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else None)
        if found is None or any(is_own(name) for name in found):
            break
        names += [name for name in found if name not in names]
    sdk = [name for name in names if name.split(".")[0] == "auditor"]
    others = functools.partial(_other_python, script, project, bool(own - {_normal(OWN_DISTRIBUTION)}) or bool(pythonpath))
    if sdk and not _may_set_variables(tree, is_own, others):  # what the SDK's modules import (NumPy) reads them too
        sdk += [name for name in SDK_PRELOAD if name not in sdk]
        if seeded:
            names += [name for name in SEEDING_PRELOAD if name not in names]
    return Preload(sdk=tuple(sdk), libraries=tuple(name for name in names if name not in sdk))


#: what a script may set variables through without writing ``environ`` (a name, attribute or module holding one of
#: these): ``os.putenv``/``unsetenv``, C's ``setenv`` (ctypes), python-dotenv
_SETS_VARIABLES = ("putenv", "setenv", "dotenv")
#: built-ins that run code this module does not read (a string, a module named at run time): they may set variables
_RUNS_UNREAD_CODE = frozenset({"exec", "eval", "compile", "__import__"})
#: functions (called by name or as an attribute) that import or run a module named at run time
_IMPORTS_BY_NAME = frozenset({"import_module", "run_path", "run_module"})


def _may_set_variables(tree: ast.Module, local: Callable[[str], bool], others: Callable[[], bool]) -> bool:
    """Whether the script may set an environment variable before its run begins, as far as its own text tells: any
    of ``_SETS_VARIABLES``; code it may run that is not read here (``_RUNS_UNREAD_CODE``: ``exec``, ``eval``; a
    module named at run time, ``_IMPORTS_BY_NAME``, where ``others`` says there is Python of the project's or a local
    package's to import; a module ``local`` says is the project's; ``sys.path`` touched); a string naming ``environ`` (what
    ``getattr``/``vars`` reach it through); or a name or attribute holding ``environ`` (read from the syntax tree, so
    inside f-strings too) that is not one of the reads ``_environ_reads`` counts (an alias of ``os.environ``, a
    write, a helper such as ``patch_environment`` or the environs library)."""
    if _loads_own_code(tree, local):
        return True
    names = []
    for node in ast.walk(tree):
        word = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                else node.name if isinstance(node, ast.alias)
                else node.module if isinstance(node, ast.ImportFrom) else None)  # ``from environs import Env``
        if isinstance(node, ast.Name) and word in _RUNS_UNREAD_CODE:
            return True
        if (word in _IMPORTS_BY_NAME or (isinstance(node, ast.alias) and word.split(".")[-1] in _IMPORTS_BY_NAME)) and others():
            return True
        if word is not None and any(name in word for name in _SETS_VARIABLES):
            return True
        if isinstance(node, ast.Constant) and node.value in ("environ", "environb"):  # getattr(os, "environ"), vars(os)[...]
            return True
        if word is not None and "environ" in word:
            names.append(word.split(".")[-1])
    return any(name != "environ" for name in names) or len(names) != _environ_reads(tree)


def _other_python(script: Path, project: Path, elsewhere: bool) -> bool:
    """Whether a module named at run time could be the project's own: ``elsewhere`` (a recorded local package, the
    rebuild's ``PYTHONPATH``), or any Python file (a module, a package's, a namespace package's) in or below the
    script's folder or the project's other than the script itself (a project of one script imports installed
    libraries only)."""
    if elsewhere:
        return True
    for folder in {script.parent, project}:
        for path in folder.rglob("*.py"):
            if path != script and ".git" not in path.relative_to(folder).parts:
                return True
    return False


def _loads_own_code(tree: ast.Module, local: Callable[[str], bool]) -> bool:
    """Whether the script imports a module of the project's (relative, or ``local``) anywhere, or touches ``sys.path``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or local(node.module or "")):
            return True
        if isinstance(node, ast.Import) and any(local(alias.name) for alias in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
            return True
    return False


def _environ_reads(tree: ast.Module) -> int:
    """The uses of ``environ`` that only read it: ``environ.get(...)``, ``environ[...]``, ``... in environ``, and
    ``from os import environ`` without another name."""
    reads: set[int] = set()
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            reads.add(id(node.func.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            reads.add(id(node.value))
        elif isinstance(node, ast.Compare) and all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            reads.update(id(value) for value in node.comparators)
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "posix", "nt"):
            count += sum(alias.name == "environ" and alias.asname is None for alias in node.names)
    return count + sum(id(node) in reads for node in ast.walk(tree)
                       if isinstance(node, ast.Attribute) and node.attr == "environ" or isinstance(node, ast.Name) and node.id == "environ")


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _is_local(name: str, *folders: Path) -> bool:
    top = name.split(".")[0]
    return any((folder / top).is_dir() or (folder / f"{top}.py").exists() for folder in folders)


_PARSING = threading.Lock()


class Cold(Exception):  # noqa: N818 - a reason, not a failure: the rebuild starts as a fresh interpreter instead
    """This rebuild cannot be forked from a worker (it is retiring, gone, unsafe, or could not fork)."""


class WarmProcess:
    """A forked rebuild, with the part of ``subprocess.Popen`` the runner uses: ``pid``, ``returncode``, ``wait``."""

    def __init__(self, worker: Worker, pid: int) -> None:
        self.worker, self.pid, self.returncode = worker, pid, None
        self.args = ["warm", str(pid)]

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (negative: the signal); ``subprocess.TimeoutExpired`` as ``Popen.wait`` raises it."""
        if not self.worker.wait_exit(self.pid, timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.returncode = self.worker.exits.pop(self.pid)
        return self.returncode


class Worker:
    """One warm worker process and the thread that reads its answers."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, preload: Preload) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own worker, under the rebuild's interpreter
            [*argv, str(ZYGOTE), json.dumps({"sdk": list(preload.sdk), "libraries": list(preload.libraries)})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(env), cwd=cwd,
            start_new_session=True)
        # the pipes as bare descriptors: a file object's lock, held by the reader thread at a fork of this process,
        # would stay held in the child and hang its closing (or abort its interpreter's shutdown)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.fds = (os.dup(self.process.stdin.fileno()), os.dup(self.process.stdout.fileno()))
        self.process.stdin.close()
        self.process.stdout.close()
        self.input_open = True
        self.lock, self.changed = threading.Lock(), threading.Condition()
        self.pids: dict[int, int | str] = {}
        self.exits: dict[int, int] = {}
        self.ready: dict | None = None  # {"failed": [...], "unsafe": why or None} once the imports are done
        self.preload, self.alive, self.next_id, self.leases = preload, True, 0, 0
        self.env = dict(env)  # what the imports saw: a rebuild whose value differs for one they read starts fresh
        threading.Thread(target=self._read, name="repro-warm-worker", daemon=True).start()

    def fork(self, argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path, start_limit_s: float) -> WarmProcess:
        """Start one rebuild; ``Cold`` where it must start fresh instead: the worker is retiring or gone, its imports
        made forking unsafe or took over ``start_limit_s`` (it is ended), or the fork failed."""
        with self.changed:
            if not self.changed.wait_for(lambda: self.ready is not None or not self.alive, start_limit_s):
                self.process.kill()
                raise Cold(f"its imports ({', '.join(self.preload.names())}) took over {start_limit_s:.0f} s")
            if self.ready is None or self.ready.get("unsafe"):
                raise Cold((self.ready or {}).get("unsafe") or "the worker ended as it imported")
        read_otherwise = sorted(k for k in self.ready.get("environ_read", ()) if env.get(k) != self.env.get(k))
        if read_otherwise:  # a run-time variable (a data path, the seed) read as a library imported
            raise Cold(f"its imports read {', '.join(read_otherwise)}, which this rebuild sets otherwise")
        with self.lock:
            self.next_id += 1
            request = self.next_id
            line = json.dumps({"id": request, "argv": list(argv), "cwd": str(cwd), "env": dict(env), "log": str(log)})
            data = memoryview(line.encode() + b"\n")
            try:
                if not self.input_open:
                    raise OSError("retired")
                while data:
                    data = data[os.write(self.fds[0], data):]
            except OSError as exc:  # retired by the pool meanwhile, or gone
                raise Cold(f"the worker is retiring ({exc})") from None
        with self.changed:
            self.changed.wait_for(lambda: request in self.pids or not self.alive)
            pid = self.pids.pop(request, None)
        if not isinstance(pid, int):
            raise Cold(f"the worker could not fork: {pid or 'it ended'}")
        return WarmProcess(self, pid)

    def wait_exit(self, pid: int, timeout: float | None) -> bool:
        from auditor.errors import InfrastructureError

        with self.changed:
            done = self.changed.wait_for(lambda: pid in self.exits or not self.alive, timeout)
            if done and pid not in self.exits:
                raise InfrastructureError(f"the warm rebuild worker ended while rebuild process {pid} ran")
            return bool(done)

    def _read(self) -> None:
        for raw in _lines(self.fds[1]):
            message = json.loads(raw)
            with self.changed:
                if "ready" in message:
                    self.ready = message
                elif "id" in message:
                    self.pids[message["id"]] = message.get("pid") or str(message.get("error"))
                else:
                    self.exits[message["pid"]] = message["status"]
                    _count_cpu(message.get("cpu_s") or 0.0)
                self.changed.notify_all()
        with self.changed:
            self.alive = False
            self.changed.notify_all()
        os.close(self.fds[1])
        self.process.wait()

    def retire(self) -> None:
        """End of input: the worker reports the children still running, then exits (its answers are still read)."""
        with self.lock:
            if self.input_open:
                self.input_open = False
                os.close(self.fds[0])

    def close(self, timeout_s: float = 5.0) -> None:
        """Retire and wait for the worker's end (killed after ``timeout_s``: the process is exiting)."""
        self.retire()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _lines(fd: int):
    """The lines read from ``fd`` until its end."""
    buffered = b""
    while chunk := os.read(fd, 1 << 16):
        buffered += chunk
        *lines, buffered = buffered.split(b"\n")
        yield from lines


class WarmPool:
    """The warm workers of one process, by key (see the module doc); at most ``MAX_WORKERS``, least recently used out."""

    def __init__(self) -> None:
        self.workers: OrderedDict[tuple, Worker] = OrderedDict()
        self.lock = threading.Lock()

    def start(self, prefix: Sequence[str], python: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
              log: Path, timeout_s: float, local: Collection[str] = ()) -> WarmProcess | None:
        """Fork ``argv`` (``[python, SCRIPT|-m MODULE, ...]``) from a warm worker; None where it must start fresh."""
        if not hasattr(os, "fork") or not _pinned_hash(env) or len(argv) < 2:
            return None
        if argv[1] == "-m" and len(argv) >= 3:
            preload = Preload()
        elif argv[1].startswith("-") or not argv[1].endswith(".py") or not (cwd / argv[1]).is_file():
            return None
        else:
            preload = leading_imports(cwd / argv[1], cwd, seeded=bool(env.get(ENV_SEED)), local=local,
                                      pythonpath=env.get("PYTHONPATH"))
        cwd, log = cwd.resolve(), log.resolve()  # the worker's folder is the rebuild's: a relative path would move
        import_env = {name: value for name, value in env.items() if not is_run_time_var(name)}
        key = (tuple(prefix), python, str(cwd), tuple(sorted(import_env.items())), preload)
        worker = self._worker(key, [*prefix, python], import_env, cwd, preload)
        try:
            return worker.fork(argv[1:], cwd, env, log, min(timeout_s, START_LIMIT_S))
        except Cold as why:
            logger.info("rebuild %s starts as a fresh interpreter: %s", argv[1], why)
            return None
        finally:
            with self.lock:
                worker.leases -= 1
                self._trim()

    def _worker(self, key: tuple, argv: list[str], env: Mapping[str, str], cwd: Path, preload: Preload) -> Worker:
        with self.lock:
            worker = self.workers.get(key)
            if worker is None or not worker.alive:
                self.workers[key] = worker = Worker(argv, env, cwd, preload)
            self.workers.move_to_end(key)
            worker.leases += 1
            self._trim()
            return worker

    def _trim(self) -> None:
        """Retire the least recently used workers beyond ``MAX_WORKERS`` that no caller is about to fork from."""
        idle = [key for key, worker in self.workers.items() if worker.leases == 0]
        for key in idle[: max(0, len(self.workers) - MAX_WORKERS)]:
            self.workers.pop(key).retire()

    def close(self) -> None:
        with self.lock:
            workers, self.workers = list(self.workers.values()), OrderedDict()
        for worker in workers:
            worker.close()


_CPU_S = [0.0]  # CPU seconds of every warm rebuild this process has seen end (they are the workers' children)
_CPU_LOCK = threading.Lock()


def _count_cpu(seconds: float) -> None:
    with _CPU_LOCK:
        _CPU_S[0] += seconds


def children_cpu_s() -> float:
    """CPU seconds (user + system) of the warm rebuilds that have ended: ``resource.RUSAGE_CHILDREN`` does not see
    them (their parent is the worker), so ``auditor.steps.reruns.children_cpu_s`` adds this."""
    with _CPU_LOCK:
        return _CPU_S[0]


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
    a reader thread that the fork did not copy. Its copies of their pipes are closed, so that a worker still sees its
    input end when the auditor that started it retires it."""
    global _POOL
    inherited, _POOL = _POOL, None
    for worker in inherited.workers.values() if inherited is not None else ():
        worker.input_open = False
        for fd in worker.fds:
            try:
                os.close(fd)
            except OSError:
                pass


os.register_at_fork(after_in_child=_forget_in_child)
