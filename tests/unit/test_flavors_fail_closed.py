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
    import re

    edited = re.sub(r"leaf_const=(\S+)", "leaf_const=0.5", text, count=1)
    diff = base.diff_normals(fl.normal_text(text), fl.normal_text(edited))
    assert not diff.identical and re.match(r"tree 0 node \d+: leaf value \[", diff.first)  # a leaf's constant, by its node
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


def _sk():
    from auditor.flavors import sklearn as fs

    return fs


def test_sklearn_pipeline_steps_in_another_order_are_another_model():
    """The same fitted steps in another order predict otherwise: the order is compared, not only each step."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler
    from sklearn.tree import DecisionTreeRegressor

    std, mm = StandardScaler().fit(X), MinMaxScaler().fit(X)
    tree = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, X[:, 0])
    one, other = Pipeline([("std", std), ("mm", mm), ("tree", tree)]), Pipeline([("mm", mm), ("std", std), ("tree", tree)])
    assert not np.allclose(one.predict(X), other.predict(X))
    diff = base.diff_normals(_sk().normal_of(one), _sk().normal_of(other))
    assert not diff.identical and "steps[0]" in str(diff.first)
    assert identical(_sk().normal_of(one), _sk().normal_of(copy.deepcopy(one)))


def test_sklearn_estimators_held_in_parameters_are_walked():
    """A FeatureUnion's fitted transformers sit in its parameter ``transformer_list``; a FrozenEstimator's fitted
    forest in ``estimator``, also inside CalibratedClassifierCV: each is compared (trees in the ladder)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.frozen import FrozenEstimator
    from sklearn.pipeline import FeatureUnion, make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    union = make_pipeline(FeatureUnion([("a", StandardScaler()), ("b", StandardScaler())]), DecisionTreeClassifier(random_state=0)).fit(X, Y)
    moved = copy.deepcopy(union)
    moved[0].transformer_list[1][1].mean_[3] += 0.5
    assert not identical(_sk().normal_of(union), _sk().normal_of(moved))
    forests = [RandomForestClassifier(n_estimators=3, random_state=seed).fit(X, Y) for seed in (0, 1)]
    frozen = [_sk().normal_of(FrozenEstimator(f)) for f in forests]
    assert len(frozen[0].trees) > 0 and not identical(*frozen)
    calibrated = [CalibratedClassifierCV(FrozenEstimator(f)).fit(X, Y) for f in forests]
    normals = [_sk().normal_of(c) for c in calibrated]
    assert len(normals[0].trees) == len(frozen[0].trees)  # the shared estimator walked once, not once per holder
    assert not identical(*normals)


def test_sklearn_list_parameters_are_compared_in_their_order():
    from sklearn.ensemble import VotingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    def voting(weights):
        return VotingClassifier([("lr", LogisticRegression()), ("dt", DecisionTreeClassifier(random_state=0))],
                                voting="soft", weights=weights).fit(X, Y)

    one, other = voting([1, 3]), voting([3, 1])
    assert not np.allclose(one.predict_proba(X), other.predict_proba(X))
    assert not identical(_sk().normal_of(one), _sk().normal_of(other))
    assert identical(_sk().normal_of(one), _sk().normal_of(voting([1, 3])))


def test_sklearn_a_memory_address_in_fitted_state_is_set_aside():
    """CountVectorizer keeps ``id(stop_words)``: two honest fits differ there only, and are the same model."""
    from sklearn.feature_extraction.text import CountVectorizer

    docs = ["red apple pie", "green apple tart", "the red cherry pie", "a green pear tart"]
    fits = [CountVectorizer(stop_words=["the", "a"]).fit(docs) for _ in range(2)]
    assert fits[0]._stop_words_id != fits[1]._stop_words_id
    normals = [_sk().normal_of(f) for f in fits]
    assert identical(*normals)
    assert any("_stop_words_id" in line for line in normals[0].set_aside)
    assert not identical(normals[0], _sk().normal_of(CountVectorizer(stop_words=["the", "an"]).fit(docs)))


def test_catboost_output_settings_are_not_the_model(tmp_path):
    """``train_dir``, ``verbose``, ``logging_level``: where and how much it wrote; an honest rebuild writes elsewhere."""
    catboost = pytest.importorskip("catboost")
    from auditor.flavors import catboost as fc

    def fit(**kw):
        return catboost.CatBoostClassifier(iterations=5, random_seed=0, thread_count=1, **kw).fit(X, Y)

    one = fc.normal_json(_dump(fit(train_dir=str(tmp_path / "a"), verbose=0)))
    assert identical(one, fc.normal_json(_dump(fit(train_dir=str(tmp_path / "b"), verbose=10))))
    assert any("train_dir" in line for line in one.set_aside)
    assert not identical(one, fc.normal_json(_dump(fit(train_dir=str(tmp_path / "a"), verbose=0, depth=3))))


def test_catboost_a_bundle_whose_cbm_is_another_model_is_refused(tmp_path):
    """The ladder reads model.json; predictions come from model.cbm: a bundle holding two models is never compared."""
    catboost = pytest.importorskip("catboost")
    from auditor.errors import MalformedRecord
    from auditor.flavors import catboost as fc
    from auditor.flavors.bundle import read_bundle, write_bundle

    for seed in (0, 1):
        fc.save(catboost.CatBoostClassifier(iterations=5, random_seed=seed, verbose=0, thread_count=1,
                                            allow_writing_files=False).fit(X, Y), tmp_path / f"{seed}.zip")
    members = read_bundle(tmp_path / "0.zip", fc.MEMBERS)
    assert fc.normal_data((tmp_path / "0.zip").read_bytes(), "0.zip").set_aside  # a bundle of one save: read
    write_bundle({**members, "model.cbm": read_bundle(tmp_path / "1.zip", fc.MEMBERS)["model.cbm"]}, tmp_path / "mixed.zip")
    with pytest.raises(MalformedRecord, match="model.cbm is not the model"):
        fc.normal_data((tmp_path / "mixed.zip").read_bytes(), "mixed.zip")


def test_sklearn_a_histgradientboosting_leaf_is_named_and_measured_in_the_ladder():
    """Its trees are node tables (``TreePredictor``): a leaf that moved is tree and node, by how much, not a
    structural 'values differ' of a whole table (an adversarial review)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    hgb = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, Y)
    moved = copy.deepcopy(hgb)
    nodes = moved._predictors[3][0].nodes
    k = int(np.flatnonzero(nodes["is_leaf"])[0])
    nodes["value"][k] += 1e-12
    diff = base.diff_normals(_sk().normal_of(hgb), _sk().normal_of(moved))
    assert len(_sk().normal_of(hgb).trees) == 5 and not diff.structural
    assert diff.first.startswith(f"tree 3 node {k}: leaf value") and 0 < diff.max_abs < 1e-11


def test_sklearn_a_mixtures_report_times_are_set_aside():
    """GaussianMixture(verbose=2) keeps the wall-clock time of its last report: two honest fits differ only there."""
    import time

    from sklearn.mixture import GaussianMixture

    fits = []
    for _ in range(2):
        fits.append(GaussianMixture(n_components=2, random_state=0, verbose=2, verbose_interval=1).fit(X[:, :3]))
        time.sleep(0.01)
    assert fits[0]._iter_prev_time != fits[1]._iter_prev_time
    assert identical(*(_sk().normal_of(f) for f in fits))


def test_catboost_a_tree_without_a_split_and_a_sum_of_models_are_read(tmp_path):
    """A tree with no split is dumped with ``"splits": null``; ``sum_models`` prefixes each summand's info with
    ``modelN:`` (its random guid, its train_dir): an honest pair is the same model (a second review)."""
    catboost = pytest.importorskip("catboost")
    from auditor.flavors import catboost as fc

    def fit(seed: int, folder: str):
        return catboost.CatBoostRegressor(iterations=3, depth=2, random_seed=seed, thread_count=1, verbose=0,
                                          train_dir=str(tmp_path / folder)).fit(X, X[:, 0])

    dump = _dump(fit(0, "a"))
    dump["oblivious_trees"][0]["splits"] = None
    assert len(fc.normal_json(dump).trees) == 3
    sums = [_dump(catboost.sum_models([fit(0, f"{run}0"), fit(1, f"{run}1")])) for run in ("x", "y")]
    assert any(k.startswith("model0:") for k in sums[0]["model_info"])
    assert identical(*(fc.normal_json(d) for d in sums))
    assert not identical(fc.normal_json(sums[0]), fc.normal_json(_dump(catboost.sum_models([fit(0, "z0"), fit(2, "z1")]))))
