"""Running the recorded recipe once: the entry-point contract applied, the outputs read back.

``run_recipe`` builds the ``RunSpec`` from a record and a prepared workspace, hands it to a runner,
and turns what the entrypoint left in its output folder into a ``RunResult``. A crash or timeout is
``RecipeCrashed`` (with the log tail); a clean exit without readable metrics is ``InputUnrecoverable``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.contract import (
    CHECKPOINT_FILE,
    ENV_RESUME_CHECKPOINT,
    ENV_STOP_STEP,
    EVALUATION_DIR,
    EVALUATION_FILE,
    EVALUATION_LOG_FILE,
    EVALUATION_STATUS_FILE,
    METRICS_FILE,
    RECORD_FILE,
    model_file,
    rebuild_env,
)
from auditor.errors import BadInput, InputUnrecoverable, MalformedRecord, RecipeCrashed
from auditor.lineage.record import RunRecord
from auditor.settings import RUNNER

if TYPE_CHECKING:
    from auditor.rebuild.runners import Runner, RunOutcome, RunSpec
    from auditor.rebuild.workspace import Workspace
    from auditor.settings import Settings

RUNNERS = RUNNER.choices
WATCH_S = 0.05  # how often a running rebuild's folder is looked at for its model file (``_read_once_written``)


def make_runner(name: str, settings: Settings) -> Runner:
    """``process`` (a subprocess, in a reconstructed environment unless ``REPRO_REBUILD_ENV=auditor``)
    or ``docker`` (a locked-down container, image by digest)."""
    if name == "process":
        from auditor.rebuild.runners import ProcessRunner

        if settings.rebuild_env == "auditor":
            return ProcessRunner(warm=settings.warm_rebuild)
        from auditor.rebuild.venv import Reconstructor, pip_find_links

        links = [link.strip() for link in (settings.find_links or "").split(",") if link.strip()] or pip_find_links()
        return ProcessRunner(reconstructor=Reconstructor(settings.venvs, find_links=links, index_url=settings.index_url),
                             warm=settings.warm_rebuild)
    if name == "docker":
        from auditor.rebuild.runners_docker import DockerRunner

        return DockerRunner()
    raise BadInput(f"runner {name!r} is not one of {', '.join(RUNNERS)}", hint="pass --runner process or --runner docker")


@dataclass
class RunResult:
    """What one run of the recorded entrypoint left behind."""

    output_dir: Path
    metrics: dict[str, Any]
    weights: Path | None
    weights_sha256: str | None
    record: RunRecord | None  # the rebuild's own record (its environment gives the drift)
    wall_s: float
    accelerator_s: float | None
    log_tail: str
    evaluated: bool = False  # this run evaluated the weights it was given instead of training
    #: ``then_train``: what the forked evaluation of the given weights left (None: the script never asked for them)
    evaluation: dict[str, Any] | None = None
    evaluation_s: float | None = None
    evaluation_crash: str | None = None  # the last line of its log, when the evaluation failed
    checkpoint: Path | None = None  # segment replay: the end state left at REPRO_STOP_STEP
    #: the model's flavour (``auditor.flavors``; None: PyTorch weights) and the sha256 of its normalised form
    #: (what the file holds that is not the model set aside): same-seed reruns are bit-identical when these agree
    flavor: str | None = None
    canonical_sha256: str | None = None


def forked_evaluation(output_dir: Path) -> tuple[dict[str, Any] | None, float | None, str | None]:
    """(metrics, seconds, crash) of the evaluation a ``then_train`` run forked, from its folder."""
    folder = output_dir / EVALUATION_DIR
    status_path = folder / EVALUATION_STATUS_FILE
    if not status_path.exists():
        return None, None, None
    status = json.loads(status_path.read_text())
    seconds = status.get("seconds")
    log_file = folder / EVALUATION_LOG_FILE
    log = log_file.read_text(errors="replace") if log_file.exists() else ""
    if status.get("exit_code") != 0:
        return None, seconds, crash_signature(log) or f"the evaluation exited with code {status.get('exit_code')}"
    if not (folder / EVALUATION_FILE).exists():
        return None, seconds, None  # it asked for the weights but never logged an evaluation of them
    try:
        metrics = json.loads((folder / METRICS_FILE).read_text())
    except (OSError, ValueError) as exc:
        return None, seconds, f"the evaluation left no readable {METRICS_FILE}: {exc}"
    return (metrics if isinstance(metrics, dict) else None), seconds, None


def crash_signature(log_tail: str) -> str:
    """The last non-empty line of a crashed run's log, addresses masked: equal for a crash that repeats."""
    import re

    lines = [line.strip() for line in log_tail.splitlines() if line.strip()]
    return re.sub(r"0x[0-9a-fA-F]+", "0x…", lines[-1]) if lines else ""


def _home(workspace: Workspace) -> Path:
    """A HOME of the rebuild's own, so it never reads the auditor's ~/.aws, ~/.netrc or caches."""
    home = workspace.root / "home"
    home.mkdir(exist_ok=True)
    return home


def run_recipe(
    record: RunRecord,
    workspace: Workspace,
    runner: Runner,
    output_dir: Path,
    *,
    timeout_s: float,
    seed: int | None = None,
    evaluate: Path | None = None,
    then_train: bool = False,
    resume: Path | None = None, stop_step: int | None = None,
    force_deterministic: bool = False, fresh: bool = False,
) -> RunResult:
    """Run ``record``'s entrypoint once in ``workspace`` (under ``seed``, or evaluating ``evaluate``; with
    ``force_deterministic``, execution made deterministic: ``contract.rebuild_env``).

    ``then_train``: evaluate ``evaluate`` in a child the script's process forks, then train in that
    process (one interpreter for both: ``RunResult.evaluation``). ``resume``/``stop_step``: a segment
    replay, from that checkpoint (None: from the seed) to that step (``RunResult.checkpoint``). ``fresh``: a fresh
    interpreter, never a fork of a warm worker (``RunSpec.fresh``). A pickle is never handed to a rebuild to
    evaluate, whatever its name (``auditor.flavors.unsafe``: ``UnsafeArtifact``).
    """
    from auditor.flavors.unsafe import refuse_unsafe
    from auditor.judge.weights import sha256_file

    if evaluate is not None:
        refuse_unsafe(evaluate)
    output_dir.mkdir(parents=True, exist_ok=False)
    env = {**rebuild_env(record, seed=seed, evaluate=str(Path(evaluate).resolve()) if evaluate else None, then_train=then_train,
                         force_deterministic=force_deterministic),
           **_segment_env(output_dir, resume, stop_step), "HOME": str(_home(workspace))}
    spec = _run_spec(record, workspace, output_dir, env, timeout_s, fresh)
    flavor = artifact.flavor if (artifact := record.outputs.model()) is not None else None
    weights = output_dir / model_file(flavor)
    outcome = _run_reading(runner, spec, flavor, evaluate, weights)
    metrics = _read_metrics(output_dir, outcome)
    own_record = _own_record(output_dir)
    sha = sha256_file(weights) if weights.exists() else None
    evaluation, evaluation_s, evaluation_crash = forked_evaluation(output_dir) if then_train else (None, None, None)
    return RunResult(
        output_dir=output_dir,
        metrics=metrics,
        weights=weights if weights.exists() else None,
        weights_sha256=sha,
        record=own_record,
        wall_s=outcome.wall_s,
        accelerator_s=outcome.accelerator_s,
        log_tail=outcome.log_tail,
        evaluated=(output_dir / EVALUATION_FILE).exists(),
        evaluation=evaluation,
        evaluation_s=evaluation_s,
        evaluation_crash=evaluation_crash,
        checkpoint=output_dir / CHECKPOINT_FILE if (output_dir / CHECKPOINT_FILE).exists() else None,
        flavor=flavor,
        canonical_sha256=sha if flavor in (None, "torch") else _canonical(weights, flavor),
    )


def _run_reading(runner: Runner, spec: RunSpec, flavor: str | None, registered: Path | None, rebuilt: Path) -> RunOutcome:
    """``runner.run(spec)``, the models read while it runs (``_read_while_running``); a run that failed is
    ``RecipeCrashed`` (its rebuilt model's read ahead dropped)."""
    from auditor.judge.models import forget_ahead

    ended = _read_while_running(flavor, registered, rebuilt)
    try:
        outcome = runner.run(spec)
    finally:
        ended.set()
    if not outcome.ok:
        forget_ahead(rebuilt, flavor)
        raise _crashed(spec, outcome)
    return outcome


def _canonical(path: Path, flavor: str | None) -> str | None:
    """The normalised model's sha256, read here without executing code (None: no model file, or unreadable)."""
    if not path.exists():
        return None
    from auditor.errors import ReproError
    from auditor.judge.models import canonical_sha256

    try:
        return canonical_sha256(path, flavor)
    except ReproError:
        return None  # an untrusted or malformed file: the comparison names why


def _segment_env(output_dir: Path, resume: Path | None, stop_step: int | None) -> dict[str, str]:
    """A segment replay's variables; the checkpoint to resume from is copied into ``output_dir``."""
    extra: dict[str, str] = {}
    if resume is not None:  # inside the output folder, so every runner (process, docker) sees it
        import shutil

        shutil.copyfile(resume, output_dir / "resume.safetensors")
        extra[ENV_RESUME_CHECKPOINT] = "resume.safetensors"
    if stop_step is not None:
        extra[ENV_STOP_STEP] = str(int(stop_step))
    return extra


def _read_while_running(flavor: str | None, registered: Path | None, rebuilt: Path) -> threading.Event:
    """What the auditor reads after the run, read while it runs (its process mostly waits): the registered model's
    normal form where the run evaluates it (``judge.models.read_ahead``), else the flavour's reading libraries; and
    the rebuilt model's as soon as the run has written it (the run then scores both models and exits: a second or
    more for a large forest). Returns the event to set when the run has ended (the watch for ``rebuilt`` stops)."""
    from auditor.flavors import prefetch
    from auditor.judge.models import read_ahead

    if registered is not None:
        read_ahead(registered, flavor)
    else:
        prefetch(flavor)
    ended = threading.Event()
    if flavor not in (None, "torch"):  # PyTorch weights are streamed by the diff, never read ahead
        threading.Thread(target=_read_once_written, args=(rebuilt, flavor, ended), name="repro-watch-rebuilt",
                         daemon=True).start()
    return ended


def _read_once_written(path: Path, flavor: str, ended: threading.Event) -> None:
    """Read ``path`` ahead once it exists (its first version: one written again is read again after the run), unless
    the run ends first."""
    from auditor.judge.models import read_ahead

    while not ended.wait(WATCH_S):
        if path.exists():
            if not ended.is_set():  # a run that has ended meanwhile is read by its caller at once
                read_ahead(path, flavor)
            return


def _run_spec(record: RunRecord, workspace: Workspace, output_dir: Path, env: dict[str, str], timeout_s: float,
              fresh: bool) -> RunSpec:
    """What the runner runs: the recorded entrypoint in the workspace, in the recorded image and accelerator."""
    from auditor.rebuild.runners import AcceleratorRequest, ImageRef, RunSpec

    environment = record.environment
    return RunSpec(
        argv=list(record.code.entrypoint or []),
        cwd=workspace.project_dir,
        output_dir=output_dir,
        env=env,
        data=workspace.data_dirs,
        config_file=workspace.config_path,
        timeout_s=timeout_s,
        image=ImageRef.from_environment(environment) if environment else None,
        accelerator=AcceleratorRequest.from_environment(environment) if environment else None,
        log_path=output_dir.with_name(output_dir.name + ".log"),
        environment=environment,
        fresh=fresh,
    )


def _crashed(spec: RunSpec, outcome: RunOutcome) -> RecipeCrashed:
    """The error for a run that exited non-zero or timed out, carrying its log tail."""
    why = "timed out" if outcome.timed_out else f"exited with code {outcome.exit_code}"
    error = RecipeCrashed(f"the recorded entrypoint {' '.join(spec.argv)!r} {why} (the end of its log follows, and is in the report)")
    error.log_tail = outcome.log_tail
    error.timed_out = outcome.timed_out
    return error


def _read_metrics(output_dir: Path, outcome: RunOutcome) -> dict[str, Any]:
    """The metrics a clean run left; ``InputUnrecoverable`` when they are missing or not a JSON object."""
    metrics_path = output_dir / METRICS_FILE
    try:
        metrics = json.loads(metrics_path.read_text())
    except (OSError, ValueError) as exc:
        error = InputUnrecoverable(
            f"the entrypoint succeeded but left no readable {METRICS_FILE} in {output_dir}: {exc}",
            hint="see docs/reference/entry-point-contract.md",
        )
        error.log_tail = outcome.log_tail
        raise error from None
    if not isinstance(metrics, dict):
        raise InputUnrecoverable(f"{metrics_path} holds {type(metrics).__name__}, not a JSON object of metrics")
    return metrics


def _own_record(output_dir: Path) -> RunRecord | None:
    """The rebuild's own run record, when it left a readable one."""
    if (output_dir / RECORD_FILE).exists():
        try:
            return RunRecord.from_json((output_dir / RECORD_FILE).read_bytes(), source=str(output_dir))
        except MalformedRecord:
            return None
    return None
