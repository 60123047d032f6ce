"""The SDK forms that do not re-indent (start/finish, @tracked), generated data, the seed guard, argparse in a rebuild.

Real parts: MLflow on SQLite, a real git repository, real snapshots, torch's real seeding
functions. The excepthook/atexit guarantees are checked in a real subprocess, where an
uncaught exception really reaches ``sys.excepthook``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import auditor
from auditor.errors import BadInput
from tests.fixtures.gitrepo import init_repo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "proj", {"train.py": "print('hi')\n", ".gitignore": "mlruns/\nmlflow.db\n.repro/\n"})


@pytest.fixture(autouse=True)
def _restore_torch_state():
    import torch

    deterministic, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.set_num_threads(threads)


def _kwargs(project: Path) -> dict:
    return {"repo_dir": project, "entrypoint": ["python", "train.py"]}


def _weights():
    import torch

    return torch.nn.Linear(2, 1).state_dict()


def test_start_and_finish_log_and_register_like_the_with_block(sqlite_tracking_uri, project, tmp_path, monkeypatch):
    from mlflow import MlflowClient

    monkeypatch.setenv("REPRO_SNAPSHOT_STORE", str(tmp_path / "store"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    hook = sys.excepthook
    run = auditor.start(config={"lr": 0.1}, seed=3, data={"train": auditor.generated(x=x, y=x[:, 0])}, **_kwargs(project))
    assert sys.excepthook is not hook  # an uncaught exception would end the run as FAILED
    assert run.seed == 3 and run.config == {"lr": 0.1}
    folder = run.data_path("train")
    assert sorted(p.name for p in folder.iterdir()) == ["x.npy", "y.npy"]
    assert np.array_equal(np.load(folder / "x.npy"), x)
    ref = run.record.data["train"]
    assert ref.kind == "snapshot" and ref.uri == str(tmp_path / "store") and ref.version.startswith("blake3:")
    run.log_metrics({"loss": 0.5})
    run.save_weights(_weights())
    with pytest.raises(BadInput, match="inside"):
        auditor.register_model(run, "started")
    run.finish()
    auditor.finish(run)  # idempotent
    assert sys.excepthook is hook
    assert MlflowClient(sqlite_tracking_uri).get_run(run.run_id).info.status == "FINISHED"
    assert auditor.register_model(run, "started") == "1"


def test_the_same_generated_data_is_the_same_snapshot_and_other_data_another(sqlite_tracking_uri, project, tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_SNAPSHOT_STORE", str(tmp_path / "store"))
    ids = []
    for values in (np.zeros(4), np.zeros(4), np.ones(4)):
        run = auditor.start(config={}, seed=1, data={"train": auditor.generated(values)}, **_kwargs(project))
        run.finish()
        ids.append(run.record.data["train"].version)
    assert ids[0] == ids[1] != ids[2]


def test_generated_data_refuses_what_it_cannot_record_naming_it():
    with pytest.raises(BadInput, match="'labels'.*set"):
        from auditor.sdk.generated import _arrays

        _arrays({"labels": {"a", "b"}}, "")
    with pytest.raises(BadInput, match="no data"):
        auditor.generated()


def test_tracked_runs_the_function_inside_track_passes_the_run_and_registers(sqlite_tracking_uri, project):
    seen = {}

    @auditor.tracked(config={"hidden": 4}, seed=5, data={"train": "warehouse.customers@latest"}, **_kwargs(project))
    def train(epochs, run):
        seen["seed"], seen["config"] = run.seed, run.config
        run.log_metrics({"loss": 1.0 / epochs})
        return "done"

    assert train(2) == "done" and seen == {"seed": 5, "config": {"hidden": 4}}
    assert train.last_run.finished and not train.last_run.failed

    @auditor.tracked(config={}, seed=5, data={"train": "warehouse.customers@latest"}, register="refused", **_kwargs(project))
    def gated():
        pass

    from auditor.errors import LineageIncomplete

    with pytest.raises(LineageIncomplete, match="data.train.version"):
        gated()  # the mutable data ref blocks: nothing registered

    @auditor.tracked(config={}, seed=5, data={"train": "warehouse.customers@latest"}, register="never", **_kwargs(project))
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        broken()
    import mlflow

    assert broken.last_run.failed
    assert mlflow.MlflowClient().get_run(broken.last_run.run_id).info.status == "FAILED"
    assert mlflow.MlflowClient().search_registered_models() == []


SCRIPT = """
import sys
import auditor
run = auditor.start(config={{"lr": 0.1}}, seed=1, data={{"train": auditor.generated([1.0, 2.0])}},
                    repo_dir={repo!r}, entrypoint=["python", "train.py"])
print("RUN", run.run_id, flush=True)
if sys.argv[1] == "crash":
    raise RuntimeError("training blew up")
if sys.argv[1] == "register":
    run.finish()
    print("VERSION", auditor.register_model(run, "script"), flush=True)
# "forget": the script ends without run.finish()
"""


@pytest.mark.parametrize(("mode", "status", "code"), [("crash", "FAILED", 1), ("forget", "FINISHED", 0), ("register", "FINISHED", 0)])
def test_a_started_run_ends_on_an_uncaught_exception_and_at_exit(sqlite_tracking_uri, project, tmp_path, mode, status, code):
    from mlflow import MlflowClient

    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(repo=str(project)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
    env.update(MLFLOW_TRACKING_URI=sqlite_tracking_uri, REPRO_SNAPSHOT_STORE=str(tmp_path / "store"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == code, done.stderr[-3000:]
    run_id = done.stdout.split("RUN ", 1)[1].split()[0]
    assert MlflowClient(sqlite_tracking_uri).get_run(run_id).info.status == status
    if mode == "crash":
        assert "RuntimeError: training blew up" in done.stderr  # the script's traceback still printed
    if mode == "forget":
        assert "ended without run.finish()" in done.stderr
    registered = [m.name for m in MlflowClient(sqlite_tracking_uri).search_registered_models()]
    assert registered == (["script"] if mode == "register" else [])


# -- the script's own seeding ------------------------------------------------------------------


def test_reseeding_after_track_is_warned_with_the_line_and_the_fix(sqlite_tracking_uri, project, caplog):
    import random

    import torch

    original = torch.manual_seed
    caplog.set_level(logging.WARNING, logger="auditor.sdk")
    with auditor.track(config={}, seed=1, data={"train": "t@latest"}, **_kwargs(project)) as run:
        torch.manual_seed(run.seed)  # the fix: no warning
        np.random.seed(run.seed)
        assert not caplog.records
        torch.manual_seed(1)  # a constant, even one equal to the seed: calibration's reruns cannot reach it
        random.seed(12345)
        gen = torch.Generator().manual_seed(7)  # a local generator is the script's business
        assert gen.initial_seed() == 7
        found = run._seed_guard.found
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    here = Path(__file__).name
    assert f"{here}:" in messages[0] and "torch.manual_seed(1)" in messages[0] and "the constant 1" in messages[0]
    assert "Fix: torch.manual_seed(run.seed)" in messages[0]
    assert "random.seed(12345)" in messages[1] and "Fix: random.seed(run.seed)" in messages[1]
    assert [f.generator for f in found] == ["torch", "python"]
    assert torch.manual_seed is original  # unwrapped when the run ends


def test_the_loaders_worker_seeding_is_not_reported(sqlite_tracking_uri, project, caplog):
    import torch

    caplog.set_level(logging.WARNING, logger="auditor.sdk")
    with auditor.track(config={}, seed=2, data={"train": "t@latest"}, **_kwargs(project)) as run:
        loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2, shuffle=True, num_workers=2, **run.dataloader_kwargs())
        assert sorted(int(i) for batch in loader for i in batch) == list(range(8))
    assert not [r for r in caplog.records if "reseeds" in r.getMessage()]


# -- argparse in a rebuild ------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=float(os.environ.get("TINY_LR", "0.1")))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("runs"))
    return p


def _rebuild_env(tmp_path: Path, config: dict, seed: int) -> dict[str, str]:
    path = tmp_path / "resolved.json"
    path.write_text(json.dumps(config))
    return {"REPRO_REBUILD": "1", "REPRO_CONFIG": str(path), "REPRO_OUTPUT_DIR": str(tmp_path / "out"), "REPRO_SEED": str(seed)}


def test_training_records_argparse_sources_and_the_namespace_is_the_scripts(sqlite_tracking_uri, project, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py", "--epo", "3"])  # abbreviated: only the parser can tell it was given
    monkeypatch.setenv("TINY_LR", "0.4")
    parser = _parser()
    args = parser.parse_args()
    with auditor.track(config=args, data={"train": "t@latest"}, **_kwargs(project)) as run:  # parser found beside args
        assert run.args is args
    assert run.record.config.resolved == {"lr": 0.4, "epochs": 3, "seed": 1, "out": "runs"}
    assert run.record.config.sources == {"lr": "env", "epochs": "cli", "seed": "default", "out": "default"}
    assert run.seed == 1  # the config's seed


def test_in_a_rebuild_the_namespace_and_the_parser_get_the_recorded_values(project, tmp_path, monkeypatch, caplog):
    # training had TINY_LR=0.4 (recorded lr=0.4, source env); the rebuild's environment has no TINY_LR
    monkeypatch.delenv("TINY_LR", raising=False)
    monkeypatch.setattr(sys, "argv", ["train.py", "--epochs", "3"])
    recorded = {"lr": 0.4, "epochs": 3, "seed": 1, "out": "runs/a"}
    parser = _parser()
    args = parser.parse_args()
    assert args.lr == 0.1  # what the script alone would train with: wrong
    env = _rebuild_env(tmp_path, recorded, seed=1)
    with auditor.track(config=args, data={"train": ""}, env={**env, "REPRO_DATA_TRAIN": str(tmp_path)}, **_kwargs(project)) as run:
        assert (args.lr, args.epochs, args.seed, args.out) == (0.4, 3, 1, Path("runs/a"))  # typed as the parser types
        assert parser.parse_args().lr == 0.4  # a later parse_args gets it too
        assert run.config == recorded
    assert not caplog.records or all("command line gives" not in r.getMessage() for r in caplog.records)


def test_a_calibration_rerun_gives_the_audits_seed_to_the_config_seed(project, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py"])
    parser = _parser()
    env = _rebuild_env(tmp_path, {"lr": 0.1, "epochs": 3, "seed": 1, "out": "runs"}, seed=4)
    with auditor.track(config=parser, data={"train": ""}, env={**env, "REPRO_DATA_TRAIN": str(tmp_path)}, **_kwargs(project)) as run:
        assert run.seed == 4 and run.args.seed == 4 and parser.parse_args().seed == 4


def test_an_argv_that_disagrees_with_the_recorded_config_is_warned_and_the_record_wins(project, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(sys, "argv", ["train.py", "--epochs", "5"])
    caplog.set_level(logging.WARNING, logger="auditor.sdk")
    env = _rebuild_env(tmp_path, {"lr": 0.1, "epochs": 3, "seed": 1, "out": "runs"}, seed=1)
    with auditor.track(config=_parser(), data={"train": ""}, env={**env, "REPRO_DATA_TRAIN": str(tmp_path)}, **_kwargs(project)) as run:
        assert run.args.epochs == 3
    assert any("command line gives epochs=5" in r.getMessage() and "3" in r.getMessage() for r in caplog.records)


def test_generated_data_that_does_not_repeat_in_a_rebuild_is_warned(project, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="auditor.sdk")
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    np.save(recorded / "x.npy", np.zeros(3), allow_pickle=False)
    env = {**_rebuild_env(tmp_path, {}, seed=1), "REPRO_DATA_TRAIN": str(recorded)}
    with auditor.track(config={}, data={"train": auditor.generated(x=np.zeros(3))}, env=env, **_kwargs(project)) as run:
        assert run.data_path("train") == recorded
    assert not caplog.records
    with auditor.track(config={}, data={"train": auditor.generated(x=np.ones(3))}, env=env, **_kwargs(project)):
        pass
    [warning] = [r.getMessage() for r in caplog.records]
    assert "generated data 'train' differs" in warning and "x.npy" in warning
