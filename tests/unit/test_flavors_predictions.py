"""Issue 28, predictions as evidence: both models scored on the recorded evaluation data, the largest raw-score
difference and the decision-flip rate judged at the recorded threshold against the same-seed floor.
Real libraries, tiny models; files in tmp_path only."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

os.environ.setdefault("LOKY_MAX_CPU_COUNT", "1")  # joblib would otherwise start a subprocess to count cores
from auditor.contract import PREDICTIONS_FILE
from auditor.errors import BadInput, MalformedRecord
from auditor.flavors import module, predictions
from auditor.judge.models import FLIP_METRIC, prediction_evidence
from auditor.judge.result import MetricResult

X = np.random.default_rng(0).normal(size=(400, 6))
Y = (X[:, 0] - X[:, 1] + 0.3 * np.random.default_rng(1).normal(size=400) > 0).astype(int)


def _fit(kind: str, **kw):
    if kind == "xgboost":
        xgboost = pytest.importorskip("xgboost")
        return xgboost.XGBClassifier(n_estimators=4, max_depth=3, random_state=0, **kw).fit(X, Y)
    if kind == "lightgbm":
        lightgbm = pytest.importorskip("lightgbm")
        return lightgbm.LGBMClassifier(n_estimators=4, num_leaves=7, random_state=0, verbose=-1, **kw).fit(X, Y)
    if kind == "catboost":
        catboost = pytest.importorskip("catboost")
        return catboost.CatBoostClassifier(iterations=4, depth=3, random_seed=0, verbose=False, allow_writing_files=False,
                                           **kw).fit(X, Y)
    pytest.importorskip("skops")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import KBinsDiscretizer

    return make_pipeline(KBinsDiscretizer(n_bins=4, encode="onehot-dense", random_state=0),
                         LogisticRegression(**kw)).fit(X, Y)


def _scored(kind: str, tmp_path, **changed) -> dict[str, np.ndarray]:
    flavour = module(kind if kind != "scorecard" else "sklearn")
    tmp_path.mkdir()
    a, b = tmp_path / "registered", tmp_path / "rebuilt"
    flavour.save(_fit(kind), a)
    flavour.save(_fit(kind, **changed), b)
    return predictions.score_both(flavour.NAME, a, b, X)


@pytest.mark.parametrize(("kind", "changed"), [("xgboost", {"learning_rate": 0.9}), ("lightgbm", {"learning_rate": 0.9}),
                                               ("catboost", {"learning_rate": 0.9}), ("scorecard", {"C": 0.001})])
def test_both_models_are_scored_from_their_files_and_a_changed_model_moves_scores_and_flips_decisions(kind, changed, tmp_path):
    same = _scored(kind, tmp_path / "same")
    assert set(same) == set(predictions.ARRAYS) and all(len(v) == len(X) for v in same.values())
    assert np.all((same["registered_score"] >= 0) & (same["registered_score"] <= 1))  # a probability
    found = predictions.compare(same, 0.5)
    assert (found.flips, found.max_abs_raw, found.max_abs_score) == (0, 0.0, 0.0)
    other = predictions.compare(_scored(kind, tmp_path / "other", **changed), 0.5)
    assert other.max_abs_raw > 0 and other.flips > 0 and other.flip_rate == other.flips / len(X)


def test_decisions_are_taken_at_the_threshold_and_by_arg_max_for_classes():
    score = np.array([0.2, 0.5, 0.7])
    assert predictions.decisions(score, 0.5).tolist() == [False, True, True]  # the edge accepts
    assert predictions.decisions(score, 0.6).tolist() == [False, False, True]
    assert predictions.decisions(np.array([[0.1, 0.9], [0.6, 0.4]]), 0.5).tolist() == [1, 0]


def _arrays(a_score, b_score) -> dict[str, np.ndarray]:
    a, b = np.asarray(a_score, dtype=float), np.asarray(b_score, dtype=float)
    return {"registered_raw": a, "rebuilt_raw": b, "registered_score": a, "rebuilt_score": b}


def test_scores_that_do_not_pair_up_or_are_not_finite_are_refused_never_passed():
    with pytest.raises(MalformedRecord, match="do not pair up"):
        predictions.compare(_arrays([0.1, 0.2], [0.1]), 0.5)
    with pytest.raises(MalformedRecord, match="NaN"):
        predictions.compare(_arrays([0.1, np.nan], [0.1, np.nan]), 0.5)
    with pytest.raises(MalformedRecord, match="lacks"):
        predictions.compare({"registered_raw": np.zeros(2)}, 0.5)


def test_evaluation_data_must_be_numeric_rows_and_the_threshold_finite():
    with pytest.raises(BadInput, match="2-D"):
        predictions.as_matrix(np.zeros(5))
    with pytest.raises(BadInput, match="numeric"):
        predictions.as_matrix(np.array([["a", "b"]], dtype=object))
    with pytest.raises(BadInput, match="finite"):
        predictions.recorded(X, float("nan"))
    meta = predictions.recorded(X, 0.5)
    assert meta["rows"] == 400 and meta["threshold"] == 0.5
    assert predictions.recorded(X.copy(), 0.5)["data_sha256"] == meta["data_sha256"]
    assert predictions.recorded(X[::-1], 0.5)["data_sha256"] != meta["data_sha256"]  # the same rows, reordered
    assert predictions.recorded(X.astype(np.float32), 0.5)["data_sha256"] != meta["data_sha256"]


class _Floor:
    def __init__(self, bit_identical: bool) -> None:
        self.bit_identical = bit_identical


def _rebuild(tmp_path, meta: dict, arrays: dict | None):
    predictions.write(tmp_path / PREDICTIONS_FILE, meta, arrays)
    return tmp_path


def test_one_flipped_decision_fails_at_a_zero_floor_and_none_passes(tmp_path):
    recorded = predictions.recorded(X[:4], 0.5)
    folder = _rebuild(tmp_path, recorded, _arrays([0.1, 0.4, 0.6, 0.9], [0.1, 0.4, 0.45, 0.9]))
    for floor in (None, _Floor(True)):  # never calibrated, or identical same-seed reruns: no flip is allowed
        lines, result, why = prediction_evidence(recorded, folder, floor=floor)
        assert why is None and isinstance(result, MetricResult) and result.name == FLIP_METRIC
        assert result.inside is False and result.rebuilt == [0.25] and "1 of 4 decisions flip at threshold 0.5" in result.reason
        assert lines["predictions.flips"] == "1" and lines["predictions.decision_flip_rate"] == "0.25"
        assert float(lines["predictions.max_abs_raw_score"]) == pytest.approx(0.15)
    # the threshold is the recorded one, whatever the rebuild used: at 0.4 the same scores flip nothing
    _, result, _ = prediction_evidence({**recorded, "threshold": 0.4}, folder, floor=None)
    assert result.inside is True and result.rebuilt == [0.0]
    # same-seed reruns that differ measured no flip rate: reported, not judged
    _, result, _ = prediction_evidence(recorded, folder, floor=_Floor(False))
    assert result.inside is None and "not judged" in result.reason


def test_other_evaluation_data_in_the_rebuild_fails_the_flip_rate(tmp_path):
    recorded = predictions.recorded(X[:4], 0.5)
    folder = _rebuild(tmp_path, predictions.recorded(X[4:8], 0.5), _arrays([0.1] * 4, [0.1] * 4))
    _, result, _ = prediction_evidence(recorded, folder, floor=None)
    assert result.inside is False and "other evaluation data" in result.reason


def test_nothing_scored_is_said_and_why(tmp_path):
    lines, result, why = prediction_evidence({}, tmp_path, floor=None)
    assert result is None and "passed no evaluation data" in why and lines["predictions"] == why
    lines, result, why = prediction_evidence(predictions.recorded(X, 0.5), tmp_path, floor=None)
    assert result is None and "left no predictions" in why
    folder = _rebuild(tmp_path, {**predictions.recorded(X, 0.5), "error": "UntrustedModel: names type os.system"}, None)
    lines, result, why = prediction_evidence(predictions.recorded(X, 0.5), folder, floor=None)
    assert result is None and "os.system" in why


def test_a_pickle_in_the_predictions_file_is_never_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    np.savez(tmp_path / PREDICTIONS_FILE, meta=np.array("{}"), registered_raw=np.array([Boom()], dtype=object))
    with pytest.raises(MalformedRecord):
        predictions.read(tmp_path / PREDICTIONS_FILE)
    assert not (tmp_path / "pwned").exists()
    assert pickle  # the payload above is a real pickle gadget (np.savez pickles object arrays)


def test_a_rebuilt_scikit_learn_model_is_read_back_once_and_scored_as_its_file_reads(tmp_path, monkeypatch):
    """Issue 41: the SDK reads a saved scikit-learn model back (its normal form is taken from the loaded model) and
    scores that object, not a second load of the same file; the registered file is still loaded. The scores are
    those of the file as read back, not of the object the script fitted."""
    from auditor.contract import ENV_EVALUATE_WEIGHTS
    from auditor.sdk.models import score_predictions, write_model

    flavour = module("sklearn")
    registered = tmp_path / "registered.skops"
    flavour.save(_fit("scorecard"), registered)
    fitted = _fit("scorecard", C=0.5)
    loads = []
    real_load = flavour.load
    monkeypatch.setattr(flavour, "load", lambda path: loads.append(os.path.basename(path)) or real_load(path))
    saved = write_model(fitted, "sklearn", tmp_path)
    assert saved.loaded is not None and saved.loaded is not fitted  # read back from the file
    score_predictions(saved, X, 0.5, {ENV_EVALUATE_WEIGHTS: str(registered)})
    assert sorted(loads) == sorted([saved.path.name, registered.name])  # each file loaded once
    _, arrays = predictions.read(tmp_path / PREDICTIONS_FILE)
    expected = predictions.score_both("sklearn", registered, saved.path, X)  # both loaded from their files
    for name in predictions.ARRAYS:
        assert np.array_equal(arrays[name], expected[name]), name
    assert not np.array_equal(arrays["registered_raw"], arrays["rebuilt_raw"])  # two models, each its own scores
