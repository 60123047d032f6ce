"""How one batch is digested for the consumed-data fingerprint (``auditor.sdk.consumed``): tensors and arrays by
type, dtype, shape and bytes; an object the script wraps its batch in by its fields; mappings in insertion order;
Arrow tables; the boosting libraries' native matrices read back. What cannot be seen whole is said (``blind``).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Iterator, Mapping
from typing import Any


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


#: how deep the attributes of a batch object (``vars``, dataclass fields, ``__slots__``) are followed
MAX_OBJECT_DEPTH = 4
#: values visited inside batch objects, per batch, before the rest is left unseen (and noted)
MAX_OBJECT_VALUES = 10_000
#: ``type.__flags__``: a class defined in Python (its instances' state is in ``__dict__``/slots, not in C)
_HEAPTYPE = 1 << 9


class _Walk:
    """One batch's digest: what was hashed (``parts``) and what could not be seen (``blind``)."""

    def __init__(self, h: Any, parts: list[str], outputs: Any, blind: list[str] | None) -> None:
        self.h, self.parts, self.outputs = h, parts, outputs
        self.blind = blind if blind is not None else []
        self.visited = 0
        self.stack: set[int] = set()

    def unseen(self, why: str) -> None:
        if why not in self.blind:
            self.blind.append(why)


def _digest(value: Any, h: Any, parts: list[str], outputs: Any, blind: list[str] | None = None) -> None:
    """Feed ``value``'s type, dtype, shape and bytes to ``h``; ``parts`` collects a description and ``blind``
    (when given) why part of it could not be seen (an object by its type only, an input that requires grad)."""
    _walk(value, _Walk(h, parts, outputs, blind), 0)


def _walk(value: Any, w: _Walk, depth: int) -> None:
    """Hash ``value`` into ``w``: the first kind that takes it, in this order (the order is part of the fingerprint)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):  # first: lists of numbers are long
        w.h.update(f"V:{value!r};".encode())
        return
    for kind in (_tensor, _ndarray, _tabular, _arrow, _boosting, _container, _by_value, _by_type):
        if kind(value, w, depth):
            return
    _object(value, f"{type(value).__module__}.{type(value).__qualname__}", w, depth)


def _tensor(value: Any, w: _Walk, depth: int) -> bool:
    """A torch tensor: its dtype, shape and bytes; the model's own value (or a leaf the script made learnable) not."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return False
    h = w.h
    if value.requires_grad or w.outputs.holds(value):
        h.update(b"T:model-value;")  # the model's own value (execution noise moves it), not data
        if value.requires_grad and value.is_leaf and not isinstance(value, torch.nn.Parameter) and not w.outputs.holds(value):
            # a leaf the script made to require grad (adversarial training, an input optimised in place): data or a
            # learned value, which cannot be told; its bytes are left out, and so the fingerprint is partial
            w.unseen(f"an input tensor {tuple(value.shape)} that requires grad (not a parameter) was not fingerprinted")
        return True
    tensor = value.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    tensor = tensor.contiguous()
    meta = f"tensor {str(tensor.dtype).removeprefix('torch.')} {tuple(tensor.shape)}"
    w.parts.append(meta)
    h.update(f"T:{meta};".encode())
    if tensor.numel():
        h.update(tensor.reshape(-1).view(torch.uint8).numpy().data)
    return True


def _ndarray(value: Any, w: _Walk, depth: int) -> bool:
    np = sys.modules.get("numpy")
    if np is None or not isinstance(value, np.ndarray):
        return False
    meta = f"ndarray {value.dtype} {value.shape}"
    w.parts.append(meta)
    w.h.update(f"A:{meta};".encode())
    if value.dtype.hasobject:
        w.h.update(repr(value.tolist()).encode())
    else:
        w.h.update(np.ascontiguousarray(value).view(np.uint8).data)
    return True


def _tabular(value: Any, w: _Walk, depth: int) -> bool:
    """A pandas DataFrame (column by column) or Series, or a scipy sparse matrix (as CSR arrays)."""
    pandas, sparse, h = sys.modules.get("pandas"), sys.modules.get("scipy.sparse"), w.h
    if pandas is not None and isinstance(value, pandas.DataFrame):
        w.parts.append(f"DataFrame {value.shape}")
        h.update(f"D:{value.shape};{list(map(str, value.columns))!r};".encode())
        for column in range(value.shape[1]):
            _walk(value.iloc[:, column].to_numpy(), _Walk(h, [], w.outputs, w.blind), depth)
    elif pandas is not None and isinstance(value, pandas.Series):
        w.parts.append(f"Series {value.dtype} {value.shape}")
        h.update(f"S:{value.name!r};".encode())
        _walk(value.to_numpy(), _Walk(h, [], w.outputs, w.blind), depth)
    elif sparse is not None and sparse.issparse(value):
        csr = value.tocsr()
        w.parts.append(f"sparse {csr.dtype} {csr.shape}")
        h.update(f"P:{csr.shape};".encode())
        for array in (csr.data, csr.indices, csr.indptr):
            _walk(array, _Walk(h, [], w.outputs, w.blind), depth)
    else:
        return False
    return True


def _container(value: Any, w: _Walk, depth: int) -> bool:
    """A list or tuple (in order), or any mapping of batches (a dict, a BatchEncoding, a UserDict)."""
    h = w.h
    if isinstance(value, (list, tuple)):
        h.update(f"L{len(value)}[".encode())
        for item in value:
            _walk(item, w, depth)
        h.update(b"]")
    elif isinstance(value, Mapping):
        # in insertion order: a consumer that iterates .values() sees the batches in that order
        h.update(f"M{len(value)}{{".encode())
        for key in list(value):
            h.update(f"{key!s}=".encode())
            _walk(value[key], w, depth)
        h.update(b"}")
    else:
        return False
    return True


def _by_value(value: Any, w: _Walk, depth: int) -> bool:
    """A NumPy scalar; a path, a date, a dtype or a device: hashed by value."""
    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        w.h.update(f"V:{value.dtype}:{value!r};".encode())
    elif isinstance(value, _plain_values()) or (torch is not None and isinstance(value, (torch.dtype, torch.device))) or (
            np is not None and isinstance(value, np.dtype)):
        w.h.update(f"V:{type(value).__qualname__}:{value!s};".encode())
    else:
        return False
    return True


def _by_type(value: Any, w: _Walk, depth: int) -> bool:
    """Code, a model or an iterator: its type only (what else it holds is not data, or cannot be seen)."""
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    if _code_or_model(value):
        # a callback, a metric function, a model: code or the model's own state, not data; its type only (its repr
        # may hold an address, which differs on every run)
        w.h.update(f"O:{name};".encode())
    elif isinstance(value, (Iterator, *_generators())):
        w.h.update(f"O:{name};".encode())
        w.unseen(f"a {name} (an iterator: its items cannot be seen without consuming them) was hashed by its type only")
    else:
        return False
    return True


def _object(value: Any, name: str, w: _Walk, depth: int) -> None:
    """Any other object (a batch class, a dataset): its fields, recursively; by its type only (noted) when its
    state is out of reach (kept in C, too deep, too large)."""
    h = w.h
    hidden = [c.__name__ for c in type(value).__mro__ if c is not object and not c.__flags__ & _HEAPTYPE]
    if hidden:
        h.update(f"O:{name};".encode())
        w.unseen(f"a {name} (its state is kept in native code) was hashed by its type only")
        return
    if depth >= MAX_OBJECT_DEPTH or w.visited >= MAX_OBJECT_VALUES:
        h.update(f"O:{name};".encode())
        w.unseen(f"a {name} nested deeper than {MAX_OBJECT_DEPTH} objects (or past {MAX_OBJECT_VALUES} values) was hashed by its type only")
        return
    if id(value) in w.stack:  # a cycle back to an object being hashed
        h.update(f"O:cycle:{name};".encode())
        return
    fields = _fields(value)
    w.visited += len(fields) + 1
    w.stack.add(id(value))
    try:
        h.update(f"C:{name}{{".encode())
        for key, item in fields.items():
            h.update(f"{key}=".encode())
            _walk(item, w, depth + 1)
        h.update(b"}")
    finally:
        w.stack.discard(id(value))


def _fields(value: Any) -> dict[str, Any]:
    """A Python object's state: dataclass fields, then ``__slots__`` and ``vars`` (each attribute once, in order)."""
    fields: dict[str, Any] = {}
    if dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            fields[field.name] = getattr(value, field.name, None)
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and slot not in fields and hasattr(value, slot):
                fields[slot] = getattr(value, slot)
    for key, item in getattr(value, "__dict__", {}).items():
        fields.setdefault(key, item)
    return fields


def _plain_values() -> tuple[type, ...]:
    import datetime
    import decimal
    import enum
    import fractions
    import os
    import uuid

    return (os.PathLike, range, slice, datetime.date, datetime.time, datetime.timedelta, decimal.Decimal,
            fractions.Fraction, uuid.UUID, enum.Enum)


def _generators() -> tuple[type, ...]:
    import types

    return (types.GeneratorType, types.AsyncGeneratorType)


def _code_or_model(value: Any) -> bool:
    """Code (a function, a class, a module, any callable object) or a model (a torch module, an estimator, a booster)."""
    if isinstance(value, type) or callable(value) or inspect.ismodule(value):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module):
        return True
    models = list(_estimator_roots())
    for module, cls in (("xgboost", "Booster"), ("lightgbm", "Booster"), ("torch.optim", "Optimizer")):
        found = getattr(sys.modules.get(module), cls, None)
        if isinstance(found, type):
            models.append(found)
    return bool(models) and isinstance(value, tuple(models))


def _arrow(value: Any, w: _Walk, depth: int) -> bool:
    """A pyarrow Table, RecordBatch, Array or ChunkedArray: by column, as NumPy arrays."""
    pa = sys.modules.get("pyarrow")
    if pa is None:
        return False
    if isinstance(value, (pa.Table, pa.RecordBatch)):
        w.parts.append(f"arrow {type(value).__name__} {value.num_rows}x{value.num_columns}")
        w.h.update(f"R:{value.num_rows};{value.schema.names!r};{[str(t) for t in value.schema.types]!r};".encode())
        for column in value.columns:
            _arrow(column, _Walk(w.h, [], w.outputs, w.blind), depth)
        return True
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks() if value.num_chunks != 1 else value.chunk(0)
    if isinstance(value, pa.Array):
        w.h.update(f"R:{value.type};{len(value)};".encode())
        _walk(value.to_numpy(zero_copy_only=False), w, depth)
        return True
    return False


def _boosting(value: Any, w: _Walk, depth: int) -> bool:
    """XGBoost's ``DMatrix`` (its data, labels, weights and margins, read back) and LightGBM's ``Dataset`` (the raw
    data and labels it holds until constructed): what the native ``train`` APIs consume."""
    xgboost = sys.modules.get("xgboost")
    if xgboost is not None and isinstance(value, getattr(xgboost, "DMatrix", ())):
        w.parts.append(f"DMatrix {value.num_row()}x{value.num_col()}")
        w.h.update(f"X:{value.num_row()}x{value.num_col()};{value.feature_names!r};{value.feature_types!r};".encode())
        try:
            data = value.get_data()
        except Exception as exc:  # noqa: BLE001 - a QuantileDMatrix keeps no data to read back
            w.unseen(f"an XGBoost {type(value).__name__}'s data could not be read back ({type(exc).__name__}): its labels only were fingerprinted")
            data = None
        inner = _Walk(w.h, [], w.outputs, w.blind)
        for part in (data, value.get_label(), value.get_weight(), value.get_base_margin()):
            _walk(part, inner, depth)
        return True
    lightgbm = sys.modules.get("lightgbm")
    if lightgbm is not None and isinstance(value, getattr(lightgbm, "Dataset", ())):
        data = getattr(value, "data", None)
        w.parts.append(f"lightgbm Dataset of {type(data).__name__}")
        if data is None or isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
            w.unseen("a LightGBM Dataset " + ("whose raw data was already freed" if data is None else
                                              "read from a file by LightGBM's native code") + " was fingerprinted by its labels only")
            data = None if data is None else str(data)
        inner = _Walk(w.h, [], w.outputs, w.blind)
        w.h.update(b"G:")
        for part in (data, value.label, value.weight, value.group, value.init_score, value.feature_name):
            _walk(part, inner, depth)
        if value.reference is not None and value.reference is not value:
            _walk(value.reference, inner, depth + 1)
        return True
    return False
