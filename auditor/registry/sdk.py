"""The training-side SDK: ``auditor.track(...)`` and ``auditor.register_model(run, name)``.

::

    with auditor.track(config="config.yaml", overrides=sys.argv[1:], data={"train": uri_at_id}, seed=7) as run:
        model = train(run.config, run.data_path("train"), **run.dataloader_kwargs())
        run.log_metrics({"auc": 0.91})
        run.save_weights(model.state_dict())
    auditor.register_model(run, "churn")

Two modes, one script. Normally ``track`` resolves the config, seeds every
generator, captures the run record, starts (or attaches to) an MLflow run and,
on exit, logs the record and everything MLflow users expect. With
``REPRO_REBUILD=1`` (the audit re-running the recorded entrypoint) it does no
MLflow I/O: the config, data, seed and output folder come from the environment
(see the entry-point contract in the README) and ``metrics.json``,
``model.safetensors`` and ``run_record.json`` are left in ``REPRO_OUTPUT_DIR``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditor.contract import (
    CHECKPOINT_FILE,
    ENV_CONFIG,
    ENV_DATA_PREFIX,
    ENV_DETERMINISTIC,
    ENV_EVALUATE_THEN_TRAIN,
    ENV_EVALUATE_WEIGHTS,
    ENV_OUTPUT_DIR,
    ENV_RESUME_CHECKPOINT,
    ENV_SEED,
    ENV_STOP_STEP,
    ENV_TORCH_THREADS,
    EVALUATION_DIR,
    EVALUATION_FILE,
    EVALUATION_LOG_FILE,
    EVALUATION_STATUS_FILE,
    METRICS_FILE,
    RECORD_FILE,
    WEIGHTS_FILE,
    check_data_name,
    data_env_var,
    is_rebuild,
)
from auditor.errors import BadInput, LineageIncomplete
from auditor.lineage.record import Artifact, DataRef, RunRecord, SeedInfo
from auditor.lineage.redact import redacted_logger
from auditor.lineage.tracing import untraced
from auditor.tags import RECORD_ARTIFACT, weights_uri

log = redacted_logger(__name__)  # records may quote config values and URIs


def rebuild_mode(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is an audit's rebuild (``REPRO_REBUILD=1``)."""
    return is_rebuild(os.environ if env is None else env)


def _env_flag(env: Mapping[str, str], name: str) -> bool | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    if raw in {"1", "0"}:
        return raw == "1"
    raise BadInput(f"environment variable {name}={raw!r} must be 1 or 0")


def _env_int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadInput(f"environment variable {name}={raw!r} is not an integer") from None


class Run:
    """One tracked training run: the handle ``track`` yields."""

    def __init__(self, *, rebuild: bool, env: Mapping[str, str]) -> None:
        self.rebuild = rebuild
        self.record: RunRecord = RunRecord()
        self.diff: str | None = None
        self.seeds: SeedInfo | None = None
        self.run_id: str | None = None
        self.tracking_uri: str | None = None
        self.finished = False
        self.failed = False
        self._env = env
        self._session: Any = None
        self._weights: Path | None = None
        self._pyfunc: dict[str, Any] | None = None
        self._scratch = Path(tempfile.mkdtemp(prefix="repro-run-"))
        self._data_dirs: dict[str, Path] = {}
        self._output_dir: Path | None = None

    # -- what the training code reads ------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        """The resolved config (file, then ``REPRO_CFG__*``, then overrides; secrets redacted, as recorded)."""
        return self.record.config.resolved if self.record.config else {}

    @property
    def weights_to_evaluate(self) -> Path | None:
        """In an audit's artifact-recovery check, the registered weights to evaluate instead of training; else None.

        Set from ``REPRO_EVALUATE_WEIGHTS``, and only in rebuild mode: a normal run always trains.
        """
        raw = self._env.get(ENV_EVALUATE_WEIGHTS) if self.rebuild else None
        if not raw:
            return None
        path = Path(raw)
        if not path.is_file():
            raise BadInput(f"rebuild mode: {ENV_EVALUATE_WEIGHTS}={raw} is not a file")
        if not _evaluate_here(self):  # REPRO_EVALUATE_THEN_TRAIN: a forked child evaluated them; this process trains
            return None
        # The audit trusts metrics as an evaluation of these weights only when the script asked for them.
        self._evaluated = path
        return path

    @property
    def seed(self) -> int | None:
        """The seed this run trains under: the recorded one, or in a calibration rerun the audit's. Seed with this."""
        return self.seeds.seed if self.seeds is not None else None

    @property
    def args(self) -> Any:
        """The argparse namespace of ``track(config=parser | args)``; in a rebuild it holds the recorded values."""
        namespace = getattr(self, "_args", None)
        if namespace is None:
            import argparse

            return argparse.Namespace(**self.config)
        return namespace

    def restore_weights(self, model: Any) -> bool:
        """In an audit's artifact-recovery check, load the registered weights into ``model`` and return True.

        Otherwise (every normal run, every rebuild that trains) do nothing and return False, so that
        ``if not run.restore_weights(model): train(...)`` is the whole change a script needs.
        """
        path = self.weights_to_evaluate
        if path is None:
            return False
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(path)))  # safetensors: no pickle
        return True

    def finish(self) -> None:
        """End a run begun with ``auditor.start(...)``: log it (or, in a rebuild, write its outputs). Idempotent."""
        tracker = getattr(self, "_tracker", None)
        if tracker is None:
            raise BadInput("run.finish() is for runs begun with auditor.start(); a `with auditor.track(...)` block ends itself")
        tracker._end(None, None, None)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """``DataLoader(..., **run.dataloader_kwargs())``: the recorded shuffling generator and worker seeding."""
        if self.seeds is None:
            raise BadInput("this run has no seed, so there is no seeded DataLoader generator", hint="pass seed= to track()")
        from auditor.seeds import dataloader_kwargs

        kwargs = dataloader_kwargs(self.seeds)
        _handed_out(self).append(kwargs["generator"])  # its state goes into every checkpoint
        return kwargs

    @untraced  # the SDK's own reads are not the script's inputs
    def data_path(self, name: str) -> Path:
        """A local folder holding data ref ``name``, verified against its recorded snapshot id."""
        if name not in self.record.data:
            known = ", ".join(sorted(self.record.data)) or "none"
            raise BadInput(f"no data ref named {name!r} in this run (recorded: {known})", hint="pass it in data={...}")
        if name in self._data_dirs:
            return self._data_dirs[name]
        if self.rebuild:
            var = data_env_var(name)
            raw = self._env.get(var)
            if not raw or not Path(raw).is_dir():
                raise BadInput(
                    f"rebuild mode: {var} is {'unset' if not raw else f'{raw!r}, not a folder'}",
                    hint=f"the audit materialises every recorded data ref and passes its folder in {ENV_DATA_PREFIX}<NAME>",
                )
            path = Path(raw)
        else:
            path = _materialize(name, self.record.data[name], self._scratch / "data" / name)
        self._data_dirs[name] = path
        return path

    # -- what the training code writes -------------------------------------------
    @untraced  # the SDK's own reads are not the script's inputs
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Record metrics (the last value of each is the run's result) and log them to MLflow."""
        clean: dict[str, float] = {}
        for key, value in metrics.items():
            if isinstance(value, (bool, str)) or not hasattr(value, "__float__"):
                raise BadInput(f"metric {key!r} is {type(value).__name__}, not a number")
            clean[str(key)] = float(value)
        # assignment (not model_copy) so the record's validators turn NaN and inf into text
        self.record.outputs.metrics = {**self.record.outputs.metrics, **clean}
        if self._session is not None:
            from auditor.registry import tracking

            tracking.log_metrics(self._session, clean, step)

    @untraced  # the SDK's own reads are not the script's inputs
    def save_weights(
        self,
        state_dict: Mapping[str, Any],
        *,
        factory: str | None = None,
        factory_kwargs: Mapping[str, Any] | None = None,
        input_example: Any = None,
    ) -> Path:
        """Save a state dict as safetensors and record its sha256 among the outputs; returns the file.

        With ``factory`` (``"module:function"`` building the architecture, e.g. ``"train:build_model"``,
        called with ``factory_kwargs``), the run also logs an MLflow LoggedModel of the pyfunc flavour
        over these weights (``auditor/registry/pyfunc_model.py``), with a signature inferred from
        ``input_example`` when the module is passed instead of its state dict; registering the run
        then makes ``mlflow.pyfunc.load_model("models:/NAME@ALIAS")`` work.
        """
        from safetensors.torch import save_file

        module = state_dict if hasattr(state_dict, "state_dict") else None
        if module is not None:
            state_dict = state_dict.state_dict()
        if factory is not None:
            self._pyfunc = _pyfunc_spec(factory, factory_kwargs, input_example, module)
        target = (self._output_dir or self._scratch) / WEIGHTS_FILE
        seen: set[int] = set()
        tensors = {}
        for key, tensor in state_dict.items():
            tensor = tensor.detach().cpu().contiguous()
            # safetensors refuses tensors sharing memory (tied weights): give repeats their own copy
            pointer = tensor.data_ptr()
            tensors[key] = tensor.clone() if pointer in seen else tensor
            seen.add(pointer)
        partial = target.with_name(target.name + ".partial")
        save_file(tensors, str(partial), metadata={"format": "pt"})
        partial.replace(target)
        digest = hashlib.sha256()
        with open(target, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        uri = WEIGHTS_FILE if self.rebuild else weights_uri(str(self.run_id))
        artifact = Artifact(name=WEIGHTS_FILE, uri=uri, sha256=digest.hexdigest(), size=target.stat().st_size)
        others = [a for a in self.record.outputs.artifacts if a.name != WEIGHTS_FILE]
        self.record.outputs.artifacts = [*others, artifact]
        self._weights = target
        return target

    def _cleanup(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)


def _materialize(name: str, ref: DataRef, dest: Path) -> Path:
    """A local folder for data ref ``name``: a snapshot materialised and verified, or a plain local folder."""
    if ref.kind == "snapshot" and ref.version:
        from auditor.snapshots import materialize

        # Copies, not hard links into the store: a training script that writes into its
        # data folder must not be able to alter the content-addressed objects.
        return materialize(ref.version, ref.uri, dest, link=False)
    local = Path(ref.uri[len("file://") :] if ref.uri.startswith("file://") else ref.uri)
    if "://" not in ref.uri.replace("file://", "", 1) and local.is_dir():
        # Nothing to verify against: training may go on, and the gate refuses to register it.
        log.warning("data ref %r (%s@%s) is not a snapshot: used unverified", name, ref.uri, ref.version)
        return local
    raise BadInput(
        f"data ref {name!r} ({ref.uri}@{ref.version}) is neither a snapshot nor a local folder",
        hint="snapshot it with repro-audit snapshot create and pass URI@<snapshot id>",
    )


def _script_dir_and_argv() -> tuple[Path, list[str] | None]:
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is not None and script.is_file():
        # The audit runs the entrypoint from the project folder (code.subdir), so the
        # script is named relative to it, whatever folder training was started from.
        return script.resolve().parent, ["python", script.name, *sys.argv[1:]]
    return Path.cwd(), None


class track:  # noqa: N801 - used as ``auditor.track(...)``, like a function
    """Context manager capturing one training run; see the module docstring."""

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | None = None,
        overrides: Sequence[str] = (),
        data: Mapping[str, str | DataRef] | None = None,
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
        config = _argparse_source(config, parser)
        self._config = config
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
        self.run: Run | None = None

    def __enter__(self) -> Run:
        from auditor.lineage.gather import capture, resolve_config
        from auditor.seeds import seed_everything

        env = self._env
        rebuild = rebuild_mode(env)
        _pin_torch_threads(env, rebuild)
        run = Run(rebuild=rebuild, env=env)
        try:
            if rebuild:
                config, overrides = _rebuild_config(env), ()
                seed = _env_int(env, ENV_SEED)
                deterministic = _env_flag(env, ENV_DETERMINISTIC)
                run._output_dir = _output_dir(env)
            else:
                config, overrides = self._config, self._overrides
                seed, deterministic = None, None
            # The config is resolved once before capture only to learn the seed it may hold.
            resolved = resolve_config(config, overrides, env).resolved
            seed = seed if seed is not None else self._seed if self._seed is not None else resolved.get("seed")
            if deterministic is None:
                deterministic = self._deterministic if self._deterministic is not None else resolved.get("deterministic", True)
            if seed is not None:
                run.seeds = seed_everything(_as_seed(seed), bool(deterministic))
            default_dir, default_argv = _script_dir_and_argv()
            repo_dir = Path(self._repo_dir) if self._repo_dir is not None else default_dir
            captured = capture(
                repo_dir=repo_dir,
                config=config,
                overrides=overrides,
                data=_data_refs(self._data, env, rebuild),
                seeds=run.seeds,
                entrypoint=self._entrypoint or default_argv,
                env=env,
            )
            run.record, run.diff = captured.record, captured.diff
            if not rebuild:
                from auditor.registry import tracking

                with _generators_untouched():  # MLflow draws its run names from `random`: a rebuild would not
                    run._session = tracking.start(self._tracking_uri, self._experiment)
                run.run_id, run.tracking_uri = run._session.run_id, run._session.uri
        except BaseException:
            run._cleanup()
            raise
        run._tracer = _start_tracing(run, repo_dir, env)
        self.run = run
        self._started = time.monotonic()
        _after_enter(self, run)
        return run

    def __exit__(self, exc_type, exc, tb) -> None:
        run = self.run
        assert run is not None
        _before_exit(run)
        run.failed = exc_type is not None
        run._exit_exc = (exc_type, exc, tb) if exc_type is not None else None  # the evaluation child prints it
        elapsed = time.monotonic() - self._started
        _stop_tracing(run)
        try:
            if run.rebuild:
                _write_rebuild_outputs(run)
            else:
                from auditor.registry import tracking

                tracking.finish(
                    run._session, run.record, run.diff, weights=run._weights, train_seconds=elapsed, failed=run.failed,
                    pyfunc=run._pyfunc,
                )
                log.info("repro: logged run %s to %s (record %s)", run.run_id, run.tracking_uri, run.record.digest())
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
    hooks = getattr(tracker, "_hooks", None)
    if hooks is None:
        return
    import atexit

    previous, excepthook, at_exit = hooks
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


# -- argparse ------------------------------------------------------------------------------------
def _argparse_source(config: Any, parser: Any) -> Any:
    """An ``ArgumentParser`` or parsed ``Namespace`` as an ``ArgparseSource``; anything else unchanged."""
    import argparse

    if parser is not None and not isinstance(parser, argparse.ArgumentParser):
        raise BadInput(f"parser= must be an argparse.ArgumentParser, not {type(parser).__name__}")
    if not isinstance(config, (argparse.ArgumentParser, argparse.Namespace)):
        if parser is not None:
            raise BadInput("parser= goes with config=args (the namespace it parsed)", hint="track(config=args, parser=parser)")
        return config
    from auditor.lineage.gather import ArgparseSource

    if isinstance(config, argparse.ArgumentParser):
        parser = config
    elif parser is None:
        parser = _find_parser(config)
    return ArgparseSource(source=config, parser=parser, argv=tuple(sys.argv[1:]))


def _find_parser(namespace: Any) -> Any:
    """The ``ArgumentParser`` that made ``namespace``: looked for among the calling code's variables.

    Scripts keep it in a local (``parser = argparse.ArgumentParser(...)``) of the function that
    calls ``track``/``start``, or at module level. It must know every name in the namespace.
    """
    import argparse

    from auditor.lineage.gather import _all_parsers

    names = set(vars(namespace))
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("auditor"):
        frame = frame.f_back
    for scope in (frame.f_locals, frame.f_globals) if frame is not None else ():
        for value in list(scope.values()):
            if isinstance(value, argparse.ArgumentParser):
                dests = {a.dest for p in _all_parsers(value) for a in p._actions} | {
                    k for p in _all_parsers(value) for k in p._defaults
                }
                if names <= dests:
                    return value
    log.info("repro: no ArgumentParser found beside the namespace; command-line values are told by their spelling")
    return None


def _get_path(mapping: Mapping[str, Any], dotted: str) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def _from_recorded(value: Any, action: Any) -> Any:
    """A recorded (JSON) value as the script's parser would have typed it (``type=Path`` gives a Path again)."""
    kind = getattr(action, "type", None)
    if not callable(kind) or kind is str:
        return value
    try:
        if isinstance(value, str):
            return kind(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [kind(v) for v in value]
    except Exception:  # noqa: BLE001 - keep the recorded value as it is
        return value
    return value


def _apply_recorded_args(tracker: track, run: Run) -> None:
    """In a rebuild, make the script's argparse values the recorded ones (REPRO_CONFIG), and say where argv disagrees.

    The namespace passed as ``config=args`` is updated in place; the parser's defaults are set to the
    recorded values so that a later ``parser.parse_args()`` returns them too. Values the command line
    gives come from the recorded argv and must agree with the record; a disagreement is logged and the
    record wins. Redacted values are left as the script parsed them. The seed, when it came from the
    config's ``seed``, becomes the audit's (``run.seed``), so calibration's reruns reach it.
    """
    from auditor.lineage.gather import argparse_jsonable
    from auditor.lineage.redact import is_redacted

    source = tracker._config
    recorded = run.config
    namespace = source.parse()
    given = source.given()
    seed_from_config = tracker._seed is None and "seed" in recorded and run.seed is not None
    for dest in sorted(set(vars(namespace)) | {k for k in recorded if k not in vars(namespace)}):
        value = _get_path(recorded, dest)
        if value is _MISSING or is_redacted(value):
            continue
        if dest == "seed" and seed_from_config:
            value = run.seed
        current = getattr(namespace, dest, _MISSING)
        if current is not _MISSING and argparse_jsonable(current) == value:
            continue
        if dest in given and dest != "seed":
            log.warning(
                "repro: the command line gives %s=%r but the recorded config holds %r; the rebuild uses the recorded value",
                dest, argparse_jsonable(current), value,
            )
        typed = _from_recorded(value, source.action(dest))
        setattr(namespace, dest, typed)
        if source.parser is not None:
            source.parser.set_defaults(**{dest: typed})
    run._args = namespace


def _pin_torch_threads(env: Mapping[str, str], rebuild: bool) -> None:
    """In a rebuild, run torch on the recorded thread count (``REPRO_TORCH_THREADS``): it changes the weights."""
    raw = env.get(ENV_TORCH_THREADS) if rebuild else None
    if not raw:
        return
    try:
        import torch
    except ImportError:
        return
    threads = _env_int(env, ENV_TORCH_THREADS)
    if threads and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _after_enter(tracker: track, run: Run) -> None:
    from auditor.lineage.gather import ArgparseSource

    _CURRENT[:] = [run]

    if isinstance(tracker._config, ArgparseSource):
        if run.rebuild:
            _apply_recorded_args(tracker, run)
        else:
            run._args = tracker._config.parse()
    if run.seeds is not None:
        from auditor.seeds import guard_seeding

        run._seed_guard = guard_seeding(run.seeds, lambda message: log.warning("repro: %s", message))


def _before_exit(run: Run) -> None:
    guard = getattr(run, "_seed_guard", None)
    if guard is not None:
        guard.uninstall()


# -- generated data -----------------------------------------------------------------------------
class GeneratedData:
    """Data a script makes itself, to be recorded as a snapshot: see ``generated``."""

    def __init__(self, values: Any, store: str | None) -> None:
        self.values = values
        self.store = store

    def write(self, folder: Path) -> Path:
        """Write the data into ``folder`` (arrays as ``.npy``, no pickle; a file or folder copied); returns it."""
        folder.mkdir(parents=True, exist_ok=True)
        values = self.values
        if isinstance(values, (str, os.PathLike)):
            source = Path(values)
            if source.is_dir():
                shutil.copytree(source, folder, dirs_exist_ok=True)
            elif source.is_file():
                shutil.copy2(source, folder / source.name)
            else:
                raise BadInput(f"generated data {str(source)!r} is neither a file nor a folder")
            return folder
        import numpy as np

        for name, array in _arrays(values, "").items():
            np.save(folder / f"{name or 'data'}.npy", array, allow_pickle=False)
        return folder


def generated(*values: Any, store: str | None = None, **named: Any) -> GeneratedData:
    """Record data the script generates (or downloads) itself as a snapshot: ``data={"train": auditor.generated(x, y)}``.

    ``values`` are arrays or tensors (``0.npy``, ``1.npy``, …), a ``TensorDataset``, a mapping of
    names to arrays, or the path of a file or folder the script wrote; ``named`` gives the names
    (``x.npy``). At training time they are written as ``.npy`` and snapshotted into ``store``
    (default ``REPRO_SNAPSHOT_STORE``): the record names that snapshot like any other, so the gate
    and the audit treat it as snapshot data (auditable lineage: the bytes are content-addressed).
    In a rebuild the script generates its data again; the SDK compares it byte for byte with the
    recorded snapshot the audit materialised and warns, naming the files, when the generation did not
    repeat (an unseeded generator). ``run.data_path(name)`` is the snapshot folder in both modes.
    """
    if values and named:
        raise BadInput("auditor.generated takes positional values or named ones, not both")
    if named:
        return GeneratedData(dict(named), store)
    if len(values) == 1:
        return GeneratedData(values[0], store)
    if not values:
        raise BadInput("auditor.generated() was given no data", hint="e.g. auditor.generated(x=x, y=y)")
    return GeneratedData(list(values), store)


def _arrays(value: Any, prefix: str) -> dict[str, Any]:
    """Arrays and tensors found in ``value`` (nested lists, tuples, mappings, TensorDataset), by dotted name."""
    import numpy as np

    if hasattr(value, "tensors") and isinstance(value.tensors, (list, tuple)):  # torch TensorDataset
        value = list(value.tensors)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_arrays(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, (list, tuple)):
        out = {}
        for index, item in enumerate(value):
            out.update(_arrays(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            raise BadInput(f"generated data {prefix!r} is bfloat16, which .npy cannot hold", hint="pass it as float32")
        value = value.numpy()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise BadInput(f"generated data {prefix!r} holds Python objects; only numeric arrays are recorded")
        return {prefix: np.ascontiguousarray(value)}
    if isinstance(value, (int, float, bool)):
        return {prefix: np.asarray(value)}
    raise BadInput(
        f"generated data {prefix or 'value'!r} is a {type(value).__name__}, not an array, tensor or file",
        hint="pass arrays/tensors, a TensorDataset, a mapping of them, or the path of the file or folder you wrote",
    )


def _generated_ref(name: str, spec: GeneratedData, env: Mapping[str, str], rebuild: bool) -> DataRef:
    with tempfile.TemporaryDirectory(prefix="repro-generated-") as tmp:
        folder = spec.write(Path(tmp) / name)
        if rebuild:
            var = data_env_var(name)
            recorded = env.get(var)
            if not recorded or not Path(recorded).is_dir():
                raise BadInput(f"rebuild mode: {var} is unset; the audit materialises the recorded snapshot of {name!r} there")
            differ = _differing_files(folder, Path(recorded))
            if differ:
                log.warning(
                    "repro: generated data %r differs from the recorded snapshot (%s): the script's generation did not "
                    "repeat (seed it, e.g. with a constant seed before auditor.track); the rebuild trains on what it generated",
                    name, ", ".join(differ[:5]) + (" …" if len(differ) > 5 else ""),
                )
            return DataRef(kind="path", uri=recorded)
        from auditor.settings import snapshot_store_from
        from auditor.snapshots import create_snapshot

        store = spec.store or snapshot_store_from(env)
        if "://" not in store:
            store = str(Path(store).resolve())
        info = create_snapshot(folder, store)
    log.info("repro: generated data %r recorded as snapshot %s@%s", name, store, info.id)
    return DataRef(kind="snapshot", uri=store, version=info.id)


def _differing_files(ours: Path, recorded: Path) -> list[str]:
    mine = {p.relative_to(ours).as_posix(): p for p in ours.rglob("*") if p.is_file()}
    theirs = {p.relative_to(recorded).as_posix(): p for p in recorded.rglob("*") if p.is_file()}
    differ = sorted(set(mine) ^ set(theirs))
    for rel in sorted(set(mine) & set(theirs)):
        if mine[rel].read_bytes() != theirs[rel].read_bytes():
            differ.append(rel)
    return differ


def _start_tracing(run: Run, repo_dir: Path, env: Mapping[str, str]) -> Any:
    """Input tracing for the block (``auditor.lineage.tracing``); a failure to trace never stops training."""
    from auditor.lineage import tracing

    try:
        return tracing.start(run.record, repo_dir=repo_dir, env=env, exclude=[run._scratch, run._output_dir])
    except Exception as exc:  # noqa: BLE001 - the record then says it was not traced
        log.warning("repro: input tracing is off for this run: %s", exc)
        return None


def _stop_tracing(run: Run) -> None:
    tracer = getattr(run, "_tracer", None)
    if tracer is not None:
        run._tracer = None
        try:
            run.record.traced = tracer.stop()
        except Exception as exc:  # noqa: BLE001 - the record then says it was not traced
            log.warning("repro: input tracing failed for this run: %s", exc)


def _data_refs(data: Mapping[str, str | DataRef], env: Mapping[str, str], rebuild: bool) -> dict[str, DataRef]:
    from auditor.lineage.gather import parse_data_ref

    refs: dict[str, DataRef] = {}
    for name, spec in data.items():
        check_data_name(name)  # before a name holding '=' is cut into the spec below
        if isinstance(spec, DataRef):
            refs[name] = spec
        elif isinstance(spec, GeneratedData):
            refs[name] = _generated_ref(name, spec, env, rebuild)
        elif spec:
            refs[name] = parse_data_ref(f"{name}={spec}")[1]
        elif rebuild:
            # A script that reads its data ref from an environment variable sees none in a rebuild;
            # the audit's materialised folder is what this rebuild actually read.
            refs[name] = DataRef(kind="path", uri=env.get(data_env_var(name)) or "unset")
        else:
            raise BadInput(f"data ref {name!r} is empty", hint=f"pass data={{{name!r}: '<store URI>@<snapshot id>'}}")
    return refs


def _as_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise BadInput(f"seed {seed!r} is not an integer")
    try:
        return int(seed)
    except ValueError:
        raise BadInput(f"seed {seed!r} is not an integer") from None


def _rebuild_config(env: Mapping[str, str]) -> dict[str, Any]:
    raw = env.get(ENV_CONFIG)
    if not raw:
        raise BadInput(f"rebuild mode: {ENV_CONFIG} is unset", hint="the audit passes the resolved config as a JSON file")
    try:
        value = json.loads(Path(raw).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"rebuild mode: cannot read {ENV_CONFIG}={raw}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"rebuild mode: {ENV_CONFIG}={raw} is not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, dict):
        raise BadInput(f"rebuild mode: {ENV_CONFIG}={raw} holds {type(value).__name__}, not a JSON object")
    return value


def _output_dir(env: Mapping[str, str]) -> Path:
    raw = env.get(ENV_OUTPUT_DIR)
    if not raw:
        raise BadInput(f"rebuild mode: {ENV_OUTPUT_DIR} is unset", hint="the audit names the folder for metrics and weights")
    path = Path(raw)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_rebuild_outputs(run: Run) -> None:
    out = run._output_dir
    assert out is not None
    # The record is written even when training failed: its environment section explains the failure.
    (out / RECORD_FILE).write_text(run.record.to_json() + "\n", encoding="utf-8")
    if not run.failed:
        metrics = {k: v for k, v in run.record.outputs.metrics.items()}
        (out / METRICS_FILE).write_text(json.dumps(metrics, sort_keys=True, indent=2) + "\n", encoding="utf-8")
        evaluated = getattr(run, "_evaluated", None)
        if evaluated is not None:
            (out / EVALUATION_FILE).write_text(json.dumps({"weights": str(evaluated)}) + "\n", encoding="utf-8")
    _end_evaluation_child(run)


def _pyfunc_spec(factory: str, kwargs: Mapping[str, Any] | None, example: Any, module: Any) -> dict[str, Any]:
    """What ``tracking.finish`` needs to log the pyfunc LoggedModel: factory, its file, example and signature."""
    import importlib

    module_name, _, function = factory.partition(":")
    if not module_name or not function:
        raise BadInput(f"factory {factory!r} is not 'module:function'", hint='e.g. factory="train:build_model"')
    main = sys.modules.get("__main__")
    found = main if main is not None and Path(getattr(main, "__file__", "") or "").stem == module_name else None
    try:
        found = found or importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInput(f"factory {factory!r}: module {module_name!r} cannot be imported ({exc})") from None
    if not callable(getattr(found, function, None)):
        raise BadInput(f"factory {factory!r}: {module_name} has no function {function!r}")
    try:
        json.dumps(dict(kwargs or {}))
    except TypeError:
        raise BadInput(f"factory_kwargs of {factory!r} must be JSON values (they go into the MLmodel)") from None
    signature = None
    if example is not None:
        import numpy as np
        from mlflow.models import infer_signature

        inputs = np.asarray(example.detach().cpu() if hasattr(example, "detach") else example, dtype=np.float32)
        outputs = None
        if module is not None:
            import torch

            was_training = module.training
            module.eval()
            with torch.no_grad():
                outputs = module(torch.as_tensor(inputs)).detach().cpu().numpy()
            module.train(was_training)
        signature = infer_signature(inputs, outputs)
        example = inputs
    return {"factory": factory, "factory_kwargs": dict(kwargs or {}), "code": str(Path(found.__file__).resolve()),
            "input_example": example, "signature": signature}


def register_model(run: Run | str, name: str, *, tracking_uri: str | None = None) -> str | None:
    """Register ``run`` as the next version of model ``name``; returns the version number.

    Refuses with ``LineageIncomplete`` listing every blocking gate finding, in
    which case nothing is registered. ``run`` is the handle ``track`` yielded
    (after its block ended) or a run id logged by ``track``. In rebuild mode it
    does nothing and returns None: an audit never registers.
    """
    from auditor.lineage.gate import blocking, check
    from auditor.registry import tracking

    if isinstance(run, Run):
        if run.rebuild:
            return None
        if not run.finished:
            raise BadInput(
                "register_model was called inside the `with auditor.track(...)` block",
                hint="call it after the block, when metrics and weights are in the record",
            )
        if run.failed:
            raise BadInput(f"run {run.run_id} failed; a failed run is not registered")
        record, diff, run_id = run.record, run.diff, run.run_id or ""
        client, uri = run._session.client, run._session.uri
    else:
        if rebuild_mode():
            return None
        from auditor.registry.mlflow import MlflowRegistry

        uri = tracking.tracking_uri(tracking_uri)
        registry = MlflowRegistry(uri)
        record, diff, run_id = *_record_of_run(registry, run), run
        client = registry.client
    found = blocking(check(record, diff=diff))
    if found:
        raise LineageIncomplete(found, subject=f"run {run_id} (not registered as {name!r})")
    return tracking.register(client, uri, run_id, name, record)


def _record_of_run(registry: Any, run_id: str) -> tuple[RunRecord, str | None]:
    from auditor.errors import NotFound

    raw = registry._read_run_file(run_id, RECORD_ARTIFACT)
    if raw is None:
        raise NotFound(f"run {run_id} has no artifact {RECORD_ARTIFACT}", hint="log the run with auditor.track(...)")
    where = f"run {run_id} (artifact {RECORD_ARTIFACT})"
    record = RunRecord.from_json(raw, source=where)
    return record, registry._load_diff(run_id, record, where)


# -- re-evaluating the registered weights in the rebuild's own process (REPRO_EVALUATE_THEN_TRAIN) ---------
def _evaluate_here(run: Run) -> bool:
    """Whether this process evaluates the weights it was given (True) or trains (False).

    Without ``REPRO_EVALUATE_THEN_TRAIN`` it evaluates, as the contract always said. With it, the first
    call forks: the child evaluates (its outputs and log in ``REPRO_OUTPUT_DIR/evaluation``, and it ends
    when the block does), the parent waits for it, writes its exit status beside them, and trains. One
    interpreter, one set of imports and one capture serve both; the child's memory is its own.
    """
    decided = getattr(run, "_evaluate_decided", None)
    if decided is not None:
        return decided
    if run._env.get(ENV_EVALUATE_THEN_TRAIN) != "1" or not hasattr(os, "fork") or run._output_dir is None:
        run._evaluate_decided = True
        return True
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():  # CUDA cannot be used in a forked child
            run._evaluate_decided = True
            return True
    except ImportError:
        pass
    # A fork copies no threads: a child that enters an OpenMP pool its parent started (torch's first parallel
    # operation starts one, as do scikit-learn and XGBoost) waits forever for the pool's threads. Whether the
    # parent started one cannot be told reliably (a script may run torch code before `auditor.start`, which
    # hung an audit of the adapted public example), so the child always evaluates with every native pool
    # limited to one thread: its metrics agree to float resolution, inside the evaluation band.
    folder = run._output_dir / EVALUATION_DIR
    folder.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: evaluate into its own folder, then end (see _end_evaluation_child)
        log_fd = os.open(folder / EVALUATION_LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        run._output_dir = folder
        run._scratch = Path(tempfile.mkdtemp(prefix="repro-evaluate-"))
        _one_thread()
        run._evaluation_child = True
        run._evaluate_decided = True
        return True
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    status_doc = {"exit_code": code, "seconds": round(time.monotonic() - started, 3)}
    (folder / EVALUATION_STATUS_FILE).write_text(json.dumps(status_doc) + "\n", encoding="utf-8")
    run._evaluate_decided = False
    return False


def _one_thread() -> None:
    """Limit every native thread pool of this (forked) process to one thread: OpenMP, BLAS, and torch's own."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)  # omp_set_num_threads(1) and the BLAS setters of every loaded runtime
    except Exception as exc:  # noqa: BLE001 - torch's own setting below still covers torch's pool
        log.warning("repro: could not limit the native thread pools of the evaluation child (%s)", exc)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _end_evaluation_child(run: Run) -> None:
    """In the forked evaluation child, end the process once its outputs are written (the parent trains)."""
    if not getattr(run, "_evaluation_child", False):
        return
    failure = getattr(run, "_exit_exc", None)
    if failure is not None:  # os._exit below ends the child before Python would print the traceback
        import traceback

        traceback.print_exception(*failure, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    shutil.rmtree(run._scratch, ignore_errors=True)
    os._exit(1 if run.failed else 0)


# -- checkpoint chains and segment replay (auditor.segments) ----------------------------------------------
class _generators_untouched:  # noqa: N801 - a context manager used like a function
    """Keep Python's and NumPy's global generator states across code that is not the script's (MLflow's run names).

    Training logs to MLflow and a rebuild does not: whatever MLflow draws would shift the script's own draws
    at training time only, and the first segment's end state (and any draw the script makes) would differ.
    """

    def __enter__(self) -> None:
        import random

        self._python = random.getstate()
        numpy = sys.modules.get("numpy")
        self._numpy = numpy.random.get_state() if numpy is not None else None

    def __exit__(self, *exc: Any) -> None:
        import random

        random.setstate(self._python)
        if self._numpy is not None:
            sys.modules["numpy"].random.set_state(self._numpy)


_CURRENT: list[Run] = []  # the run of the innermost track()/start(), for auditor.checkpoint(...)


def _handed_out(run: Run) -> list[Any]:
    generators = getattr(run, "_generators", None)
    if generators is None:
        generators = run._generators = []
    return generators


def _current(run: Run | None) -> Run:
    if run is not None:
        return run
    if not _CURRENT:
        raise BadInput("auditor.checkpoint() was called outside auditor.track()/start()", hint="call it inside the tracked block")
    return _CURRENT[-1]


def _stop_step(run: Run) -> int | None:
    return _env_int(run._env, ENV_STOP_STEP) if run.rebuild else None


def _save_checkpoint(run: Run, step: int, model: Any, optimizer: Any, loader_state: Any, generators: Sequence[Any]) -> str | None:
    from auditor import segments

    links = getattr(run, "_chain", None)
    if links is None:
        links = run._chain = {}
    if step in links:
        return links[step]
    state = {"model": model, "optimizer": optimizer, "loader_state": loader_state, "generators": [*_handed_out(run), *generators]}
    if run.rebuild:  # a replay leaves only the end state it was asked for; a full rebuild leaves none
        stop = _stop_step(run)
        if stop is None or step != stop:
            return None
        digest = segments.save(run._output_dir / CHECKPOINT_FILE, step, **state)
        links[step] = digest
        return digest
    started = time.perf_counter()
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
        uri = f"runs:/{run.run_id}/{segments.store_path(digest)}"
        named.unlink()
    artifact = Artifact(name=segments.artifact_name(step), uri=uri, sha256=digest, size=size)
    run.record.outputs.artifacts = [*run.record.outputs.artifacts, artifact]
    links[step] = digest
    run.checkpoint_seconds = getattr(run, "checkpoint_seconds", 0.0) + time.perf_counter() - started
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
    every = getattr(current, "_every", None)
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
    return segments.restore(path, model=model, optimizer=optimizer, generators=[*_handed_out(current), *generators])


def stop_step(run: Run | None = None) -> int | None:
    """In a segment replay, the step training stops at (``REPRO_STOP_STEP``); else None."""
    return _stop_step(_current(run))
