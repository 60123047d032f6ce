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
  call only (a Pipeline's own steps are inside it), on the thread that began the block.

A batch's digest is one sha256 over the type, dtype, shape and bytes of every array it holds (tensors,
NumPy arrays, pandas frames and series by column, SciPy sparse matrices; lists, tuples and dicts
recursively; numbers and strings by value; any other object by its type name only, so an address never
makes two runs differ). One pass at sha256 speed (about 2 GB/s on CPU, FACTS.md) per batch; a CUDA tensor
is copied to the host first. What is kept is bounded: a short digest for each of the first
:data:`LEAVES` batches, then one per block of :data:`BLOCK` batches (at most :data:`MAX_BLOCKS`), and the
digest of the whole stream.

Not seen (``ConsumedData.notes`` says so when it applies): torch imported only after the block began,
XGBoost's and LightGBM's native ``train`` APIs (their ``DMatrix``/``Dataset``), keyword-only tensors of
a ``forward``, and work done in other processes. A model fed another model's detached output (a GAN's
discriminator) sees that output as data, so execution noise there reads as input noise: never a false
pass, at worst a false refusal.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import sys
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from auditor.digests import spelled
from auditor.lineage.record import ConsumedData, ConsumedStream
from auditor.lineage.redact import redacted_logger

log = redacted_logger(__name__)

#: what is hashed and which calls are hooked; a change to either is a new scheme (runs of two schemes never compare)
SCHEME = 1
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
        self._undo: list[Any] = []
        self._local = threading.local()
        self._owner = threading.get_ident()
        self._outputs = _Outputs()  # tensors an outermost module returned: the model's values
        self.active = False
        self._sklearn_at_start = True
        self._torch_at_start = True

    # -- depth: only the outermost call counts -----------------------------------------------------
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def _enter(self) -> None:
        self._local.depth = self._depth() + 1

    def _leave(self) -> None:
        self._local.depth = max(0, self._depth() - 1)

    def _counts(self) -> bool:
        return self.active and self._depth() == 0 and threading.get_ident() == self._owner

    def record(self, kind: str, value: Any) -> None:
        """Add one batch of ``kind``; a failure to digest never stops training (it is noted)."""
        try:
            h = hashlib.sha256()
            parts: list[str] = []
            _digest(value, h, parts, self._outputs)
            self.streams.setdefault(kind, _Stream()).add(h.digest(), ", ".join(parts)[:200])
        except Exception as exc:  # noqa: BLE001 - the record says what could not be fingerprinted
            note = f"a {kind} batch could not be fingerprinted: {type(exc).__name__}: {exc}"[:300]
            if note not in self.notes:
                self.notes.append(note)

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
                    targets = tuple(args[1:])
                    if targets:
                        self.record("train" if module.training and torch.is_grad_enabled() else "eval", targets)
                elif args:
                    self.record("train" if module.training and torch.is_grad_enabled() else "eval", tuple(args))
                else:  # torch's global pre-hooks see positional arguments only: model(**batch) is not seen
                    note = (f"{type(module).__name__} was called with keyword arguments only: those batches were not "
                            "fingerprinted (call the model with its inputs as positional arguments)")
                    if note not in self.notes:
                        self.notes.append(note)
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
                    target = args[1:2] or tuple(kwargs[k] for k in ("target",) if k in kwargs)
                    if target:
                        training = torch.is_grad_enabled() and bool(getattr(args[0] if args else None, "requires_grad", False))
                        fingerprint.record("train" if training else "eval", target)
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

    def _wrap(self, fn: Any, kind: str) -> Any:
        fingerprint = self

        @functools.wraps(fn)
        def wrapper(estimator: Any, *args: Any, **kwargs: Any) -> Any:
            if fingerprint._counts():
                fingerprint.record(kind, (args, kwargs))
            fingerprint._enter()
            try:
                return fn(estimator, *args, **kwargs)
            finally:
                fingerprint._leave()

        return wrapper

    def install(self) -> None:
        self._install_torch()
        self._install_estimators()
        self.active = True

    def stop(self) -> ConsumedData:
        """Remove every hook and return what was seen."""
        self.active = False
        if not self._torch_at_start and "torch" in sys.modules:
            self.notes.append("torch was imported after the block began: its batches were not fingerprinted "
                              "(import it before auditor.track)")
        if not self._sklearn_at_start and "sklearn.base" in sys.modules:
            self.notes.append("scikit-learn was imported after the block began: its estimators' fit/predict calls "
                              "were not fingerprinted (import it before auditor.track)")
        for undo in reversed(self._undo):
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - one hook that will not come off must not lose the record
                log.warning("repro: could not remove a fingerprint hook: %s", exc)
        self._undo.clear()
        return ConsumedData(scheme=SCHEME, streams={kind: s.finish() for kind, s in sorted(self.streams.items())},
                            notes=list(self.notes))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The SDK's own calls into the model (a signature's input example) are not what the script fed it."""
        self._enter()
        try:
            yield
        finally:
            self._leave()


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


def _estimator_roots() -> list[type]:
    """The estimator base classes imported so far: scikit-learn's ``BaseEstimator`` and CatBoost's ``CatBoost``."""
    roots = []
    base = sys.modules.get("sklearn.base")
    if base is not None and hasattr(base, "BaseEstimator"):
        roots.append(base.BaseEstimator)
    catboost = sys.modules.get("catboost")
    if catboost is not None and hasattr(catboost, "CatBoost"):
        roots.append(catboost.CatBoost)
    return roots


def _subclasses(roots: list[type]) -> list[type]:
    """``roots`` and every class derived from them so far."""
    seen: dict[int, type] = {}
    stack = list(roots)
    while stack:
        cls = stack.pop()
        if id(cls) in seen:
            continue
        seen[id(cls)] = cls
        try:
            stack.extend(cls.__subclasses__())
        except TypeError:
            continue
    return list(seen.values())


def _tensors(value: Any) -> Iterator[Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _digest(value: Any, h: Any, parts: list[str], outputs: Any) -> None:  # noqa: C901 - one branch per kind of value
    """Feed ``value``'s type, dtype, shape and bytes to ``h``; ``parts`` collects a description."""
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    pandas = sys.modules.get("pandas")
    sparse = sys.modules.get("scipy.sparse")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.requires_grad or outputs.holds(value):
            h.update(b"T:model-value;")  # the model's own value (execution noise moves it), not data
            return
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        tensor = tensor.contiguous()
        meta = f"tensor {str(tensor.dtype).removeprefix('torch.')} {tuple(tensor.shape)}"
        parts.append(meta)
        h.update(f"T:{meta};".encode())
        if tensor.numel():
            h.update(tensor.reshape(-1).view(torch.uint8).numpy().data)
        return
    if np is not None and isinstance(value, np.ndarray):
        meta = f"ndarray {value.dtype} {value.shape}"
        parts.append(meta)
        h.update(f"A:{meta};".encode())
        if value.dtype.hasobject:
            h.update(repr(value.tolist()).encode())
        else:
            h.update(np.ascontiguousarray(value).view(np.uint8).data)
        return
    if pandas is not None and isinstance(value, pandas.DataFrame):
        parts.append(f"DataFrame {value.shape}")
        h.update(f"D:{value.shape};{list(map(str, value.columns))!r};".encode())
        for column in value.columns:
            _digest(value[column].to_numpy(), h, [], outputs)
        return
    if pandas is not None and isinstance(value, pandas.Series):
        parts.append(f"Series {value.dtype} {value.shape}")
        h.update(f"S:{value.name!r};".encode())
        _digest(value.to_numpy(), h, [], outputs)
        return
    if sparse is not None and sparse.issparse(value):
        csr = value.tocsr()
        parts.append(f"sparse {csr.dtype} {csr.shape}")
        h.update(f"P:{csr.shape};".encode())
        for array in (csr.data, csr.indices, csr.indptr):
            _digest(array, h, [], outputs)
        return
    if isinstance(value, (list, tuple)):
        h.update(f"L{len(value)}[".encode())
        for item in value:
            _digest(item, h, parts, outputs)
        h.update(b"]")
        return
    if isinstance(value, Mapping):  # a dict, and a BatchEncoding, UserDict or any other mapping of batches
        h.update(f"M{len(value)}{{".encode())
        for key in sorted(value, key=str):
            h.update(f"{key!s}=".encode())
            _digest(value[key], h, parts, outputs)
        h.update(b"}")
        return
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        h.update(f"V:{value!r};".encode())
        return
    if np is not None and isinstance(value, np.generic):
        h.update(f"V:{value.dtype}:{value!r};".encode())
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a batch dataclass: its fields
        fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        h.update(f"C:{type(value).__qualname__};".encode())
        _digest(fields, h, parts, outputs)
        return
    # any other object (a callback, a metric function): its type only (its repr may hold an address, which
    # differs on every run); data travels as the kinds above
    h.update(f"O:{type(value).__module__}.{type(value).__qualname__};".encode())


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
