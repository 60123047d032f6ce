"""The native boosting APIs' execution parameters are no consumed data (issue 39, build point 1)."""

from __future__ import annotations


def test_native_boosting_params_that_say_only_how_many_threads_run_are_no_consumed_data():
    """Issue 39: ``xgboost.train(params, …)`` at 2 threads and at 1 consumed the same data; a seed is still an input."""
    import numpy as np
    import xgboost as xgb

    from tests.fixtures.consumed import fingerprint

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 4)), rng.integers(0, 2, size=200)

    def train(**params):
        return lambda: xgb.train({"objective": "binary:logistic", "max_depth": 2, **params}, xgb.DMatrix(x, label=y), num_boost_round=3)

    two, one = fingerprint(train(nthread=2, verbosity=0)), fingerprint(train(nthread=1))
    assert two.streams["fit"].digest == one.streams["fit"].digest
    seeded = fingerprint(train(nthread=1, seed=1))
    assert seeded.streams["fit"].digest != one.streams["fit"].digest
