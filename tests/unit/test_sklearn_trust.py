"""Issue 39, build 4: every scikit-learn estimator a bank uses saves without pickle. What may be loaded is what
skops and scikit-learn trust (their own types, fitted internals included), not a hand list; a project's own class
or a function outside skops's list is refused, naming it, and nothing is loaded."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("skops")
pd = pytest.importorskip("pandas")

from sklearn.base import BaseEstimator, TransformerMixin  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, OrdinalEncoder, StandardScaler  # noqa: E402

from auditor.errors import BadInput  # noqa: E402
from auditor.flavors import sklearn as flavor  # noqa: E402


def _frame(rows: int = 300) -> tuple[pd.DataFrame, np.ndarray]:
    """A mixed-type frame: floats with gaps, integers, strings and a category."""
    rng = np.random.default_rng(3)
    x = pd.DataFrame({"income": rng.normal(50, 10, rows), "age": rng.integers(18, 80, rows),
                      "region": rng.choice(["north", "south", "east"], rows),
                      "product": pd.Categorical(rng.choice(["card", "loan"], rows))})
    x.loc[::17, "income"] = np.nan
    return x, (x["income"].fillna(50) + rng.normal(0, 5, rows) > 52).to_numpy().astype(int)


def _mixed(model) -> Pipeline:
    columns = ColumnTransformer([("num", Pipeline([("impute", SimpleImputer()), ("scale", StandardScaler())]), ["income", "age"]),
                                 ("cat", OneHotEncoder(handle_unknown="ignore"), ["region"]),
                                 ("ord", OrdinalEncoder(), ["product"])])
    return Pipeline([("columns", columns), ("model", model)])


MODELS = {
    "hist-gradient-boosting": lambda: _mixed(HistGradientBoostingClassifier(max_iter=20, random_state=0)),
    "hist-gradient-boosting-regressor": lambda: _mixed(HistGradientBoostingRegressor(max_iter=20, random_state=0)),
    "gradient-boosting": lambda: _mixed(GradientBoostingClassifier(n_estimators=10, random_state=0)),
    "gradient-boosting-regressor": lambda: _mixed(GradientBoostingRegressor(n_estimators=10, random_state=0)),
    "random-forest": lambda: _mixed(RandomForestClassifier(n_estimators=5, random_state=0)),
    "extra-trees": lambda: _mixed(ExtraTreesClassifier(n_estimators=5, random_state=0)),
    "logistic": lambda: _mixed(LogisticRegression(max_iter=200)),
    "ridge": lambda: _mixed(Ridge()),
    "log1p": lambda: Pipeline([("log", FunctionTransformer(np.log1p)), ("model", LogisticRegression())]),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_the_common_estimators_save_and_load_without_pickle_and_normalise_alike(tmp_path, kind):
    x, y = _frame()
    if kind == "log1p":
        x = x[["income", "age"]].fillna(1).abs()
    model = MODELS[kind]().fit(x, y)
    target = tmp_path / "model.skops"
    flavor.save(model, target)
    loaded = flavor.load(target)
    assert flavor.normal_of(loaded).digest() == flavor.normal_of(model).digest()
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))


class Doubler(BaseEstimator, TransformerMixin):
    """A project's own transformer: not scikit-learn's, not skops's."""

    def fit(self, x, y=None):
        return self

    def transform(self, x):
        return np.asarray(x) * 2


def _shift(x):
    """A project's own function: skops trusts no function but numpy's and scipy's ufuncs."""
    return np.asarray(x) + 1


@pytest.mark.parametrize(("step", "named"), [(Doubler(), "Doubler"), (FunctionTransformer(_shift), "_shift")])
def test_a_type_nobody_trusts_is_refused_by_name_and_nothing_is_written(tmp_path, step, named):
    x, y = _frame()
    model = Pipeline([("own", step), ("model", LogisticRegression())]).fit(x[["income", "age"]].fillna(0), y)
    with pytest.raises(BadInput, match=named):
        flavor.save(model, tmp_path / "model.skops")
    assert not list(tmp_path.iterdir())


def test_a_type_only_skops_names_is_refused_by_name_too(tmp_path):
    """The schema walk sees a bound method's class (scikit-learn's own, trusted); skops names the method itself.
    The load tells skops to trust only what the walk saw, so skops refuses it, and the load's second check names it
    (a mutation that lets skops's refusal through, or trusts what skops lists unchecked, fails here)."""
    import skops.io

    path = tmp_path / "model.skops"
    skops.io.dump(FunctionTransformer(func=StandardScaler().transform), str(path))
    assert "sklearn.preprocessing._data.StandardScaler" in flavor.check_trusted(path)
    with pytest.raises(flavor.UntrustedModel, match=r"StandardScaler\.transform"):
        flavor.load(path)


@pytest.mark.parametrize("name", ["sklearn.tree._tree.Tree", "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
                                  "sklearn.ensemble._hist_gradient_boosting.binning._BinMapper", "numpy.float64",
                                  "sklearn.ensemble._gb.GradientBoostingClassifier", "numpy.random.mtrand.RandomState"])
def test_the_libraries_own_types_are_trusted(name):
    assert flavor.trusted(name)


@pytest.mark.parametrize("name", ["os.system", "builtins.eval", "posix.system", "sklearn.utils.estimator_checks.check_estimator",
                                  "sklearn..os", "numpy.load", "tests.unit.test_sklearn_trust.Doubler", "subprocess.Popen"])
def test_functions_and_other_packages_are_not(name):
    assert not flavor.trusted(name)


def test_a_type_that_cannot_be_saved_is_named_before_training(caplog):
    """``run.save_model`` refuses it after training; the SDK names it when the fit begins, so nobody trains for an
    hour to learn it (a warning: the block may fit helpers it never saves)."""
    import logging

    from tests.fixtures.consumed import fingerprint

    x, y = _frame()
    numbers = x[["income", "age"]].fillna(0)
    own = Pipeline([("own", Doubler()), ("model", LogisticRegression())])
    with caplog.at_level(logging.WARNING):
        fingerprint(lambda: own.fit(numbers, y))
    said = [r.getMessage() for r in caplog.records if "cannot save without pickle" in r.getMessage()]
    assert len(said) == 1 and "Doubler" in said[0] and "sklearn.pipeline.Pipeline" in said[0], said
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fingerprint(lambda: _mixed(HistGradientBoostingClassifier(max_iter=5)).fit(*_frame()))
    assert not [r for r in caplog.records if "cannot save without pickle" in r.getMessage()]
    assert [n.rsplit(".", 1)[-1] for n in flavor.unsaveable(own)] == ["Doubler"]


def test_a_thread_count_the_bin_mapper_echoes_is_set_aside():
    """HistGradientBoosting hands its bin mapper the OpenMP thread count it ran with (``_bin_mapper.n_threads``): a
    rebuild on a worker with another count is the same model (found by the honest decoys in CI)."""
    x, y = _frame()
    a = MODELS["hist-gradient-boosting"]().fit(x, y)
    b = MODELS["hist-gradient-boosting"]().fit(x, y)
    b.named_steps["model"]._bin_mapper.n_threads = a.named_steps["model"]._bin_mapper.n_threads + 1
    na, nb = flavor.normal_of(a), flavor.normal_of(b)
    assert na.digest() == nb.digest()
    assert any("n_threads" in s for s in na.set_aside)
