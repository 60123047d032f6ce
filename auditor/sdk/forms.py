"""The forms a script uses to track a run: ``with auditor.track(...)``, ``auditor.start``/``finish``, ``@auditor.tracked``.

``track`` is the one that does the work (the others wrap it): on entry it captures the record
(``capture``), starts the MLflow run (``outputs``) and starts watching the block; on exit it logs the
run, or in a rebuild writes its outputs. ``start`` is ``track`` without the ``with`` block: an
uncaught exception (``sys.excepthook``) or the interpreter's exit (``atexit``) ends the run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditor.lineage.record import DataRef
from auditor.lineage.redact import redacted_logger
from auditor.sdk.argparse_capture import argparse_source, script_args
from auditor.sdk.capture import capture_record, guard_seeds, start_tracing, stop_tracing, unguard_seeds
from auditor.sdk.checkpoints import make_current
from auditor.sdk.consumed import start_fingerprint, stop_fingerprint
from auditor.sdk.env import pin_torch_threads, rebuild_mode
from auditor.sdk.generated import GeneratedData
from auditor.sdk.outputs import start_session, write_outputs
from auditor.sdk.register import register_model
from auditor.sdk.run import Run
from auditor.sdk.world import start_world, stop_world

log = redacted_logger(__name__)


class track:  # noqa: N801 - used as ``auditor.track(...)``, like a function
    """Context manager capturing one training run; see ``auditor.sdk``."""

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | None = None,
        overrides: Sequence[str] = (),
        data: Mapping[str, str | DataRef | GeneratedData] | None = None,
        seed: int | None = None,
        deterministic: bool | None = None,
        experiment: str | None = None,
        *,
        repo_dir: str | Path | None = None,
        entrypoint: Sequence[str] | None = None,
        tracking_uri: str | None = None,
        env: Mapping[str, str] | None = None,
        parser: Any = None,
    ) -> None:
        self._config = argparse_source(config, parser)
        self._overrides = list(overrides)
        self._data = dict(data or {})
        self._seed = seed
        self._deterministic = deterministic
        self._experiment = experiment
        self._repo_dir = repo_dir
        self._entrypoint = list(entrypoint) if entrypoint is not None else None
        self._tracking_uri = tracking_uri
        self._env = os.environ if env is None else env
        self._started = 0.0
        self._hooks: tuple[Any, Any, Any] | None = None  # start()'s excepthook and atexit hooks (see _hook)
        self.run: Run | None = None

    def __enter__(self) -> Run:
        env = self._env
        rebuild = rebuild_mode(env)
        pin_torch_threads(env, rebuild)
        run = Run(rebuild=rebuild, env=env)
        try:
            repo_dir = capture_record(
                run, config=self._config, overrides=self._overrides, data=self._data, seed=self._seed,
                deterministic=self._deterministic, repo_dir=self._repo_dir, entrypoint=self._entrypoint,
            )
            if not rebuild:
                start_session(run, self._tracking_uri, self._experiment)
        except BaseException:
            run._cleanup()
            raise
        start_tracing(run, repo_dir)
        start_fingerprint(run)
        start_world(run)
        self.run = run
        self._started = time.monotonic()
        make_current(run)
        run._args = script_args(self._config, run, seed_given=self._seed is not None)
        guard_seeds(run)
        return run

    def __exit__(self, exc_type, exc, tb) -> None:
        run = self.run
        assert run is not None
        unguard_seeds(run)
        run.failed = exc_type is not None
        run._exit_exc = (exc_type, exc, tb) if exc_type is not None else None  # the evaluation child prints it
        elapsed = time.monotonic() - self._started
        stop_tracing(run)
        stop_fingerprint(run)
        stop_world(run)
        try:
            write_outputs(run, elapsed)
        finally:
            run.finished = True
            run._cleanup()

    def _end(self, exc_type, exc, tb) -> None:
        """End the run once, whichever comes first: ``run.finish()``, an uncaught exception, interpreter exit."""
        run = self.run
        if run is None or run.finished:
            return
        _unhook(self)
        self.__exit__(exc_type, exc, tb)


# -- the forms that do not re-indent: start()/finish() and @tracked ------------------------------
_ACTIVE: list[track] = []


def start(
    config: Any = None,
    overrides: Sequence[str] = (),
    data: Mapping[str, Any] | None = None,
    seed: int | None = None,
    deterministic: bool | None = None,
    experiment: str | None = None,
    **kwargs: Any,
) -> Run:
    """``run = auditor.start(...)`` ... ``run.finish()``: ``track`` without the ``with`` block (and its indent).

    Same arguments and guarantees as ``auditor.track``: an uncaught exception (``sys.excepthook``)
    ends the run as FAILED, so ``register_model`` refuses it; a script that exits without
    calling ``run.finish()`` has the run ended at interpreter exit (``atexit``), with a warning.
    """
    tracker = track(config, overrides, data, seed, deterministic, experiment, **kwargs)
    run = tracker.__enter__()
    run._tracker = tracker
    _hook(tracker)
    return run


def finish(run: Run) -> None:
    """``auditor.finish(run)``, the same as ``run.finish()``."""
    run.finish()


def _hook(tracker: track) -> None:
    import atexit

    previous = sys.excepthook

    def excepthook(exc_type, exc, tb) -> None:
        try:
            previous(exc_type, exc, tb)
        finally:
            try:
                tracker._end(exc_type, exc, tb)
            except Exception as failure:  # noqa: BLE001 - the script's own traceback is already printed
                log.error("repro: could not end the failed run: %s", failure)

    def at_exit() -> None:
        if tracker.run is not None and not tracker.run.finished:
            log.warning("repro: the script ended without run.finish(); ending the run now")
            tracker._end(None, None, None)

    tracker._hooks = (previous, excepthook, at_exit)
    sys.excepthook = excepthook
    atexit.register(at_exit)
    _ACTIVE.append(tracker)


def _unhook(tracker: track) -> None:
    if tracker._hooks is None:
        return
    import atexit

    previous, excepthook, at_exit = tracker._hooks
    if sys.excepthook is excepthook:
        sys.excepthook = previous
    atexit.unregister(at_exit)
    tracker._hooks = None
    if tracker in _ACTIVE:
        _ACTIVE.remove(tracker)


def tracked(
    config: Any = None,
    overrides: Sequence[str] = (),
    data: Mapping[str, Any] | None = None,
    seed: int | None = None,
    deterministic: bool | None = None,
    experiment: str | None = None,
    *,
    register: str | None = None,
    **kwargs: Any,
):
    """``@auditor.tracked(...)`` on the training function: its body runs inside ``auditor.track(...)``.

    The function gets the run as its ``run`` argument when it has a parameter of that name; the
    last run is also ``fn.last_run``. ``register="NAME"`` registers it after a successful call
    (refused, with nothing registered, when the gate blocks; a no-op in a rebuild). An exception
    ends the run as FAILED and propagates; nothing is registered.
    """
    import functools
    import inspect

    def decorate(fn):
        wants_run = "run" in inspect.signature(fn).parameters

        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> Any:
            with track(config, overrides, data, seed, deterministic, experiment, **kwargs) as run:
                wrapper.last_run = run
                if wants_run and "run" not in kw:
                    kw["run"] = run
                result = fn(*args, **kw)
            if register:
                register_model(run, register)
            return result

        wrapper.last_run = None
        return wrapper

    return decorate
