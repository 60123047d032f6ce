"""Issue 40, build 1 and acceptance 1: one vocabulary of differences, from the flavour up. Each kind of difference
(threshold, leaf, structure, parameter, shape, dtype, echo) is named as that kind, and counts never exceed totals."""

from __future__ import annotations

import numpy as np
import pytest

from auditor.flavors.base import KINDS, Node, Normal, diff_normals
from auditor.judge.models import as_weight_diff
from auditor.judge.verdict import judge

TREE = [Node(feature=0, threshold=0.5, children=(1, 2)), Node(value=(0.1,)), Node(value=(-0.2,))]


def _normal(tree=TREE, meta=None, arrays=None, set_aside=()) -> Normal:
    return Normal(flavor="test", meta={"eta": "0.100000001", **(meta or {})}, trees=[list(tree)] * 3,
                  arrays={"coef_": np.ones(3), **(arrays or {})}, set_aside=list(set_aside))


@pytest.mark.parametrize(("kind", "other"), [
    ("threshold", _normal(tree=[Node(feature=0, threshold=1.25, children=(1, 2)), *TREE[1:]])),
    ("leaf", _normal(tree=[TREE[0], Node(value=(0.15,)), TREE[2]])),
    ("structure", _normal(tree=[Node(feature=1, threshold=0.5, children=(1, 2)), *TREE[1:]])),
    ("parameter", _normal(meta={"eta": "0.119999997"})),
    ("shape", _normal(arrays={"coef_": np.ones(4)})),
    ("shape", _normal(arrays={"coef_": np.ones(3, dtype=np.int64)})),  # another dtype
])
def test_each_kind_of_difference_is_named_as_that_kind_and_counts_never_exceed_totals(kind, other):
    diff = diff_normals(_normal(), other)
    assert not diff.identical
    assert {e.kind for e in diff.entries} == {kind}, diff.entries  # named as that kind, by the flavour's diff
    if kind != "leaf":  # another model: each line says its kind in the one vocabulary's words
        assert all(KINDS[kind] in s or s.startswith("parameter ") for s in diff.structural), diff.structural
    assert 0 < diff.differing <= diff.compared, (diff.differing, diff.compared)
    weights, evidence = as_weight_diff(diff, "test")
    assert weights.differing <= weights.tensors and weights.unit.startswith("part(s)")
    if kind == "parameter":
        assert evidence["model.cause"] == "parameter eta: '0.100000001' vs '0.119999997'"
    if kind == "threshold":
        assert diff.max_abs == 0.75  # the threshold moved by 0.75 though every leaf is equal


def test_a_set_aside_echo_is_no_difference_and_is_said_as_set_aside():
    diff = diff_normals(_normal(set_aside=["[num_threads: 2] (echo)"]), _normal(set_aside=["[num_threads: 1] (echo)"]))
    assert diff.identical and diff.differing == 0
    assert diff.set_aside == ["[num_threads: 1] (echo)", "[num_threads: 2] (echo)"]


def test_the_bitwise_tier_counts_parts_and_lists_the_parameter_first_with_both_values():
    other = _normal(meta={"eta": "0.119999997"}, tree=[Node(feature=0, threshold=0.75, children=(1, 2)), *TREE[1:]])
    weights, _ = as_weight_diff(diff_normals(_normal(), other), "test")
    _, tiers = judge(findings=[], recovery=None, metric_results=[], weight_diff=weights)
    bitwise = tiers["bitwise"]
    assert bitwise.summary.startswith(f"{weights.differing} of {weights.tensors} part(s)"), bitwise.summary
    assert weights.differing <= weights.tensors
    assert bitwise.details[0] == "parameter eta: '0.100000001' vs '0.119999997'", bitwise.details
    assert not any(d.startswith("shape or dtype differs: tree") for d in bitwise.details), bitwise.details
