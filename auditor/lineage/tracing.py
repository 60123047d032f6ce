"""Input tracing: what a training process read that the run record does not pin.

The record pins five inputs (data snapshots, code commit+diff, config, environment, seeds). A script
can still read something else: a file outside the snapshot (``/shared/extra_features.csv``), a
git-ignored file in the project, a hyperparameter from an environment variable. A rebuild then runs
from other inputs while the record claims it ran from the same ones. ``track()`` therefore traces,
between entering and leaving its block, in training and in every rebuild:

* **files opened for reading**, seen through Python's audit hooks (``sys.addaudithook``: the
  ``open`` event raised by ``open``, ``io.open``, ``os.open``, ``io.open_code``, and
  ``sqlite3.connect``), except those under the data folders, the repository (pinned by commit and
  diff; a *git-ignored* file there is not pinned and is traced), the Python installation, the
  auditor's own folders and package, the source folders of local packages (pinned by digest in
  ``environment.local_packages``), ``/proc``, ``/sys``, ``/dev`` (but not ``/dev/shm``), the run's
  output folder, the system files in ``IGNORED_SYSTEM_PATHS`` and files the run made itself inside the
  block (written, copied or moved there, or under a folder it created: they derive from its inputs). The
  temporary folder is traced like any other: a file an earlier step left there is an input. Each is
  recorded by path (``$REPO/…`` inside the repository, ``~/…`` under HOME, redacted), size and sha256
  when first opened, never its content;
* **environment variables read** by key (``os.environ[k]``, ``.get``, ``os.getenv``, ``k in
  os.environ``; ``os.environ`` is given a tracking class for the block and its own class back
  after), except contract variables, settings, variables the environment section already captures
  and runtime/library variables that say nothing about the model (``IGNORED_VARIABLES``,
  ``IGNORED_VARIABLE_PREFIXES``). Each is recorded by name and sha256 of its value (``null``:
  unset), never the value; a secret-looking name gets the short redaction marker instead.

``auditor.lineage.traced`` (pure, re-exported here) judges what was traced:
``registration_findings`` gives the gate's warnings, by name; ``compare`` the audit's blocking
findings when training and rebuild read different things. What the tracing cannot see is said in
``traced.notes``: every folder left out above, by name, and every reader it does not see: native code
that bypasses Python's ``open`` (safetensors, pyarrow, h5py read files in C/Rust), child processes,
reads before ``track()`` is entered, network reads, and bulk reads of the environment
(``os.environ.copy()``, ``dict(os.environ)``, iterating it).

An audit hook is process-wide and cannot be removed: after ``track()`` exits it returns at its
first test. Each path is looked at once (deduplicated).
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from auditor import contract
from auditor import settings as _settings
from auditor.digests import sha256_digest, sha256_file
from auditor.lineage.record import RunRecord, TracedFile, TracedInputs, TracedVariable
from auditor.lineage.redact import is_secret_key, marker, redact_text
from auditor.lineage.traced import OWN_DISTRIBUTION, REPO_PREFIX, compare, registration_findings

__all__ = ["OWN_DISTRIBUTION", "Tracer", "compare", "paused", "paused_here", "registration_findings", "start", "untraced"]

#: variables the Python runtime, the shell or libraries read that say nothing about the model
IGNORED_VARIABLES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "USERNAME", "SHELL", "PWD", "OLDPWD", "SHLVL", "HOSTNAME", "TERM",
    "TERM_PROGRAM", "COLORTERM", "COLUMNS", "LINES", "DISPLAY", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
    "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "VIRTUAL_ENV", "EDITOR", "PAGER", "MAIL",
    "SSH_AUTH_SOCK", "SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "http_proxy", "https_proxy", "no_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "all_proxy", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # urllib.request.getproxies_environment's httpoxy guard ("REQUEST_METHOD" in os.environ): read whenever any
    # library (an HTTP client, MLflow's telemetry thread) looks up proxies, never a model input
    "REQUEST_METHOD",
    "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MPLBACKEND", "MPLCONFIGDIR",
    "KMP_DUPLICATE_LIB_OK", "KMP_AFFINITY", "KMP_BLOCKTIME", "KMP_SETTINGS", "KMP_INIT_AT_FORK",
})
#: variable prefixes ignored for the same reason (thread pools, GPU runtime, tooling, trackers, clouds)
IGNORED_VARIABLE_PREFIXES = (
    "LC_", "XDG_", "PYTHON", "CONDA_", "UV_", "PIP_", "GIT_", "SSL_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_",
    "TORCHDYNAMO_", "TRITON_", "CUDA_", "CUBLAS_", "CUDNN_", "NCCL_", "NVIDIA_", "OMP_", "MKL_", "KMP_",
    "OPENBLAS_", "NUMEXPR_", "NUMBA_", "JOBLIB_", "LOKY_", "TQDM_", "MLFLOW_", "AWS_", "BOTO_", "GOOGLE_",
    "AZURE_", "WANDB_", "COMET_", "NEPTUNE_", "HF_", "HUGGINGFACE_", "TOKENIZERS_", "TRANSFORMERS_", "KINETO_",
    "JUPYTER", "IPY", "VSCODE_", "PYDEVD", "PYTEST_", "COVERAGE_", "SQLALCHEMY_", "ALEMBIC_", "GUNICORN_",
    "DATABRICKS_", "AIRFLOW_", "MPL", "_",  # MPL: matplotlib reads MPLBACKEND, MPLCONFIGDIR, MPLSETUPCFG … on its own
)
#: system files (and folders) read on the runtime's behalf: MIME types, time zones, certificates, name service
IGNORED_SYSTEM_PATHS = (
    "/etc/mime.types", "/etc/os-release", "/usr/lib/os-release", "/etc/localtime", "/etc/timezone",
    "/usr/share/zoneinfo", "/etc/ssl", "/etc/pki", "/usr/share/ca-certificates", "/usr/lib/ssl", "/etc/hosts",
    "/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/passwd", "/etc/group",
    "/etc/ld.so.cache", "/usr/share/locale", "/usr/lib/locale", "/usr/share/mime", "/usr/lib", "/usr/lib64",
    "/lib", "/lib64", "/usr/local/cuda", "/etc/nvidia", "/etc/matplotlibrc",
)
#: folders under HOME holding caches and credentials of tools, not inputs of the model
IGNORED_HOME_PATHS = (
    ".cache/matplotlib", ".config/matplotlib", ".triton", ".nv", ".cache/torch/kernels", ".cache/pip", ".cache/uv",
    ".netrc", ".aws", ".docker", ".ssh", ".git-credentials", ".gitconfig", ".config/git", ".mlflow",
    ".databrickscfg", ".pypirc", ".python_history", ".keras/keras.json",
)
#: what tracing never sees; recorded in ``traced.notes`` of every traced record
LIMITS = (
    "reads by native code that bypasses Python's open (e.g. safetensors, pyarrow, h5py) are not traced",
    "reads in child processes (DataLoader workers, subprocesses) and before track() is entered are not traced",
    "network reads (downloads, database and object-store clients) are not traced",
    "whether a file exists, when checked without opening it (os.path.exists, os.stat, os.listdir, glob), is not traced",
    "files the run made itself inside the block (written, copied or moved there, or under a folder it created) "
    "are not traced when read back: they derive from its inputs",
)
#: audit events by which the run makes a file or folder (the path made is the last string argument named here)
_MAKING = {"os.mkdir": 0, "tempfile.mkdtemp": 0, "tempfile.mkstemp": 0, "os.rename": 1, "shutil.copyfile": 1,
           "shutil.copytree": 1}
#: under /dev, the one folder that holds ordinary files a script may read (a tmpfs): traced
SHARED_MEMORY = "/dev/shm"
#: folders in the temporary folder (or /dev/shm) that libraries keep for themselves: compiled-kernel caches and
#: worker pools, never the model's inputs (a first run fills them, a later one reads them)
IGNORED_TEMP_FOLDERS = ("torchinductor_", "triton", "pymp-", "joblib_memmapping_folder_", "loky-", "numba_cache")

F = TypeVar("F", bound=Callable[..., Any])

# -- process-wide state (one audit hook, installed once) --------------------------------------
_ACTIVE: list[Tracer] = []
_LOCAL = threading.local()
_HOOK_LOCK = threading.RLock()
_hook_installed = False
#: a switch for measurements (bench/bench_tracing.py): False makes ``start`` return an inert tracer
ENABLED = True


_PAUSED = [0]  # process-wide: the SDK's own work may run in worker threads (parallel materialisation)


def _paused() -> bool:
    return _PAUSED[0] > 0 or getattr(_LOCAL, "paused", 0) > 0


class paused:  # noqa: N801 - a context manager used like a function
    """Tracing suspended (in every thread): the SDK's own reads (data, weights, MLflow) are not the script's."""

    def __enter__(self) -> None:
        with _HOOK_LOCK:
            _PAUSED[0] += 1

    def __exit__(self, *exc: object) -> None:
        with _HOOK_LOCK:
            _PAUSED[0] -= 1


class paused_here:  # noqa: N801 - a context manager used like a function
    """Tracing suspended in this thread only: what a library reads as it is imported on the SDK's behalf (the
    compiler ``auditor.seeds`` defers), while the script's other threads go on being traced."""

    def __enter__(self) -> None:
        _LOCAL.paused = getattr(_LOCAL, "paused", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _LOCAL.paused -= 1


def untraced(method: F) -> F:
    """Decorator: run ``method`` with tracing paused (``paused``)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with paused():
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _reads_existing(flags: Any) -> bool:
    if not isinstance(flags, int):
        return True
    if flags & os.O_TRUNC or (flags & os.O_CREAT and flags & os.O_EXCL):
        return False  # truncated or newly created: nothing that existed before is read
    return flags & (os.O_WRONLY | os.O_RDWR) != os.O_WRONLY


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    if not _ACTIVE:
        return  # after track() exits: one test, then nothing
    if event == "open":
        path = args[0]
        flags = args[2] if len(args) > 2 else None
        if isinstance(path, int):
            return
        if not _reads_existing(flags):
            if isinstance(flags, int) and flags & os.O_CREAT and flags & (os.O_TRUNC | os.O_EXCL):
                _note_made(path)  # created or truncated: what it holds next is the run's own
            return
    elif event in _MAKING:
        index = _MAKING[event]
        if len(args) <= index:
            return
        if event == "os.mkdir" and _exists(args[0], args[2] if len(args) > 2 else None):
            return  # the event fires before the call: makedirs(..., exist_ok=True) on a folder that was there made nothing
        if event == "os.rename" and args:
            path = args[0]  # what is moved is read, as it was, before it becomes the run's own under its new name
            if not isinstance(path, int) and not _paused() and not getattr(_LOCAL, "busy", False):
                _LOCAL.busy = True
                try:
                    for tracer in list(_ACTIVE):
                        tracer._opened(path)
                        if os.path.isdir(path):
                            tracer._moved_folder(path)
                finally:
                    _LOCAL.busy = False
        _note_made(args[index])
        return
    elif event == "sqlite3.connect":
        path = args[0] if args else None
        if not isinstance(path, (str, bytes, os.PathLike)) or str(path) in {":memory:", ""} or str(path).startswith("file:"):
            return
    else:
        return
    if _paused() or getattr(_LOCAL, "busy", False):
        return
    _LOCAL.busy = True  # our own stat and hashing must not re-enter (this thread only)
    try:
        for tracer in list(_ACTIVE):
            tracer._opened(path)
    finally:
        _LOCAL.busy = False


def _exists(path: Any, dir_fd: Any) -> bool:
    """Whether ``path`` (relative to ``dir_fd`` when given) is there already; unknown counts as not there."""
    try:
        if dir_fd is not None:
            os.stat(path, dir_fd=dir_fd)
            return True
        return os.path.lexists(path)
    except (OSError, TypeError, ValueError, NotImplementedError):
        return False


def _note_made(path: Any) -> None:
    if _paused() or getattr(_LOCAL, "busy", False):
        return
    for tracer in list(_ACTIVE):
        tracer._made(path)


class _TrackingEnviron(os._Environ):  # type: ignore[name-defined, misc]
    """``os.environ``'s class while a tracer is active: keyed reads are noted, bulk reads are not."""

    def __getitem__(self, key: str) -> str:
        try:
            value = super().__getitem__(key)
        except KeyError:
            if _ACTIVE and not _paused():
                for tracer in list(_ACTIVE):
                    tracer._env_read(key, None)
            raise
        if _ACTIVE and not _paused():
            bulk = getattr(_LOCAL, "bulk", None)
            if bulk and key in bulk:
                bulk.discard(key)  # dict(os.environ): keys() then each value
            else:
                for tracer in list(_ACTIVE):
                    tracer._env_read(key, value)
        return value

    def _bulk(self) -> None:
        if _ACTIVE:
            for tracer in list(_ACTIVE):
                tracer.bulk_env_reads += 1

    def keys(self):  # type: ignore[override]
        self._bulk()
        names = [self.decodekey(k) for k in self._data]
        _LOCAL.bulk = set(names)
        return names

    def items(self):  # type: ignore[override]
        self._bulk()
        with paused():
            return dict(super().items()).items()

    def values(self):  # type: ignore[override]
        self._bulk()
        with paused():
            return list(super().values())

    def copy(self) -> dict[str, str]:
        self._bulk()
        with paused():
            return dict(super().items())


def _variable_ignored(name: str, captured: frozenset[str]) -> bool:
    return name in captured or name in IGNORED_VARIABLES or name.startswith(IGNORED_VARIABLE_PREFIXES)


def _captured_variables() -> frozenset[str]:
    """Contract variables, settings and what ``environment.variables`` captures: pinned elsewhere."""
    from auditor.lineage.gather.host import ENV_ALLOWLIST

    names = {value for name, value in vars(contract).items() if name.startswith("ENV_") and isinstance(value, str)}
    names |= {setting.name for setting in _settings.SETTINGS}
    names |= set(ENV_ALLOWLIST) | set(contract.THREAD_VARS)
    return frozenset(names)


def _norm(path: str) -> str:
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _source_of_pyc(path: str) -> str:
    """``pkg/__pycache__/mod.cpython-311.pyc`` -> ``pkg/mod.py`` when that source exists (what was compiled)."""
    head, name = os.path.split(path)
    if os.path.basename(head) == "__pycache__" and name.endswith(".pyc"):
        source = os.path.join(os.path.dirname(head), name.split(".", 1)[0] + ".py")
        if os.path.exists(source):
            return source
    return path


def _import_machinery(path: str) -> bool:
    """A path the import system probes, not one the script reads: an editable install's finder puts
    ``__editable__.NAME-VERSION.finder.__path_hook__`` on ``sys.path``, which Python then looks up in the working
    directory; so the auditor's own editable install (or any other) is never read as an input. Only while no such
    file exists: a real file named so is read like any other (a side input cannot hide behind the name)."""
    name = os.path.basename(path)
    return name.startswith("__editable__.") and name.endswith(".__path_hook__") and not os.path.lexists(path)


def _python_roots() -> list[str]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots |= {p for p in sysconfig.get_paths().values() if p}
    try:
        import site

        roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    except Exception:  # noqa: BLE001 - site is optional in embedded interpreters
        pass
    roots.add(str(Path(__file__).resolve().parents[1]))  # the auditor package itself
    return sorted(r for r in roots if r)


def _digest_file(path: str) -> TracedFile:
    try:
        size = os.path.getsize(path)
        return TracedFile(path="", size=size, sha256=sha256_file(path))
    except (FileNotFoundError, NotADirectoryError):
        return TracedFile(path="")
    except IsADirectoryError:
        return TracedFile(path="", error="a directory")
    except OSError as exc:
        return TracedFile(path="", error=exc.strerror or type(exc).__name__)


class Tracer:
    """One ``track()`` block's tracing; ``start`` it, then ``stop`` for the record's ``traced`` section."""

    def __init__(self, *, repo_top: Path | None, exclude: Iterable[Path | str] = (), home: str | None = None) -> None:
        self.repo_top = os.path.normpath(str(repo_top.absolute())) if repo_top is not None else None
        roots = [os.path.normpath(os.path.abspath(str(p))) for p in exclude if p]
        self._own = sorted(set(roots))  # excluded inside the repository too
        self._python = _python_roots()
        self._temp = os.path.normpath(tempfile.gettempdir())
        outside = [*self._python, "/proc", "/sys"]  # /dev is left out below, all but /dev/shm
        self._roots = sorted({*self._own, *(os.path.normpath(r) for r in outside)})
        self._roots_real = sorted({os.path.realpath(r) for r in self._roots})
        self._home = os.path.normpath(home) if home else None
        self._captured = _captured_variables()
        self._seen: set[str] = set()
        self._files: dict[str, TracedFile] = {}
        self._repo_reads: dict[str, str] = {}  # relative path in the repository -> absolute path
        self._made_paths: set[str] = set()  # files and folders the run made inside the block (not inputs when read)
        self._env: dict[str, str | None] = {}
        self.bulk_env_reads = 0
        self.forked = False
        self.active = False
        self._result: TracedInputs | None = None
        # Threads already running when the block is entered belong to libraries started before it (MLflow's
        # telemetry, a logging queue): what they read is not the script's input, and a rebuild that never
        # started them would read differently. The entering thread, and every thread started inside, count.
        self._foreign: frozenset[threading.Thread] = frozenset()  # Thread objects: an ident is reused once a thread ends
        self.foreign_reads = 0  # reads left out because a thread started before the block made them (see stop)
        self._moved: list[str] = []  # input folders the run moved: what it reads under their new name is not traced

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> Tracer:
        global _hook_installed
        if not ENABLED:
            return self
        with _HOOK_LOCK:
            if not _hook_installed:
                sys.addaudithook(_audit_hook)
                os.register_at_fork(after_in_child=_ACTIVE.clear, after_in_parent=_note_fork)
                _hook_installed = True
            if type(os.environ) is os._Environ:  # type: ignore[attr-defined]
                os.environ.__class__ = _TrackingEnviron
            _ACTIVE.append(self)
        here = threading.current_thread()
        self._foreign = frozenset(t for t in threading.enumerate() if t is not here)
        self.active = True
        return self

    def stop(self) -> TracedInputs:
        """Stop tracing; the ``traced`` section (in-repository reads are kept only when git ignores them)."""
        with _HOOK_LOCK:
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            if not _ACTIVE and type(os.environ) is _TrackingEnviron:
                os.environ.__class__ = os._Environ  # type: ignore[attr-defined]
            _LOCAL.bulk = None
        if self._result is not None:
            return self._result
        if not self.active:
            return TracedInputs(notes=["tracing was switched off"])
        self.active = False
        with paused():
            for rel, absolute in self._ignored_in_repo():
                entry = _digest_file(absolute)
                self._files[REPO_PREFIX + rel] = entry.model_copy(update={"path": REPO_PREFIX + rel})
        notes = [*self._untraced_folders(), *LIMITS]
        if self.bulk_env_reads:
            notes.append(f"the environment was read in bulk {self.bulk_env_reads} time(s) (copy, items, dict(os.environ)): values read that way are not traced")
        if self.forked:
            notes.append("the process forked while traced: reads in the child processes are not traced")
        for folder in self._moved[:10]:
            notes.append(f"folder {folder} was moved by the run: files read from it under its new name are not traced")
        if self.foreign_reads:
            notes.append(f"{self.foreign_reads} read(s) by threads already running when track() was entered were not traced "
                         "(a library's background thread, or a thread the script started before track())")
        files = [self._files[p] for p in sorted(self._files)]
        env = [TracedVariable(name=name, sha256=self._env[name]) for name in sorted(self._env)]
        self._result = TracedInputs(files=files, env=env, notes=notes)
        return self._result

    # -- what the hook and the environment view report -------------------------------------
    def _opened(self, raw: Any) -> None:
        if self._foreign and threading.current_thread() in self._foreign:
            self.foreign_reads += 1
            return
        try:
            path = _norm(os.fsdecode(os.fspath(raw)))
        except (TypeError, ValueError):
            return
        if path in self._seen:
            return
        self._seen.add(path)
        if _import_machinery(path):
            return
        path = _source_of_pyc(path)
        real = os.path.realpath(path)
        if self.repo_top is not None and _under(path, [self.repo_top]):
            if not _under(path, self._own) and not self._inside_made(path):  # what the run made there is its output
                self._repo_reads.setdefault(os.path.relpath(path, self.repo_top), path)
            return
        if _under(path, self._roots) or _under(real, self._roots_real) or _under(path, IGNORED_SYSTEM_PATHS):
            return
        if (_under(path, ["/dev"]) and not _under(path, [SHARED_MEMORY])) or self._inside_made(path) or self._library_temp(path):
            return
        shown = path
        if self._home and _under(path, [self._home]):
            rel = os.path.relpath(path, self._home)
            if _under(rel, IGNORED_HOME_PATHS):
                return
            shown = "~/" + rel
        shown = redact_text(shown)
        if shown in self._files:
            return
        entry = _digest_file(path)
        if entry.error == "a directory":
            return
        self._files[shown] = entry.model_copy(update={"path": shown})

    def _made(self, raw: Any) -> None:
        try:
            self._made_paths.add(_norm(os.fsdecode(os.fspath(raw))))
        except (TypeError, ValueError):
            return

    def _moved_folder(self, raw: Any) -> None:
        """An input folder the run renamed: its files then read as the run's own (the new name is a made path)."""
        if self._foreign and threading.current_thread() in self._foreign:
            return
        try:
            path = _norm(os.fsdecode(os.fspath(raw)))
        except (TypeError, ValueError):
            return
        if self._inside_made(path) or _under(path, self._roots) or (self.repo_top is not None and _under(path, [self.repo_top])):
            return
        shown = self._shown(path)
        if shown not in self._moved:
            self._moved.append(shown)

    def _library_temp(self, path: str) -> bool:
        for root in (self._temp, SHARED_MEMORY):
            if _under(path, [root]) and path != root:
                return os.path.relpath(path, root).split(os.sep, 1)[0].startswith(IGNORED_TEMP_FOLDERS)
        return False

    def _inside_made(self, path: str) -> bool:
        while True:
            if path in self._made_paths:
                return True
            parent = os.path.dirname(path)
            if parent == path:
                return False
            path = parent

    def _shown(self, path: str) -> str:
        if self._home and _under(path, [self._home]):
            path = "~/" + os.path.relpath(path, self._home)
        return redact_text(path)

    def _untraced_folders(self) -> list[str]:
        """What tracing leaves out by folder, each named: said in ``traced.notes`` (and so in the report)."""
        notes = []
        if self._own:
            notes.append("files under these folders are not traced (pinned elsewhere: the data folders, local packages "
                         "pinned by digest, the run's own output and scratch, the auditor's own folders): "
                         + ", ".join(self._shown(r) for r in self._own))
        if self.repo_top is not None:
            notes.append(f"files tracked in the repository {self._shown(self.repo_top)} are not traced (pinned by commit and "
                         "diff); git-ignored files there are")
        notes.append("not traced, as not inputs of the model: the Python installation and the auditor's package ("
                     + ", ".join(self._shown(r) for r in self._python) + f"), /proc, /sys, /dev except {SHARED_MEMORY}, "
                     "the system files " + ", ".join(IGNORED_SYSTEM_PATHS) + ", libraries' own folders in the temporary folder "
                     f"{self._shown(self._temp)} and {SHARED_MEMORY} (" + ", ".join(f + "*" for f in IGNORED_TEMP_FOLDERS)
                     + ") and, under HOME, " + ", ".join("~/" + p for p in IGNORED_HOME_PATHS))
        return notes

    def _env_read(self, name: str, value: str | None) -> None:
        if name in self._env or _variable_ignored(name, self._captured):
            return
        if self._foreign and threading.current_thread() in self._foreign:
            self.foreign_reads += 1
            return
        if value is None:
            self._env[name] = None
        elif is_secret_key(name):
            self._env[name] = marker(value)
        else:
            self._env[name] = sha256_digest(value.encode("utf-8", "surrogateescape"))

    def _ignored_in_repo(self) -> list[tuple[str, str]]:
        """The repository files read that git ignores (tracked and untracked ones are pinned by commit+diff)."""
        from auditor.lineage.own import is_own_relpath

        candidates = {rel: p for rel, p in self._repo_reads.items() if not is_own_relpath(rel) and os.path.isfile(p)}
        missing = {rel: p for rel, p in self._repo_reads.items() if not os.path.exists(p) and not is_own_relpath(rel)}
        if not candidates and not missing:
            return []
        from auditor import git

        try:
            result = git.run(
                ["check-ignore", "--stdin", "-z"], self.repo_top,
                input="\0".join(candidates).encode("utf-8", "surrogateescape"), text=False, ok=None,
            )
        except git.GitFailed:
            return sorted(candidates.items())  # no git: nothing in the tree is known to be pinned
        ignored = {p for p in bytes(result.stdout).decode("utf-8", "surrogateescape").split("\0") if p}
        if result.returncode not in (0, 1):
            ignored = set(candidates)
        # a file read that no longer exists cannot have been pinned either
        return sorted([(rel, candidates[rel]) for rel in ignored if rel in candidates] + list(missing.items()))


def _note_fork() -> None:
    for tracer in _ACTIVE:
        tracer.forked = True


def start(record: RunRecord, *, repo_dir: Path | None, env: Mapping[str, str] | None = None, exclude: Iterable[Path | str] = ()) -> Tracer:
    """Start tracing for the run captured in ``record`` (its data folders, repository and packages excluded)."""
    env = os.environ if env is None else env
    from auditor.lineage.own import own_locations

    top: Path | None = None
    if repo_dir is not None:
        top = Path(repo_dir).absolute()
        subdir = record.code.subdir if record.code else ""
        for _ in Path(subdir).parts if subdir else ():
            top = top.parent
    roots: list[Path | str] = [*exclude, *own_locations(env)]
    for ref in record.data.values():  # local data folders and snapshot stores: pinned by the data section
        if "://" not in ref.uri.replace("file://", "", 1):
            roots.append(ref.uri[len("file://") :] if ref.uri.startswith("file://") else ref.uri)
    # every folder a rebuild was handed (REPRO_DATA_<NAME>, whichever names the script asks for)
    roots += [value for name, value in env.items() if name.startswith(contract.ENV_DATA_PREFIX) and value]
    for name in (contract.ENV_OUTPUT_DIR, contract.ENV_CONFIG, contract.ENV_EVALUATE_WEIGHTS):
        if env.get(name):
            roots.append(env[name])
    if record.environment is not None:
        roots += [pkg.path for pkg in record.environment.local_packages.values() if pkg.editable and pkg.path]
    home = env.get("HOME") or os.path.expanduser("~")
    return Tracer(repo_top=top, exclude=roots, home=home).start()
