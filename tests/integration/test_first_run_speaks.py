"""The first training run speaks (issue 29, build 9 and acceptance 7): a script that writes its own data and outputs,
adapted with the README's "Audit your own training script" steps, trains with a clean ``git status`` and
``register_model`` prints the version it registered and every warning of the gate, by name, with its fix.

Real parts: a git repository, MLflow on the README's default SQLite file, the default snapshot store, scikit-learn.
The project's interpreter is this one, with the README's default settings (no REPRO_* or MLFLOW_* variable).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fixtures.gitrepo import git, init_repo

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "getting-started" / "pytorch.md").read_text(encoding="utf-8")  # was the README's section
SECTION = README

SCRIPT = '''\
"""Writes its own data file (data/points.csv) and its predictions (outputs/predictions.csv), as many scripts do."""
import argparse
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

import auditor

parser = argparse.ArgumentParser()
parser.add_argument("--C", type=float, default=1.0)
args = parser.parse_args()

rng = np.random.default_rng(7)  # the data: generated under a constant seed, written where the script keeps it
x = rng.normal(size=(200, 3))
y = (x[:, 0] - x[:, 1] > 0).astype(int)
Path("data").mkdir(exist_ok=True)
np.savetxt("data/points.csv", np.column_stack([x, y]), delimiter=",")

run = auditor.start(config=args, seed=1, experiment="points", data={"train": auditor.generated("data/points.csv")})
model = LogisticRegression(C=args.C, random_state=run.seed).fit(x, y)
Path("outputs").mkdir(exist_ok=True)
np.savetxt("outputs/predictions.csv", model.predict_proba(x)[:, 1], delimiter=",")
print(f"fitted C={args.C}: accuracy {model.score(x, y):.3f}")
run.log_metrics({"accuracy": float(model.score(x, y))})
run.save_model(model)
run.finish()
auditor.register_model(run, "points")
'''


def _readme_gitignore() -> str:
    start = SECTION.index("out of git")
    match = re.search(r"```gitignore\n(.*?)```", SECTION[start:], re.S)
    assert match, "no ```gitignore block in the README's onboarding section"
    return textwrap.dedent(match.group(1))


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REPRO_", "MLFLOW_")) and k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)  # the checkout, as an editable install puts it on the path
    env.pop("PYTHONHASHSEED", None)  # a first run as people start it: the gate's hash-seed warning must be said
    return env


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The project, committed with the README's .gitignore, trained once: (project folder, the training's stderr, .gitignore)."""
    project = init_repo(tmp_path_factory.mktemp("first-run") / "points", {"train.py": SCRIPT})
    gitignore = _readme_gitignore()
    (project / ".gitignore").write_text(gitignore)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "train with repro-audit")
    assert git(project, "status", "--porcelain").strip() == ""  # the README: check git status before training
    done = subprocess.run([sys.executable, "train.py", "--C", "0.5"], cwd=project, env=_clean_env(),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return project, done.stderr, gitignore


def test_a_script_writing_its_own_data_trains_clean_and_register_model_prints_its_version_and_warnings(trained):
    project, err, gitignore = trained
    # the script's own data and outputs are ignored by the README's .gitignore: nothing untracked, nothing dirty
    assert (project / "data" / "points.csv").is_file() and (project / "outputs" / "predictions.csv").is_file()
    assert git(project, "status", "--porcelain", "--untracked-files=all").strip() == "", (
        "the README's .gitignore leaves the script's own files in the recorded diff:\n" + gitignore)

    assert "repro-audit: registered models:/points/1 (run " in err, err[-3000:]
    warnings = re.findall(r"^  - ([a-z_.]+) \(", err, re.M)
    assert "data.split_missing" in warnings and "seeds.hashseed_random" in warnings, err[-3000:]
    # each warning comes with its fix: the split with the SDK call that records it, the hash seed in one line
    assert 'run.record_split(\'train\', "random 80/20 by row", seed=run.seed)' in err
    assert "PYTHONHASHSEED=0 python train.py" in err
    # the run is clean: no dirty warning, and no library's own environment variable counted as the script's input
    assert "code.dirty" not in warnings and "MPL" not in err

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / '.repro' / 'mlflow.db'}")
    version = client.get_model_version("points", "1")
    assert client.get_run(version.run_id).data.tags.get("mlflow.source.git.commit") == git(project, "rev-parse", "HEAD").strip()


def _under_pty(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as its stdin, stdout and stderr (as in a person's shell): (exit code, output)."""
    import pty
    import select
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env={**env, "TERM": "xterm", "COLUMNS": "160"}, stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_calibrate_on_a_terminal_prints_a_line_per_rerun_with_its_elapsed_time_and_streams_the_trainer(trained):
    project, _, _ = trained
    code, out = _under_pty([sys.executable, "-m", "auditor", "calibrate", "models:/points/1", "--reruns", "3", "--same-seed", "2",
                            "--stream-output"], project, _clean_env(), timeout=900)
    assert code == 0, out[-4000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out).replace("\r", "\n")
    done = re.findall(r"^✓ ((?:same-seed|seed-varied) rerun \d/\d) \(seed \d+\) \((\d+\.\d) s; \d+ s in all\)", plain, re.M)
    assert [name for name, _ in done] == ["same-seed rerun 1/2", "same-seed rerun 2/2", "seed-varied rerun 1/3",
                                          "seed-varied rerun 2/3", "seed-varied rerun 3/3"], plain[-4000:]
    assert all(float(seconds) > 0 for _, seconds in done)
    # the trainer's own output, streamed as it ran (five reruns, each printed its line)
    assert len(re.findall(r"│ fitted C=0\.5: accuracy", plain)) >= 5, plain[-4000:]
