"""Streamed weight diff of two 1 GiB safetensors files against a plain read of the same bytes.

Writes a registered file and two rebuilds (a bit-identical copy and one where every tensor moved by a
few ULPs) into a temporary folder, warms the page cache, then prints, in one run:

- a plain read of both files through one reused 4 MiB buffer (the floor any diff stands on);
- ``diff_safetensors`` on the identical pair and on the differing pair, its throughput and its ratio
  to the plain read;
- the same with ``hash_files=True`` (sha256 of both files on top; off by default);
- ``safe_open(...).get_tensor`` per tensor, the obvious alternative, for its memory;
- peak memory: process RSS (``getrusage``) and the largest Python/numpy allocation (``tracemalloc``)
  during each diff, against the files' size.

The files are generated in a child process so this process never holds a tensor: its peak RSS is the
diff's own. Everything is deleted at the end.

    .venv/bin/python bench/bench_weight_diff.py [--scale 1.0] [--repeat 3] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditor.judge.weights import diff_safetensors  # noqa: E402

GIB = 1 << 30
MIB = 1 << 20


def layout(scale: float) -> dict[str, int]:
    """Tensor name -> float32 element count: one embedding (1/4) and 24 layers (3/4), about 1 GiB at 1.0."""
    sizes = {"embed.weight": max(1, int((64 << 20) * scale))}
    for layer in range(24):
        for part in ("attn.weight", "mlp.weight"):
            sizes[f"layers.{layer}.{part}"] = max(1, int((4 << 20) * scale))
        sizes[f"layers.{layer}.bias"] = 1024
    return sizes


def _write_files(folder: str, scale: float) -> None:
    """Child process: registered, identical and noisy files (the parent never allocates the tensors)."""
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(7)
    tensors = {}
    for name, n in layout(scale).items():
        shape = (n // 1024, 1024) if n % 1024 == 0 else (n,)
        tensors[name] = rng.standard_normal(n, dtype=np.float32).reshape(shape)
    save_file(tensors, os.path.join(folder, "registered.safetensors"))
    shutil.copyfile(os.path.join(folder, "registered.safetensors"), os.path.join(folder, "identical.safetensors"))
    factor = np.float32(1 + 2**-20)  # about 8 float32 ULPs on every element: a nondeterministic rebuild
    save_file({k: v * factor for k, v in tensors.items()}, os.path.join(folder, "noisy.safetensors"))


def plain_read(paths: list[Path]) -> None:
    buffer = bytearray(4 * MIB)
    view = memoryview(buffer)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(view):
                pass


def get_tensor_pass(a: Path, b: Path) -> None:
    """The obvious alternative: one get_tensor per name per file (numpy framework)."""
    import numpy as np
    from safetensors import safe_open

    with safe_open(str(a), framework="numpy") as fa, safe_open(str(b), framework="numpy") as fb:
        for name in fa.keys():
            x, y = fa.get_tensor(name), fb.get_tensor(name)
            np.array_equal(x.view(np.uint32), y.view(np.uint32))


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(fn, repeat: int) -> tuple[float, float, float]:
    """Median and best seconds over ``repeat`` runs, and the tracemalloc peak (MiB) of one more run."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1] / MIB
    finally:
        tracemalloc.stop()
    return statistics.median(times), min(times), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="file size as a fraction of 1 GiB")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write the temporary files")
    parser.add_argument("--skip-get-tensor", action="store_true", help="leave out the get_tensor comparison")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-weight-diff-") as tmp:
        child = multiprocessing.get_context("spawn").Process(target=_write_files, args=(tmp, args.scale))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"writing the files failed (exit {child.exitcode})")
        reg, same, noisy = (Path(tmp) / f"{n}.safetensors" for n in ("registered", "identical", "noisy"))
        size = reg.stat().st_size
        pair = 2 * size
        plain_read([reg, same, noisy])  # warm the page cache: every figure below reads cached bytes
        print(
            f"files: 2 x {size / MIB:.0f} MiB, {len(layout(args.scale))} float32 tensors, "
            f"cpus {os.cpu_count()}, median of {args.repeat}"
        )
        print(f"start RSS {rss_mib():.0f} MiB")

        t_read, best_read, m_read = measure(lambda: plain_read([reg, noisy]), args.repeat)
        rows = [("plain read, reused 4 MiB buffer", t_read, best_read, m_read, rss_mib())]
        for label, other, hashes in (
            ("diff, identical pair", same, False),
            ("diff, every tensor differs", noisy, False),
            ("diff, identical pair + sha256 of both", same, True),
            ("diff, differing pair + sha256 of both", noisy, True),
        ):
            result = diff_safetensors(reg, other, hash_files=hashes)
            assert result.identical is (other is same), label
            t, best, m = measure(lambda o=other, h=hashes: diff_safetensors(reg, o, hash_files=h), args.repeat)
            rows.append((label, t, best, m, rss_mib()))
        rss_after_diffs = rss_mib()
        if not args.skip_get_tensor:
            t, best, m = measure(lambda: get_tensor_pass(reg, noisy), 1)
            rows.append(("safe_open get_tensor + integer-view equality", t, best, m, rss_mib()))

        header = f"{'what':46} {'median s':>8} {'best s':>7} {'GB/s':>6} {'x read':>6} {'x read best':>11}"
        print(f"{header} {'tracemalloc peak':>16} {'max RSS so far':>14}")
        for label, t, best, m, rss in rows:
            ratios = f"{t / t_read:6.2f} {best / best_read:11.2f}"
            print(f"{label:46} {t:8.3f} {best:7.3f} {pair / t / 1e9:6.2f} {ratios} {m:12.1f} MiB {rss:10.0f} MiB")
        print(
            f"peak RSS through every diff: {rss_after_diffs:.0f} MiB for {pair / MIB:.0f} MiB of weights "
            f"({rss_after_diffs / (pair / MIB):.1%} of the two files' size)"
        )


if __name__ == "__main__":
    main()
