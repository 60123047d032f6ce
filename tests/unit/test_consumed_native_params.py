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


def test_a_seed_or_hyperparameter_given_another_value_is_named_as_one_with_both_values():
    """Issue 39, build 1: a seed passed in the native params mapping is an input, named as one ("trained with seed 1;
    the rebuild used 0; the record's seed is 0"), never only "consumed other data"; a set is recorded sorted."""
    import numpy as np
    import xgboost as xgb

    from auditor.judge.consumed import rebuild_findings
    from auditor.lineage.record import RunRecord, SeedInfo
    from tests.fixtures.consumed import fingerprint

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 4)), rng.integers(0, 2, size=200)

    def train(seed):
        params = {"objective": "binary:logistic", "eta": 0.1, "seed": seed, "nthread": 2, "eval_metric": ["auc", "error"]}
        return lambda: xgb.train(params, xgb.DMatrix(x, label=y), num_boost_round=2)

    trained, rebuilt = fingerprint(train(1)), fingerprint(train(0))
    assert trained.params["seed"] == "1" and "nthread" not in trained.params
    assert trained.params["eval_metric"] == "['auc', 'error']"
    from auditor.sdk.consumed import _shown_param

    assert _shown_param({"l2", "l1", "huber"}) == "['huber', 'l1', 'l2']"  # a set: its members sorted
    record = RunRecord(consumed=trained, seeds=SeedInfo(seed=0))
    [finding] = rebuild_findings(record, RunRecord(consumed=rebuilt))
    assert finding.blocking and finding.path == "consumed.params"
    assert "seed: trained with 1; the rebuild used 0; the record's seed is 0" in finding.message, finding.message
    assert "consumed other data" not in finding.message
    same = fingerprint(train(1))
    assert rebuild_findings(record, RunRecord(consumed=same)) == []
