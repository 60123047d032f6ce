"""Checkpoint chains and segment replay (``auditor.segments``): ``auditor.checkpoint``, ``step_done``, ``resume``.

At training time a checkpoint is stored content-addressed in the run's artifacts and listed in the
record's chain; in a segment replay (``REPRO_RESUME_CHECKPOINT``, ``REPRO_STOP_STEP``) the script resumes
from the start checkpoint and leaves only the end state it was asked for. The module-level functions
act on the run of the innermost ``track()``/``start()`` unless given ``run=``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditor.contract import CHECKPOINT_FILE, ENV_RESUME_CHECKPOINT, ENV_STOP_STEP
from auditor.errors import BadInput
from auditor.lineage.record import Artifact
from auditor.sdk.env import env_int
from auditor.sdk.run import Run
from auditor.uris import run_artifact_uri

_CURRENT: list[Run] = []  # the run of the innermost track()/start(), for auditor.checkpoint(...)


def make_current(run: Run) -> None:
    """Make ``run`` the one ``auditor.checkpoint(...)`` and the others act on (called when a block begins)."""
    _CURRENT[:] = [run]


def _current(run: Run | None) -> Run:
    if run is not None:
        return run
    if not _CURRENT:
        raise BadInput("auditor.checkpoint() was called outside auditor.track()/start()", hint="call it inside the tracked block")
    return _CURRENT[-1]


def _stop_step(run: Run) -> int | None:
    return env_int(run._env, ENV_STOP_STEP) if run.rebuild else None


def _save_checkpoint(run: Run, step: int, model: Any, optimizer: Any, loader_state: Any, generators: Sequence[Any]) -> str | None:
    if step in run._chain:
        return run._chain[step]
    state = {"model": model, "optimizer": optimizer, "loader_state": loader_state, "generators": [*run._generators, *generators]}
    if run.rebuild:  # a replay leaves only the end state it was asked for; a full rebuild leaves none
        stop = _stop_step(run)
        if stop is None or step != stop:
            return None
        assert run._output_dir is not None  # a rebuild always has its REPRO_OUTPUT_DIR
        return _save_end_state(run, step, run._output_dir / CHECKPOINT_FILE, state)
    started = time.perf_counter()
    digest = _save_to_chain(run, step, state)
    run.checkpoint_seconds += time.perf_counter() - started
    return digest


def _save_end_state(run: Run, step: int, path: Path, state: dict[str, Any]) -> str:
    """A replay's end state, left in ``REPRO_OUTPUT_DIR`` for the audit to compare."""
    from auditor import segments

    digest = segments.save(path, step, **state)
    run._chain[step] = digest
    return digest


def _save_to_chain(run: Run, step: int, state: dict[str, Any]) -> str:
    """A training checkpoint, stored content-addressed (in the run's artifacts when it logs) and listed in the record."""
    from auditor import segments

    folder = run._scratch / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f"step-{step}.safetensors"
    digest = segments.save(staged, step, **state)
    named = staged.with_name(f"{digest}.safetensors")
    staged.replace(named)
    size = named.stat().st_size
    uri = named.as_uri()
    if run._session is not None:  # content-addressed in the run's artifact store
        run._session.client.log_artifact(run.run_id, str(named), artifact_path=segments.STORE_FOLDER)
        uri = run_artifact_uri(run.run_id, segments.store_path(digest))
        named.unlink()
    artifact = Artifact(name=segments.artifact_name(step), uri=uri, sha256=digest, size=size)
    run.record.outputs.artifacts = [*run.record.outputs.artifacts, artifact]
    run._chain[step] = digest
    return digest


def checkpoint(step: int, *, model: Any, optimizer: Any = None, loader_state: Mapping[str, Any] | None = None,
               generators: Sequence[Any] = (), run: Run | None = None) -> str | None:
    """Save a checkpoint after ``step``: weights, optimizer state, every generator's state, the loader's position.

    Safetensors only (tensors, plus JSON of the rest: never a pickle), stored content-addressed in the
    run's artifacts (``checkpoints/<sha256>.safetensors``) and listed in the record's chain as
    ``checkpoint@<step>``. Returns the sha256, or None in a rebuild that was not asked to stop here.
    ``generators`` are ``torch.Generator`` s of the script's own (the SDK's loader generator is included).
    """
    return _save_checkpoint(_current(run), int(step), model, optimizer, loader_state, generators)


def checkpoint_every(k: int, *, run: Run | None = None) -> None:
    """Make ``auditor.step_done(step, ...)`` save a checkpoint every ``k`` steps."""
    if int(k) < 1:
        raise BadInput(f"checkpoint_every({k}): k must be a positive number of steps")
    _current(run)._every = int(k)


def step_done(step: int, *, model: Any, optimizer: Any = None, loader_state: Mapping[str, Any] | None = None,
              generators: Sequence[Any] = (), run: Run | None = None) -> bool:
    """Call after every optimisation step: saves the every-k checkpoint, and says (True) when training must stop.

    In a segment replay (``REPRO_STOP_STEP``) it saves the end state at that step and returns True, so
    ``if auditor.step_done(step, model=m, optimizer=o, loader_state={...}): break`` is the whole change.
    """
    current = _current(run)
    step = int(step)
    stop = _stop_step(current)
    every = current._every
    if (every and step % every == 0) or (stop is not None and step == stop):
        _save_checkpoint(current, step, model, optimizer, loader_state, generators)
    return stop is not None and step >= stop


def resume(*, model: Any = None, optimizer: Any = None, generators: Sequence[Any] = (), run: Run | None = None) -> Any:
    """In a segment replay, restore the start checkpoint (``REPRO_RESUME_CHECKPOINT``) and return it; else None.

    Loads the weights into ``model``, the optimizer state into ``optimizer``, and every generator's
    state (Python, NumPy, torch, CUDA, the SDK's loader generator, ``generators``); the returned
    ``Restored`` holds ``step`` (go on from step + 1) and ``loader_state`` (as the script saved it).
    """
    from auditor import segments

    current = _current(run)
    raw = current._env.get(ENV_RESUME_CHECKPOINT) if current.rebuild else None
    if not raw:
        return None
    path = Path(raw)
    if not path.is_absolute() and current._output_dir is not None:
        path = current._output_dir / path
    if not path.is_file():
        raise BadInput(f"rebuild mode: {ENV_RESUME_CHECKPOINT}={raw} is not a file")
    return segments.restore(path, model=model, optimizer=optimizer, generators=[*current._generators, *generators])


def stop_step(run: Run | None = None) -> int | None:
    """In a segment replay, the step training stops at (``REPRO_STOP_STEP``); else None."""
    return _stop_step(_current(run))


def save_model(model: Any, *, eval_data: Any = None, threshold: float = 0.5, run: Run | None = None) -> Path:
    """``auditor.save_model(model)``: ``run.save_model(model, ...)`` on the run of the innermost tracked block."""
    return _current(run).save_model(model, eval_data=eval_data, threshold=threshold)
