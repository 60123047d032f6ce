"""The warm worker: a fork server that has imported a rebuild's libraries once and forks each rebuild from there.

Run by :mod:`auditor.rebuild.warm` as ``python zygote.py PRELOAD_JSON`` under the interpreter, environment, HOME,
working directory and network namespace of the rebuilds it serves; **standard library only**, because that
interpreter may be a reconstructed environment without the auditor in it. ``PRELOAD_JSON`` is
``{"sdk": [...], "libraries": [...]}``: the SDK's modules are imported as given; a library only where it is
installed under this interpreter's own folders (``sysconfig``), never a module of the project or an editable
install, whose code could read a run's variables as it is imported. A failure is left for the rebuild to meet again.
It then freezes the garbage collector's view of what it imported (the pages stay shared), says whether forking is
safe (no Python thread but this one, CUDA not initialised) and which variables its imports read (``environ_read``:
the pool starts fresh a rebuild that sets one of them otherwise), and reads one request per line on fd 0, answering
on fd 1, JSON both ways (a request whose script folder holds a module named as one this worker holds is refused:
``_shadowed``):

* ``{"id": N, "argv": [...], "cwd": ..., "env": {...}, "log": PATH}`` → ``{"id": N, "pid": PID}`` at once (or
  ``{"id": N, "error": ...}`` when the fork fails), and ``{"pid": PID, "status": CODE, "cpu_s": S}`` when that
  rebuild ends (``CODE`` negative: the signal that ended it, as ``subprocess`` says it; ``S`` its CPU seconds).

Each rebuild is a forked child made to look like a fresh ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``):
a session of its own (the runner ends its whole process group on a timeout), stdout and stderr appended to the log,
stdin from ``/dev/null``, the working directory, ``os.environ`` replaced by the request's (plus what the imports
set), ``sys.argv``, ``__main__`` and ``sys.path[0]`` as the interpreter sets them, NumPy's legacy global generator
(where the preload imported it) drawn afresh from the OS (``random`` reseeds itself after a fork); it ends through
the interpreter's own shutdown (threads joined, ``atexit`` handlers run, modules cleared so that files left open are
flushed and closed). End of input (the auditor gone or done) ends the worker once its children have been reported.
"""

from __future__ import annotations

import sys

#: what the interpreter had imported as it started, as a fresh ``python SCRIPT`` has before the script's folder
#: goes first on its path (``_shadowed``)
_AT_START = frozenset(sys.modules)

import contextlib  # noqa: E402 - after the record of what the interpreter imported by itself
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import select  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Iterator  # noqa: E402 - not typing: the worker imports no more than it must (``_shadowed``)

POLL_S = 0.05  # how often a running child's end is looked for while no request arrives


class _Become(BaseException):
    """Raised in a forked child to leave the worker's loop: the child then runs the rebuild from ``main``'s frame."""

    def __init__(self, request: dict) -> None:
        self.request = request


def main() -> None:
    if not sys.flags.safe_path:
        sys.path.pop(0)  # this file's folder is no part of a rebuild's import path
    requests, answers = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    asked = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    environ = dict(os.environ)
    with _reading_environ() as read, _printed():  # what an import prints: never into the answers
        failed = preload(asked.get("sdk", []), asked.get("libraries", []))
    for fd in (1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    _SET_BY_IMPORTS.update({k: v for k, v in os.environ.items() if environ.get(k) != v})
    _SET_BY_IMPORTS.update({k: None for k in environ if k not in os.environ})
    unsafe = _unsafe()
    _HELD.update({name.split(".")[0] for name in sys.modules} - {name.split(".")[0] for name in _AT_START})  # all imported
    _answer(answers, {"ready": True, "failed": failed, "unsafe": unsafe, "environ_read": sorted(read)})
    try:
        serve(requests, answers)
        return
    except _Become as child:
        request = child.request  # out of the handler before the script runs: its errors have no context of ours
    sys.exit(_become(request))  # the interpreter's own shutdown ends the rebuild


#: the variables the preload's imports set (None: removed): a fresh interpreter's imports set them too
_SET_BY_IMPORTS: dict[str, str | None] = {}
#: what the preload's imports printed (a banner, a warning): at the top of each rebuild's log, as a fresh one prints it
_PRINTED: list[bytes] = []
#: the top-level modules the preload imported beyond what the interpreter starts with (``_shadowed``)
_HELD: set[str] = set()


@contextlib.contextmanager
def _printed() -> Iterator[None]:
    """Standard output and error into one unnamed file while the preload imports, kept in ``_PRINTED``."""
    with tempfile.TemporaryFile() as file:
        for fd in (1, 2):
            os.dup2(file.fileno(), fd)
        yield
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        file.seek(0)
        _PRINTED.append(file.read())


@contextlib.contextmanager
def _reading_environ() -> Iterator[set[str]]:
    """The names of the variables read from ``os.environ`` (``[]``, ``get``, ``in``, ``os.getenv``) while the
    preload imports: the pool starts a rebuild fresh where it sets one of them otherwise (a run-time variable)."""
    read: set[str] = set()
    cls = type(os.environ)
    original = cls.__getitem__

    def getitem(environ: object, key: str) -> str:
        if isinstance(key, str):  # the class is os.environb's too (bytes keys: subprocess's PATH look-up)
            read.add(key)
        return original(environ, key)

    cls.__getitem__ = getitem  # type: ignore[method-assign]
    try:
        yield read
    finally:
        cls.__getitem__ = original  # type: ignore[method-assign]


def preload(sdk: list[str], libraries: list[str]) -> list[str]:
    """Import the SDK's modules and the installed ``libraries``; the names that failed or were left out."""
    import gc

    failed = []
    for name in sdk + libraries:
        try:
            if name in sdk or _installed(name):
                importlib.import_module(name)
            else:
                failed.append(name)
        except BaseException:  # noqa: BLE001 - any failure is the rebuild's to meet, not the worker's
            failed.append(name)
    gc.collect()
    gc.freeze()  # the imported objects are never collected in a child: their pages stay shared with this process
    return failed


def _installed(name: str) -> bool:
    """Whether ``name``'s top-level package lives in this interpreter's own folders (not a project's, not editable)."""
    import importlib.util
    import sysconfig

    spec = importlib.util.find_spec(name.split(".")[0])
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen"):
        return True
    where = [os.path.realpath(p) for p in (spec.submodule_search_locations or [spec.origin or ""])]
    roots = {os.path.realpath(sysconfig.get_paths()[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return bool(where) and all(any(w == r or w.startswith(r + os.sep) for r in roots) for w in where)


def _unsafe() -> str | None:
    """Why a fork of this process would not be a clean process, or None."""
    import _thread
    import threading
    import time

    time.sleep(0.01)  # a thread an import started (``_thread``'s too) has begun to run: it is seen below
    threads = max(threading.active_count(), len(sys._current_frames()), _thread._count() + 1)
    if threads > 1:
        return f"{threads - 1} Python thread(s) started by an import"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA initialised by an import"
    return None


def serve(requests: int, answers: int) -> None:
    """Fork a child per request; report each child's end; return when input ends and every child is reported."""
    buffered, running, open_input = b"", set(), True
    while open_input or running:
        if not open_input:
            _reap(running, answers, block=True)
            continue
        if select.select([requests], [], [], POLL_S if running else None)[0]:
            data = os.read(requests, 1 << 16)
            open_input = bool(data)
            buffered += data
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                request = json.loads(line)
                shadowed = _shadowed(request)
                if shadowed:
                    _answer(answers, {"id": request["id"], "error": shadowed})
                    continue
                try:
                    pid = _fork(request, requests, answers)
                except OSError as exc:  # no memory or process slot for a fork: the runner starts it fresh
                    _answer(answers, {"id": request["id"], "error": str(exc)})
                    continue
                running.add(pid)
                _answer(answers, {"id": request["id"], "pid": pid})
        _reap(running, answers, block=False)


def _shadowed(request: dict) -> str | None:
    """Why a fresh interpreter would import another module than one this worker holds: a module of the rebuild's
    first path entry (the script's folder, or the working directory for ``-m``) named as one the worker imported
    beyond what the interpreter itself starts with (``json.py`` beside the script: the worker holds the standard one)."""
    if sys.flags.safe_path:
        return None
    argv, cwd = request["argv"], request["cwd"]
    first = cwd if argv[0] == "-m" else os.path.dirname(os.path.realpath(os.path.join(cwd, argv[0])))
    try:
        entries = os.listdir(first)
    except OSError:
        return None
    for entry in entries:
        name = entry.split(".")[0]
        if name in _HELD and (entry.endswith((".py", ".so", ".pyd")) or os.path.isfile(os.path.join(first, entry, "__init__.py"))):
            return f"the project's {entry} would be imported as {name}, which the worker imported from the interpreter's own folders"
    return None


def _reap(running: set[int], answers: int, *, block: bool) -> None:
    while running:
        pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        if pid in running:
            running.discard(pid)
            cpu = round(usage.ru_utime + usage.ru_stime, 3)
            _answer(answers, {"pid": pid, "status": os.waitstatus_to_exitcode(status), "cpu_s": cpu})
        if block:
            return


def _answer(answers: int, message: dict) -> None:
    os.write(answers, (json.dumps(message) + "\n").encode())


def _fork(request: dict, requests: int, answers: int) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        os.close(requests)
        os.close(answers)
    except BaseException:  # noqa: BLE001 - a child must never return into the worker's loop
        os._exit(70)
    raise _Become(request)


def _become(request: dict) -> int:
    """This process as the rebuild: set up like a fresh interpreter, then the entry point; its exit code."""
    try:
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.write(2, b"".join(_PRINTED))
        os.chdir(request["cwd"])
        _retitle([sys.executable, *request["argv"]])
        os.environ.clear()
        os.environ.update(request["env"])
        for name, value in _SET_BY_IMPORTS.items():  # what the imports set (scikit-learn: KMP_INIT_AT_FORK, ...)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        legacy = sys.modules.get("numpy.random")  # not imported here where the preload did not (it imports secrets)
        if legacy is not None:
            legacy.seed()  # a fresh interpreter draws the legacy global generator from the OS; a fork would share it
    except BaseException:  # noqa: BLE001 - said in the log (or the worker's stderr), exit code 70
        import traceback

        traceback.print_exc()
        return 70
    return _run(request["argv"])


def _retitle(words: list[str]) -> None:
    """Show the rebuild, not the worker, to ``ps`` and to whoever walks the process tree: its command line where
    ``setproctitle`` is installed (Airflow requires it), else its name (Linux ``prctl``)."""
    try:
        import setproctitle

        setproctitle.setproctitle(" ".join(words))
    except ImportError:
        try:
            import ctypes

            ctypes.CDLL(None).prctl(15, os.path.basename(words[1])[:15].encode(), 0, 0, 0)  # PR_SET_NAME
        except (OSError, AttributeError, IndexError):
            pass


def _run(argv: list[str]) -> int:
    import types

    sys.modules["__main__"] = types.ModuleType("__main__")  # a fresh, empty __main__, as the interpreter starts with
    try:
        if argv[0] == "-m":
            import runpy

            sys.argv = [argv[1], *argv[2:]]
            if not sys.flags.safe_path:
                sys.path.insert(0, os.getcwd())
            # what `python -m` itself calls: the module runs as __main__ and stays so for atexit handlers
            runpy._run_module_as_main(argv[1], alter_argv=True)  # type: ignore[attr-defined]
        else:
            sys.argv = list(argv)  # argv[0] as given, __file__ absolute: as `python SCRIPT` sets them
            _run_script(os.path.abspath(argv[0]))
    except SystemExit as exc:
        return _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - printed and turned into exit code 1, as the interpreter does
        kind, error, trace = sys.exc_info()
        while trace is not None and trace.tb_frame.f_code.co_filename == _run.__code__.co_filename:
            trace = trace.tb_next  # the traceback starts in the script, as a fresh interpreter's does
        sys.excepthook(kind, error.with_traceback(trace), trace)  # type: ignore[arg-type, union-attr]
        return 1
    return 0


def _run_script(path: str) -> None:
    """Execute ``path`` as the ``__main__`` module (not ``runpy.run_path``, which also sets ``sys.argv[0]``)."""
    import io
    from importlib.machinery import SourceFileLoader

    if not sys.flags.safe_path:
        sys.path.insert(0, os.path.dirname(os.path.realpath(path)))  # a linked script's own folder, as CPython has it
    with io.open_code(path) as fh:
        code = compile(fh.read(), path, "exec", dont_inherit=True)
    main = sys.modules["__main__"]
    main.__dict__.update(__file__=path, __cached__=None, __builtins__=__builtins__, __annotations__={},
                         __loader__=SourceFileLoader("__main__", path))
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(sys.getrecursionlimit() + depth + 1)  # the script's frames as deep as in a fresh interpreter (exec: one)
    exec(code, main.__dict__)  # noqa: S102 - the rebuild's own entry point, as the interpreter would run it


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
