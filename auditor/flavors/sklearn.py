"""scikit-learn: estimators and pipelines saved with skops, loaded only through an explicit allow-list.

skops's file is a zip of ``schema.json`` (every object's type, as data) and ``.npy`` arrays. Before
anything is loaded, every type the schema names is read from it as JSON and held against ``trusted`` (what
skops and scikit-learn trust); one outside it refuses the file, naming it (``UntrustedModel``). Only then does skops load it, trusting
exactly those types. The normal form walks the fitted estimator, failing closed: per step its parameters
(``n_jobs`` and ``verbose`` set aside: they echo how it ran; lists in their order, estimators held as parameters
walked too) and every other entry of its ``__dict__`` (bin edges, scaler means, coefficients, intercepts, ...); a
fitted tree (``sklearn.tree._tree.Tree``) becomes a tree of the ladder; an estimator held twice is walked once and
named where else it sits (so a Pipeline's step order is compared).
skops's object ids (array file names in the zip) are not the model: the normal form never sees them.
"""

from __future__ import annotations

import functools
import io
import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from auditor.errors import InputUnrecoverable, MalformedRecord
from auditor.flavors.base import Normal
from auditor.flavors.forest import Forest

#: what reading a model needs, imported ahead by ``auditor.flavors.prefetch`` while a rebuild runs
HEAVY_IMPORTS = ("skops.io",)

NAME = "sklearn"

#: types every skops file holds besides the estimators (containers and numpy's own), which skops trusts by default
#: only under other names or not at all: numpy's scalar types, its legacy and new generators
_OTHER = frozenset({
    "builtins.dict", "builtins.list", "builtins.tuple", "builtins.str", "builtins.int", "builtins.float", "builtins.bool",
    "builtins.NoneType", "builtins.slice", "builtins.set", "builtins.type", "numpy.ndarray", "numpy.dtype",
    "numpy.random.mtrand.RandomState", "numpy.random._generator.Generator", "numpy.random.bit_generator.SeedSequence",
})


@functools.cache
def _skops_trusted() -> frozenset[str]:
    """What skops trusts by default (its ``_trusted_types``: scikit-learn's estimators and internals, containers,
    numpy dtypes and ufuncs, numpy's bit generators, scipy's ufuncs), by the full name a file's schema gives."""
    from skops.io import _trusted_types as t

    names = (t.SKLEARN_ESTIMATOR_TYPE_NAMES, t.SKLEARN_INTERNAL_TYPE_NAMES, t.PRIMITIVE_TYPE_NAMES, t.CONTAINER_TYPE_NAMES,
             t.NUMPY_DTYPE_TYPE_NAMES, t.NUMPY_RANDOM_BIT_GENERATOR_TYPE_NAMES, t.NUMPY_UFUNC_TYPE_NAMES, t.SCIPY_UFUNC_TYPE_NAMES)
    return frozenset().union(*map(frozenset, names))


def _library_class(name: str) -> bool:
    """``name`` is a class (not a function) that scikit-learn or numpy defines: a fitted internal such as
    ``sklearn.tree._tree.Tree``, ``TreePredictor``, ``_BinMapper``, a Cython loss, or a numpy scalar type. Resolved
    by importing the library's own module (never a module the file names outside ``sklearn.``/``numpy.``)."""
    import importlib

    module, _, cls = name.rpartition(".")
    if module.split(".")[0] not in ("sklearn", "numpy"):
        return False
    try:
        found = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError, ValueError, TypeError):
        return False
    if not isinstance(found, type) or not str(found.__module__).startswith(module.split(".")[0]):
        return False
    return module.startswith("sklearn.") or issubclass(found, np.generic)


def trusted(name: str) -> bool:
    """One rule for what may be loaded (issue 39): what skops trusts, scikit-learn's and numpy's own classes (their
    fitted internals included), and the containers a file holds. A function outside skops's list, or any type of
    another package (a project's own transformer), is not."""
    return name in _OTHER or name in _skops_trusted() or _library_class(name)


#: parameters that say how a model ran, not what it is
SET_ASIDE_PARAMS = ("n_jobs", "n_threads", "verbose", "memory", "copy", "copy_X")  # n_threads: HistGradientBoosting's bin mapper echoes the OpenMP thread count
#: fitted attributes that hold no part of the model, and why: set aside by name
SET_ASIDE_STATE = {"_stop_words_id": "id() of the stop_words list in the fitting process: a memory address",
                   "_init_prev_time": "the wall-clock time of the fit's last report (a mixture's verbose=2)",
                   "_iter_prev_time": "the wall-clock time of the fit's last report (a mixture's verbose=2)"}


class UntrustedModel(InputUnrecoverable):
    """A skops file that names a type outside the allow-list: refused before anything is loaded (in an audit,
    the registered artifact cannot be recovered safely: NOT_REPRODUCIBLE)."""


def _types(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if "__class__" in node and "__module__" in node:
            yield f"{node['__module__']}.{node['__class__']}"
        if "module_path" in node and "function" in node:
            yield f"{node['module_path']}.{node['function']}"
        for value in node.values():
            yield from _types(value)
    elif isinstance(node, list):
        for value in node:
            yield from _types(value)


def file_types(path: str | os.PathLike | bytes, name: str | None = None) -> set[str]:
    """Every type ``path``'s schema names, read as JSON (nothing loaded); ``path`` may be the file's bytes, already
    read (``name`` says whose, in messages)."""
    try:
        with zipfile.ZipFile(io.BytesIO(path) if isinstance(path, bytes) else path) as z:
            schema = json.loads(z.read("schema.json"))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise MalformedRecord(f"{_whose(path, name)} is not a skops file: {exc}") from None
    return set(_types(schema))


def _whose(path: str | os.PathLike | bytes, name: str | None) -> str:
    """What a message calls the file: ``name``, else its path (bytes with no name: "the skops file")."""
    return name or ("the skops file" if isinstance(path, bytes) else os.fspath(path))


def check_trusted(path: str | os.PathLike | bytes, name: str | None = None) -> set[str]:
    """Every type of ``path`` (or of these bytes: ``file_types``), each one the loader trusts; else ``UntrustedModel``
    naming those it does not."""
    types = file_types(path, name)
    untrusted = sorted(t for t in types if not trusted(t))
    if untrusted:
        raise UntrustedModel(f"{_whose(path, name)} names type(s) outside the allow-list of trusted types: {', '.join(untrusted)}; it is not loaded",
                             hint="save the model with scikit-learn types only (auditor.flavors.sklearn.trusted), or audit it in a sandbox")
    return types


def unsaveable(model: Any) -> list[str]:
    """The types and functions in a scikit-learn model's parameters (its steps and theirs) that the loader would refuse
    (``trusted``): known before it is fitted, so the SDK names them before training instead of after it. [] for a model
    of another library (another flavour saves it)."""
    if not type(model).__module__.startswith("sklearn.") or not hasattr(model, "get_params"):
        return []
    found = []
    for value in [model, *model.get_params(deep=True).values()]:
        if hasattr(value, "get_params"):
            kind = type(value)
        elif callable(value) and not isinstance(value, type) and hasattr(value, "__qualname__"):
            kind = value
        else:
            continue
        name = f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"
        if not trusted(name) and name not in found:
            found.append(name)
    return found


def save(model: Any, target: str | os.PathLike) -> None:
    """Dump with skops, then refuse the file (and remove it) when it names a type the loader would refuse."""
    import skops.io

    partial = Path(str(target) + ".partial")
    skops.io.dump(model, str(partial))
    try:
        check_trusted(partial)
    except UntrustedModel as exc:
        from auditor.flavors import refuse

        partial.unlink(missing_ok=True)
        raise refuse(model, f"skops would save type(s) the auditor refuses to load: {exc}") from None
    partial.replace(target)


def load(path: str | os.PathLike) -> Any:
    """The estimator, loaded by skops trusting only allow-listed types (checked first, from the schema)."""
    return load_data(Path(path).read_bytes(), os.fspath(path))


def load_data(data: bytes, name: str) -> Any:
    """``load`` of a file's bytes, already read: the checks and the load see the same bytes (``name``: in messages).

    skops is told to trust the types the schema names, each allowed by ``trusted`` (``check_trusted``): one build of
    its node tree, where asking skops first for its own list of untrusted types built it twice (0.4 s of a 600-tree
    forest). A type skops finds that the schema walk did not name is put to the same rule before a second try."""
    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    allowed = check_trusted(data, name)
    try:
        return skops.io.loads(data, trusted=sorted(allowed))
    except UntrustedTypesFoundException:
        pass  # skops sees a type the schema walk did not: it is checked by name, as below
    untrusted = skops.io.get_untrusted_types(data=data)
    outside = sorted(t for t in untrusted if not trusted(t))
    if outside:
        raise UntrustedModel(f"{name}: skops lists type(s) outside the allow-list of trusted types: {', '.join(outside)}; it is not loaded")
    return skops.io.loads(data, trusted=list(untrusted))


def _tree(t: Any) -> Forest:
    """A fitted ``sklearn.tree._tree.Tree`` as arrays, straight from its node table: a node is a leaf where it has no
    left child, its values are its row of ``value``, its kind says where a missing value goes."""
    state = t.__getstate__()
    nodes = state["nodes"]
    left = nodes["left_child"].astype(np.int64)
    values = np.array(state["values"], dtype=np.float64).reshape(len(left), -1)
    values[left >= 0] = np.nan  # a split's value is what its samples averaged, not what it predicts: read on leaves only
    missing = nodes["missing_go_to_left"].astype(np.int32) if "missing_go_to_left" in nodes.dtype.names else np.zeros(len(left), np.int32)
    leaf = left < 0
    return Forest(offsets=np.array([0, len(left)], dtype=np.int64), leaf=leaf, feature=nodes["feature"].astype(np.int64),
                  threshold=nodes["threshold"].astype(np.float64), children=(left, nodes["right_child"].astype(np.int64)),
                  kind=np.where(leaf, 0, missing + 1).astype(np.int32),
                  kinds=("", *(f"missing_left={m}" for m in range(int(missing.max(initial=1)) + 1))),
                  values=values)


def _walk(est: Any, prefix: str, normal: Normal, seen: dict[int, str]) -> None:
    """Parameters and fitted attributes of ``est`` (and of the estimators it holds), named by their path; every entry
    of its ``__dict__`` is read (fail closed: a FeatureUnion's fitted ``transformer_list``, a FrozenEstimator's
    ``estimator``, a list-valued parameter such as a VotingClassifier's ``weights``). An estimator held in two
    places (a Pipeline's step, again in its ``steps``) is walked once, and named where else it sits (``same_as``):
    so the order of a Pipeline's steps is compared, not only what each step holds."""
    if id(est) in seen:
        normal.meta[f"{prefix}.same_as"] = seen[id(est)]
        return
    seen[id(est)] = prefix or "model"
    if type(est).__name__ == "Tree" and hasattr(est, "__getstate__"):
        normal.trees.append(_tree(est))
        normal.meta[f"{prefix}.tree_index"] = len(normal.trees) - 1
        return
    children = _children(est)
    for name, child in children:
        _walk(child, _join(prefix, name), normal, seen)
    params = est.get_params(deep=False) if hasattr(est, "get_params") else {}
    for key, value in params.items():
        if key in SET_ASIDE_PARAMS:
            normal.set_aside.append(f"{prefix or 'model'}.{key}={value!r} (echoes how it ran)")
        else:
            _param(value, _join(prefix, key), normal, seen)
    for key, value in sorted(vars(est).items()) if hasattr(est, "__dict__") else ():
        if key in params or key in SET_ASIDE_PARAMS or any(key == c for c, _ in children):
            continue  # a parameter (read above through get_params), or a child walked above
        if key in SET_ASIDE_STATE:
            normal.set_aside.append(f"{_join(prefix, key)} ({SET_ASIDE_STATE[key]})")
            continue
        _state(value, _join(prefix, key), normal, 0, seen)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}".lstrip(".")


def _param(value: Any, path: str, normal: Normal, seen: dict[int, str]) -> None:
    """A parameter by value: plain values as they are, anything else (a ``RandomState`` a fitted GradientBoosting
    hands each of its trees, an estimator, a list in its order) by its state, never by a repr that holds a memory
    address."""
    plain = (bool, int, float, str, type(None))
    if isinstance(value, plain) or (isinstance(value, tuple) and all(isinstance(v, plain) for v in value)):
        normal.meta[path] = value
    else:
        _state(value, path, normal, 0, seen)


def _state(value: Any, path: str, normal: Normal, depth: int, seen: dict[int, str]) -> None:
    """A fitted attribute (private ones too: ``_predictors`` and ``_baseline_prediction`` are what a
    HistGradientBoosting predicts with), by value, recursively: fail closed, never a summarised repr."""
    if depth > 12:
        raise MalformedRecord(f"{path}: fitted state nested too deep to compare; it is not judged identical")
    if isinstance(value, np.ndarray) and value.dtype != object:
        normal.arrays[path] = value
    elif isinstance(value, (bool, str, type(None))):
        normal.meta[path] = value
    elif isinstance(value, (int, float, np.generic)):
        normal.arrays[path] = np.asarray(value)
    elif isinstance(value, type):
        normal.meta[path] = f"{value.__module__}.{value.__qualname__}"
    elif (type(value).__name__ == "Tree" and hasattr(value, "__getstate__")) or hasattr(value, "get_params"):
        _walk(value, path, normal, seen)
    elif type(value).__name__ == "TreePredictor" and isinstance(getattr(value, "nodes", None), np.ndarray):
        _predictor(value, path, normal, seen)
    elif isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.dtype == object):
        items = list(value.ravel()) if isinstance(value, np.ndarray) else list(value)
        normal.meta[f"{path}.length"] = len(items)
        for i, item in enumerate(items):
            _state(item, f"{path}[{i}]", normal, depth + 1, seen)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            _state(value[key], f"{path}[{key!r}]", normal, depth + 1, seen)
    elif hasattr(value, "__dict__") or hasattr(value, "__getstate__"):
        state = value.__getstate__() if hasattr(value, "__getstate__") else vars(value)
        normal.meta[f"{path}.type"] = f"{type(value).__module__}.{type(value).__qualname__}"
        _state(state if state is not None else {}, path, normal, depth + 1, seen)
    else:
        raise MalformedRecord(f"{path}: a fitted attribute of type {type(value).__name__} cannot be compared by value; "
                              "it is not judged identical")


#: a HistGradientBoosting node's fields the ladder reads (the rest are kept as arrays: counts, gains, bins)
_PREDICTOR_LADDER = ("value", "is_leaf", "missing_go_to_left", "is_categorical", "num_threshold", "left", "right", "feature_idx")


def _predictor(predictor: Any, path: str, normal: Normal, seen: dict[int, str]) -> None:
    """A HistGradientBoosting tree (``TreePredictor``: one node table) as a tree of the ladder, so a leaf that moved
    is named by tree and node and measured; the node fields the ladder does not read, and the predictor's other
    attributes (its category bitsets), by value."""
    nodes = predictor.nodes
    leaf = nodes["is_leaf"].astype(bool)
    categorical = nodes["is_categorical"].astype(np.int32) if "is_categorical" in nodes.dtype.names else np.zeros(len(leaf), np.int32)
    kind = np.where(leaf, 0, 1 + nodes["missing_go_to_left"].astype(np.int32) + 2 * categorical).astype(np.int32)
    normal.trees.append(Forest(
        offsets=np.array([0, len(leaf)], dtype=np.int64), leaf=leaf, feature=nodes["feature_idx"].astype(np.int64),
        threshold=nodes["num_threshold"].astype(np.float64),
        children=tuple(np.where(leaf, -1, nodes[side]).astype(np.int64) for side in ("left", "right")), kind=kind,
        kinds=("", "missing_left=0", "missing_left=1", "categorical missing_left=0", "categorical missing_left=1"),
        values=np.where(leaf, nodes["value"], np.nan).astype(np.float64).reshape(-1, 1)))
    normal.meta[f"{path}.tree_index"] = len(normal.trees) - 1
    for field in nodes.dtype.names:
        if field not in _PREDICTOR_LADDER:
            normal.arrays[f"{path}.nodes.{field}"] = np.ascontiguousarray(nodes[field])
    normal.arrays[f"{path}.nodes.value at splits"] = np.where(leaf, 0.0, nodes["value"]).astype(np.float64)  # not predicted with
    for key, value in sorted(vars(predictor).items()):
        if key != "nodes":
            _state(value, _join(path, key), normal, 0, seen)


def _children(est: Any) -> list[tuple[str, Any]]:
    """The fitted sub-estimators a composite holds by name (a Pipeline's steps, a ColumnTransformer's transformers)."""
    if type(est).__name__ == "Pipeline":
        return [(f"step {name}", step) for name, step in est.steps if hasattr(step, "get_params")]
    if hasattr(est, "transformers_"):
        return [(f"transformer {name}", t) for name, t, _ in est.transformers_ if hasattr(t, "get_params")]
    if hasattr(est, "tree_"):
        return [("tree_", est.tree_)]
    return []


def normal_of(model: Any) -> Normal:
    normal = Normal(flavor=NAME, meta={"class": f"{type(model).__module__}.{type(model).__qualname__}"})
    _walk(model, "", normal, {})
    normal.trees = Forest.join(normal.trees) if normal.trees else Forest.empty()  # one forest, compared as arrays
    normal.meta = {k: v for k, v in normal.meta.items()}
    normal.set_aside.append("skops object ids (array file names and ids in schema.json)")
    return normal


def normal(path: str | os.PathLike) -> Normal:
    return normal_of(load(path))


def normal_data(data: bytes, name: str) -> Normal:
    """``normal`` of a file's bytes, already read (``name`` says whose, in messages)."""
    return normal_of(load_data(data, name))


def knobs(model: Any) -> dict[str, Any]:
    """Every ``random_state`` and thread count in ``get_params(deep=True)``, by parameter path."""
    params = model.get_params(deep=True) if hasattr(model, "get_params") else {}
    out = {}
    for key, value in sorted(params.items()):
        if key.split("__")[-1] in ("random_state", "n_jobs", "early_stopping", "solver", "subsample", "bootstrap", "max_features"):
            out[key] = value if isinstance(value, (str, int, float, bool)) or value is None else f"<{type(value).__name__}>"
    return out


def predict(model: Any, x: Any) -> np.ndarray:
    x = x if hasattr(x, "columns") else np.asarray(x)  # a DataFrame as the pipeline was fitted on it
    if hasattr(model, "decision_function"):
        return np.asarray(model.decision_function(x))
    if hasattr(model, "predict_proba"):
        return np.asarray(model.predict_proba(x))[:, -1]
    return np.asarray(model.predict(x))


def scores(model: Any, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(raw, score): ``decision_function`` (else the score) and the positive class's probability for a binary
    classifier (all classes for multi-class), else ``predict``."""
    x = x if hasattr(x, "columns") else np.asarray(x)  # a DataFrame as the pipeline was fitted on it
    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(x))
        score = proba[:, 1] if proba.ndim == 2 and proba.shape[1] == 2 else proba
    else:
        score = np.asarray(model.predict(x))
    raw = np.asarray(model.decision_function(x)) if hasattr(model, "decision_function") else score
    return raw, score
