"""The README's defaults, followed literally from a project folder, give a correct verdict (issue 13, point 6).

A fresh git project with a small torch script using the SDK the way the README shows; everything run
from the project folder with no REPRO_HOME and no MLFLOW_TRACKING_URI: the snapshot store is
``.repro/snapshots``, the registry ``.repro/mlflow.db`` and MLflow's artifacts land in ``./mlruns``,
all inside the repository and none of it in the user's ``.gitignore``. The run must be recorded clean
and ``repro-audit audit`` must rebuild it bit-identically (the recipe is deterministic on CPU).
Real git, real MLflow on SQLite, real torch training, the real CLI in subprocesses.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.gitrepo import GIT_ENV, git, init_repo

TRAIN_PY = '''
import sys
from pathlib import Path

import numpy as np
import torch

import auditor

torch.set_num_threads(1)


def main():
    with auditor.track(config="config.yaml", overrides=sys.argv[1:], seed=7, experiment="readme",
                       data={"train": "SNAPSHOT_REF"}) as run:
        cfg = run.config
        folder = run.data_path("train")
        x = torch.from_numpy(np.load(folder / "x.npy", allow_pickle=False))
        y = torch.from_numpy(np.load(folder / "y.npy", allow_pickle=False))
        model = torch.nn.Sequential(torch.nn.Linear(4, cfg["hidden"]), torch.nn.Tanh(), torch.nn.Linear(cfg["hidden"], 1))
        if run.weights_to_evaluate is not None:
            from safetensors.torch import load_file
            model.load_state_dict(load_file(run.weights_to_evaluate))
        else:
            optimizer = torch.optim.SGD(model.parameters(), lr=float(cfg["lr"]))
            loader = torch.utils.data.DataLoader(list(zip(x, y)), batch_size=8, shuffle=True, **run.dataloader_kwargs())
            for _ in range(int(cfg["epochs"])):
                for xb, yb in loader:
                    optimizer.zero_grad()
                    torch.nn.functional.mse_loss(model(xb).squeeze(1), yb).backward()
                    optimizer.step()
            run.save_weights(model.state_dict())
        with torch.no_grad():
            run.log_metrics({"mse": float(torch.nn.functional.mse_loss(model(x).squeeze(1), y))})
    auditor.register_model(run, "readme-tiny")


main()
'''


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without any auditor or MLflow setting: the README's defaults apply."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REPRO_", "MLFLOW_"))}
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return {**env, **GIT_ENV, "PYTHONHASHSEED": "0", "TMPDIR": str(tmpdir)}


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from auditor.cli import main; sys.argv[0] = 'repro-audit'; main()", *args]


def test_the_readme_defaults_from_a_project_folder_record_a_clean_run_and_rebuild_it_bitwise(tmp_path):
    import numpy as np

    project = init_repo(tmp_path / "project", {"config.yaml": "lr: 0.05\nepochs: 2\nhidden: 3\n", ".gitignore": "data/\n"})
    env = _clean_env(tmp_path)

    # 1. snapshot the data with the default store (.repro/snapshots, inside the project)
    (project / "data").mkdir()
    rng = np.random.default_rng(0)
    np.save(project / "data" / "x.npy", rng.normal(size=(64, 4)).astype("float32"))
    np.save(project / "data" / "y.npy", rng.normal(size=64).astype("float32"))
    made = _run(_cli("snapshot", "create", "data/"), project, env)
    assert made.returncode == 0, made.stderr[-3000:]
    snapshot_id = made.stdout.strip().splitlines()[-1]
    assert snapshot_id.startswith("blake3:") and (project / ".repro" / "snapshots").is_dir()

    # 2. the script names the snapshot as the README does, and is committed: the tree is clean but for our folders
    (project / "train.py").write_text(TRAIN_PY.replace("SNAPSHOT_REF", f".repro/snapshots@{snapshot_id}"))
    git(project, "add", "train.py")
    git(project, "commit", "-q", "-m", "train")
    trained = _run([sys.executable, "train.py"], project, env)
    assert trained.returncode == 0, trained.stderr[-3000:]
    # the auditor's own state is in the tree, unignored, exactly as the defaults put it there
    assert (project / ".repro" / "mlflow.db").is_file() and (project / "mlruns").is_dir()
    status = git(project, "status", "--porcelain", "--untracked-files=all")
    assert ".repro/" in status and "mlruns/" in status

    # 3. the record says clean
    shown = _run(_cli("lineage", "show", "models:/readme-tiny/1", "--json"), project, env)
    assert shown.returncode in (0, 1), shown.stderr[-3000:]
    record = json.loads(shown.stdout)["record"]
    assert record["code"]["dirty"] is False, record["code"]
    assert record["code"]["commit"] == git(project, "rev-parse", "HEAD").strip()
    assert record["traced"] is not None and record["traced"]["files"] == [] and record["traced"]["env"] == []

    # 4. the audit, from the same folder, rebuilds it bit-identically
    audited = _run(_cli("audit", "models:/readme-tiny/1", "--json"), project, env)
    assert audited.stdout.strip(), audited.stderr[-3000:]
    result = json.loads(audited.stdout)
    inner = result.get("result", result)
    why = {k: inner.get(k) for k in ("error", "log_tail", "findings", "tiers")}
    assert result["verdict"] == "REPRODUCED_BITWISE", json.dumps(why, indent=1)[:6000]
    assert audited.returncode == 0

    # 5. and a second training after the audit (reports/, workspaces and caches now in the tree) is still clean
    again = _run([sys.executable, "-c", "from auditor.lineage.gather import git_info; print(git_info('.')[0].dirty)"], project, env)
    assert again.returncode == 0 and again.stdout.strip() == "False", again.stderr[-2000:]


def test_the_auditors_folders_never_dirty_the_capture_but_committed_files_there_and_user_files_still_do(tmp_path, monkeypatch):
    from auditor.lineage.gather import git_info

    project = init_repo(tmp_path / "p", {"train.py": "x\n", "reports/summary.py": "S = 1\n"})
    monkeypatch.chdir(project)
    for name in ("REPRO_HOME", "REPRO_REPORTS", "MLFLOW_TRACKING_URI", "REPRO_SNAPSHOT_STORE"):
        monkeypatch.delenv(name, raising=False)
    for own in (".repro/mlflow.db", "mlruns/0/meta.yaml", "mlartifacts/a", "mlflow.db", "sub/__pycache__/m.cpython-311.pyc"):
        (project / own).parent.mkdir(parents=True, exist_ok=True)
        (project / own).write_text("state")
    code, diff = git_info(project)
    assert code.dirty is False and diff is None
    # a configured REPRO_HOME inside the repository is the auditor's too
    monkeypatch.setenv("REPRO_HOME", str(project / "state"))
    (project / "state").mkdir()
    (project / "state" / "x").write_text("x")
    assert git_info(project)[0].dirty is False
    # the user's own files are still seen: a tracked file under reports/ (REPRO_REPORTS' default name) ...
    (project / "reports" / "summary.py").write_text("S = 2\n")
    code, diff = git_info(project)
    assert code.dirty is True and "reports/summary.py" in diff and "mlruns" not in diff and ".repro" not in diff
    # ... and a new file beside the auditor's folders
    git(project, "checkout", "--", "reports/summary.py")
    (project / "model.py").write_text("M = 1\n")
    code, diff = git_info(project)
    assert code.dirty is True and "model.py" in diff and "__pycache__" not in diff


def test_a_relative_workspace_folder_still_applies_the_recorded_diff(tmp_path, monkeypatch):
    """REPRO_HOME=.repro is relative: the patch handed to git apply (run in the checkout) must be absolute."""
    from auditor.lineage.gather import capture
    from auditor.rebuild.workspace import prepare_workspace

    project = init_repo(tmp_path / "p", {"train.py": "x = 1\n"})
    (project / "train.py").write_text("x = 2\n")  # dirty: the diff must be replayed
    captured = capture(repo_dir=project, config={"a": 1}, entrypoint=["python", "train.py"])
    assert captured.record.code.dirty is True
    monkeypatch.chdir(tmp_path)
    ws = prepare_workspace(captured.record, captured.diff, dest=Path(".repro/work/ws"), git_cache=Path(".repro/git"))
    assert ws.root.is_absolute() and ws.project_dir.is_absolute() and ws.config_path.is_absolute()
    assert (ws.project_dir / "train.py").read_text() == "x = 2\n"
