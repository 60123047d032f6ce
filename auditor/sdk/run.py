"""``Run``: the handle ``auditor.track``/``auditor.start`` yield, and every piece of state a run holds.

The lowest module of ``auditor.sdk`` that knows ``Run``: the features (``capture``, ``checkpoints``,
``argparse_capture``, ``outputs``, ``register``, ``forms``) import it and take a ``Run``; it imports
none of them, only two helpers that know nothing of ``Run`` (``evaluation``: the fork; ``weights``:
the safetensors file and the pyfunc spec). The attributes with a leading underscore are the SDK's own
state, read and written by those modules; every one is declared in ``__init__``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from auditor.contract import ENV_DATA_PREFIX, ENV_EVALUATE_WEIGHTS, WEIGHTS_FILE, data_env_var
from auditor.errors import BadInput
from auditor.lineage.record import Artifact, DataRef, RunRecord, SeedInfo
from auditor.lineage.redact import redacted_logger
from auditor.lineage.tracing import untraced
from auditor.sdk import evaluation
from auditor.sdk.weights import load_safetensors, pyfunc_spec, write_safetensors
from auditor.tags import weights_uri

if TYPE_CHECKING:
    from auditor.lineage.tracing import Tracer
    from auditor.registry.tracking import Session
    from auditor.sdk.consumed import Fingerprint
    from auditor.sdk.world import WorldWatch
    from auditor.seeds import SeedGuard

log = redacted_logger(__name__)  # the warnings quote data URIs


class Ends(Protocol):
    """What ``run.finish()`` ends: the ``track`` of a run begun with ``auditor.start`` (``auditor.sdk.forms``)."""

    def _end(self, exc_type: Any, exc: Any, tb: Any) -> None: ...


class Run:
    """One tracked training run: the handle ``track`` yields."""

    def __init__(self, *, rebuild: bool, env: Mapping[str, str]) -> None:
        # -- what the run is: public, read by scripts and tests
        self.rebuild = rebuild
        self.record: RunRecord = RunRecord()
        self.diff: str | None = None
        self.seeds: SeedInfo | None = None
        self.run_id: str | None = None
        self.tracking_uri: str | None = None
        self.finished = False
        self.failed = False
        self.checkpoint_seconds = 0.0  # time spent saving checkpoints at training time
        # -- where it reads and writes
        self._env = env
        self._scratch = Path(tempfile.mkdtemp(prefix="repro-run-"))
        self._output_dir: Path | None = None  # a rebuild's REPRO_OUTPUT_DIR (the evaluation child's folder there)
        self._data_dirs: dict[str, Path] = {}  # data_path's folders, by data ref name
        # -- the block: set by track() (auditor.sdk.forms, auditor.sdk.capture, auditor.sdk.outputs)
        self._session: Session | None = None  # the MLflow run it logs to; None in a rebuild
        self._tracker: Ends | None = None  # set by auditor.start(): run.finish() ends it
        self._tracer: Tracer | None = None  # input tracing while the block runs
        self._seed_guard: SeedGuard | None = None  # reports the script's own reseeding while the block runs
        self._consumed: Fingerprint | None = None  # what the model consumed while the block runs (auditor.sdk.consumed)
        self._world: WorldWatch | None = None  # the process groups the run initialised (auditor.sdk.world)
        self._args: argparse.Namespace | None = None  # the script's argparse namespace (track(config=parser|args))
        self._exit_exc: tuple[Any, Any, Any] | None = None  # the block's uncaught exception: the evaluation child prints it
        # -- the outputs
        self._max_step = 0  # the highest step logged: a metric logged without one goes there, so MLflow's latest is the record's
        self._weights: Path | None = None  # the saved safetensors file
        self._pyfunc: dict[str, Any] | None = None  # the pyfunc LoggedModel to log over it (save_weights(factory=))
        # -- re-evaluating registered weights (auditor.sdk.evaluation)
        self._evaluate_decided: bool | None = None  # whether this process evaluates (True) or trains; None: undecided
        self._evaluation_child = False  # this process is the forked evaluation child
        self._evaluated: Path | None = None  # the weights the script asked for: its metrics evaluate them
        # -- checkpoint chains (auditor.sdk.checkpoints)
        self._generators: list[Any] = []  # generators handed out (dataloader_kwargs): their state goes into checkpoints
        self._chain: dict[int, str | None] = {}  # checkpoints saved, by step: their sha256
        self._every: int | None = None  # checkpoint_every(k)

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
        if not self._evaluate_here():  # REPRO_EVALUATE_THEN_TRAIN: a forked child evaluated them; this process trains
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
        if self._args is None:
            return argparse.Namespace(**self.config)
        return self._args

    def restore_weights(self, model: Any) -> bool:
        """In an audit's artifact-recovery check, load the registered weights into ``model`` and return True.

        Otherwise (every normal run, every rebuild that trains) do nothing and return False, so that
        ``if not run.restore_weights(model): train(...)`` is the whole change a script needs.
        """
        path = self.weights_to_evaluate
        if path is None:
            return False
        load_safetensors(model, path)
        return True

    def finish(self) -> None:
        """End a run begun with ``auditor.start(...)``: log it (or, in a rebuild, write its outputs). Idempotent."""
        if self._tracker is None:
            raise BadInput("run.finish() is for runs begun with auditor.start(); a `with auditor.track(...)` block ends itself")
        self._tracker._end(None, None, None)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """``DataLoader(..., **run.dataloader_kwargs())``: the recorded shuffling generator and worker seeding."""
        if self.seeds is None:
            raise BadInput("this run has no seed, so there is no seeded DataLoader generator", hint="pass seed= to track()")
        from auditor.seeds import dataloader_kwargs

        kwargs = dataloader_kwargs(self.seeds)
        self._generators.append(kwargs["generator"])  # its state goes into every checkpoint
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

    def record_split(self, name: str, how: str, *, seed: int | None = None, **details: str | int | float | bool) -> None:
        """Record how data ref ``name`` was cut (``how``: e.g. "random 80/20 by row, stratified on y") and the seed
        the cut drew from, so a rebuild's split can be checked against it: ``run.record_split("train", "random 80/20",
        seed=run.seed, test_size=0.2)``. Without it the gate warns that how the data was split is not recorded."""
        if name not in self.record.data:
            known = ", ".join(sorted(self.record.data)) or "none"
            raise BadInput(f"no data ref named {name!r} in this run (recorded: {known})", hint="pass it in data={...}")
        bad = sorted(k for k, v in details.items() if not isinstance(v, (str, int, float, bool)))
        if bad:
            raise BadInput(f"record_split: {', '.join(bad)} must be text or numbers", hint="describe the split in plain values")
        split = {"how": str(how), "seed": seed, **details}
        self.record.data = {**self.record.data, name: self.record.data[name].model_copy(update={"split": split})}

    def record_nondeterminism(self, source: str) -> None:
        """Declare a source of execution noise the recipe really has and no seed controls (a kernel that sums in
        another order on every run: ``run.record_nondeterminism("scatter_add_ on CUDA: atomic adds")``).

        Without a declaration a CPU run is expected bitwise, and same-seed reruns that differ are judged an input the
        record does not pin (the clock, an unseeded generator), never noise. With one, the expected tier is
        statistical (unless another rule makes it not reproducible: an unseeded DataLoader, say, which a declaration
        does not lift): the same-seed floor judges the weights. The audit cannot verify a declaration; every report
        shows it (README, "What each verdict means")."""
        text = str(source).strip() if isinstance(source, str) else ""
        if not text:
            raise BadInput("record_nondeterminism: source must be a non-empty text naming the kernel or operation",
                           hint='e.g. run.record_nondeterminism("index_add_ on CUDA: atomic adds")')
        if self.seeds is None:
            raise BadInput("record_nondeterminism: this run has no seeds section to record it in", hint="pass seed= to track()")
        if self.finished:  # the record is logged: changing it now would read as an edit after registration
            raise BadInput("record_nondeterminism: the run has ended, its record is logged",
                           hint="call it inside the tracked block, before it ends")
        from auditor.contract import FLAG_NONDETERMINISTIC

        declared = list(self.seeds.flags.get(FLAG_NONDETERMINISTIC) or [])
        if text not in declared:
            declared.append(text)
        self.record_flag(FLAG_NONDETERMINISTIC, declared)

    def record_flag(self, name: str, value: Any) -> None:
        """Set ``seeds.flags[name]`` in the run's seeds and its record (the SDK's own flags: ``auditor.contract``)."""
        if self.seeds is not None:
            self.seeds.flags[name] = value
        if self.record.seeds is not None and self.record.seeds is not self.seeds:
            self.record.seeds.flags[name] = value

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
        if step is None:  # MLflow shows the value at the highest step: the last one logged must be there to be shown
            step = self._max_step
        else:
            self._max_step = max(self._max_step, int(step))
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
        eval_data: Any = None,
        threshold: float = 0.5,
    ) -> Path:
        """Save a state dict as safetensors and record its sha256 among the outputs; returns the file.

        With the module itself and ``eval_data`` (the evaluation rows as the module takes them, e.g. normalised: a 2-D array, rows by features) and
        ``threshold`` (on the module's output: 0 for a logit, 0.5 for a probability), the audit compares both models'
        decisions and calibration measures how many decisions the seed flips, as for ``save_model``.

        With ``factory`` (``"module:function"`` building the architecture, e.g. ``"train:build_model"``,
        called with ``factory_kwargs``), the run also logs an MLflow LoggedModel of the pyfunc flavour
        over these weights (``auditor/registry/pyfunc_model.py``), with a signature inferred from
        ``input_example`` when the module is passed instead of its state dict; registering the run
        then makes ``mlflow.pyfunc.load_model("models:/NAME@ALIAS")`` work.
        """
        module = state_dict if hasattr(state_dict, "state_dict") else None
        if module is not None:
            state_dict = state_dict.state_dict()
        if eval_data is not None and module is None:  # before anything is written
            raise BadInput("save_weights(eval_data=...) needs the module itself, not its state dict: it scores the data",
                           hint="pass the model: run.save_weights(model, eval_data=x_test, threshold=0.0)")
        if factory is not None:
            from auditor.sdk.consumed import sdk_call

            with sdk_call(self):  # the signature's own forward pass is not data the script fed the model
                self._pyfunc = pyfunc_spec(factory, factory_kwargs, input_example, module)
        target = (self._output_dir or self._scratch) / WEIGHTS_FILE
        sha256, size = write_safetensors(state_dict, target)
        uri = WEIGHTS_FILE if self.rebuild else weights_uri(str(self.run_id))
        predictions: dict[str, Any] = {}
        if eval_data is not None and module is not None:
            from auditor.sdk.consumed import sdk_call
            from auditor.sdk.models import module_predictions

            with sdk_call(self):  # scoring is the SDK's own call, not data the script fed the model
                predictions = module_predictions(module, eval_data, threshold, target.parent,
                                                 self._env if self.rebuild else None)
        artifact = Artifact(name=WEIGHTS_FILE, uri=uri, sha256=sha256, size=size, predictions=predictions)
        others = [a for a in self.record.outputs.artifacts if a.name != WEIGHTS_FILE]
        self.record.outputs.artifacts = [*others, artifact]
        self._weights = target
        return target

    @untraced  # the SDK's own reads are not the script's inputs
    def save_model(self, model: Any, *, eval_data: Any = None, threshold: float = 0.5) -> Path:
        """Save any supported model without pickle and record it as the run's model artifact; returns the file.

        PyTorch (a module or state dict) as ``save_weights``; a scikit-learn estimator or Pipeline with skops
        (allow-listed types only); XGBoost as UBJSON plus its config; LightGBM as its text model; CatBoost as
        ``cbm`` plus its JSON dump (``auditor.flavors``). The artifact records the flavour, the sha256 of the
        normalised model, what normalising set aside, and the library's determinism knobs as resolved at fit
        time. Any other model is refused (``BadInput``) with the reason and the nearest supported route.

        ``eval_data`` (the evaluation features) and ``threshold`` (the decision threshold on the score) are
        recorded; an audit's rebuild scores that data with the registered model and its rebuild and reports
        the largest score difference and the share of decisions that flip (``auditor.flavors.predictions``).
        """
        from auditor.contract import MODEL_FILES
        from auditor.flavors import flavor_of, refuse
        from auditor.sdk.models import score_predictions, write_model

        flavor = flavor_of(model)
        if flavor is None:
            raise refuse(model)
        if flavor == "torch":
            return self.save_weights(model, eval_data=eval_data, threshold=threshold)
        saved = write_model(model, flavor, self._output_dir or self._scratch)
        uri = saved.path.name if self.rebuild else weights_uri(str(self.run_id))  # the run's model folder
        from auditor.sdk.consumed import sdk_call

        with sdk_call(self):  # scoring both models is the SDK's own call, not data the script fed the model
            predictions = score_predictions(saved, eval_data, threshold, self._env if self.rebuild else None)
        artifact = Artifact(name=saved.path.name, uri=uri, sha256=saved.sha256, size=saved.size, flavor=flavor,
                            canonical_sha256=saved.canonical_sha256, set_aside=saved.set_aside, knobs=saved.knobs,
                            predictions=predictions)
        others = [a for a in self.record.outputs.artifacts if a.name not in MODEL_FILES.values()]
        self.record.outputs.artifacts = [*others, artifact]
        self._weights = saved.path
        return saved.path

    # -- the SDK's own --------------------------------------------------------------
    def _evaluate_here(self) -> bool:
        """Whether this process evaluates the weights it was given (True) or trains (False); decided once.

        Without ``REPRO_EVALUATE_THEN_TRAIN`` it evaluates. With it, the first call forks
        (``auditor.sdk.evaluation``): the child evaluates into ``REPRO_OUTPUT_DIR/evaluation`` with a
        scratch folder of its own, and the parent, once the child ended, trains.
        """
        if self._evaluate_decided is None:
            self._evaluate_decided = self._fork_evaluation()
        return self._evaluate_decided

    def _fork_evaluation(self) -> bool:
        if self._output_dir is None or not evaluation.can_fork(self._env):
            return True
        folder = evaluation.fork(self._output_dir)
        if folder is None:  # the parent: the child evaluated; this process trains
            return False
        self._output_dir = folder
        self._scratch = Path(tempfile.mkdtemp(prefix="repro-evaluate-"))
        self._evaluation_child = True
        return True

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
