"""A flavour's identity fails closed: what the tree ladder does not read still makes two models differ.

Real libraries. Found by an adversarial read: each of these changed predictions while the normal forms
hashed alike (a DART or gblinear booster read as zero trees, a linear tree's leaf_const, a CatBoost split's
CTR index, a bin edge inside an object array, a HistGradientBoosting's private predictors).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from auditor.flavors import base

pytest.importorskip("sklearn")
RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 30))
Y = (X[:, 0] + X[:, 1] > 0).astype(int)
Y2 = (X[:, 2] > 0).astype(int)


def identical(a, b) -> bool:
    return base.diff_normals(a, b).identical


@pytest.mark.parametrize("booster", ["dart", "gblinear"])
def test_xgboost_boosters_the_ladder_does_not_read_are_still_compared(booster):
    xgb = pytest.importorskip("xgboost")
    from auditor.flavors import xgboost as fx

    def normal(labels):
        m = xgb.train({"booster": booster, "objective": "binary:logistic", "seed": 1, "nthread": 1}, xgb.DMatrix(X, label=labels), 5)
        return fx.normal_from(json.loads(bytes(m.save_raw("json"))), json.loads(m.save_config()))

    assert not identical(normal(Y), normal(Y2))
    assert identical(normal(Y), normal(Y))


def test_a_lightgbm_linear_trees_constant_is_part_of_the_model():
    lgb = pytest.importorskip("lightgbm")
    from auditor.flavors import lightgbm as fl

    text = lgb.train({"objective": "binary", "linear_tree": True, "verbose": -1, "num_threads": 1}, lgb.Dataset(X, label=Y), 5).model_to_string()
    diff = base.diff_normals(fl.normal_text(text), fl.normal_text(text.replace("leaf_const=", "leaf_const=9", 1)))
    assert not diff.identical and diff.first
    assert identical(fl.normal_text(text), fl.normal_text(text.replace("[num_threads: 1]", "[num_threads: 2]")))


def test_a_catboost_splits_ctr_index_is_part_of_the_split():
    catboost = pytest.importorskip("catboost")
    from auditor.flavors import catboost as fc

    model = catboost.CatBoostClassifier(iterations=5, random_seed=0, verbose=False, thread_count=1).fit(X, Y)
    dump = _dump(model)
    edited = copy.deepcopy(dump)
    split = edited["oblivious_trees"][0]["splits"][0]
    split["split_index"] = split.get("split_index", 0) + 1
    assert not identical(fc.normal_json(dump), fc.normal_json(edited))


def _dump(model) -> dict:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        model.save_model(str(Path(tmp) / "m.json"), format="json")
        return json.loads((Path(tmp) / "m.json").read_text())


def test_sklearn_object_arrays_and_private_predictors_are_compared_by_value():
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.preprocessing import KBinsDiscretizer

    from auditor.flavors import sklearn as fs

    bins = KBinsDiscretizer(n_bins=5, encode="ordinal", strategy="quantile").fit(X)
    nudged = copy.deepcopy(bins)
    nudged.bin_edges_[25][2] += 1e-12  # an object array of per-feature edges: never a summarised repr
    assert not identical(fs.normal_of(bins), fs.normal_of(nudged))
    hgb = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, Y)
    leaf = copy.deepcopy(hgb)
    leaf._predictors[0][0].nodes["value"][1] += 1e-9  # what it predicts with is private state
    assert not identical(fs.normal_of(hgb), fs.normal_of(leaf))
    assert identical(fs.normal_of(hgb), fs.normal_of(copy.deepcopy(hgb)))
