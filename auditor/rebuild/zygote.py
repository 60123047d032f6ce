"""The warm worker: a fork server that has imported a rebuild's libraries once and forks each rebuild from there.

Run by :mod:`auditor.rebuild.warm` as ``python zygote.py MODULES_JSON`` under the interpreter, environment and
network namespace of the rebuilds it serves; **standard library only**, because that interpreter may be a
reconstructed environment without the auditor in it. It imports the modules it is given (a failure is left for
the rebuild to meet again), freezes the garbage collector's view of them (so the pages stay shared), then reads one
request per line on fd 0 and answers on fd 1, JSON both ways:

* ``{"id": N, "argv": [...], "cwd": ..., "env": {...}, "log": PATH}`` → ``{"id": N, "pid": PID}`` at once, and
  ``{"pid": PID, "status": CODE}`` when that rebuild ends (``CODE`` negative: the signal that ended it, as
  ``subprocess`` says it).

Each rebuild is a forked child made to look like a fresh ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``):
a session of its own (the runner ends its whole process group on a timeout), stdout and stderr appended to the log,
stdin from ``/dev/null``, the working directory, ``os.environ`` replaced by the request's, ``sys.argv`` and
``sys.path[0]`` as the interpreter sets them, NumPy's legacy global generator drawn afresh from the OS (``random``
reseeds itself after a fork); at its end non-daemon threads are joined, ``atexit`` handlers run and the streams
flushed, as an interpreter's shutdown does. End of input (the auditor gone or done) ends the worker once its
children have been reported.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import sys

POLL_S = 0.05  # how often a running child's end is looked for while no request arrives


def main() -> None:
    sys.path.pop(0)  # this file's folder is no part of a rebuild's import path
    requests, answers = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # what an import prints goes nowhere, never into the answers
    failed = preload(json.loads(sys.argv[1]) if len(sys.argv) > 1 else [])
    _answer(answers, {"ready": True, "failed": failed})
    serve(requests, answers)


def preload(modules: list[str]) -> list[str]:
    """Import ``modules`` in order; the names that failed (the rebuild meets the same failure itself)."""
    import gc

    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - any failure is the rebuild's to meet, not the worker's
            failed.append(name)
    gc.collect()
    gc.freeze()  # the imported objects are never collected in a child: their pages stay shared with this process
    return failed


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
                pid = _fork(request, requests, answers)
                running.add(pid)
                _answer(answers, {"id": request["id"], "pid": pid})
        _reap(running, answers, block=False)


def _reap(running: set[int], answers: int, *, block: bool) -> None:
    while running:
        pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        if pid in running:
            running.discard(pid)
            _answer(answers, {"pid": pid, "status": os.waitstatus_to_exitcode(status)})
        if block:
            return


def _answer(answers: int, message: dict) -> None:
    os.write(answers, (json.dumps(message) + "\n").encode())


def _fork(request: dict, requests: int, answers: int) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        os.close(requests)
        os.close(answers)
        code = _become(request)
    finally:
        os._exit(code)


def _become(request: dict) -> int:
    """This process as the rebuild: set up like a fresh interpreter, run the entry point, shut down like one."""
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()  # a fresh interpreter draws the legacy global generator from the OS; a fork would share it
    return _shutdown(_run(request["argv"]))


def _run(argv: list[str]) -> int:
    import runpy

    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
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
    import types
    from importlib.machinery import SourceFileLoader

    sys.path.insert(0, os.path.dirname(path))
    with io.open_code(path) as fh:
        code = compile(fh.read(), path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __builtins__=__builtins__,
                         __loader__=SourceFileLoader("__main__", path))
    sys.modules["__main__"] = main
    exec(code, main.__dict__)  # noqa: S102 - the rebuild's own entry point, as the interpreter would run it


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _shutdown(code: int) -> int:
    import atexit
    import threading

    try:
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as the interpreter does
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
    return code


if __name__ == "__main__":
    main()
