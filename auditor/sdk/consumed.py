"""A fingerprint of what the model consumed: a digest per batch of what training and evaluation fed it.

Noise between two runs of one recipe has two sources that the judge must tell apart: the inputs (rows
chosen by the clock, feature order from ``set`` iteration under a random ``PYTHONHASHSEED``, an unseeded
shuffle) and the execution (GPU reductions, a nondeterministic kernel). Only the second is execution
noise; a band built on the first would accept a model trained on other data. So every run records, per
kind of batch, a digest of each batch its model consumed (``RunRecord.consumed``), and calibration and
the audit compare them before any spread is accepted (``auditor.judge.consumed``).

What is seen, with no change to the script, while a ``track`` block runs:

- **PyTorch**: the inputs of every *outermost* module call (a module called while no other module is
  running), through torch's global forward hooks. ``train`` when the module is in training mode with
  gradients on, else ``eval``. For a loss module only its targets count (its input is the model's output,
  which execution noise moves), and so do the targets of a loss called as a function
  (``torch.nn.functional.cross_entropy(logits, y)``, looked up at call time). Tensors that require grad, and tensors an outermost module returned, are
  the model's own values, not data, and are skipped. Torch must be imported when the block begins.
- **Estimators**: ``fit``/``partial_fit``/``fit_transform``/``fit_predict`` (``fit``) and ``predict``,
  ``predict_proba``, ``decision_function``, ``transform``, ``score`` (``predict``) of scikit-learn-API
  estimators (scikit-learn, XGBoost's and LightGBM's scikit-learn classes) and CatBoost, the outermost
  call only (a Pipeline's own steps are inside it).
- **Native boosting APIs**: ``xgboost.train``/``cv`` and ``lightgbm.train``/``cv`` (``fit``: a ``DMatrix``'s data,
  labels, weights and margins read back; a LightGBM ``Dataset``'s raw data and labels), and their Boosters'
  ``predict``/``inplace_predict``/``update``/``refit``. Looked up at call time (``xgb.train``), as the losses are.

Calls count on the thread that entered the block; a call on another thread while that thread is not itself inside
a model or estimator call (a forest's trees and DataParallel's replicas are) is not recorded, and a note says so.

A batch's digest is one sha256 over the type, dtype, shape and bytes of every array it holds (tensors,
NumPy arrays, pandas frames and series by column, SciPy sparse matrices, Arrow tables and arrays by column;
lists, tuples and mappings recursively, a mapping in insertion order; numbers, strings, paths and dates by
value; any other object by its fields (dataclass fields, ``__slots__``, ``vars``) to a depth of
:data:`MAX_OBJECT_DEPTH`, so a ``Batch(x, y)`` is its tensors; code and models (a callback, a metric function,
a module, an estimator) by their type name only, so an address never makes two runs differ). One pass at sha256
speed (about 2 GB/s on CPU, FACTS.md) per batch; a CUDA tensor is copied to the host first. What is kept is
bounded: a short digest for each of the first :data:`LEAVES` batches, then one per block of :data:`BLOCK`
batches (at most :data:`MAX_BLOCKS`), and the digest of the whole stream.

Not seen, and said in ``ConsumedData.notes`` whenever it happens (the judge then never calls same-seed spread
execution noise: ``auditor.judge.consumed.unattributed``): an object whose state is kept in native code or
nested too deep (hashed by its type only), an iterator (its items cannot be read without consuming them), an
input tensor the script made to require grad, a call on another thread, torch, scikit-learn, XGBoost or
LightGBM imported only after the block began, keyword-only tensors of a ``forward``, a LightGBM ``Dataset``
read from a file, and a loss whose targets were seen while no model input ever was (a model run through
``.forward()`` or as a plain function). Work done in other processes is not seen. A model fed another model's
detached output (a GAN's discriminator) sees that output as data, so execution noise there reads as input noise:
never a false pass, at worst a false refusal.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from auditor.digests import spelled
from auditor.flavors.rules import without_execution_params
from auditor.lineage.record import ConsumedData, ConsumedStream
from auditor.lineage.redact import redacted_logger
from auditor.sdk.batch_digest import _digest, _estimator_roots, _subclasses, _tensors

log = redacted_logger(__name__)

#: what is hashed and which calls are hooked; a change to either is a new scheme (runs of two schemes never compare)
SCHEME = 2  # 2: objects by their fields, mappings in insertion order, Arrow, the native boosting APIs, loss weights
#: batches at the start of a stream that keep a digest each (where data first differs is nearly always early)
LEAVES = 256
#: batches per block after those
BLOCK = 256
#: blocks kept; the last absorbs whatever follows, so a record stays small however long training runs
MAX_BLOCKS = 1024
#: hex characters kept per batch or block digest (change detection between runs; the stream digest is full)
SHORT = 16

#: ``torch.nn.functional`` losses whose second argument is the target
FUNCTIONAL_LOSSES = ("binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss", "mse_loss",
                     "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
                     "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
                     "multilabel_margin_loss")
FIT_METHODS = ("fit", "partial_fit", "fit_transform", "fit_predict")
PREDICT_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function", "transform", "score")
#: native training and prediction functions of the boosting libraries: (module, attribute, kind)
NATIVE_FUNCTIONS = (("xgboost", "train", "fit"), ("xgboost.training", "train", "fit"), ("xgboost", "cv", "fit"),
                    ("xgboost.training", "cv", "fit"), ("lightgbm", "train", "fit"), ("lightgbm.engine", "train", "fit"),
                    ("lightgbm", "cv", "fit"), ("lightgbm.engine", "cv", "fit"))
#: native model methods: (module, class, method, kind)
NATIVE_METHODS = (("xgboost", "Booster", "predict", "predict"), ("xgboost", "Booster", "inplace_predict", "predict"),
                  ("xgboost", "Booster", "update", "fit"), ("lightgbm", "Booster", "predict", "predict"),
                  ("lightgbm", "Booster", "refit", "fit"))
#: how many parameters of a native training call the record keeps by name (a params mapping is short)
MAX_PARAMS = 64


def _shown_param(value: Any) -> str:
    """A parameter's value as the record keeps it: its repr (a set's members sorted, so the hash seed's order is not
    a difference), at most 120 characters, secrets redacted (the one redactor)."""
    from auditor.lineage.redact import redact_text

    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=repr)
    return redact_text(repr(value))[:120]


#: how many notes one record keeps (the first say what matters: the judge refuses to attribute noise on any)
MAX_NOTES = 20


class _Stream:
    """One kind of batch, in order: the digests kept and the running digest of all."""

    def __init__(self) -> None:
        self.count = 0
        self.total = hashlib.sha256()
        self.first: list[str] = []
        self.blocks: list[str] = []
        self.block: Any = None
        self.in_block = 0
        self.shape: str | None = None

    def add(self, digest: bytes, shape: str) -> None:
        if self.count == 0:
            self.shape = shape
        self.total.update(digest)
        if self.count < LEAVES:
            self.first.append(digest.hex()[:SHORT])
        else:
            if self.block is None:
                self.block = hashlib.sha256()
            self.block.update(digest)
            self.in_block += 1
            if self.in_block == BLOCK and len(self.blocks) < MAX_BLOCKS - 1:
                self.blocks.append(self.block.hexdigest()[:SHORT])
                self.block, self.in_block = None, 0
        self.count += 1

    def finish(self) -> ConsumedStream:
        blocks = list(self.blocks)
        if self.block is not None:
            blocks.append(self.block.hexdigest()[:SHORT])
        return ConsumedStream(batches=self.count, digest=spelled(self.total.hexdigest()), first=list(self.first),
                              blocks=blocks, block_size=BLOCK if blocks else 0, shape=self.shape)


class Fingerprint:
    """The hooks of one ``track`` block and what they saw."""

    def __init__(self) -> None:
        self.streams: dict[str, _Stream] = {}
        self.notes: list[str] = []
        self._checked: set[type] = set()  # estimator classes whose saveability was checked (``_before_fit``)
        self.params: dict[str, str] = {}  # the first native training call's parameters, by name (``_native_call``)
        self._undo: list[Any] = []
        self._local = threading.local()
        self._owner = threading.get_ident()
        self._outputs = _Outputs()  # tensors an outermost module returned: the model's values
        self.active = False
        self._sklearn_at_start = True
        self._torch_at_start = True
        self._native_at_start: set[str] = set()
        self.installed = False  # install() ran: only then can a library have been imported "after the block began"
        self._owner_depth = 0  # calls in progress on the thread that entered the block
        self.inputs_seen = 0  # batches seen as a model's or an estimator's input (not a loss's targets)
        self.targets_seen = 0  # batches seen as a loss's targets

    # -- depth: only the outermost call counts -----------------------------------------------------
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def _enter(self) -> None:
        self._local.depth = self._depth() + 1
        if threading.get_ident() == self._owner:
            self._owner_depth = self._local.depth

    def _leave(self) -> None:
        self._local.depth = max(0, self._depth() - 1)
        if threading.get_ident() == self._owner:
            self._owner_depth = self._local.depth

    def _counts(self) -> bool:
        if not self.active or self._depth() != 0:
            return False
        if threading.get_ident() == self._owner:
            return True
        if self._owner_depth == 0:  # not inside a call of the entering thread's (a forest's trees, DataParallel): a batch
            # the order of which between threads is not the data's; it is left out, and the fingerprint says so
            self.note(f"a model or estimator was called on thread {threading.current_thread().name!r}, not the one that "
                      "entered the block: what it consumed there was not fingerprinted (train and evaluate on that thread)")
        return False

    def note(self, text: str) -> None:
        """Say what the fingerprint could not see (once): the judge then never attributes noise to execution."""
        text = text[:300]
        if text not in self.notes and len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def record(self, kind: str, value: Any, *, targets: bool = False) -> None:
        """Add one batch of ``kind``; a failure to digest never stops training (it is noted)."""
        try:
            h = hashlib.sha256()
            parts: list[str] = []
            blind: list[str] = []
            _digest(value, h, parts, self._outputs, blind)
            self.streams.setdefault(kind, _Stream()).add(h.digest(), ", ".join(parts)[:200])
            for why in blind:
                self.note(f"a {_KIND_WORDS.get(kind, kind)} was not fully fingerprinted: {why}")
            if targets:
                self.targets_seen += 1
            else:
                self.inputs_seen += 1
        except Exception as exc:  # noqa: BLE001 - the record says what could not be fingerprinted
            self.note(f"a {kind} batch could not be fingerprinted: {type(exc).__name__}: {exc}")

    # -- PyTorch ---------------------------------------------------------------------------------
    def _install_torch(self) -> None:
        torch = sys.modules.get("torch")
        if torch is None or not hasattr(torch, "nn"):
            self._torch_at_start = False  # said at the end, if the script imports it inside the block
            return
        from torch.nn.modules import module as hooks
        from torch.nn.modules.loss import _Loss

        def pre(module: Any, args: Any) -> None:
            if self._counts():
                if isinstance(module, _Loss):
                    # the targets and the loss's own per-row weights (weight=, pos_weight= buffers): rows chosen by 0/1
                    # weights are chosen rows
                    buffers = tuple(b for _, b in sorted(module.named_buffers(recurse=False)) if b is not None)
                    targets = tuple(args[1:]) + buffers
                    if targets:
                        self.record("train" if module.training and torch.is_grad_enabled() else "eval", targets, targets=True)
                elif args:
                    self.record("train" if module.training and torch.is_grad_enabled() else "eval", tuple(args))
                else:  # torch's global pre-hooks see positional arguments only: model(**batch) is not seen
                    self.note(f"{type(module).__name__} was called with keyword arguments only: those batches were not "
                              "fingerprinted (call the model with its inputs as positional arguments)")
            self._enter()

        def post(module: Any, args: Any, output: Any) -> None:
            self._leave()
            if self._depth() == 0 and threading.get_ident() == self._owner:
                for tensor in _tensors(output):
                    self._outputs.add(tensor)

        self._undo.append(hooks.register_module_forward_pre_hook(pre).remove)
        self._undo.append(hooks.register_module_forward_hook(post, always_call=True).remove)
        self._install_functional_losses(torch)

    def _install_functional_losses(self, torch: Any) -> None:
        """A loss called as a function (``F.cross_entropy(logits, y)``) consumes its targets: they are data."""
        functional = torch.nn.functional
        fingerprint = self
        for name in FUNCTIONAL_LOSSES:
            original = getattr(functional, name, None)
            if original is None or not callable(original):
                continue

            def wrapper(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
                if fingerprint._counts():
                    # everything but the model's output: the target and any weight=/pos_weight= (0/1 weights choose rows)
                    target = tuple(args[1:]) + tuple(kwargs[k] for k in sorted(kwargs) if k != "input")
                    if target:
                        training = torch.is_grad_enabled() and bool(getattr(args[0] if args else None, "requires_grad", False))
                        fingerprint.record("train" if training else "eval", target, targets=True)
                fingerprint._enter()
                try:
                    return __original(*args, **kwargs)
                finally:
                    fingerprint._leave()

            functools.update_wrapper(wrapper, original)
            setattr(functional, name, wrapper)
            self._undo.append(functools.partial(setattr, functional, name, original))

    # -- estimators ------------------------------------------------------------------------------
    def _install_estimators(self) -> None:
        roots = _estimator_roots()
        self._sklearn_at_start = "sklearn.base" in sys.modules
        for cls in _subclasses(roots):
            self._wrap_class(cls)
        for root in roots:  # estimator classes defined while the block runs (a module imported inside it)
            self._hook_subclasses(root)

    def _wrap_class(self, cls: type) -> None:
        for name, kind in [*((m, "fit") for m in FIT_METHODS), *((m, "predict") for m in PREDICT_METHODS)]:
            original = cls.__dict__.get(name)
            if not inspect.isfunction(original):  # descriptors (available_if) and inherited methods are left as they are
                continue
            setattr(cls, name, self._wrap(original, kind))
            self._undo.append(functools.partial(setattr, cls, name, original))

    def _hook_subclasses(self, root: type) -> None:
        fingerprint = self
        original = root.__dict__.get("__init_subclass__")

        def init_subclass(cls: type, **kwargs: Any) -> None:
            if original is not None:
                original.__get__(None, cls)(**kwargs)
            else:
                super(root, cls).__init_subclass__(**kwargs)
            if fingerprint.active:
                fingerprint._wrap_class(cls)

        root.__init_subclass__ = classmethod(init_subclass)  # type: ignore[assignment]
        if original is not None:
            self._undo.append(functools.partial(setattr, root, "__init_subclass__", original))
        else:
            self._undo.append(functools.partial(delattr, root, "__init_subclass__"))

    def _wrap(self, fn: Any, kind: str, *, bound: bool = True, shape: Any = None) -> Any:
        """``fn`` recording its arguments (less ``self`` when ``bound``; through ``shape(args, kwargs)`` when given) as
        one batch of ``kind``, outermost calls only."""
        fingerprint = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if fingerprint._counts():
                if kind == "fit" and bound and args:
                    fingerprint._before_fit(args[0])
                recorded = (args[1:] if bound else args, kwargs)
                fingerprint.record(kind, shape(*recorded) if shape else recorded)
            fingerprint._enter()
            try:
                return fn(*args, **kwargs)
            finally:
                fingerprint._leave()

        return wrapper

    # -- the boosting libraries' native APIs ---------------------------------------------------------
    def _install_native(self) -> None:
        """``xgboost.train``/``lightgbm.train`` (and ``cv``) and their Boosters' ``predict``: what the native APIs
        consume (a ``DMatrix``'s or ``Dataset``'s data, read back). Looked up at call time, as ``xgb.train`` is."""
        for module_name, name, kind in NATIVE_FUNCTIONS:
            module = sys.modules.get(module_name)
            original = getattr(module, name, None)
            if module is None or not inspect.isfunction(original):
                continue
            self._native_at_start.add(module_name.split(".")[0])
            wrapped = self._wrap(original, kind, bound=False, shape=self._native_call)  # threads are no data
            setattr(module, name, wrapped)
            self._undo.append(functools.partial(setattr, module, name, original))
        for module_name, class_name, name, kind in NATIVE_METHODS:
            cls = getattr(sys.modules.get(module_name), class_name, None)
            original = cls.__dict__.get(name) if isinstance(cls, type) else None
            if not inspect.isfunction(original):
                continue
            self._native_at_start.add(module_name)
            setattr(cls, name, self._wrap(original, kind))
            self._undo.append(functools.partial(setattr, cls, name, original))

    def _before_fit(self, estimator: Any) -> None:
        """Name, before it is fitted, a scikit-learn type ``run.save_model`` would refuse (once per class): a warning, not
        a refusal, since the block may fit helpers it never saves."""
        cls = type(estimator)
        if cls in self._checked:
            return
        self._checked.add(cls)
        try:
            from auditor.flavors.sklearn import unsaveable

            refused = unsaveable(estimator)
        except Exception:  # noqa: BLE001 - a check that cannot run must not stop training
            return
        if refused:
            log.warning("repro: %s.%s holds type(s) run.save_model cannot save without pickle: %s; if this is the model "
                        "you register, use scikit-learn's own types (or a supported library) before training", cls.__module__,
                        cls.__qualname__, ", ".join(refused))

    def _native_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A native ``train``/``cv`` call as it is fingerprinted (execution knobs left out); the first call's parameters
        are kept by name too, so a rebuild given another seed or hyperparameter is told so with both values."""
        args, kwargs = without_execution_params(args, kwargs)
        params = args[0] if args else kwargs.get("params")
        if not self.params and isinstance(params, dict):
            self.params = {str(k): _shown_param(v) for k, v in list(params.items())[:MAX_PARAMS]}
        return args, kwargs

    def install(self) -> None:
        self._install_torch()
        self._install_estimators()
        self._install_native()
        self.installed = True
        self.active = True

    def stop(self) -> ConsumedData:
        """Remove every hook and return what was seen."""
        self.active = False
        if not self._torch_at_start and "torch" in sys.modules:
            self.note("torch was imported after the block began: its batches were not fingerprinted "
                              "(import it before auditor.track)")
        if not self._sklearn_at_start and "sklearn.base" in sys.modules:
            self.note("scikit-learn was imported after the block began: its estimators' fit/predict calls "
                              "were not fingerprinted (import it before auditor.track)")
        for library in ("xgboost", "lightgbm"):
            if self.installed and library in sys.modules and library not in self._native_at_start:
                self.note(f"{library} was imported after the block began: its native train/predict calls were not "
                                  f"fingerprinted (import it before auditor.track)")
        if self.targets_seen and not self.inputs_seen:
            self.note(f"a loss's targets were seen ({self.targets_seen} batch(es)) but never a model's input: a model "
                              "run through .forward() or as a plain function is not fingerprinted (call the model itself)")
        for undo in reversed(self._undo):
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - one hook that will not come off must not lose the record
                log.warning("repro: could not remove a fingerprint hook: %s", exc)
        self._undo.clear()
        return ConsumedData(scheme=SCHEME, streams={kind: s.finish() for kind, s in sorted(self.streams.items())},
                            notes=list(self.notes), params=dict(self.params))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The SDK's own calls into the model (a signature's input example) are not what the script fed it."""
        self._enter()
        try:
            yield
        finally:
            self._leave()


_KIND_WORDS = {"train": "training batch", "eval": "evaluation batch", "fit": "fit() call", "predict": "predict() call"}


class _Outputs:
    """Tensors held by identity, weakly (a ``WeakSet`` would compare tensors with ``==``, elementwise)."""

    def __init__(self) -> None:
        self._refs: dict[int, Any] = {}

    def add(self, tensor: Any) -> None:
        if len(self._refs) > 4096:
            self._refs = {key: ref for key, ref in self._refs.items() if ref() is not None}
        self._refs[id(tensor)] = weakref.ref(tensor)

    def holds(self, tensor: Any) -> bool:
        ref = self._refs.get(id(tensor))
        return ref is not None and ref() is tensor


# -- the block's start and end (``auditor.sdk.forms``) ------------------------------------------------
def start_fingerprint(run: Any) -> None:
    """Fingerprint what the model consumes while the block runs; a failure to hook never stops training."""
    fingerprint = Fingerprint()
    try:
        fingerprint.install()
    except Exception as exc:  # noqa: BLE001 - the record then says it was not fingerprinted
        log.warning("repro: the consumed-data fingerprint is off for this run: %s", exc)
        fingerprint.stop()
        return
    run._consumed = fingerprint


def stop_fingerprint(run: Any) -> None:
    """Remove the hooks and put what the model consumed into the record."""
    fingerprint = getattr(run, "_consumed", None)
    if fingerprint is None:
        return
    run._consumed = None
    try:
        run.record.consumed = fingerprint.stop()
    except Exception as exc:  # noqa: BLE001 - the record then says it was not fingerprinted
        log.warning("repro: the consumed-data fingerprint failed for this run: %s", exc)


@contextmanager
def sdk_call(run: Any) -> Iterator[None]:
    """Around the SDK's own calls into the model: not counted as consumed data."""
    fingerprint = getattr(run, "_consumed", None)
    if fingerprint is None:
        yield
        return
    with fingerprint.paused():
        yield
