"""LightGBM: the text model (``save_model``/``model_to_string``), thresholds and leaf values in full precision.

The normal form is parsed from the text itself (no library needed to compare): the header, each
``Tree=`` block and the ``parameters:`` section. Set aside: ``[num_threads: N]`` (an echoed run
setting: FACTS.md measured identical trees at 1 and 2 threads on lightgbm 4.7, with bagging too),
the per-tree ``tree_sizes`` (byte counts of the text), and split gains and internal values, which the
text prints with 6 digits only (they are training statistics, not used to predict).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from auditor.errors import MalformedRecord
from auditor.flavors.base import Normal
from auditor.flavors.forest import PAD, Forest
from auditor.flavors.rules import ORDER_FREE_PARAMS, order_free

NAME = "lightgbm"
SET_ASIDE_PARAMS = ("num_threads",)
KNOBS = ("num_threads", "deterministic", "force_row_wise", "force_col_wise", "bagging_fraction", "bagging_freq",
         "bagging_seed", "feature_fraction", "feature_fraction_seed", "device_type", "gpu_use_dp", "seed", "data_random_seed",
         "extra_trees", "extra_seed", "boosting", "objective")
_TREE_META = ("num_cat", "cat_boundaries", "cat_threshold", "is_linear", "num_features", "leaf_features", "shrinkage")
#: printed with 6 digits or derived from the others: not compared
_TREE_SKIPPED = ("split_gain", "internal_value", "internal_weight", "internal_count", "leaf_weight", "leaf_count", "num_leaves")


def booster(model: Any) -> Any:
    return model.booster_ if hasattr(model, "booster_") else model


def save(model: Any, target: str | os.PathLike) -> None:
    text = booster(model).model_to_string(num_iteration=-1)
    partial = Path(str(target) + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(target)


def load(path: str | os.PathLike) -> Any:
    import lightgbm

    return lightgbm.Booster(model_str=Path(path).read_text(encoding="utf-8"))


def _blocks(text: str) -> tuple[dict[str, str], list[dict[str, str]], dict[str, str], list[str]]:
    """(header, trees, parameters, the rest) of a text model."""
    head, _, rest = text.partition("\nTree=")
    if not _:
        head, rest = text, ""
    trees_text, _, tail = ("Tree=" + rest).partition("end of trees") if rest else ("", "", text)
    header = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    trees = []
    for block in trees_text.split("Tree=")[1:]:
        trees.append(dict(line.split("=", 1) for line in block.splitlines()[1:] if "=" in line))
    params_text = tail.partition("parameters:")[2].partition("end of parameters")[0]
    params = {}
    for line in params_text.splitlines():
        line = line.strip()
        if line.startswith("[") and ": " in line:
            key, value = line[1:-1].split(": ", 1)
            params[key] = value
    other = [line for line in tail.partition("end of parameters")[2].splitlines() if line.strip()]
    return header, trees, params, other


def _forest(trees: list[dict[str, str]]) -> Forest:
    """The trees as arrays, parsed field by field (each a line of numbers): a tree's splits, then its leaves."""
    columns: dict[str, list[np.ndarray]] = {k: [] for k in ("leaf", "feature", "threshold", "left", "right", "kind", "values", "widths")}
    vocabulary: dict[str, int] = {"": 0}
    sizes = []
    for t in trees:
        n, leaves = _tree(t, columns, vocabulary)
        sizes.append(n + leaves)
    if not trees:
        return Forest.empty()
    thresholds = columns["threshold"]
    if any(c.dtype == object for c in thresholds):
        thresholds = [c.astype(object) for c in thresholds]
    return Forest(offsets=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]), leaf=np.concatenate(columns["leaf"]),
                  feature=np.concatenate(columns["feature"]), threshold=np.concatenate(thresholds),
                  children=(np.concatenate(columns["left"]), np.concatenate(columns["right"])),
                  kind=np.concatenate(columns["kind"]), kinds=tuple(vocabulary), **_values(columns))


def _values(columns: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray | None]:
    """The leaves' values as the Forest holds them: one column, or (linear trees: a leaf's value, constant and
    coefficients) as wide as the widest leaf, NaN beyond each leaf's own ``widths``."""
    widths = np.concatenate(columns["widths"])
    width = int(widths.max(initial=1))
    if width == 1:
        return {"values": np.concatenate([v[:, 0] for v in columns["values"]]).reshape(-1, 1), "widths": None}
    padded = [np.pad(v, ((0, 0), (0, width - v.shape[1])), constant_values=np.nan) for v in columns["values"]]
    return {"values": np.concatenate(padded), "widths": widths}


def _tree(t: dict[str, str], columns: dict[str, list[np.ndarray]], vocabulary: dict[str, int]) -> tuple[int, int]:
    """One ``Tree=`` block into ``columns``: (splits, leaves). A categorical split's threshold stays its text (an index
    into the tree's category bitsets); the tree's own fields (categories, linear, shrinkage) are its root's kind."""
    leaves = np.array(t.get("leaf_value", "").split(), dtype=np.float64)
    if "split_feature" not in t:
        leaves = leaves[:1]
        n = 0
        features = lefts = rights = codes = np.empty(0, dtype=np.int64)
        thresholds = np.empty(0)
    else:
        kinds = t["decision_type"].split()
        n = len(kinds)
        features = np.array(t["split_feature"].split()[:n], dtype=np.int64)  # as many as there are splits, as before
        text = t["threshold"].split()[:n]
        categorical = (np.array(kinds, dtype=np.int64) & 1).astype(bool)[:len(text)]
        thresholds = (np.fromiter((_category_set(t, x) if c else float(x) for x, c in zip(text, categorical, strict=True)),
                                  dtype=object, count=len(text)) if categorical.any() else np.array(text, dtype=np.float64))
        lefts, rights = (np.array(t[k].split()[:n], dtype=np.int64) for k in ("left_child", "right_child"))
        lefts, rights = (np.where(c >= 0, c, n - c - 1) for c in (lefts, rights))  # a leaf ~k is node n + k
        codes = np.array([vocabulary.setdefault(f"decision_type={k}", len(vocabulary)) for k in kinds], dtype=np.int32)
        extra = " ".join(f"{k}={t[k]}" for k in _TREE_META if k in t and k not in _READ_PER_NODE)
        if n:
            codes[0] = vocabulary.setdefault(f"decision_type={kinds[0]} {extra}", len(vocabulary))
    if len(features) != n or len(thresholds) != n or len(lefts) != n or len(rights) != n:
        raise MalformedRecord("a LightGBM tree's split fields differ in length")
    count = len(leaves)
    widths, values = _leaf_columns(t, n, leaves)
    columns["widths"].append(widths)
    columns["values"].append(values)
    columns["leaf"].append(np.concatenate([np.zeros(n, dtype=bool), np.ones(count, dtype=bool)]))
    columns["feature"].append(np.concatenate([features, np.zeros(count, dtype=np.int64)]))
    columns["threshold"].append(np.concatenate([thresholds, np.full(count, np.nan, dtype=thresholds.dtype)]))
    columns["left"].append(np.concatenate([lefts, np.full(count, PAD, dtype=np.int64)]))
    columns["right"].append(np.concatenate([rights, np.full(count, PAD, dtype=np.int64)]))
    columns["kind"].append(np.concatenate([codes, np.zeros(count, dtype=np.int32)]).astype(np.int32))
    return n, count


#: the tree fields read into its nodes (category sets into categorical splits), not into its root's kind
_READ_PER_NODE = ("cat_boundaries", "cat_threshold", "leaf_const", "leaf_coeff")


def _category_set(t: dict[str, str], index: str) -> tuple[int, ...]:
    """A categorical split's threshold (an index into the tree's bitsets) as the categories it sends left."""
    try:
        bounds = [int(x) for x in t["cat_boundaries"].split()]
        words = [int(x) for x in t["cat_threshold"].split()][bounds[int(index)]:bounds[int(index) + 1]]
    except (KeyError, ValueError, IndexError):
        raise MalformedRecord(f"a LightGBM categorical split's threshold {index!r} names no category bitset") from None
    return tuple(32 * i + b for i, word in enumerate(words) for b in range(32) if word >> b & 1)


def _leaf_columns(t: dict[str, str], n: int, leaves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values per node of a tree of ``n`` splits, then its ``leaves``, and how many each holds: one (NaN on a
    split), or on a linear tree's leaf its value, constant and coefficients (``_linear_leaves``)."""
    if t.get("is_linear") != "1":
        return np.ones(n + len(leaves), dtype=np.int64), np.concatenate([np.full(n, np.nan), leaves]).reshape(-1, 1)
    linear = _linear_leaves(t, leaves)
    widths = np.array([1] * n + [len(v) for v in linear], dtype=np.int64)
    values = np.full((len(widths), int(widths.max())), np.nan)
    for k, v in enumerate(linear):
        values[n + k, :len(v)] = v
    return widths, values


def _linear_leaves(t: dict[str, str], leaves: np.ndarray) -> list[list[float]]:
    """Each leaf's values in a linear tree (``is_linear=1``): its value, constant and coefficients (which features
    they weigh stays in the tree's kind: ``leaf_features``)."""
    try:
        const = [float(x) for x in t["leaf_const"].split()]
        sizes = [int(x) for x in t["num_features"].split()]
        coeff = [float(x) for x in t.get("leaf_coeff", "").split()]
    except (KeyError, ValueError):
        raise MalformedRecord("a LightGBM linear tree lacks leaf_const or num_features, or holds a non-number") from None
    if len(const) != len(leaves) or len(sizes) != len(leaves) or sum(sizes) != len(coeff):
        raise MalformedRecord("a LightGBM linear tree's leaf_const, num_features and leaf_coeff do not match its leaves")
    starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return [[float(v), const[k], *coeff[starts[k]:starts[k + 1]]] for k, v in enumerate(leaves)]


def normal_text(text: str) -> Normal:
    """The normal form of a text model."""
    if not text.startswith("tree"):
        raise MalformedRecord("not a LightGBM text model (it does not begin with 'tree')")
    if "end of trees" not in text or "end of parameters" not in text:
        raise MalformedRecord("not a whole LightGBM text model (no 'end of trees' or 'end of parameters': truncated?)")
    header, trees, params, other = _blocks(text)
    params = order_free(NAME, params)
    meta = {f"header.{k}": v for k, v in header.items() if k != "tree_sizes"}
    meta.update({f"param.{k}": v for k, v in params.items() if k not in SET_ASIDE_PARAMS})
    meta["trailer"] = "\n".join(other)
    set_aside = [f"[{k}: {params[k]}] (a thread count echoed into the parameters, not the model)" for k in SET_ASIDE_PARAMS if k in params]
    set_aside += ["tree_sizes (byte counts of the text)"]
    # the whole text model but the echoed thread count and byte sizes, order-free lists as compared
    identity = [_ordered(line, params) for line in text.splitlines()
                if not line.startswith(("tree_sizes=", *(f"[{k}: " for k in SET_ASIDE_PARAMS)))]
    return Normal(flavor=NAME, meta=meta, trees=_forest(trees), arrays={}, set_aside=set_aside, identity=identity)


def _ordered(line: str, params: dict[str, str]) -> str:
    """A ``[key: value]`` parameter line of an order-free list as compared (``flavors.rules.order_free``)."""
    key = line[1:].partition(": ")[0] if line.startswith("[") and line.endswith("]") else None
    return f"[{key}: {params[key]}]" if key in ORDER_FREE_PARAMS.get(NAME, ()) and key in params else line


def normal(path: str | os.PathLike) -> Normal:
    return normal_data(Path(path).read_bytes(), os.fspath(path))


def normal_data(data: bytes, name: str) -> Normal:
    """The normal form of a text model's bytes, decoded as ``Path.read_text`` decodes a file (UTF-8, universal
    newlines); ``name`` says whose, in messages."""
    try:
        text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
    except UnicodeDecodeError:
        raise MalformedRecord(f"{name} is not a LightGBM text model (not UTF-8 text)") from None
    return normal_text(text)


def knobs(model: Any) -> dict[str, Any]:
    """The determinism knobs as resolved at fit time (the booster's parameters as LightGBM resolved them)."""
    # the parameters block is the same whatever number of trees is written (tests/unit/test_flavors_tabular.py):
    # write the first iteration's, not every tree (0.2 s of a 5,000-tree model's rebuild, issue 41)
    _, _, params, _ = _blocks(booster(model).model_to_string(num_iteration=1))
    out: dict[str, Any] = {k: params[k] for k in KNOBS if k in params}
    given = model.get_params() if hasattr(model, "get_params") else dict(getattr(booster(model), "params", {}) or {})
    for k in ("device", "device_type", "deterministic", "n_jobs", "random_state", "subsample", "subsample_freq"):
        if k in given:
            out[f"param.{k}"] = given[k] if isinstance(given[k], (str, int, float, bool)) or given[k] is None else str(given[k])
    return out


def predict(model: Any, x: Any) -> np.ndarray:
    return np.asarray(booster(model).predict(np.asarray(x), raw_score=True))


def scores(model: Any, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(raw score, score) of a Booster or wrapper: the score is LightGBM's default output (a probability for
    binary objectives, one column per class for multi-class)."""
    b = booster(model)
    x = np.asarray(x)
    return np.asarray(b.predict(x, raw_score=True)), np.asarray(b.predict(x))
