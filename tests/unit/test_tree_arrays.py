"""Issue 41, build 3: the tree diff on arrays names what the per-node diff named, and reads XGBoost's UBJSON as data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from auditor.flavors import ubjson
from auditor.flavors.base import Normal, diff_normals
from auditor.flavors.forest import Forest, Node

SPLIT = Node(feature=0, threshold=0.5, children=(1, 2))
TREE = [SPLIT, Node(value=(0.1,)), Node(value=(-0.2,))]
BIG = [SPLIT, Node(feature=1, threshold=1.0, children=(3, 4)), Node(value=(0.3,)), Node(value=(0.4,)), Node(value=(0.5,))]


def test_a_forest_gives_back_the_nodes_it_was_built_from():
    trees = [TREE, BIG, [Node(value=(1.0, 2.0))], [Node(feature="f", threshold=[1, 3], children=(1,), kind="cat"), Node(value=())]]
    forest = Forest.from_nodes(trees)
    assert [forest.nodes(i) for i in range(len(forest))] == trees
    assert Forest.join([Forest.from_nodes(trees[:2]), Forest.from_nodes(trees[2:])]).nodes(3) == trees[3]


def test_trees_after_one_of_another_size_are_still_compared_node_by_node():
    a = Normal("x", trees=[TREE, TREE, TREE])
    b = Normal("x", trees=[BIG, TREE, [SPLIT, TREE[1], Node(value=(-0.25,))]])
    d = diff_normals(a, b)
    assert [e.name for e in d.entries][:2] == ["tree 0", "tree 2 node 2"], d.entries
    assert d.first == "tree 0: tree structure differs: 3 vs 5 nodes"
    assert "tree 2 node 2: leaf value -0.2 vs -0.25" in [f"{e.name}: {e.note}" for e in d.entries]
    assert d.twin is not None and d.twin[0] == 0 and len(d.twin[1]) == 5


def test_a_negative_zero_leaf_is_a_difference_and_nan_equals_nan():
    zero = Normal("x", trees=[[SPLIT, Node(value=(0.0,)), Node(value=(float("nan"),))]])
    negative = Normal("x", trees=[[SPLIT, Node(value=(-0.0,)), Node(value=(float("nan"),))]])
    d = diff_normals(zero, negative)
    assert not d.identical and d.first == "tree 0 node 1: leaf value 0.0 vs -0.0" and d.max_abs == 0.0
    assert diff_normals(zero, Normal("x", trees=[[SPLIT, Node(value=(0.0,)), Node(value=(float("nan"),))]])).identical


def test_a_category_set_threshold_is_compared_and_named_by_value():
    def tree(categories):
        return [Node(feature=2, threshold=categories, children=(1, 2), kind="decision_type=1"), *TREE[1:]]

    d = diff_normals(Normal("x", trees=[TREE, tree([1, 2])]), Normal("x", trees=[TREE, tree([1, 3])]))
    assert d.first == "tree 1 node 0: split threshold differs on feature 2: [1, 2] vs [1, 3]"
    assert d.entries[0].kind == "threshold" and d.entries[0].max_abs is None
    assert diff_normals(Normal("x", trees=[tree("0||2")]), Normal("x", trees=[tree("0||2")])).identical


def test_a_leaf_of_another_width_is_a_shape_difference():
    d = diff_normals(Normal("x", trees=[[SPLIT, Node(value=(0.1,)), Node(value=(0.2,))]]),
                     Normal("x", trees=[[SPLIT, Node(value=(0.1,)), Node(value=(0.2, 0.3))]]))
    assert d.first == "tree 0 node 2: shape or dtype differs: a leaf of 1 vs 2 values" and d.structural


def test_ubjson_reads_typed_arrays_as_views_and_records_column_by_column():
    # {"a": [$l#2 1 2], "t": [#2 {"k": [$d#1 0.5]} {"k": [$d#1 1.5]}]} in UBJSON, as XGBoost writes it
    def key(name: bytes) -> bytes:
        return b"L" + len(name).to_bytes(8, "big") + name

    def floats(*values: float) -> bytes:
        return b"[$d#L" + len(values).to_bytes(8, "big") + np.array(values, dtype=">f4").tobytes()

    doc = (b"{" + key(b"a") + b"[$l#L" + (2).to_bytes(8, "big") + np.array([1, 2], dtype=">i4").tobytes()
           + key(b"t") + b"[#L" + (2).to_bytes(8, "big") + b"{" + key(b"k") + floats(0.5) + b"}{" + key(b"k") + floats(1.5) + b"}}")
    full = ubjson.loads(doc)
    assert full["a"].tolist() == [1, 2] and [t["k"].tolist() for t in full["t"]] == [[0.5], [1.5]]
    lazy = ubjson.loads(doc, spans=True)
    assert isinstance(lazy["t"], ubjson.Records) and ubjson.column(doc, lazy["t"], "k").tolist() == [0.5, 1.5]
    assert ubjson.plain(doc, lazy) == {"a": [1, 2], "t": [{"k": [0.5]}, {"k": [1.5]}]}
    from auditor.errors import MalformedRecord

    with pytest.raises(MalformedRecord):
        ubjson.loads(doc[:-5])


def test_xgboost_read_from_its_bytes_names_what_its_json_names(tmp_path):
    xgboost = pytest.importorskip("xgboost")
    from auditor.flavors import xgboost as fx

    x = np.random.default_rng(0).normal(size=(200, 4))
    y = (x[:, 0] > 0).astype(int)
    model = xgboost.XGBClassifier(n_estimators=6, max_depth=3, random_state=0, n_jobs=1).fit(x, y)
    doc = json.loads(bytes(model.get_booster().save_raw("json")))
    conditions = doc["learner"]["gradient_booster"]["model"]["trees"][4]["split_conditions"]
    conditions[-1] += 0.25  # the last node's: a leaf
    changed = xgboost.Booster()
    changed.load_model(bytearray(json.dumps(doc).encode()))
    changed.load_config(model.get_booster().save_config())
    fx.save(model, tmp_path / "a.zip")
    fx.save(changed, tmp_path / "b.zip")
    a, b = fx.normal(tmp_path / "a.zip"), fx.normal(tmp_path / "b.zip")
    config = json.loads(model.get_booster().save_config())
    a_json = fx.normal_from(json.loads(bytes(model.get_booster().save_raw("json"))), config)
    b_json = fx.normal_from(json.loads(bytes(changed.save_raw("json"))), config)
    assert [a.trees.nodes(i) for i in range(6)] == [a_json.trees.nodes(i) for i in range(6)]
    from_bytes, from_json = diff_normals(a, b), diff_normals(a_json, b_json)
    assert from_bytes.first == from_json.first and from_bytes.first.startswith(f"tree 4 node {len(conditions) - 1}: leaf value ")
    assert from_bytes.twin == from_json.twin
    assert diff_normals(a, fx.normal(tmp_path / "a.zip")).identical


def test_a_rebuild_with_more_trees_names_the_first_tree_it_added_and_a_file_difference_its_element(tmp_path):
    """3 rounds against 5 whose first 3 are the same: the first divergence is tree 3, not a training statistic; a
    dart weight edited is named at its element, not inside the digest of a long list (an adversarial review)."""
    xgboost = pytest.importorskip("xgboost")
    from auditor.flavors import xgboost as fx

    x = np.random.default_rng(0).normal(size=(300, 4))
    y = x[:, 0] + np.sin(x[:, 1])
    params = {"max_depth": 3, "nthread": 1, "tree_method": "hist", "seed": 0}
    for rounds in (3, 5):
        fx.save(xgboost.train(params, xgboost.DMatrix(x, y), rounds), tmp_path / f"{rounds}.zip")
    diff = diff_normals(fx.normal(tmp_path / "3.zip"), fx.normal(tmp_path / "5.zip"))
    assert diff.first == "tree 3: only in the rebuild (3 vs 5 trees)" and diff.only_in_b == ["tree 3", "tree 4"]
    dart = xgboost.train({**params, "booster": "dart", "rate_drop": 0.0}, xgboost.DMatrix(x, y), 20)
    doc = json.loads(bytes(dart.save_raw("json")))
    doc["learner"]["gradient_booster"]["weight_drop"][7] = 0.5
    edited = xgboost.Booster()
    edited.load_model(bytearray(json.dumps(doc).encode()))
    edited.load_config(dart.save_config())
    fx.save(dart, tmp_path / "dart.zip")
    fx.save(edited, tmp_path / "edited.zip")
    first = diff_normals(fx.normal(tmp_path / "dart.zip"), fx.normal(tmp_path / "edited.zip")).first
    assert first is not None and first.startswith("model file at ") and "weight_drop[7]" in first


def test_an_xgboost_category_set_that_differs_is_named_by_tree_and_node(tmp_path):
    """A categorical split sends a set of categories left: that set is its threshold, read alike from the bytes and
    from the JSON (not a parameter, nor the cause of the difference)."""
    xgboost = pytest.importorskip("xgboost")
    from auditor.flavors import xgboost as fx

    rng = np.random.default_rng(0)
    x = np.column_stack([rng.normal(size=(300, 3)), rng.integers(0, 6, 300)]).astype(float)
    y = x[:, 0] + (x[:, 3] % 2)
    data = xgboost.DMatrix(x, y, feature_types=["q", "q", "q", "c"], enable_categorical=True)
    model = xgboost.train({"max_depth": 2, "nthread": 1, "max_cat_to_onehot": 1, "tree_method": "hist"}, data, 3)
    doc = json.loads(bytes(model.save_raw("json")))
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][2]
    k = tree["categories_nodes"][-1]
    start, size = tree["categories_segments"][-1], tree["categories_sizes"][-1]
    tree["categories"][start + size - 1] = max(tree["categories"]) + 1
    edited = xgboost.Booster()
    edited.load_model(bytearray(json.dumps(doc).encode()))
    edited.load_config(model.save_config())
    fx.save(model, tmp_path / "a.zip")
    fx.save(edited, tmp_path / "b.zip")
    diff = diff_normals(fx.normal(tmp_path / "a.zip"), fx.normal(tmp_path / "b.zip"))
    assert diff.first.startswith(f"tree 2 node {k}: split threshold differs on feature 3: (") and diff.cause is None
    config = json.loads(model.save_config())
    from_json = diff_normals(fx.normal_from(json.loads(bytes(model.save_raw("json"))), config), fx.normal_from(doc, config))
    assert from_json.first == diff.first
    assert diff_normals(fx.normal(tmp_path / "a.zip"), fx.normal(tmp_path / "a.zip")).identical


def test_an_xgboost_multi_output_leaf_is_its_vector_of_leaf_weights(tmp_path):
    """With ``multi_strategy="multi_output_tree"`` a leaf's values are in ``leaf_weights`` (its split condition is a
    placeholder): a leaf edited there is named by tree and node, read alike from the bytes and from the JSON."""
    xgboost = pytest.importorskip("xgboost")
    from auditor.flavors import xgboost as fx

    x = np.random.default_rng(0).normal(size=(300, 3))
    y = np.column_stack([x[:, 0], -x[:, 0]])
    model = xgboost.train({"max_depth": 2, "nthread": 1, "multi_strategy": "multi_output_tree", "tree_method": "hist"},
                          xgboost.DMatrix(x, y), 3)
    doc = json.loads(bytes(model.save_raw("json")))
    tree = doc["learner"]["gradient_booster"]["model"]["trees"][1]
    tree["leaf_weights"][1] += 0.25  # the first leaf's second value
    edited = xgboost.Booster()
    edited.load_model(bytearray(json.dumps(doc).encode()))
    edited.load_config(model.save_config())
    fx.save(model, tmp_path / "a.zip")
    fx.save(edited, tmp_path / "b.zip")
    a = fx.normal(tmp_path / "a.zip")
    first_leaf = next(k for k, n in enumerate(a.trees.nodes(1)) if n.leaf)
    assert len(a.trees.nodes(1)[first_leaf].value) == 2
    diff = diff_normals(a, fx.normal(tmp_path / "b.zip"))
    assert diff.first.startswith(f"tree 1 node {first_leaf}: leaf value [") and 0.2 < diff.max_abs < 0.3
    config = json.loads(model.save_config())
    as_json = [fx.normal_from(json.loads(bytes(m.save_raw("json"))), config) for m in (model, edited)]
    assert diff_normals(*as_json).first == diff.first


def test_lightgbm_a_category_bitset_and_a_linear_coefficient_are_named_at_their_node():
    """A categorical split's threshold is the set of categories its bitset sends left; a linear leaf holds its value,
    constant and coefficients: each difference is named at its own node (an adversarial review)."""
    lightgbm = pytest.importorskip("lightgbm")
    import re

    from auditor.flavors import lightgbm as fl

    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 3))
    c = rng.integers(0, 8, 500)
    y = 4 * (x[:, 0] > 0) + (c % 3 == 0) + rng.normal(size=500) * 0.1
    params = {"objective": "regression", "num_leaves": 4, "verbose": -1, "num_threads": 1}

    def resaved(text: str) -> str:
        return lightgbm.Booster(model_str=text).model_to_string()

    text = lightgbm.train({**params, "min_data_per_group": 5, "cat_smooth": 1},
                          lightgbm.Dataset(np.column_stack([x, c]), y, categorical_feature=[3]), 3).model_to_string()
    found = re.search(r"(Tree=1\n(?:.*\n)*?cat_threshold=)(\d+)", text)
    flipped = resaved(text[:found.start(2)] + str(int(found.group(2)) ^ 0b10) + text[found.end(2):])
    first = diff_normals(fl.normal_text(text), fl.normal_text(flipped)).first
    assert re.match(r"tree 1 node \d+: split threshold differs on feature 3: \(", first), first
    linear = lightgbm.train({**params, "linear_tree": True}, lightgbm.Dataset(x, y), 3).model_to_string()
    found = re.search(r"Tree=2\n(?:.*\n)*?leaf_coeff=(\S+)", linear)
    edited = resaved(linear[:found.start(1)] + "0.5" + linear[found.end(1):])
    diff = diff_normals(fl.normal_text(linear), fl.normal_text(edited))
    assert re.match(r"tree 2 node \d+: leaf value \[", diff.first) and diff.max_abs > 0.1
    assert diff_normals(fl.normal_text(linear), fl.normal_text(resaved(linear))).identical
