"""Issue 39, build point 5: a pickle is found by its content, whatever its name, and is never loaded.

The sniff (``auditor.flavors.unsafe``) on the bytes of each kind of pickle (protocols 0 to 5, joblib's compressed
files, ``torch.save``'s zip, a zip holding ``*.pkl`` or a pickle under another member name, a NumPy object array),
no false positive on real model files made here by the installed libraries, and what an audit's comparison does
with a registered file that is a pickle or garbage: ``InputUnrecoverable`` (NOT_REPRODUCIBLE, exit 1), never
ERROR, and the payload never runs.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from auditor.errors import InputUnrecoverable, exit_code, verdict_failure
from auditor.flavors.unsafe import FIX, UnreadableArtifact, UnsafeArtifact, refuse_unsafe, sniff, sniff_file


class Payload:
    """Unpickling it would create the marker file: the proof that a load ran the payload."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "payload-ran"


@pytest.mark.parametrize("protocol", range(6))
def test_a_pickle_of_every_protocol_is_found_by_its_bytes(protocol, marker):
    data = pickle.dumps(Payload(marker), protocol=protocol)
    found = sniff(data)
    assert found and "pickle" in found, (protocol, data[:40])
    assert sniff(data[:64]), "the first bytes alone are enough"
    assert sniff(pickle.dumps({"weights": [1.0, 2.0], "name": "m"}, protocol=protocol)), "a plain container too"
    assert not marker.exists()


@pytest.mark.parametrize("compress", [3, ("gzip", 3), ("bz2", 3), ("lzma", 3), ("xz", 3), 0])
def test_joblib_files_compressed_or_not_are_pickles(compress, tmp_path, marker):
    joblib = pytest.importorskip("joblib")
    path = tmp_path / "model.ubj"
    joblib.dump({"model": Payload(marker), "coef": np.arange(1000.0)}, path, compress=compress)
    found = sniff_file(path)
    assert found and "pickle" in found, path.read_bytes()[:16]
    if compress:
        assert "compressed" in found, found
    assert not marker.exists()


def test_joblibs_old_zf_header_is_read_through():
    inner = pickle.dumps({"a": 1}, protocol=2)
    data = b"ZF" + hex(len(inner)).encode().ljust(19) + zlib.compress(inner)
    assert "zlib-compressed" in (sniff(data) or "")


def test_torch_save_is_a_zip_holding_a_pickle(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "model.safetensors"
    torch.save({"w": torch.zeros(3)}, path)
    found = sniff_file(path)
    assert found and "data.pkl" in found and "torch.save" in found, found


def test_a_zip_holding_a_pickle_by_name_or_by_content(tmp_path, marker):
    named, hidden = tmp_path / "named.zip", tmp_path / "model.xgboost.zip"
    with zipfile.ZipFile(named, "w") as z:
        z.writestr("config.json", b"{}")
        z.writestr("sub/estimator.pkl", b"not even a pickle")
    with zipfile.ZipFile(hidden, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", b"{}")
        z.writestr("model.ubj", pickle.dumps(Payload(marker), protocol=4))
    assert "sub/estimator.pkl" in (sniff_file(named) or "")
    assert "model.ubj" in (sniff_file(hidden) or "")
    assert "model.ubj" in (sniff(hidden.read_bytes()) or ""), "bytes in memory too"
    assert not marker.exists()


def test_a_numpy_object_array_is_a_pickle_and_a_numeric_one_is_not(tmp_path):
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    assert "object array" in (sniff(buffer.getvalue()) or "")
    buffer = io.BytesIO()
    np.save(buffer, np.arange(10.0))
    assert sniff(buffer.getvalue()) is None


def test_nothing_else_is_a_pickle():
    rng = np.random.default_rng(0)
    for data in (b"", b"\x80", b"\x80\x02", b"tree\nversion=v4\nnum_class=1\n", b'{"learner": {}}', b"[1, 2, 3]",
                 b"catboost\nmodel\n", b"PK\x03\x04 truncated zip", b"\x78\x9c not really zlib",
                 *(rng.bytes(n) for n in (1, 7, 100, 4096))):
        assert sniff(data) is None, data[:40]


def _safetensors(path: Path, header_bytes: int | None = None) -> Path:
    from safetensors.numpy import save_file

    metadata = None
    if header_bytes is not None:  # pad the metadata so the header's length begins b"\x80\x02": a pickle's first bytes
        base = len(b'{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"__metadata__":{"pad":""}}')
        metadata = {"pad": "x" * (header_bytes - base)}
    save_file({"w": np.zeros(3, dtype=np.float32)}, str(path), metadata=metadata)
    return path


def test_real_model_files_are_not_pickles(tmp_path):
    """Each flavour's file as the SDK saves it, and the raw formats inside the bundles."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import KBinsDiscretizer, OneHotEncoder

    from auditor.flavors import catboost as fc
    from auditor.flavors import lightgbm as fl
    from auditor.flavors import sklearn as fs
    from auditor.flavors import xgboost as fx

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(200, 4)), rng.integers(0, 2, 200)
    pipeline = Pipeline([("bins", KBinsDiscretizer(n_bins=3, encode="onehot-dense", quantile_method="averaged_inverted_cdf")),
                         ("logit", LogisticRegression(max_iter=200))]).fit(x, y)
    words = np.array([["a"], ["b"], ["c"]] * 10, dtype=object)  # object arrays inside a skops file
    encoder = OneHotEncoder().fit(words)
    files = {"pipeline.skops": pipeline, "encoder.skops": encoder}
    for name, model in files.items():
        fs.save(model, tmp_path / name)
    xgboost, lightgbm, catboost = (pytest.importorskip(m) for m in ("xgboost", "lightgbm", "catboost"))
    booster = xgboost.train({"objective": "binary:logistic", "nthread": 1}, xgboost.DMatrix(x, label=y), 3)
    fx.save(booster, tmp_path / "model.xgboost.zip")
    (tmp_path / "model.ubj").write_bytes(bytes(booster.save_raw("ubj")))
    (tmp_path / "model.json").write_bytes(bytes(booster.save_raw("json")))
    fl.save(lightgbm.train({"objective": "binary", "verbose": -1, "num_threads": 1}, lightgbm.Dataset(x, label=y), 3),
            tmp_path / "model.lightgbm.txt")
    cat = catboost.CatBoostClassifier(iterations=3, verbose=False, thread_count=1, allow_writing_files=False).fit(x, y)
    fc.save(cat, tmp_path / "model.catboost.zip")
    cat.save_model(str(tmp_path / "model.cbm"), format="cbm")
    _safetensors(tmp_path / "model.safetensors")
    _safetensors(tmp_path / "padded.safetensors", header_bytes=0x0280)
    assert (tmp_path / "padded.safetensors").read_bytes()[:2] == b"\x80\x02"
    for path in sorted(tmp_path.iterdir()):
        assert sniff_file(path) is None, path.name
        assert sniff(path.read_bytes()) is None, path.name


def test_refusing_names_the_format_the_file_and_the_fix_and_is_not_reproducible(tmp_path, marker):
    path = tmp_path / "model.skops"
    path.write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(UnsafeArtifact) as caught:
        refuse_unsafe(path)
    message = str(caught.value)
    assert "unsafe format: pickle" in message and "model.skops" in message and FIX in message
    assert isinstance(caught.value, InputUnrecoverable)
    assert verdict_failure(caught.value) == "NOT_REPRODUCIBLE" and exit_code(caught.value) == 1
    with pytest.raises(UnsafeArtifact, match="registered model.skops"):
        refuse_unsafe(path, name="registered model.skops")
    assert not marker.exists()


FLAVOR_FILES = {"sklearn": "model.skops", "xgboost": "model.xgboost.zip", "lightgbm": "model.lightgbm.txt",
                "catboost": "model.catboost.zip", None: "model.safetensors"}


@pytest.mark.parametrize("flavor", list(FLAVOR_FILES))
def test_the_audits_comparison_refuses_a_registered_pickle_before_any_flavour_reads_it(flavor, tmp_path, marker):
    from auditor.judge.models import model_diff

    registered = tmp_path / f"registered-{FLAVOR_FILES[flavor]}"
    registered.write_bytes(pickle.dumps(Payload(marker), protocol=2))
    with pytest.raises(UnsafeArtifact, match="unsafe format: pickle"):
        model_diff(registered, registered, flavor)
    assert not marker.exists()


def _garbage(tmp_path: Path, flavor: str | None) -> tuple[Path, list[Path]]:
    """A real file of the flavour, and garbage under its name: random bytes, and the real file cut in half."""
    rng = np.random.default_rng(2)
    whole = tmp_path / f"whole-{FLAVOR_FILES[flavor]}"
    x, y = rng.normal(size=(100, 3)), rng.integers(0, 2, 100)
    if flavor is None:
        _safetensors(whole)
    elif flavor == "lightgbm":
        lightgbm = pytest.importorskip("lightgbm")
        whole.write_text(lightgbm.train({"objective": "binary", "verbose": -1}, lightgbm.Dataset(x, label=y), 2).model_to_string())
    else:
        from sklearn.linear_model import LogisticRegression

        from auditor.flavors import module

        if flavor == "sklearn":
            model = LogisticRegression().fit(x, y)
        elif flavor == "xgboost":
            model = pytest.importorskip("xgboost").XGBClassifier(n_estimators=2, n_jobs=1).fit(x, y)
        else:
            model = pytest.importorskip("catboost").CatBoostClassifier(iterations=2, verbose=False, allow_writing_files=False).fit(x, y)
        module(flavor).save(model, whole)
    random = tmp_path / f"random-{FLAVOR_FILES[flavor]}"
    random.write_bytes(rng.bytes(2000))
    truncated = tmp_path / f"truncated-{FLAVOR_FILES[flavor]}"
    truncated.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    return whole, [random, truncated]


@pytest.mark.parametrize("flavor", list(FLAVOR_FILES))
def test_a_registered_file_of_garbage_is_unrecoverable_never_an_error(flavor, tmp_path):
    """Garbage that its flavour cannot read is ``UnreadableArtifact``; what it reads anyway (LightGBM's text parser
    reads the trees before the cut) is another model than the rebuild's: either way no ERROR."""
    from auditor.judge.models import model_diff

    whole, garbage = _garbage(tmp_path, flavor)
    assert model_diff(whole, whole, flavor)[0].identical
    for path in garbage:
        try:
            diff, _ = model_diff(path, whole, flavor)
        except InputUnrecoverable as exc:
            assert isinstance(exc, UnreadableArtifact) or "untrusted" in str(exc), exc
            assert path.name in str(exc) and verdict_failure(exc) == "NOT_REPRODUCIBLE", exc
        else:
            assert flavor == "lightgbm" and path.name.startswith("truncated") and not diff.identical, (path.name, diff)


def test_a_missing_registered_file_keeps_its_own_meaning(tmp_path):
    from auditor.errors import NotFound
    from auditor.judge.models import model_diff

    with pytest.raises(NotFound):
        model_diff(tmp_path / "gone.safetensors", tmp_path / "gone.safetensors", None)


def test_a_rebuild_is_never_handed_a_pickle_to_evaluate(tmp_path, marker):
    """``run_recipe`` refuses before it starts anything: no runner is called, no folder is made."""
    from auditor.rebuild.run import run_recipe

    registered = tmp_path / "registered-model.lightgbm.txt"
    registered.write_bytes(zlib.compress(pickle.dumps(Payload(marker), protocol=4)))

    class Runner:
        def run(self, spec):
            raise AssertionError("a rebuild was started")

    with pytest.raises(UnsafeArtifact, match="unsafe format: pickle.*registered-model.lightgbm.txt"):
        run_recipe(None, None, Runner(), tmp_path / "out", timeout_s=1, evaluate=registered)
    assert not (tmp_path / "out").exists() and not marker.exists()
