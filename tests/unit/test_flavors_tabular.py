"""Issue 28: the flavours save without pickle, normalise, diff structurally, refuse what they cannot trust,
and the knob rules fire where the library diverges and nowhere else. Real libraries, tiny models."""

from __future__ import annotations

import os
import pickle
import sys
import zipfile

import numpy as np
import pytest

from auditor.flavors import flavor_of, module

os.environ.setdefault("LOKY_MAX_CPU_COUNT", "1")  # joblib would otherwise start a subprocess to count cores
from auditor.flavors.base import diff_normals
from auditor.flavors.rules import RULES, findings
from auditor.judge.models import model_diff

X = np.random.default_rng(0).normal(size=(400, 6))
Y = (X[:, 0] - X[:, 1] + 0.3 * np.random.default_rng(1).normal(size=400) > 0).astype(int)


def _fit(kind: str, **kw):
    if kind == "xgboost":
        xgboost = pytest.importorskip("xgboost")
        return xgboost.XGBClassifier(n_estimators=4, max_depth=3, random_state=0, subsample=0.8, **kw).fit(X, Y)
    if kind == "lightgbm":
        lightgbm = pytest.importorskip("lightgbm")
        return lightgbm.LGBMClassifier(n_estimators=4, num_leaves=7, random_state=0, subsample=0.8, subsample_freq=1,
                                       verbose=-1, **kw).fit(X, Y)
    if kind == "catboost":
        catboost = pytest.importorskip("catboost")
        return catboost.CatBoostClassifier(iterations=4, depth=3, random_seed=0, verbose=False, allow_writing_files=False, **kw).fit(X, Y)
    pytest.importorskip("skops")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import KBinsDiscretizer

    return make_pipeline(KBinsDiscretizer(n_bins=4, encode="onehot-dense", random_state=0),
                         LogisticRegression(random_state=0, **kw)).fit(X, Y)


THREADS = {"xgboost": "n_jobs", "lightgbm": "n_jobs", "catboost": "thread_count", "sklearn": None}
CHANGED = {"xgboost": {"learning_rate": 0.5}, "lightgbm": {"learning_rate": 0.5}, "catboost": {"learning_rate": 0.05},
           "sklearn": {"C": 0.01}}


@pytest.mark.parametrize("kind", ["xgboost", "lightgbm", "catboost", "sklearn"])
def test_another_thread_count_is_the_same_normalised_model_and_one_hyperparameter_is_named(kind, tmp_path):
    knob = THREADS[kind]
    one, two = (_fit(kind, **({knob: n} if knob else {})) for n in (1, 2))
    changed = _fit(kind, **CHANGED[kind])
    assert flavor_of(one) == kind
    flavour = module(kind)
    paths = [tmp_path / f"m{i}" for i in range(3)]
    for model, path in zip((one, two, changed), paths, strict=True):
        flavour.save(model, path)
        with open(path, "rb") as f:
            assert f.read(2) != b"\x80\x04"  # never a pickle
    same = diff_normals(flavour.normal(paths[0]), flavour.normal(paths[1]))
    assert same.identical and same.first is None
    assert same.set_aside  # and says what it set aside
    diff, evidence = model_diff(paths[0], paths[2], kind)
    assert not diff.identical and diff.worst
    first = evidence["model.first_divergence"]
    assert first.startswith("tree " if kind != "sklearn" else "step logisticregression.coef_"), first
    assert diff.worst[0].name in first
    flavour.load(paths[0])  # loads safely


def test_a_changed_leaf_is_measured_and_a_changed_threshold_is_another_model():
    from auditor.flavors.base import Node, Normal

    tree = [Node(feature=0, threshold=0.5, children=(1, 2)), Node(value=(0.1,)), Node(value=(-0.2,))]
    a = Normal("x", trees=[tree, tree])
    leaf = Normal("x", trees=[tree, [tree[0], Node(value=(0.1,)), Node(value=(-0.25,))]])
    split = Normal("x", trees=[[Node(feature=0, threshold=0.6, children=(1, 2)), *tree[1:]], tree])
    d = diff_normals(a, leaf)
    assert not d.identical and not d.structural and d.first.startswith("tree 1 node 2: leaf value -0.2 vs -0.25")
    assert d.max_abs == pytest.approx(0.05)
    d = diff_normals(a, split)
    assert d.structural and d.first.startswith("tree 0 node 0: split threshold differs on feature 0: 0.5 vs 0.6")
    d = diff_normals(a, Normal("x", trees=[tree]))
    assert d.only_in_a == ["tree 1"] and "2 vs 1 trees" in d.structural


class Payload:
    """Creates a file when it is restored: the proof that a loader executed it."""

    target = ""

    def __setstate__(self, state):
        open(state["target"], "w").close()

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_skops_file_naming_an_untrusted_type_is_refused_naming_it_and_never_executed(tmp_path, monkeypatch):
    skops_io = pytest.importorskip("skops.io")
    from auditor.flavors.sklearn import UntrustedModel, load

    proof = tmp_path / "executed"
    payload = Payload()
    payload.__dict__["target"] = str(proof)
    monkeypatch.setattr(sys.modules[__name__], "Payload", Payload)
    path = tmp_path / "model.skops"
    skops_io.dump({"model": payload}, str(path))
    with pytest.raises(UntrustedModel, match="Payload"):
        load(path)
    assert not proof.exists()
    with pytest.raises(UntrustedModel, match="Payload"):
        model_diff(path, path, "sklearn")
    assert not proof.exists()


def test_a_pickle_posing_as_a_model_artifact_is_refused_and_never_unpickled(tmp_path):
    from auditor.errors import ReproError

    proof = tmp_path / "executed"
    payload = Payload()
    payload.target = str(proof)
    for flavor, name in (("sklearn", "model.skops"), ("xgboost", "model.xgboost.zip"), ("catboost", "model.catboost.zip"),
                         ("lightgbm", "model.lightgbm.txt")):
        path = tmp_path / name
        path.write_bytes(pickle.dumps(payload))
        with pytest.raises(ReproError, match="unsafe format: pickle"):
            model_diff(path, path, flavor)
        assert not proof.exists()
    # a zip holding a pickle beside the expected members is refused too, by its content; any other extra member by the bundle
    bundle = tmp_path / "extra.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("model.ubj", b"{}")
        z.writestr("config.json", b"{}")
        z.writestr("payload.pkl", pickle.dumps(payload))
    with pytest.raises(ReproError, match=r"unsafe format: pickle.*payload\.pkl"):
        model_diff(bundle, bundle, "xgboost")
    assert not proof.exists()
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("model.ubj", b"{}")
        z.writestr("config.json", b"{}")
        z.writestr("notes.txt", b"not a model")
    with pytest.raises(ReproError, match="expected exactly"):
        model_diff(bundle, bundle, "xgboost")


def test_an_unsupported_model_is_refused_with_the_reason_and_the_nearest_route():
    from auditor.errors import BadInput
    from auditor.flavors import refuse

    class Homemade:
        pass

    assert flavor_of(Homemade()) is None
    error = refuse(Homemade())
    assert isinstance(error, BadInput) and "Homemade" in str(error) and "scikit-learn" in error.hint


def test_random_state_none_in_one_step_is_an_unpinned_seed_naming_the_step():
    found = findings("sklearn", {"bins__random_state": 0, "logit__random_state": None})
    assert [f.code for f in found] == ["knobs.unpinned_seed"] and "logit" in found[0].message
    assert "scikit-learn 1.9.1" in found[0].message
    assert findings("sklearn", {"bins__random_state": 0, "logit__random_state": 3}) == []


def test_lightgbm_deterministic_on_gpu_is_a_finding_and_on_cpu_is_not():
    found = findings("lightgbm", {"deterministic": "1", "param.device": "gpu"})
    assert [f.code for f in found] == ["knobs.lightgbm_gpu_deterministic"]
    assert findings("lightgbm", {"deterministic": "1", "device_type": "cpu", "num_threads": "2"}) == []


def test_what_was_measured_not_to_diverge_raises_no_finding():
    assert findings("lightgbm", {"bagging_fraction": "0.8", "bagging_freq": "1", "num_threads": "2"}) == []
    assert findings("xgboost", {"subsample": "0.8", "colsample_bytree": "0.8", "nthread": "2", "device": "cpu"}) == []
    assert findings("catboost", {"thread_count": 2, "task_type": "CPU"}) == []
    for rule in RULES:  # every rule cites its source and the versions it was measured on
        assert rule.source.startswith("https://") and any(ch.isdigit() for ch in rule.measured)


def test_the_recorded_knobs_come_from_the_fitted_model():
    knobs = module("lightgbm").knobs(_fit("lightgbm", n_jobs=2))
    assert knobs["num_threads"] == "2" and knobs["bagging_fraction"] == "0.8"
    knobs = module("sklearn").knobs(_fit("sklearn"))
    assert knobs["logisticregression__random_state"] == 0


@pytest.mark.parametrize("kind", ["xgboost", "sklearn"])
def test_a_registered_model_read_ahead_is_used_only_for_the_bytes_it_was_read_from(kind, tmp_path):
    """Issue 41: the registered model's normal form is read while the rebuild runs (``read_ahead``); the diff takes
    that read only where the file still holds the same bytes, and a read that failed fails the diff as its own
    read would (``UnreadableArtifact``)."""
    import shutil

    from auditor.flavors.unsafe import UnreadableArtifact
    from auditor.judge.models import _AHEAD, read_ahead

    flavour = module(kind)
    registered, same, other = tmp_path / "registered", tmp_path / "same", tmp_path / "other"
    flavour.save(_fit(kind), registered)
    flavour.save(_fit(kind), same)
    flavour.save(_fit(kind, **CHANGED[kind]), other)
    read_ahead(registered, kind)
    assert model_diff(registered, same, kind)[0].identical
    assert not _AHEAD  # taken by the diff

    read_ahead(registered, kind)  # read from the registered bytes, then the file is replaced before the diff
    _AHEAD[(kind, os.fspath(registered))].result()
    shutil.copyfile(other, registered)
    assert not model_diff(registered, same, kind)[0].identical  # read afresh: the replaced file's model

    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"\x00not a model" * 64)
    read_ahead(garbage, kind)
    with pytest.raises(UnreadableArtifact):
        model_diff(garbage, same, kind)  # the diff's own read fails too
    read_ahead(garbage, kind)  # a read ahead that failed is not the file's answer: the diff reads it itself
    _AHEAD[(kind, os.fspath(garbage))].exception()
    shutil.copyfile(same, garbage)
    assert model_diff(garbage, same, kind)[0].identical


def test_lightgbm_knobs_equal_the_parameters_of_the_whole_text_model():
    """Issue 41: the knobs are read from the first iteration's text (the parameters block does not depend on how
    many trees are written): they equal those of the whole model's text, for binary, multi-class, DART and RF
    boosting and a booster with no tree."""
    lightgbm = pytest.importorskip("lightgbm")
    flavour = module("lightgbm")
    x = np.random.default_rng(0).normal(size=(300, 4))
    y, classes = (x[:, 0] > 0).astype(int), (np.abs(x[:, 1]) * 2).astype(int) % 3
    models = [lightgbm.LGBMClassifier(n_estimators=30, verbose=-1, n_jobs=1).fit(x, y),
              lightgbm.LGBMClassifier(n_estimators=10, verbose=-1, boosting_type="dart", subsample=0.5,
                                      subsample_freq=1, deterministic=True).fit(x, y),
              lightgbm.LGBMClassifier(n_estimators=10, verbose=-1, objective="multiclass").fit(x, classes),
              lightgbm.LGBMRegressor(n_estimators=5, verbose=-1, boosting_type="rf", subsample=0.5,
                                     subsample_freq=1).fit(x, x[:, 2]),
              lightgbm.Booster(params={"objective": "binary", "verbose": -1, "seed": 3}, train_set=lightgbm.Dataset(x, y))]
    for model in models:
        whole = flavour._blocks(flavour.booster(model).model_to_string(num_iteration=-1))[2]
        knobs = flavour.knobs(model)
        assert knobs and {k: v for k, v in knobs.items() if not k.startswith("param.")} == {
            k: whole[k] for k in flavour.KNOBS if k in whole}


@pytest.mark.parametrize("kind", ["xgboost", "sklearn"])
def test_a_rebuilt_model_read_while_its_run_may_still_write_it_counts_only_for_the_bytes_it_read(kind, tmp_path, monkeypatch):
    """Issue 41: the rebuilt model is read as soon as its run has written it (``read_ahead``), while the run may
    still write it: its bytes are read once, hashed and parsed, so a file swapped for another model and back during
    the read cannot pass that other model's form for its own bytes; ``normal_form`` takes the read only where the
    file still holds the bytes read, else reads the file again."""
    import shutil

    from auditor.judge.models import _AHEAD, _FORMS, normal_form, read_ahead

    flavour = module(kind)
    rebuilt, a, b = tmp_path / "rebuilt", tmp_path / "a", tmp_path / "b"
    flavour.save(_fit(kind), a)
    flavour.save(_fit(kind, **CHANGED[kind]), b)
    digest_a, digest_b = flavour.normal(a).digest(), flavour.normal(b).digest()
    assert digest_a != digest_b
    real, real_data = flavour.normal, flavour.normal_data

    def swapped(read):  # the run's process puts another model in place while the auditor parses, then puts it back
        def reading(*args):
            shutil.copyfile(b, rebuilt)
            form = read(*args)
            shutil.copyfile(a, rebuilt)
            return form
        return reading

    def refused(*args):
        raise AssertionError(f"{args[-1]} read again")

    shutil.copyfile(a, rebuilt)
    monkeypatch.setattr(flavour, "normal", swapped(real))  # whichever way the flavour is asked to read
    monkeypatch.setattr(flavour, "normal_data", swapped(real_data))
    read_ahead(rebuilt, kind)
    _AHEAD[(kind, os.fspath(rebuilt))].result()
    monkeypatch.setattr(flavour, "normal", refused)
    monkeypatch.setattr(flavour, "normal_data", refused)
    _FORMS.clear()
    assert normal_form(rebuilt, kind).digest() == digest_a  # the read ahead, taken, and of the bytes it hashed
    assert not _AHEAD

    monkeypatch.setattr(flavour, "normal", real)
    monkeypatch.setattr(flavour, "normal_data", real_data)
    read_ahead(rebuilt, kind)
    _AHEAD[(kind, os.fspath(rebuilt))].result()
    shutil.copyfile(b, rebuilt)  # the run wrote its model again after the read
    _FORMS.clear()
    assert normal_form(rebuilt, kind).digest() == digest_b


def test_the_rebuilt_model_is_read_once_it_is_written_and_not_after_its_run_ended(tmp_path):
    """The watch ``rebuild.run`` keeps on a run's folder: the model file is read ahead once it appears; a run that
    ended without writing it leaves nothing read."""
    import threading
    import time

    from auditor.judge.models import _AHEAD
    from auditor.rebuild.run import _read_once_written

    flavour = module("xgboost")
    path, never = tmp_path / "model", tmp_path / "never"
    ended = threading.Event()
    watch = threading.Thread(target=_read_once_written, args=(path, "xgboost", ended))
    watch.start()
    flavour.save(_fit("xgboost"), path)
    watch.join(timeout=30)
    assert not watch.is_alive() and _AHEAD.pop(("xgboost", os.fspath(path))).result()[0]
    ended.set()
    late = threading.Thread(target=_read_once_written, args=(never, "xgboost", ended))
    late.start()
    late.join(timeout=30)
    flavour.save(_fit("xgboost"), never)
    time.sleep(0.2)
    assert not late.is_alive() and ("xgboost", os.fspath(never)) not in _AHEAD


def test_an_xgboost_difference_is_named_only_from_the_bytes_its_normal_form_was_read_from(tmp_path):
    """The whole XGBoost document (read to name a difference the tree ladder does not see: gblinear, dart) is read
    again from the file only while it holds the bytes the normal form was parsed from: a file rewritten since (a read
    ahead's, by the run that wrote it) is refused, never named from another model."""
    from auditor.errors import MalformedRecord

    xgboost = pytest.importorskip("xgboost")
    flavour = module("xgboost")
    x = np.random.default_rng(0).normal(size=(200, 4))
    y = (x[:, 0] > 0).astype(int)
    a, b = tmp_path / "a", tmp_path / "b"
    flavour.save(xgboost.XGBClassifier(booster="gblinear", n_estimators=5, learning_rate=0.5).fit(x, y), a)
    flavour.save(xgboost.XGBClassifier(booster="gblinear", n_estimators=5, learning_rate=0.3).fit(x, y), b)
    na, nb = flavour.normal(a), flavour.normal_data(b.read_bytes(), str(b))
    diff = diff_normals(na, nb)
    assert not diff.identical and "gradient_booster.model.weights[0]" in (diff.first or "")
    b.write_bytes(a.read_bytes())  # rewritten with the other model after the read
    with pytest.raises(MalformedRecord, match="changed since it was read"):
        diff_normals(na, nb)


@pytest.mark.parametrize("kind", ["xgboost", "sklearn"])
def test_the_registered_model_is_compared_only_as_the_bytes_hashed_before_its_rebuild(kind, tmp_path):
    """The rebuild is handed the registered file's path (to score it): the diff reads that file once, as the bytes the
    audit hashed before the rebuild (``registered_sha256``), whatever was read ahead. Put the rebuilt model in its
    place and the audit refuses to compare; read ahead while another model stood there and put back, and the read
    ahead is not what is compared."""
    import shutil

    from auditor.errors import InputUnrecoverable
    from auditor.judge.models import _AHEAD, read_ahead
    from auditor.judge.weights import sha256_file

    flavour = module(kind)
    registered, rebuilt, kept = tmp_path / "registered", tmp_path / "rebuilt", tmp_path / "kept"
    flavour.save(_fit(kind), registered)
    flavour.save(_fit(kind, **CHANGED[kind]), rebuilt)
    expected = sha256_file(registered)
    shutil.copyfile(registered, kept)
    shutil.copyfile(rebuilt, registered)  # the rebuild's own model, where the registered one was
    with pytest.raises(InputUnrecoverable, match="changed while its rebuild ran"):
        model_diff(registered, rebuilt, kind, registered_sha256=expected)
    read_ahead(registered, kind)  # read while the other model stood there
    _AHEAD[(kind, os.fspath(registered))].result()
    shutil.copyfile(kept, registered)  # and put back before the diff
    assert not model_diff(registered, rebuilt, kind, registered_sha256=expected)[0].identical
    assert model_diff(registered, kept, kind, registered_sha256=expected)[0].identical
