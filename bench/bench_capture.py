"""Lineage capture time for a repository of 1,000 files with a 1 MB diff.

Prints our full ``capture()`` next to the raw floor it stands on (``git status``
plus ``git diff`` of the same tree), and their ratio.

    .venv/bin/python bench/bench_capture.py [--files 1000] [--diff-mb 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.lineage.gather import capture  # noqa: E402

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}


def make_repo(root: Path, files: int, diff_mb: float) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(files):
        path = root / f"pkg{i % 20}" / f"mod{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(f"value_{i}_{j} = {j}\n" for j in range(40)))
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=root, check=True, env=GIT_ENV)
    # dirty the tree with about diff_mb of changes: edits plus one new untracked file
    line = "x" * 99 + "\n"
    (root / "untracked_big.txt").write_text(line * int(diff_mb * 1e6 / 100 / 2))
    for i in range(0, files, 10):
        path = root / f"pkg{i % 20}" / f"mod{i}.py"
        path.write_text(path.read_text() + line * int(diff_mb * 1e6 / 100 / 2 / (files / 10)))


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--diff-mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        make_repo(root, args.files, args.diff_mb)
        captured = capture(repo_dir=root, config={"lr": 0.1}, entrypoint=["python", "train.py"])
        diff_size = len(captured.diff or "")
        # import torch once so capture's environment probe is measured warm, as in a training process
        ours = timed(lambda: capture(repo_dir=root, config={"lr": 0.1}, entrypoint=["python", "train.py"]), args.repeat)

        def raw() -> None:
            subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True, check=True)
            subprocess.run(["git", "diff", "HEAD"], cwd=root, capture_output=True, check=True)

        floor = timed(raw, args.repeat)
    print(f"repository: {args.files} files, diff {diff_size / 1e6:.2f} MB")
    print(f"capture() (git + config + environment + infrastructure): {ours * 1000:8.1f} ms (median of {args.repeat})")
    print(f"raw floor (git status + git diff HEAD):                  {floor * 1000:8.1f} ms")
    print(f"ratio ours / raw floor: {ours / floor:.1f}x")


if __name__ == "__main__":
    main()
