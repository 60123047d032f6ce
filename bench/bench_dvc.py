"""Verifying a DVC-tracked folder: our ``verify_snapshot`` of its DVC snapshot vs ``dvc`` itself, same data.

    python bench/bench_dvc.py                  # 1,000 x 256 KiB (250 MiB) tracked by DVC in a temp git repo
    python bench/bench_dvc.py --scale 0.2      # a fifth of the files

"Ours" is ``auditor.snapshots.verify_snapshot(id, store)`` of the snapshot
``create_dvc_snapshot(repo, "data", store)`` made: BLAKE3 of every byte of every
cache object the recorded revision names, in-process (DVC's own API is only
used to create it). The peers are DVC's own checks of the same folder, start-up
included since users pay it too:

- ``dvc status (cold)``: ``dvc status data.dvc`` after removing DVC's state
  database (``.dvc/tmp``), so it re-reads and MD5s every workspace file: the
  like-for-like figure (both read every byte);
- ``dvc status (warm)``: the same with its state database kept, where DVC trusts
  size + mtime + inode and reads nothing: what users see day to day, and a check
  that a changed-in-place file with restored mtime would pass;
- ``dvc checkout --relink``: rebuilding the workspace from the cache;
- ``dvc version``: DVC's start-up alone, subtracted for a second cold ratio.

The page cache is warmed first; each figure is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditor.snapshots import verify_snapshot  # noqa: E402
from auditor.snapshots.dvc import create_dvc_snapshot  # noqa: E402

KIB = 1 << 10


def _run(cwd: Path, *argv: str) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")


def _dvc(cwd: Path, *argv: str) -> None:
    _run(cwd, sys.executable, "-m", "dvc", *argv)


def make_repo(root: Path, count: int, size: int) -> None:
    data = root / "data"
    data.mkdir(parents=True)
    block = os.urandom(size + count)
    for n in range(count):
        folder = data / f"d{n // 250:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"{n:05d}.bin").write_bytes(block[n : n + size])
    _run(root, "git", "init", "-q")
    _run(root, "git", "config", "user.email", "bench@example.com")
    _run(root, "git", "config", "user.name", "bench")
    _dvc(root, "init", "-q")
    _dvc(root, "config", "core.autostage", "true")
    _dvc(root, "add", "-q", "data")
    _run(root, "git", "add", "-A")
    _run(root, "git", "commit", "-qm", "data")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    count, size = max(10, int(1000 * args.scale)), 256 * KIB
    tmp = Path(tempfile.mkdtemp(prefix="bench-dvc-"))
    try:
        repo, store = tmp / "repo", tmp / "store"
        make_repo(repo, count, size)
        snapshot = create_dvc_snapshot(repo, "data", store).id
        print(f"{count:,} x {size // KIB} KiB tracked by DVC ({count * size / (1 << 20):,.0f} MiB); load {os.getloadavg()[0]:.2f}")

        def ours() -> None:
            assert verify_snapshot(snapshot, store) == []

        def cold() -> None:
            shutil.rmtree(repo / ".dvc" / "tmp", ignore_errors=True)
            _dvc(repo, "status", "-q", "data.dvc")

        def warm() -> None:
            _dvc(repo, "status", "-q", "data.dvc")

        def checkout() -> None:
            _dvc(repo, "checkout", "-q", "--relink", "data.dvc")

        ours()  # warm the page cache for every file both read
        cold()
        figures = {"ours (verify_snapshot)": best(ours, args.repeat)}
        figures["dvc status (cold)"] = best(cold, args.repeat)
        figures["dvc status (warm)"] = best(warm, args.repeat)
        figures["dvc checkout --relink"] = best(checkout, args.repeat)
        figures["dvc version (start-up)"] = best(lambda: _dvc(repo, "version"), args.repeat)
        base = figures["ours (verify_snapshot)"]
        for name, seconds in figures.items():
            if name.startswith("ours"):
                ratio = ""
            elif seconds >= base:
                ratio = f"  ours is {seconds / base:,.1f}x faster"
            else:
                ratio = f"  ours is {base / seconds:,.1f}x slower"
            print(f"{name:24s} {seconds:7.3f} s{ratio}")
        startup = figures["dvc version (start-up)"]
        print(f"without DVC's start-up, dvc status (cold) is {figures['dvc status (cold)'] - startup:.3f} s: "
              f"{(figures['dvc status (cold)'] - startup) / base:,.1f}x ours")
        print(f"load at end {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
