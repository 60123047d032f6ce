"""The training-side SDK against real MLflow, a real git repository, a real snapshot and real torch training."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.errors import BadInput, LineageIncomplete
from auditor.lineage.record import RunRecord
from auditor.registry.base import RECORD_ARTIFACT, TAG_RECORD_DIGEST, TAG_WEIGHTS_SHA256, WEIGHTS_ARTIFACT
from auditor.registry.mlflow import MlflowRegistry
from tests.fixtures.gitrepo import git, init_repo

TRAIN_PY = '''
"""A tiny training project using the SDK the way the README tells users to."""
import os
import sys
from pathlib import Path

import numpy as np
import torch

import auditor

torch.set_num_threads(1)


def main():
    with auditor.track(
        config=Path(__file__).with_name("config.yaml"),
        overrides=sys.argv[1:],
        data={"train": os.environ.get("TINY_DATA", "")},
        experiment="tiny",
    ) as run:
        folder = run.data_path("train")
        x = torch.from_numpy(np.load(folder / "x.npy", allow_pickle=False))
        y = torch.from_numpy(np.load(folder / "y.npy", allow_pickle=False))
        model = torch.nn.Sequential(torch.nn.Linear(4, run.config["model"]["hidden"]), torch.nn.Tanh(),
                                    torch.nn.Linear(run.config["model"]["hidden"], 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=float(run.config["lr"]))
        loader = torch.utils.data.DataLoader(list(zip(x, y)), batch_size=8, shuffle=True, **run.dataloader_kwargs())
        for _ in range(int(run.config["epochs"])):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(xb).squeeze(1), yb)
                loss.backward()
                optimizer.step()
        run.log_metrics({"loss": float(loss)})
        run.save_weights(model.state_dict())
    name = os.environ.get("REGISTER_AS")
    if name:
        print("VERSION", auditor.register_model(run, name), run.run_id, flush=True)


if __name__ == "__main__":
    main()
'''

CONFIG_YAML = "seed: 7\nlr: 0.05\nepochs: 2\nmodel:\n  hidden: 3\n"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A git repository holding the tiny project, with an origin remote as teams have."""
    repo = init_repo(tmp_path / "tiny", {"train.py": TRAIN_PY, "config.yaml": CONFIG_YAML, ".gitignore": "mlruns/\n"})
    git(repo, "remote", "add", "origin", "https://git.example.invalid/ml/tiny.git")
    return repo


@pytest.fixture()
def snapshot(tmp_path: Path) -> tuple[Path, str]:
    """Tiny data as a real snapshot in a local store; returns (plain data folder, 'store@id')."""
    import numpy as np

    from auditor.snapshots import create_snapshot

    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    np.save(data / "x.npy", rng.normal(size=(64, 4)).astype("float32"))
    np.save(data / "y.npy", rng.normal(size=64).astype("float32"))
    store = tmp_path / "store"
    info = create_snapshot(data, store)
    return data, f"{store}@{info.id}"


def train(project: Path, cwd: Path, *, env: dict[str, str], args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
    return subprocess.run(
        [sys.executable, str(project / "train.py"), *args],
        cwd=cwd,
        env={**clean, "PYTHONHASHSEED": "0", **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(params=["sqlite", "server"])
def tracking_uri(request) -> str:
    return request.getfixturevalue("sqlite_tracking_uri" if request.param == "sqlite" else "server_tracking_uri")


def test_a_script_using_the_sdk_registers_a_version_whose_record_passes_the_gate(
    tracking_uri, project, snapshot, tmp_path, capsys
):
    import uuid

    from mlflow import MlflowClient

    from auditor.lineage.gate import blocking, check

    name = f"tiny-{uuid.uuid4().hex[:8]}"
    _, data_ref = snapshot
    done = train(project, tmp_path, env={"TINY_DATA": data_ref, "REGISTER_AS": name, "MLFLOW_TRACKING_URI": tracking_uri}, args=("lr=0.1",))
    assert done.returncode == 0, done.stderr[-3000:]
    version, run_id = done.stdout.split("VERSION ", 1)[1].split()

    registry = MlflowRegistry(tracking_uri)
    info = registry.resolve(f"models:/{name}/{version}")
    assert info.run_id == run_id
    record, diff = registry.load_record(info)
    assert diff is None and not blocking(check(record))
    assert info.tags[TAG_RECORD_DIGEST] == record.digest()

    # the five inputs, as recorded
    head = git(project, "rev-parse", "HEAD").strip()
    assert record.code.commit == head and record.code.dirty is False
    assert record.code.entrypoint == ["python", "train.py", "lr=0.1"] and record.code.subdir == ""
    assert record.data["train"].kind == "snapshot" and f"{record.data['train'].uri}@{record.data['train'].version}" == data_ref
    assert record.config.resolved == {"seed": 7, "lr": 0.1, "epochs": 2, "model": {"hidden": 3}}
    assert record.config.sources["lr"] == "cli"
    assert record.seeds.seed == 7 and record.seeds.deterministic is True
    assert "torch" in record.environment.packages and "mlflow" in record.environment.packages

    # the registered weights are the bytes the record's sha256 names
    weights = registry.download_artifact(info, WEIGHTS_ARTIFACT, tmp_path / "registered.safetensors")
    [artifact] = record.outputs.artifacts
    assert artifact.sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert artifact.uri == f"runs:/{run_id}/{WEIGHTS_ARTIFACT}"
    assert info.tags[TAG_WEIGHTS_SHA256] == hashlib.sha256(weights.read_bytes()).hexdigest()

    # what MLflow users see: flattened params, the tags they already read, our tags, inputs, metrics
    run = MlflowClient(tracking_uri).get_run(run_id)
    assert run.info.status == "FINISHED"
    assert {k: run.data.params[k] for k in ("seed", "lr", "epochs", "model.hidden")} == {
        "seed": "7", "lr": "0.1", "epochs": "2", "model.hidden": "3"
    }
    tags = run.data.tags
    assert tags["mlflow.source.git.commit"] == head
    assert tags["mlflow.source.git.repoURL"] == "https://git.example.invalid/ml/tiny.git"
    assert tags[TAG_RECORD_DIGEST] == record.digest() and tags["repro.dirty"] == "false"
    assert tags["repro.image_digest"] == "none" and tags["repro.data.train"] == data_ref
    [dataset_input] = run.inputs.dataset_inputs
    assert dataset_input.dataset.name == "train"
    assert dataset_input.dataset.digest == record.data["train"].version[:36]
    assert {t.key: t.value for t in dataset_input.tags}["repro.version"] == record.data["train"].version
    assert set(run.data.metrics) == {"loss"} and record.outputs.metrics["loss"] == run.data.metrics["loss"]

    from tests.contract.test_registry import run_cli

    code, out, _ = run_cli(["lineage", "show", f"models:/{name}/{version}", "--tracking-uri", tracking_uri], capsys)
    assert code == 0, out
    assert head in out and record.data["train"].version in out


@pytest.mark.parametrize(
    ("env", "data", "paths"),
    [
        ({"REPRO_IMAGE": "python:3.11-slim"}, "snapshot", ["environment.image_digest"]),
        ({}, "latest", ["data.train.version"]),
    ],
    ids=["tag-only image", "latest data"],
)
def test_a_tag_only_image_or_a_latest_data_ref_is_refused_at_registration_and_nothing_is_registered(
    sqlite_tracking_uri, project, snapshot, tmp_path, env, data, paths
):
    from mlflow import MlflowClient

    folder, data_ref = snapshot
    ref = data_ref if data == "snapshot" else f"{folder}@latest"
    done = train(project, tmp_path, env={"TINY_DATA": ref, "REGISTER_AS": "tiny", **env})
    assert done.returncode != 0
    assert "LineageIncomplete" in done.stderr and "not registered as 'tiny'" in done.stderr
    listed = [line.strip().split(":")[0] for line in done.stderr.splitlines() if line.strip().startswith("- ")]
    assert sorted(p.removeprefix("- ") for p in listed) == sorted(paths)
    assert MlflowClient(sqlite_tracking_uri).search_registered_models() == []
    assert list(MlflowRegistry(sqlite_tracking_uri).list_versions()) == []
    # the run itself was still logged, so the refusal can be investigated: its tags name what it stored
    [run] = MlflowClient(sqlite_tracking_uri).search_runs([MlflowClient().get_experiment_by_name("tiny").experiment_id])
    stored = MlflowRegistry(sqlite_tracking_uri)
    record_bytes = stored._read_run_file(run.info.run_id, RECORD_ARTIFACT)
    weights_bytes = stored._read_run_file(run.info.run_id, WEIGHTS_ARTIFACT)
    assert record_bytes is not None and weights_bytes is not None
    assert run.data.tags[TAG_RECORD_DIGEST] == RunRecord.from_json(record_bytes).digest()
    assert run.data.tags[TAG_WEIGHTS_SHA256] == hashlib.sha256(weights_bytes).hexdigest()


def test_the_rebuild_mode_run_does_no_mlflow_io_and_reproduces_the_registered_weights_bitwise(
    sqlite_tracking_uri, project, snapshot, tmp_path
):
    from auditor.snapshots import materialize

    folder, data_ref = snapshot
    done = train(project, tmp_path, env={"TINY_DATA": data_ref, "REGISTER_AS": "tiny"})
    assert done.returncode == 0, done.stderr[-3000:]
    registry = MlflowRegistry(sqlite_tracking_uri)
    info = registry.resolve("models:/tiny/1")
    record, _ = registry.load_record(info)

    config = tmp_path / "resolved.json"
    config.write_text(json.dumps(record.config.resolved))
    out = tmp_path / "out"
    data_dir = materialize(record.data["train"].version, record.data["train"].uri, tmp_path / "materialised")
    untouched = tmp_path / "never.db"
    rebuilt = train(
        project,
        project,  # the audit runs the entrypoint from code.subdir of the workspace
        env={
            "REPRO_REBUILD": "1",
            "REPRO_CONFIG": str(config),
            "REPRO_OUTPUT_DIR": str(out),
            "REPRO_DATA_TRAIN": str(data_dir),
            "REPRO_SEED": "7",
            "REPRO_DETERMINISTIC": "1",
            "MLFLOW_TRACKING_URI": f"sqlite:///{untouched}",
            "REGISTER_AS": "tiny",  # register_model must be a no-op in a rebuild
        },
    )
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert not untouched.exists()
    assert "VERSION None None" in rebuilt.stdout
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "model.safetensors", "run_record.json"]
    assert hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest() == record.outputs.artifacts[0].sha256
    assert json.loads((out / "metrics.json").read_text()) == record.outputs.metrics

    own = RunRecord.from_json((out / "run_record.json").read_text())
    assert own.config.digest == record.config.digest and own.seeds == record.seeds
    assert [v.version for v in registry.list_versions()] == ["1"]


# -- in-process behaviour ---------------------------------------------------------------------------


def tiny_training(run) -> None:
    import torch

    model = torch.nn.Linear(2, 1)
    run.log_metrics({"loss": 0.5, "acc": 0.75})
    run.save_weights(model.state_dict())


def test_inside_an_active_mlflow_run_track_attaches_to_it_instead_of_starting_another(sqlite_tracking_uri, project, snapshot):
    import mlflow

    import auditor

    _, data_ref = snapshot
    with mlflow.start_run() as outer:
        mlflow.log_param("team", "risk")
        with auditor.track(config=project / "config.yaml", data={"train": data_ref}, repo_dir=project,
                           entrypoint=["python", "train.py"]) as run:
            tiny_training(run)
        assert run.run_id == outer.info.run_id
        assert mlflow.active_run().info.run_id == outer.info.run_id  # still open: its owner ends it
    client = mlflow.MlflowClient()
    assert len(client.search_runs([outer.info.experiment_id])) == 1
    logged = client.get_run(outer.info.run_id)
    assert logged.data.params["team"] == "risk" and logged.data.params["model.hidden"] == "3"
    assert logged.data.tags[TAG_RECORD_DIGEST] == run.record.digest()
    assert auditor.register_model(run, "attached") == "1"


def test_a_dirty_tree_logs_its_diff_beside_the_record_and_the_reader_returns_it(sqlite_tracking_uri, project, snapshot):
    import auditor

    (project / "train.py").write_text(TRAIN_PY + "\n# tuned by hand\n")
    (project / "notes.txt").write_text("untracked\n")
    _, data_ref = snapshot
    with auditor.track(config=project / "config.yaml", data={"train": data_ref}, repo_dir=project,
                       entrypoint=["python", "train.py"]) as run:
        tiny_training(run)
    version = auditor.register_model(run, "dirty")
    record, diff = MlflowRegistry(sqlite_tracking_uri).load_record(MlflowRegistry(sqlite_tracking_uri).resolve(f"models:/dirty/{version}"))
    assert record.code.dirty is True and diff == run.diff
    assert "+# tuned by hand" in diff and "notes.txt" in diff


def test_register_model_refuses_inside_the_block_and_for_a_failed_run(sqlite_tracking_uri, project, snapshot):
    import auditor

    _, data_ref = snapshot
    kwargs = {"config": project / "config.yaml", "data": {"train": data_ref}, "repo_dir": project, "entrypoint": ["python", "t.py"]}
    with auditor.track(**kwargs) as run:
        tiny_training(run)
        with pytest.raises(BadInput, match="inside the `with auditor.track"):
            auditor.register_model(run, "early")
    with pytest.raises(RuntimeError, match="boom"), auditor.track(**kwargs) as failed:
        raise RuntimeError("boom")
    with pytest.raises(BadInput, match="failed"):
        auditor.register_model(failed, "failed")
    import mlflow

    assert mlflow.MlflowClient().get_run(failed.run_id).info.status == "FAILED"


def test_register_model_by_run_id_gates_the_logged_record(sqlite_tracking_uri, project):
    import auditor

    with auditor.track(config=project / "config.yaml", data={"train": "warehouse.customers@latest"}, repo_dir=project,
                       entrypoint=["python", "t.py"]) as run:
        tiny_training(run)
    with pytest.raises(LineageIncomplete) as refused:
        auditor.register_model(run.run_id, "by-id")
    assert [f.path for f in refused.value.findings] == ["data.train.version"]


def test_an_empty_data_ref_is_bad_input_naming_it(sqlite_tracking_uri, project):
    import auditor

    with pytest.raises(BadInput, match="data ref 'train' is empty"):
        with auditor.track(config=project / "config.yaml", data={"train": ""}, repo_dir=project):
            pass


def test_weights_to_evaluate_is_offered_only_to_an_audits_rebuild(project, tmp_path):
    import auditor

    weights = tmp_path / "registered.safetensors"
    weights.write_bytes(b"not read here")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"seed": 3, "model": {"hidden": 2}}))
    rebuild_env = {
        "REPRO_REBUILD": "1",
        "REPRO_CONFIG": str(config),
        "REPRO_OUTPUT_DIR": str(tmp_path / "out"),
        "REPRO_SEED": "3",
        "REPRO_EVALUATE_WEIGHTS": str(weights),
    }
    with auditor.track(config=project / "config.yaml", data={"train": ""}, repo_dir=project, env=rebuild_env) as run:
        assert run.weights_to_evaluate == weights
        assert run.config == {"seed": 3, "model": {"hidden": 2}} and run.seeds.seed == 3
        run.log_metrics({"auc": 0.5})
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["evaluation.json", "metrics.json", "run_record.json"]  # evaluation.json: these metrics evaluate the given weights
    assert run.run_id is None

    with pytest.raises(BadInput, match="REPRO_OUTPUT_DIR is unset"):
        with auditor.track(config=project / "config.yaml", repo_dir=project, env={"REPRO_REBUILD": "1", "REPRO_CONFIG": str(config)}):
            pass
