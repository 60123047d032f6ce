"""Issue 39, build 3: parameters are compared as parameters. LightGBM echoes ``metric={"l2", "l1"}`` in the order
Python's hash seed gave the set; the order changes nothing in the model, so it is compared as a set. A real change
of the list, or its order under ``first_metric_only`` (where the first metric stops training), still differs."""

from __future__ import annotations

import numpy as np
import pytest

lightgbm = pytest.importorskip("lightgbm")

from auditor.flavors.base import diff_normals  # noqa: E402
from auditor.flavors.lightgbm import normal_text  # noqa: E402


@pytest.fixture(scope="module")
def text() -> str:
    x = np.random.default_rng(0).normal(size=(200, 3))
    booster = lightgbm.train({"metric": ["l2", "l1"], "verbose": -1, "num_threads": 1}, lightgbm.Dataset(x, x[:, 0]),
                             num_boost_round=3)
    out = booster.model_to_string()
    assert "[metric: l2,l1]" in out
    return out


def test_a_set_valued_parameter_in_another_order_is_the_same_model(text):
    other = text.replace("[metric: l2,l1]", "[metric: l1,l2]")
    a, b = normal_text(text), normal_text(other)
    assert a.digest() == b.digest()
    assert diff_normals(a, b).identical


@pytest.mark.parametrize(("old", "new"), [("[metric: l2,l1]", "[metric: l2,huber]"), ("[metric: l2,l1]", "[metric: l2]")])
def test_another_list_is_named_as_the_parameter_with_both_values(text, old, new):
    diff = diff_normals(normal_text(text), normal_text(text.replace(old, new)))
    assert not diff.identical
    assert any("param.metric" in s and "l1" in s for s in diff.structural), diff.structural


def test_the_order_counts_where_the_first_metric_decides(text):
    first = text.replace("[first_metric_only: 0]", "[first_metric_only: 1]")
    assert first != text
    diff = diff_normals(normal_text(first), normal_text(first.replace("[metric: l2,l1]", "[metric: l1,l2]")))
    assert not diff.identical
