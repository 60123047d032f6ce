"""Input tracing through the real SDK: a script reading a hyperparameter from the environment and a file
outside the snapshot, trained (real MLflow on SQLite, real torch) and rebuilt the way the runner does it
(the entry-point contract, in a subprocess). The registration warns by name; a rebuild from changed
inputs yields blocking findings naming the file and the variable, and an intact one none. Issue 26: a file in
the temporary folder ($TMPDIR, moved here to another folder) or in /dev/shm is traced like any other and named
when it changes; a file the run made itself there is not an input; ``traced.notes`` lists what is not traced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.lineage.gate import check
from auditor.lineage.record import RunRecord
from auditor.lineage.traced import compare
from auditor.registry.mlflow import MlflowRegistry
from tests.fixtures.gitrepo import init_repo
from tests.integration.test_sdk_tracking import CONFIG_YAML, snapshot  # noqa: F401 - a fixture

TRAIN_PY = '''
import os, sys, tempfile
from pathlib import Path
import numpy as np
import torch
import auditor

torch.set_num_threads(1)

def main():
    with auditor.track(config=Path(__file__).with_name("config.yaml"), overrides=sys.argv[1:],
                       data={"train": os.environ.get("TINY_DATA", "")}, experiment="traced") as run:
        folder = run.data_path("train")
        x = torch.from_numpy(np.load(folder / "x.npy", allow_pickle=False))
        y = torch.from_numpy(np.load(folder / "y.npy", allow_pickle=False))
        lr = float(os.environ.get("TINY_LR", run.config["lr"]))          # a hyperparameter from the environment
        scale = 1.0
        for name in os.environ["TINY_SCALE_FILE"].split(os.pathsep):  # files outside the snapshot
            scale *= float(Path(name).read_text())
        own = Path(tempfile.mkdtemp()) / "cache.txt"  # a file the run makes itself and reads back: not an input
        own.write_text(str(lr))
        lr = float(own.read_text())
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        for _ in range(3):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x * scale).squeeze(1), y)
            loss.backward()
            optimizer.step()
        run.log_metrics({"loss": float(loss)})
        run.save_weights(model.state_dict())
    name = os.environ.get("REGISTER_AS")
    if name:
        print("VERSION", auditor.register_model(run, name), flush=True)

main()
'''


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("REPRO_", "TINY_"))}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    # PYTHONPATH: the rebuild must run this checkout's SDK, as the runner's would be the installed one
    root = str(Path(__file__).resolve().parents[2])
    return {**clean, "PYTHONHASHSEED": "0", "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": root, **extra}


def _rebuild(project: Path, record: RunRecord, tmp_path: Path, name: str, data_dir: Path, **extra: str) -> RunRecord:
    """The recorded entrypoint under the entry-point contract, as ProcessRunner runs it; its own record back."""
    from auditor.contract import path_env, rebuild_env

    out = tmp_path / name
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps(record.config.resolved))
    env = {**_env(tmp_path, **extra), **rebuild_env(record), **path_env(output_dir=str(out), data={"train": str(data_dir)}, config_file=str(config))}
    done = subprocess.run([sys.executable, "train.py"], cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return RunRecord.from_json((out / "run_record.json").read_text())


@pytest.mark.parametrize("changed", ["nothing", "file", "variable"])
def test_traced_inputs_warn_at_registration_and_a_changed_one_blocks_after_the_rebuild(snapshot, sqlite_tracking_uri, tmp_path, changed):  # noqa: F811
    from auditor.snapshots import materialize

    data_dir, data_ref = snapshot
    project = init_repo(tmp_path / "project", {"train.py": TRAIN_PY, "config.yaml": CONFIG_YAML, ".gitignore": "mlruns/\n"})
    shared = tmp_path / "shared"
    shared.mkdir()
    scale = shared / "scale.txt"
    scale.write_text("1.0")
    inputs = {"TINY_LR": "0.07", "TINY_SCALE_FILE": str(scale)}
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=project, capture_output=True, text=True, timeout=300, check=False,
        env=_env(tmp_path, TINY_DATA=data_ref, REGISTER_AS="traced", MLFLOW_TRACKING_URI=sqlite_tracking_uri, **inputs),
    )
    assert done.returncode == 0, done.stderr[-3000:]

    registry = MlflowRegistry(sqlite_tracking_uri)
    record, _ = registry.load_record(registry.resolve("models:/traced/1"))
    assert [(f.path, f.size) for f in record.traced.files] == [(str(scale), 3)]
    assert {v.name for v in record.traced.env} == {"TINY_LR", "TINY_SCALE_FILE"}
    assert "0.07" not in record.to_json()
    warned = {f.code: f.message for f in check(record) if f.code.startswith("traced")}
    assert f"read {scale} outside the snapshots" in warned["traced.file"]
    assert any("TINY_LR" in f.message for f in check(record) if f.code == "traced.env")

    materialized = materialize(record.data["train"].version, record.data["train"].uri, tmp_path / "mat", link=False)
    if changed == "file":
        scale.write_text("2.0")  # changed after training, before the audit
    if changed == "variable":
        inputs["TINY_LR"] = "0.08"
    rebuilt = _rebuild(project, record, tmp_path, "rebuild", materialized, **inputs)
    assert rebuilt.traced is not None  # the rebuild's own record carries the section
    blocking = {f.path: f.message for f in compare(record, rebuilt) if f.blocking}
    if changed == "nothing":
        assert blocking == {}
    elif changed == "file":
        assert list(blocking) == [f"traced.files.{scale}"] and str(scale) in blocking[f"traced.files.{scale}"]
    else:
        assert list(blocking) == ["traced.env.TINY_LR"] and "TINY_LR" in blocking["traced.env.TINY_LR"]


def test_a_rebuild_without_the_variable_the_runner_does_not_pass_is_named(snapshot, sqlite_tracking_uri, tmp_path):  # noqa: F811
    """The runner passes only allowlisted variables: a hyperparameter read from the environment is unset there."""
    from auditor.snapshots import materialize

    _, data_ref = snapshot
    project = init_repo(tmp_path / "project", {"train.py": TRAIN_PY, "config.yaml": CONFIG_YAML})
    scale = tmp_path / "scale.txt"
    scale.write_text("1.0")
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=project, capture_output=True, text=True, timeout=300, check=False,
        env=_env(tmp_path, TINY_DATA=data_ref, REGISTER_AS="traced2", MLFLOW_TRACKING_URI=sqlite_tracking_uri, TINY_LR="0.07", TINY_SCALE_FILE=str(scale)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    registry = MlflowRegistry(sqlite_tracking_uri)
    record, _ = registry.load_record(registry.resolve("models:/traced2/1"))
    materialized = materialize(record.data["train"].version, record.data["train"].uri, tmp_path / "mat", link=False)
    rebuilt = _rebuild(project, record, tmp_path, "rebuild", materialized, TINY_SCALE_FILE=str(scale))
    [finding] = [f for f in compare(record, rebuilt) if f.blocking]
    assert finding.path == "traced.env.TINY_LR" and "unset in the rebuild" in finding.message


def test_files_in_the_temp_folder_and_dev_shm_are_traced_and_named_when_they_change(snapshot, sqlite_tracking_uri, tmp_path):  # noqa: F811
    from auditor.snapshots import materialize

    _, data_ref = snapshot
    project = init_repo(tmp_path / "project", {"train.py": TRAIN_PY, "config.yaml": CONFIG_YAML, ".gitignore": "mlruns/\n"})
    env = _env(tmp_path)
    temp = Path(env["TMPDIR"])  # another folder than /tmp: tempfile.gettempdir() in the script
    scale = temp / "scale.txt"  # left there by an earlier step: an input the record does not pin
    scale.write_text("1.0")
    shm = Path("/dev/shm") / f"repro-test-{tmp_path.name}.txt"
    shm.write_text("1.0")
    try:
        inputs = {"TINY_SCALE_FILE": f"{scale}{os.pathsep}{shm}"}
        done = subprocess.run([sys.executable, "train.py"], cwd=project, capture_output=True, text=True, timeout=300, check=False,
                              env=_env(tmp_path, TINY_DATA=data_ref, REGISTER_AS="temp", MLFLOW_TRACKING_URI=sqlite_tracking_uri, **inputs))
        assert done.returncode == 0, done.stderr[-3000:]
        registry = MlflowRegistry(sqlite_tracking_uri)
        record, _ = registry.load_record(registry.resolve("models:/temp/1"))
        assert sorted(f.path for f in record.traced.files) == sorted([str(scale), str(shm)])  # not the run's own cache.txt
        notes = " | ".join(record.traced.notes)
        assert "/dev except /dev/shm" in notes and "the Python installation" in notes and "network reads" in notes
        assert "files the run made itself inside the block" in notes and "git-ignored files there are" in notes
        assert "the data folders" in notes

        materialized = materialize(record.data["train"].version, record.data["train"].uri, tmp_path / "mat", link=False)
        scale.write_text("2.0")  # changed after training, before the audit
        shm.write_text("3.0")
        rebuilt = _rebuild(project, record, tmp_path, "rebuild", materialized, **inputs)
    finally:
        shm.unlink(missing_ok=True)
    blocking = {f.path: f.message for f in compare(record, rebuilt) if f.blocking}
    assert sorted(blocking) == sorted([f"traced.files.{scale}", f"traced.files.{shm}"])
    assert str(scale) in blocking[f"traced.files.{scale}"] and "differs in the rebuild" in blocking[f"traced.files.{shm}"]
