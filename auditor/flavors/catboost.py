"""CatBoost: the model as ``cbm`` (CatBoost's binary format) plus its JSON dump, in one bundle.

The normal form is read from the JSON dump as data (no library needed to compare): oblivious trees
(splits, then leaf values), feature borders, scale and bias, and the training params. Set aside:
``model_info.model_guid`` (random on every run: FACTS.md), the thread count, ``train_finish_time``,
the output options (paths and log names), the parameters that say only what it printed or wrote where
(``rules.OUTPUT_PARAMS``: ``train_dir``, ``verbose``, ``logging_level``, ...) and the library's build info.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from auditor.flavors.base import Normal
from auditor.flavors.bundle import read_bundle, write_bundle
from auditor.flavors.forest import Forest
from auditor.flavors.rules import OUTPUT_PARAMS

NAME = "catboost"
MEMBERS = ("model.cbm", "model.json")
SET_ASIDE_INFO = ("model_guid", "train_finish_time", "output_options", "catboost_version_info")
KNOBS = ("task_type", "thread_count", "random_seed", "random_strength", "bootstrap_type", "subsample", "rsm",
         "boosting_type", "devices")


def save(model: Any, target: str | os.PathLike) -> None:
    with tempfile.TemporaryDirectory(prefix="repro-catboost-") as tmp:
        model.save_model(str(Path(tmp) / "model.cbm"), format="cbm")
        model.save_model(str(Path(tmp) / "model.json"), format="json")
        write_bundle({name: (Path(tmp) / name).read_bytes() for name in MEMBERS}, target)


def load(path: str | os.PathLike) -> Any:
    """The model from its ``cbm`` member (CatBoost's flatbuffers format: no pickle)."""
    from catboost import CatBoost

    members = read_bundle(path, MEMBERS)
    model = CatBoost()
    model.load_model(blob=members["model.cbm"])
    return model


def _forest(trees: list[dict[str, Any]]) -> Forest:
    """Oblivious trees as arrays: each tree's splits as a chain of nodes (one per level), then its leaves. The splits
    are read one by one from the parsed JSON (the dump holds them as objects); one array per field for all trees."""
    sizes, leaf, feature, threshold, children, kind, values = [], [], [], [], [], [], []
    for t in trees:
        splits, leaves = t.get("splits") or [], t.get("leaf_values") or []  # a tree without a split: "splits": null
        for i, s in enumerate(splits):
            found = s.get("float_feature_index", s.get("cat_feature_index", s.get("ctr_target_border_idx")))
            leaf.append(found is None)
            feature.append(0 if found is None else found)
            threshold.append(s.get("border", s.get("value")))
            children.append((i + 1,))
            kind.append(f"{s.get('split_type')} split_index={s.get('split_index')}")  # which CTR or feature: part of the split
            values.append(())
        leaf += [True] * len(leaves)
        feature += [0] * len(leaves)
        threshold += [np.nan] * len(leaves)
        children += [()] * len(leaves)
        kind += [""] * len(leaves)
        values += [(float(v),) for v in leaves]
        sizes.append(len(splits) + len(leaves))
    return Forest.build(sizes, leaf, feature, threshold, children, kind, values)


def normal_json(dump: dict[str, Any]) -> Normal:
    """The normal form of a CatBoost JSON dump. A sum of models (``catboost.sum_models``) prefixes each summand's
    info with ``modelN:``: set aside and cleaned alike (``_bare``)."""
    info = dict(dump.get("model_info", {}))
    cleaned, set_aside = {}, []
    for key in [k for k in info if _bare(k) == "params"]:
        cleaned[key], lines = _clean_params(info[key], key)
        set_aside += lines
    if "params" not in cleaned:  # as the form has always read: the run's params, empty where the dump has none
        cleaned["params"], _ = _clean_params(None, "params")
    kept = {k: cleaned.get(k, v) for k, v in info.items() if _bare(k) not in SET_ASIDE_INFO}
    meta = {f"model_info.{k}": v for k, v in kept.items() if k not in cleaned}
    for key, params in cleaned.items():
        meta.update(_flatten(params, key))
    meta.update({k: v for k, v in dump.items() if k not in ("model_info", "oblivious_trees", "scale_and_bias", "features_info")})
    meta["features_info"] = dump.get("features_info")
    trees = dump.get("oblivious_trees") or dump.get("trees") or []
    weights = [np.asarray(t.get("leaf_weights") or [], dtype=np.float64) for t in trees]
    arrays = {"scale_and_bias": np.asarray(_flat(dump.get("scale_and_bias", [])), dtype=np.float64),
              "leaf_weights": np.concatenate(weights) if weights else np.empty(0)}
    set_aside = [f"model_info.{k}" + (" (random on every run)" if _bare(k) == "model_guid" else "")
                 for k in info if _bare(k) in SET_ASIDE_INFO] + set_aside
    identity = {**dump, "model_info": {**kept, **cleaned}}
    return Normal(flavor=NAME, meta=meta, trees=_forest(trees), arrays=arrays, set_aside=set_aside,
                  identity=identity)  # the whole dump but the set-aside info and thread count: fail closed


def _bare(key: str) -> str:
    """A ``model_info`` key without the ``modelN:`` a sum of models gives each summand's."""
    return key.rpartition(":")[2]


def _clean_params(params: Any, key: str) -> tuple[dict[str, Any], list[str]]:
    """A run's params (a JSON string or a mapping) less the thread count and ``rules.OUTPUT_PARAMS`` (at its top and
    in ``flat_params``), and a line for each set aside."""
    params = json.loads(params) if isinstance(params, str) else dict(params or {})
    system = dict(params.get("system_options", {}))
    flat_params = dict(params.get("flat_params", {}))
    thread_count = flat_params.pop("thread_count", system.pop("thread_count", None))
    names = OUTPUT_PARAMS[NAME]
    output = [(f"flat_params.{k}", flat_params.pop(k)) for k in sorted(set(flat_params) & names)]
    output += [(k, params[k]) for k in sorted(set(params) & names)]
    lines = [f"{key} thread_count {thread_count} (a thread count echoed into the params, not the model)"] if thread_count is not None else []
    lines += [f"{key}.{name}={value!r} (says what it printed or wrote where, not the model)" for name, value in output]
    kept = {k: v for k, v in params.items() if k not in names}
    return {**kept, "system_options": system, "flat_params": flat_params}, lines


def _flatten(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flatten(item, f"{prefix}.{key}").items()}
    return {prefix: value}


def _flat(value: Any) -> list[float]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [float(value)]


def normal(path: str | os.PathLike) -> Normal:
    return normal_data(Path(path).read_bytes(), os.fspath(path))


def normal_data(data: bytes, name: str) -> Normal:
    """The normal form of a bundle's bytes (its JSON dump, parsed as data); ``name`` says whose, in messages. The
    ``cbm`` member (what ``load`` predicts with) must be the model the dump describes (``_same_model``)."""
    members = read_bundle(data, MEMBERS, name=name)
    dump = json.loads(members["model.json"])
    checked = _same_model(members["model.cbm"], dump, name)
    normal = normal_json(dump)
    if not checked:
        normal.set_aside.append("model.cbm not checked against model.json here (catboost is not installed): the "
                                "rebuild's scores of both models come from model.cbm")
    return normal


def _same_model(cbm: bytes, dump: dict[str, Any], name: str) -> bool:
    """Whether the ``cbm`` member, loaded (CatBoost's flatbuffers format: no pickle) and dumped again as JSON, is
    ``dump``; False where catboost is not installed. ``MalformedRecord`` where it is another model: the bundle was
    not written by one save (an edited file), and the normal form would describe a model nobody predicts with."""
    try:
        from catboost import CatBoost
    except ImportError:
        return False
    model = CatBoost()
    model.load_model(blob=cbm)
    with tempfile.TemporaryDirectory(prefix="repro-catboost-") as tmp:
        model.save_model(str(Path(tmp) / "model.json"), format="json")
        again = json.loads((Path(tmp) / "model.json").read_bytes())
    if again != dump:
        from auditor.errors import MalformedRecord

        raise MalformedRecord(f"{name}: its model.cbm is not the model its model.json describes (a bundle is written "
                              "by one save of one model): it is not compared", hint="save the model again with the SDK")
    return True


def knobs(model: Any) -> dict[str, Any]:
    params = {**(model.get_all_params() if hasattr(model, "get_all_params") else {}),
              **{k: v for k, v in model.get_params().items() if v is not None}}
    return {k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v)) for k, v in params.items() if k in KNOBS}


def predict(model: Any, x: Any) -> np.ndarray:
    return np.asarray(model.predict(np.asarray(x), prediction_type="RawFormulaVal"))


def scores(model: Any, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """(RawFormulaVal, score): a classifier's probability of the positive class (all classes for multi-class),
    a regressor's prediction."""
    x = np.asarray(x)
    raw = np.asarray(model.predict(x, prediction_type="RawFormulaVal"))
    loss = str(model.get_all_params().get("loss_function", ""))
    if loss in ("Logloss", "CrossEntropy", "MultiClass", "MultiClassOneVsAll"):
        proba = np.asarray(model.predict(x, prediction_type="Probability"))
        return raw, (proba[:, 1] if proba.ndim == 2 and proba.shape[1] == 2 else proba)
    return raw, raw
