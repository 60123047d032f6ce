"""XGBoost: the model as UBJSON (binary floats, XGBoost's default since 2.1) plus ``save_config()`` JSON.

Both go into one bundle (``auditor.flavors.bundle``). Loading is XGBoost's own format, never a pickle.
The normal form is read from the model's JSON (``Booster.save_raw("json")``: float32 values print in
full) and the config; ``nthread``/``n_jobs`` are echoed thread counts, set aside (FACTS.md: the trees
are identical at 1 and 2 threads on xgboost 3.2).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from auditor.flavors.base import Node, Normal
from auditor.flavors.bundle import read_bundle, write_bundle

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


def _tree(t: dict[str, Any]) -> list[Node]:
    left, right = t["left_children"], t["right_children"]
    cond, feat = t["split_conditions"], t["split_indices"]
    default_left, split_type = t["default_left"], t["split_type"]
    nodes = []
    for i in range(len(left)):
        if left[i] == -1:
            nodes.append(Node(value=(float(cond[i]),)))
        else:
            nodes.append(Node(feature=int(feat[i]), threshold=float(cond[i]), children=(int(left[i]), int(right[i])),
                              kind=f"default_left={default_left[i]} split_type={split_type[i]}"))
    return nodes


def normal_from(model_json: dict[str, Any], config: dict[str, Any]) -> Normal:
    """The normal form of an XGBoost model JSON and its config."""
    learner = model_json["learner"]
    booster_model = learner["gradient_booster"].get("model", learner["gradient_booster"])
    trees = booster_model.get("trees", [])
    flat = {f"config.{k}": v for k, v in _flatten(config).items() if k not in SET_ASIDE}
    meta = {**flat, "version": model_json.get("version"), "tree_info": booster_model.get("tree_info"),
            "iteration_indptr": booster_model.get("iteration_indptr"),
            **{f"learner.{k}": v for k, v in learner.items() if k != "gradient_booster"},
            "trees.categories": [[t.get("categories"), t.get("categories_nodes")] for t in trees if t.get("categories")]}
    stats = [np.asarray(t.get(k, []), dtype=np.float64) for t in trees for k in ("loss_changes", "sum_hessian", "base_weights")]
    arrays = {"node statistics (loss_changes, sum_hessian, base_weights)": np.concatenate(stats) if stats else np.empty(0)}
    set_aside = [f"config {k.rsplit('.', 1)[-1]} (a thread count echoed into the config, not the model)"
                 for k in SET_ASIDE if k in _flatten(config)]
    if "model" not in learner["gradient_booster"] or not trees:  # dart, gblinear, or a layout not read above
        set_aside.append("the tree ladder reads gbtree models only: this booster is compared as a whole document")
    identity = {"model": model_json, "config": flat}  # everything but the set-aside thread counts: fail closed
    return Normal(flavor=NAME, meta=meta, trees=[_tree(t) for t in trees], arrays=arrays, set_aside=set_aside,
                  identity=identity)


def normal(path: str | os.PathLike) -> Normal:
    """Read the bundle as data: the UBJSON decoded by XGBoost into its JSON form (no pickle, no code)."""
    import xgboost

    members = read_bundle(path, MEMBERS)
    b = xgboost.Booster()
    b.load_model(bytearray(members["model.ubj"]))
    return normal_from(json.loads(bytes(b.save_raw("json"))), json.loads(members["config.json"]))


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
