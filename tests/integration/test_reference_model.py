"""The reference model, run the way an audit runs it: rebuild mode through the process runner.

The project is copied out of the repository (so the record's git facts do not
depend on the state of this checkout), its data generated with make_data.py,
and train.py started with the entry-point contract: REPRO_REBUILD, REPRO_CONFIG
(the resolved config as JSON), REPRO_OUTPUT_DIR, REPRO_DATA_TRAIN, REPRO_SEED,
REPRO_DETERMINISTIC and pinned threads. Two epochs keep it quick.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from auditor.lineage.gather import resolve_config
from auditor.lineage.record import RunRecord
from auditor.rebuild.runners import ProcessRunner, RunOutcome, RunSpec

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference_model"
QUICK = ["epochs=2"]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("reference") / "reference_model"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def _load(name: str) -> ModuleType:
    """Import an example module under a unique name (a bare ``train`` could shadow another test's)."""
    spec = importlib.util.spec_from_file_location(f"reference_model_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return _load("make_data").write(tmp_path_factory.mktemp("snapshot") / "train", rows=8_000)


def _rebuild(project: Path, data_dir: Path, out: Path, overrides: list[str]) -> tuple[RunOutcome, Path]:
    config = resolve_config(project / "config.yaml", overrides, env={}).resolved
    out.mkdir(parents=True)
    config_file = out.parent / f"{out.name}.config.json"
    config_file.write_text(json.dumps(config))
    spec = RunSpec(
        argv=["python", "train.py", *overrides],
        cwd=project,
        output_dir=out,
        data={"train": data_dir},
        config_file=config_file,
        env={
            "REPRO_SEED": str(config["seed"]),
            "REPRO_DETERMINISTIC": "1",
            "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": "2",
            "MKL_NUM_THREADS": "2",
            "MKL_CBWR": "AVX2",
            "REPRO_TORCH_THREADS": "2",
        },
        log_path=out.parent / f"{out.name}.log",
        timeout_s=300,
    )
    outcome = ProcessRunner().run(spec)
    return outcome, out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def runs(project, data_dir, tmp_path_factory) -> dict[str, tuple[RunOutcome, Path]]:
    """Three rebuilds side by side: same seed twice, another seed once (load must not change the bits)."""
    base = tmp_path_factory.mktemp("rebuilds")
    plans = {"seed7_a": [*QUICK, "seed=7"], "seed7_b": [*QUICK, "seed=7"], "seed8": [*QUICK, "seed=8"]}
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        futures = {name: pool.submit(_rebuild, project, data_dir, base / name, o) for name, o in plans.items()}
        done = {name: future.result() for name, future in futures.items()}
    for name, (outcome, _) in done.items():
        assert outcome.ok, f"{name} failed:\n{outcome.log_tail}"
    return done


@pytest.fixture()
def reference(monkeypatch):
    """train.py imported in this process, and torch's process-wide flags restored afterwards."""
    import torch

    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    deterministic, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    yield _load("train")
    torch.use_deterministic_algorithms(deterministic)
    torch.set_num_threads(threads)


def _train_in_process(train, data_dir: Path, **overrides) -> dict:
    from auditor.seeds import dataloader_kwargs, seed_everything

    config = {**resolve_config(EXAMPLE / "config.yaml", env={}).resolved, "epochs": 1, **overrides}
    info = seed_everything(config["seed"])
    model, _ = train.train(config, train.load(data_dir), dataloader_kwargs(info))
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_the_same_seed_rebuilds_bitwise_identical_weights_and_identical_metrics(runs):
    (_, a), (_, b) = runs["seed7_a"], runs["seed7_b"]
    assert _sha256(a / "model.safetensors") == _sha256(b / "model.safetensors")
    assert json.loads((a / "metrics.json").read_text()) == json.loads((b / "metrics.json").read_text())


def test_a_different_seed_gives_different_weights(runs):
    (_, a), (_, c) = runs["seed7_a"], runs["seed8"]
    assert _sha256(a / "model.safetensors") != _sha256(c / "model.safetensors")


def test_the_rebuild_leaves_held_out_metrics_and_its_own_record(runs):
    outcome, out = runs["seed7_a"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) >= {"auc", "accuracy", "log_loss"}
    assert 0.6 < metrics["auc"] <= 1.0 and 0.5 < metrics["accuracy"] <= 1.0 and metrics["log_loss"] > 0
    record = RunRecord.from_json((out / "run_record.json").read_text(), source="run_record.json")
    weights = {a.name: a.sha256 for a in record.outputs.artifacts}
    assert weights["model.safetensors"] == _sha256(out / "model.safetensors")
    assert record.outputs.metrics == metrics
    assert record.seeds.seed == 7 and record.seeds.deterministic is True
    assert record.config.resolved["epochs"] == 2
    assert record.environment.threads["torch_intra_op"] == 2
    assert "trained in" in outcome.log


def test_planted_nondeterminism_makes_two_trainings_with_one_seed_differ(reference, data_dir):
    clean = [_train_in_process(reference, data_dir) for _ in range(2)]
    planted = [_train_in_process(reference, data_dir, plant_nondeterminism=True) for _ in range(2)]
    assert all(torch_equal(clean[0][k], clean[1][k]) for k in clean[0])
    assert not all(torch_equal(planted[0][k], planted[1][k]) for k in planted[0])


def test_fail_at_epoch_raises_mid_training(reference, data_dir, capsys):
    with pytest.raises(RuntimeError, match="fail_at_epoch=1: planted failure"):
        _train_in_process(reference, data_dir, epochs=3, fail_at_epoch=1)
    assert "epoch 0:" in capsys.readouterr().out


def test_the_auc_is_the_rank_statistic(reference):
    import torch

    labels = torch.tensor([0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    assert reference.auc(torch.tensor([0.1, 0.2, 0.8, 0.9, 0.3, 0.7]), labels) == 1.0
    assert reference.auc(torch.tensor([0.9, 0.8, 0.1, 0.2, 0.7, 0.3]), labels) == 0.0
    # one tie between a positive and a negative counts half: (8 + 0.5) / 9
    assert reference.auc(torch.tensor([0.1, 0.2, 0.8, 0.9, 0.5, 0.5]), labels) == pytest.approx(8.5 / 9)


def torch_equal(a, b) -> bool:
    """Bitwise: the same values and the same bits (float32 compared as int32)."""
    import torch

    return torch.equal(a, b) and torch.equal(a.view(torch.int32), b.view(torch.int32))
