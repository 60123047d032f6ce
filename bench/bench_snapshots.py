"""Snapshot fingerprinting vs a plain read vs ``dvc add --no-commit``, side by side, on three shapes.

    python bench/bench_snapshots.py                 # 2,000 x 512 KiB; one 1 GiB file; 50,000 x 4 KiB
    python bench/bench_snapshots.py --scale 0.1     # the same shapes, a tenth of the files / bytes

"Ours" is ``auditor.snapshots.build_manifest(dir).id`` (walk + BLAKE3 of every
byte + the manifest's id: what ``snapshot create`` does before it stores
anything), in-process. "Read"
walks the same tree and reads every byte into one reused buffer: the ceiling.
"DVC" runs ``dvc add --no-commit`` in a fresh DVC repository (with a fresh site
cache, so it cannot reuse hashes), start-up included since users pay it too.
The page cache is warmed first; each figure is the best of ``--repeat`` runs
(ours and the read interleaved). CPU seconds are printed beside wall time
because on a shared, loaded machine wall time reads low for whatever uses
both cores; the load average is printed at start and end for the same reason.
Targets (issue 3): >= 15x DVC on the two large shapes, >= 5x on the small-file
shape, and >= 0.4x the plain read's speed on the large shapes.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auditor.snapshots.manifest import build_manifest  # noqa: E402

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
SHAPES = {  # --shape: name, file count, file size, DVC target, read target
    "files": ("2,000 x 512 KiB", 2000, 512 * KIB, 15.0, 0.4),
    "big": ("1 x 1 GiB", 1, GIB, 15.0, 0.4),
    "tiny": ("50,000 x 4 KiB", 50000, 4 * KIB, 5.0, None),
}


def make_tree(root: Path, count: int, size: int) -> None:
    root.mkdir(parents=True)
    chunk = 64 * MIB
    block = os.urandom(size + count) if size <= chunk else b""  # distinct files without urandom per file
    for n in range(count):
        path = root / f"f{n // 1000:03d}" / f"{n:06d}.bin" if count > 1000 else root / f"{n:06d}.bin"
        path.parent.mkdir(exist_ok=True)
        with open(path, "wb") as out:
            if size <= chunk:
                out.write(block[n : n + size])
            else:
                for start in range(0, size, chunk):
                    out.write(os.urandom(min(chunk, size - start)))


def plain_read(root: Path) -> int:
    buf = bytearray(8 * MIB)
    total = 0
    stack = [str(root)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for item in it:
                if item.is_dir(follow_symlinks=False):
                    stack.append(item.path)
                    continue
                with open(item.path, "rb", buffering=0) as f:
                    while n := f.readinto(buf):
                        total += n
    return total


def cpu_now() -> float:
    """CPU seconds of this process and its reaped children (forked hashers, dvc) so far."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), cpu_now()
    run()
    return time.perf_counter() - wall, cpu_now() - cpu


def dvc_command() -> list[str] | None:
    beside = Path(sys.executable).parent / "dvc"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("dvc")
    return [found] if found else None


def dvc_add(dvc: list[str], repo: Path, repeat: int) -> tuple[float, float]:
    def once() -> tuple[float, float]:
        shutil.rmtree(repo / ".dvc", ignore_errors=True)
        (repo / "data.dvc").unlink(missing_ok=True)
        site = tempfile.mkdtemp(prefix="dvc-site-", dir=repo.parent)
        env = {**os.environ, "DVC_NO_ANALYTICS": "1", "DVC_SITE_CACHE_DIR": site}
        quiet = {"cwd": repo, "env": env, "check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
        subprocess.run([*dvc, "init", "--no-scm", "-q"], **quiet)
        subprocess.run([*dvc, "config", "core.site_cache_dir", site], **quiet)
        took = measure(lambda: subprocess.run([*dvc, "add", "--no-commit", "-q", "data"], **quiet))
        shutil.rmtree(site, ignore_errors=True)
        return took

    runs = [once() for _ in range(repeat)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def load() -> str:
    """The 1/5/15-minute load averages: on a shared machine, figures taken under load read low."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def rate(nbytes: int, seconds: float, cpu: float) -> str:
    return f"{seconds:7.3f} s {nbytes / seconds / 1e9:6.2f} GB/s   ({cpu:6.3f} CPU-s)"


def verdict(value: float, target: float | None) -> str:
    if target is None:
        return ""
    return f"(target >= {target:g}x: {'met' if value >= target else 'MISSED'})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply file counts (and the big file's size)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept")
    parser.add_argument("--shape", choices=list(SHAPES), action="append", help="run only these shapes (repeatable)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the trees (default: a temp dir)")
    args = parser.parse_args()
    dvc = dvc_command()
    print(f"cores: {len(os.sched_getaffinity(0))}, scale {args.scale:g}, best of {args.repeat}, load {load()}")
    if dvc is None:
        print("dvc not installed: pip install -e .[bench]   (the DVC column is skipped)")
    work = Path(tempfile.mkdtemp(prefix="bench-snapshots-", dir=args.dir))
    failures = 0
    try:
        for name, count, size, dvc_target, read_target in (SHAPES[s] for s in args.shape or SHAPES):
            if count > 1:
                count = max(1, round(count * args.scale))
            else:
                size = max(KIB, round(size * args.scale))
            repo = work / name.replace(" ", "").replace(",", "")
            data = repo / "data"
            make_tree(data, count, size)
            total = count * size
            plain_read(data)  # warm the page cache
            # Interleaved rounds, best of each: a burst of load on a shared machine hits both sides alike.
            rounds = [
                (measure(lambda data=data: build_manifest(data).id), measure(lambda data=data: plain_read(data)))
                for _ in range(args.repeat)
            ]
            ours, ours_cpu = min(r[0][0] for r in rounds), min(r[0][1] for r in rounds)
            read, read_cpu = min(r[1][0] for r in rounds), min(r[1][1] for r in rounds)
            print(f"\n{name}  ({count:,} files, {total / GIB:.2f} GiB)")
            print(f"  ours (fingerprint)   {rate(total, ours, ours_cpu)}")
            print(f"  plain read           {rate(total, read, read_cpu)}")
            speed = read / ours
            print(f"  ours / read speed    {speed:6.2f}x {verdict(speed, read_target)}")
            if read_target is not None and speed < read_target:
                failures += 1
            if dvc is not None:
                took, took_cpu = dvc_add(dvc, repo, min(args.repeat, 2))
                print(f"  dvc add --no-commit  {rate(total, took, took_cpu)}")
                print(f"  ours vs DVC          {took / ours:6.1f}x faster {verdict(took / ours, dvc_target)}")
                print(f"  ours vs DVC, CPU-s   {took_cpu / max(ours_cpu, 1e-6):6.1f}x less work")
                if took / ours < dvc_target:
                    failures += 1
            shutil.rmtree(repo)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.scale != 1.0:
        print("\nnote: the targets are stated for --scale 1; at other scales DVC's fixed start-up skews the ratio")
    print(f"\nload at the end {load()}")
    print(f"{failures} target(s) missed" if failures else "all targets met")
    return 1 if failures and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
