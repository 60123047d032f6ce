"""XGBoost: the model as UBJSON (binary floats, XGBoost's default since 2.1) plus ``save_config()`` JSON.

Both go into one bundle (``auditor.flavors.bundle``). Loading is XGBoost's own format, never a pickle.
The normal form is read from the model's UBJSON as data (``auditor.flavors.ubjson``: each per-node field of every
tree is one numpy array, ``auditor.flavors.forest``) and the config; ``nthread``/``n_jobs`` are echoed thread
counts, set aside (FACTS.md: the trees are identical at 1 and 2 threads on xgboost 3.2). The bytes are read as
XGBoost wrote them when the installed XGBoost wrote them (it saves what it loads byte for byte); a file another
version wrote is first loaded and saved again by the installed one, so both models are read in one version's form.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from auditor.digests import sha256_digest
from auditor.errors import MalformedRecord
from auditor.flavors import ubjson
from auditor.flavors.base import Normal
from auditor.flavors.bundle import read_bundle, write_bundle
from auditor.flavors.forest import Forest

NAME = "xgboost"
MEMBERS = ("model.ubj", "config.json")
#: config entries that echo how the model was run, not what it is
SET_ASIDE = ("learner.generic_param.nthread", "learner.generic_param.n_jobs")
KNOBS = ("nthread", "n_jobs", "tree_method", "device", "colsample_bytree", "colsample_bylevel", "colsample_bynode",
         "subsample", "sampling_method", "objective", "seed", "random_state")


def booster(model: Any) -> Any:
    """The Booster of ``model`` (itself, or a scikit-learn wrapper's)."""
    return model.get_booster() if hasattr(model, "get_booster") else model


def save(model: Any, target: str | os.PathLike) -> None:
    b = booster(model)
    write_bundle({"model.ubj": bytes(b.save_raw("ubj")), "config.json": b.save_config().encode("utf-8")}, target)


def load(path: str | os.PathLike) -> Any:
    """The Booster, from the UBJSON member (XGBoost's format: no code runs), with its config applied."""
    import xgboost

    members = read_bundle(path, MEMBERS)
    b = xgboost.Booster()
    b.load_model(bytearray(members["model.ubj"]))
    b.load_config(members["config.json"].decode("utf-8"))
    return b


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


#: the per-node fields of a tree the ladder reads, and the training statistics compared as one array
NODE_FIELDS = ("left_children", "right_children", "split_indices", "split_conditions", "default_left", "split_type")
STATISTICS = ("loss_changes", "sum_hessian", "base_weights")


def _column(trees: Any, key: str, raw: bytes | None) -> np.ndarray:
    """Field ``key`` of every tree end to end: one copy out of the UBJSON bytes, or (a JSON document) its lists."""
    if isinstance(trees, ubjson.Records) and key in trees.dtypes:
        return ubjson.column(raw, trees, key)
    fields = [t.get(key, []) for t in trees]
    if raw is not None and fields and all(isinstance(f, ubjson.Span) for f in fields):
        return ubjson.column(raw, fields)
    return np.concatenate([np.asarray(ubjson.plain(raw, f)) for f in fields]) if fields else np.empty(0)


def _statistics(trees: Any, raw: bytes | None) -> np.ndarray:
    """The training statistics of every node, tree by tree (each tree's loss changes, hessian sums, base weights)."""
    if isinstance(trees, ubjson.Records) and all(k in trees.dtypes for k in STATISTICS) and len({trees.dtypes[k] for k in STATISTICS}) == 1:
        offsets = np.stack([np.frombuffer(trees.offsets[k], dtype=np.int64) for k in STATISTICS], axis=1).reshape(-1)
        counts = np.stack([np.frombuffer(trees.counts[k], dtype=np.int64) for k in STATISTICS], axis=1).reshape(-1)
        return ubjson.gather(raw, offsets.tolist(), counts.tolist(), trees.dtypes[STATISTICS[0]])
    stats = [np.asarray(ubjson.plain(raw, t.get(k, [])), dtype=np.float64) for t in trees for k in STATISTICS]
    return np.concatenate(stats) if stats else np.empty(0)


def _forest(trees: Any, raw: bytes | None) -> Forest:
    """The trees as arrays: a node is a leaf where it has no left child; its value is its split condition."""
    if not len(trees):
        return Forest.empty()
    left, right, feature, condition, default_left, split_type = (_column(trees, k, raw) for k in NODE_FIELDS)
    if isinstance(trees, ubjson.Records) and "left_children" in trees.dtypes:
        sizes = np.frombuffer(trees.counts["left_children"], dtype=np.int64)
    else:
        sizes = np.array([_size(t["left_children"]) for t in trees], dtype=np.int64)
    if any(len(c) != int(sizes.sum()) for c in (left, right, feature, condition, default_left, split_type)):
        raise MalformedRecord("an XGBoost tree's node fields differ in length")
    leaf = left == -1
    kind, kinds = _kinds(default_left, split_type)
    kind[leaf] = 0
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return Forest(offsets=offsets, leaf=leaf, feature=feature, threshold=_with_category_sets(condition, trees, raw, offsets),
                  children=(left, right), kind=kind, kinds=kinds, values=_leaf_values(condition, trees, raw, offsets, leaf, right))


def _leaf_values(condition: np.ndarray, trees: Any, raw: bytes | None, offsets: np.ndarray, leaf: np.ndarray,
                 right: np.ndarray) -> np.ndarray:
    """Each leaf's value: its split condition, or in a multi-output tree (``multi_strategy="multi_output_tree"``) its
    vector of ``leaf_weights``, found at the leaf's index (its right child slot) times the vector's size."""
    if isinstance(trees, ubjson.Records):
        counts = np.frombuffer(trees.counts["leaf_weights"], dtype=np.int64) if "leaf_weights" in trees.dtypes else np.zeros(len(trees), np.int64)
    else:
        counts = np.array([_size(t.get("leaf_weights")) for t in trees], dtype=np.int64)
    if not counts.any():
        return condition.reshape(-1, 1)
    leaves = np.add.reduceat(leaf.astype(np.int64), offsets[:-1]) if len(leaf) else np.zeros(len(counts), np.int64)
    widths = {int(c) // int(n) for c, n in zip(counts, leaves, strict=True) if n} - {0}
    width = widths.pop() if len(widths) == 1 else 0
    if not width or any(c != n * width for c, n in zip(counts, leaves, strict=True)):
        raise MalformedRecord("an XGBoost multi-output tree's leaf_weights do not hold one vector per leaf")
    weights = np.asarray(_column(trees, "leaf_weights", raw), dtype=condition.dtype)  # as the conditions are read
    tree_of = np.repeat(np.arange(len(counts)), np.diff(offsets))
    base = (np.concatenate([[0], np.cumsum(counts)])[tree_of] + right.astype(np.int64) * width)[leaf]
    values = np.full((len(leaf), width), np.nan, dtype=condition.dtype)
    values[leaf] = weights[base[:, None] + np.arange(width)]
    return values


def _with_category_sets(condition: np.ndarray, trees: Any, raw: bytes | None, offsets: np.ndarray) -> np.ndarray:
    """The split thresholds, a categorical split's being its category set (what it sends left; its condition is a
    placeholder): so a set that differs is named by its tree and node."""
    found = _categorical(trees)
    if not found:
        return condition
    threshold = condition.astype(object)
    plain = functools.partial(ubjson.plain, raw) if raw is not None else (lambda v: v)
    def ints(tree: dict[str, Any], key: str) -> list[int]:
        value = plain(tree.get(key))
        return [] if value is None else [int(v) for v in value]

    for i, tree in found:
        categories, segments, sizes = (ints(tree, k) for k in ("categories", "categories_segments", "categories_sizes"))
        for node, start, size in zip(ints(tree, "categories_nodes"), segments, sizes, strict=False):
            if not 0 <= node < offsets[i + 1] - offsets[i]:
                raise MalformedRecord(f"an XGBoost tree's categorical node {node} is outside tree {i}")
            threshold[offsets[i] + node] = tuple(categories[start:start + size])
    return threshold


def _kinds(default_left: np.ndarray, split_type: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each node's default direction and split type as one small code (0: none), and the words of each code."""
    high = int(split_type.max(initial=0)) + 1
    if default_left.min(initial=0) < 0 or split_type.min(initial=0) < 0 or int(default_left.max(initial=0)) * high > 60000:
        raise MalformedRecord("an XGBoost tree's default_left or split_type is out of range")
    code = (default_left.astype(np.uint16) * high + split_type.astype(np.uint16) + 1).astype(np.uint16)
    words = [f"default_left={default_left.dtype.type(d)} split_type={split_type.dtype.type(t)}"
             for d in range(int(default_left.max(initial=0)) + 1) for t in range(high)]
    return code, ("", *words)


def normal_from(model_json: dict[str, Any], config: dict[str, Any], raw: bytes | None = None,
                document: Any = None) -> Normal:
    """The normal form of an XGBoost model document (its JSON, or with ``raw`` the UBJSON bytes it was read from
    with ``ubjson.loads(raw, spans=True)``) and its config."""
    learner = model_json["learner"]
    booster_model = learner["gradient_booster"].get("model", learner["gradient_booster"])
    trees = booster_model.get("trees", [])
    flat = {f"config.{k}": v for k, v in _flatten(config).items() if k not in SET_ASIDE}
    plain = functools.partial(ubjson.plain, raw) if raw is not None else (lambda v: v)
    meta = {**flat, "version": plain(model_json.get("version")), "tree_info": plain(booster_model.get("tree_info")),
            "iteration_indptr": plain(booster_model.get("iteration_indptr")),
            **{f"learner.{k}": plain(v) for k, v in learner.items() if k != "gradient_booster"},
            }  # category sets: the thresholds of categorical splits (``_with_category_sets``), and in the identity
    arrays = {"node statistics (loss_changes, sum_hessian, base_weights)": _statistics(trees, raw)}
    set_aside = [f"config {k.rsplit('.', 1)[-1]} (a thread count echoed into the config, not the model)"
                 for k in SET_ASIDE if k in _flatten(config)]
    if "model" not in learner["gradient_booster"] or not trees:  # dart, gblinear, or a layout not read above
        set_aside.append("the tree ladder reads gbtree models only: this booster is compared as a whole document")
    # fail closed: everything but the set-aside thread counts; the UBJSON by the digest of its bytes (XGBoost writes a
    # model's bytes the same each time), the whole document read again only to name a difference the ladder misses
    identity = {"model": model_json, "config": flat} if raw is None else {"model.ubj": sha256_digest(raw), "config": flat}
    return Normal(flavor=NAME, meta=meta, trees=_forest(trees, raw), arrays=arrays, set_aside=set_aside, identity=identity,
                  document=None if document is None else lambda: {"model": document(), "config": flat})


def _size(value: Any) -> int:
    return value.count if isinstance(value, ubjson.Span) else len(value or [])


def _categorical(trees: Any) -> list[tuple[int, dict[str, Any]]]:
    """The trees with categorical splits, by index (their category lists are part of the model)."""
    if isinstance(trees, ubjson.Records) and "categories" in trees.dtypes:
        return [(i, trees[i]) for i in np.flatnonzero(np.frombuffer(trees.counts["categories"], dtype=np.int64)).tolist()]
    return [(i, t) for i, t in enumerate(trees) if _size(t.get("categories"))]


def normal(path: str | os.PathLike) -> Normal:
    """Read the bundle as data: the UBJSON as XGBoost wrote it (no pickle, no code), in the installed XGBoost's form."""
    return normal_data(Path(path).read_bytes(), os.fspath(path))


def normal_data(data: bytes, name: str) -> Normal:
    """``normal`` of the bytes of the bundle at ``name``, already read. The whole document, to name a difference the
    ladder does not, is read from ``name`` again when asked, and only while it holds these bytes (``_document``)."""
    members = read_bundle(data, MEMBERS, name=name)
    raw, doc = _read(members.pop("model.ubj"))
    return normal_from(doc, json.loads(members.pop("config.json")), raw=raw,
                       document=functools.partial(_document, name, sha256_digest(data)))


def _document(path: str, sha256: str) -> Any:
    """The whole model document of ``path``, as JSON holds it (lists of numbers): read again, to name a difference,
    only while the file holds the bytes the normal form was read from (never another model's document); the bytes
    are not kept meanwhile (a tree diff's memory stays within twice the two files, issue 41)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise MalformedRecord(f"{path} cannot be read again to name how it differs: {exc}") from None
    if sha256_digest(data) != sha256:
        raise MalformedRecord(f"{path} changed since it was read: its whole document is not read to name a difference")
    raw, doc = _read(read_bundle(data, MEMBERS, name=path)["model.ubj"])
    return ubjson.plain(raw, doc)


def _read(raw: bytes) -> tuple[bytes, dict[str, Any]]:
    """``raw`` as the installed XGBoost saves it, and its document (typed arrays as spans): itself when that version
    wrote it (XGBoost saves what it loads byte for byte), else loaded and saved again (the version and the layout
    another version writes are not the model). XGBoost itself is imported only to save again (its import is about
    a second, issue 41): its version is read from the installed distribution's metadata."""
    doc = ubjson.loads(raw, spans=True)
    if not isinstance(doc, dict) or not isinstance(doc.get("learner"), dict):
        raise MalformedRecord("not an XGBoost model document (no learner)")
    installed = [int(p) for p in _installed_version().split("+")[0].split(".")[:3] if p.isdigit()]
    if ubjson.plain(raw, doc.get("version")) == installed:
        return raw, doc
    import xgboost

    b = xgboost.Booster()
    b.load_model(bytearray(raw))
    raw = bytes(b.save_raw("ubj"))
    return raw, ubjson.loads(raw, spans=True)


def _installed_version() -> str:
    """The installed XGBoost's version, as ``xgboost.__version__`` says it (from the distribution's metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("xgboost")
    except PackageNotFoundError:
        import xgboost  # not installed as a distribution: its import says so (or the module knows its version)

        return str(xgboost.__version__)


def knobs(model: Any) -> dict[str, Any]:
    """The determinism knobs as resolved at fit time, from the booster's config (and the wrapper's params)."""
    config = json.loads(booster(model).save_config())
    flat = {k.rsplit(".", 1)[-1]: v for k, v in _flatten(config).items()}
    out = {k: flat[k] for k in KNOBS if k in flat and not isinstance(flat[k], (dict, list))}
    if "objective" not in out and isinstance(config.get("learner", {}).get("objective"), dict):
        out["objective"] = config["learner"]["objective"].get("name")
    params = model.get_params() if hasattr(model, "get_params") else {}
    out.update({f"param.{k}": params[k] for k in ("tree_method", "device", "n_jobs", "random_state") if k in params})
    return {k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v)) for k, v in out.items()}


def predict(model: Any, x: Any) -> np.ndarray:
    import xgboost

    return np.asarray(booster(model).predict(xgboost.DMatrix(np.asarray(x)), output_margin=True))


__all__ = ["NAME", "Path", "knobs", "load", "normal", "normal_from", "save"]


def scores(model: Any, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(raw margin, score) of a Booster or wrapper: the score is XGBoost's default output (a probability for
    logistic objectives, one column per class for ``multi:softprob``)."""
    import xgboost

    data = xgboost.DMatrix(np.asarray(x))
    b = booster(model)
    return np.asarray(b.predict(data, output_margin=True)), np.asarray(b.predict(data))
