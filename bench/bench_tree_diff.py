"""Structural diff of two 2,000-tree XGBoost models against loading both natively.

Trains one XGBoost model of ``--trees`` trees (depth ``--depth``) in a child process and writes, as the
SDK saves them (``auditor.flavors.xgboost``: UBJSON + ``save_config`` in one bundle), the registered model,
an identical copy and a copy with one leaf changed (the last tree's first leaf, moved by one float32 step
of 1e-3). Then prints, in one run:

- loading both bundles natively (``xgboost.Booster.load_model`` + ``load_config``, the auditor's own
  loader): the floor any comparison that reads both models stands on;
- the audit's comparison (``auditor.judge.models.model_diff``: both normal forms read, the ladder run, the
  first divergent tree and node named) on the identical pair and on the one-leaf pair, with its ratio to
  the native load;
- peak memory: process RSS (``getrusage``) and the largest Python allocation (``tracemalloc``) during each,
  against the bundles' size;
- the acceptance lines of issue 41: each diff's median within 3x of the native load's, its Python peak within
  twice the two bundles' size; and the load average while it ran (a shared machine's timings need it).

The models are trained in a child process, so this process's peak RSS is the comparison's own (and the
native loads'). Everything is deleted at the end.

    .venv/bin/python bench/bench_tree_diff.py [--trees 2000] [--depth 6] [--repeat 3] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_weight_diff import measure, rss_mib  # noqa: E402 - one way to time a diff and read its peak memory

from auditor.flavors import xgboost as flavour  # noqa: E402
from auditor.judge.models import model_diff  # noqa: E402

MIB = 1 << 20


def _write_models(folder: str, trees: int, depth: int) -> None:
    """Child process: the registered bundle, an identical copy and a copy with one leaf changed."""
    import numpy as np
    import xgboost

    rng = np.random.default_rng(7)
    x = rng.normal(size=(5000, 20))
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * rng.normal(size=5000) > 0).astype(int)
    model = xgboost.XGBClassifier(n_estimators=trees, max_depth=depth, learning_rate=0.05, tree_method="hist",
                                  n_jobs=1, random_state=7).fit(x, y)
    flavour.save(model, os.path.join(folder, "registered.zip"))
    flavour.save(model, os.path.join(folder, "identical.zip"))
    doc = json.loads(bytes(model.get_booster().save_raw("json")))
    last = doc["learner"]["gradient_booster"]["model"]["trees"][-1]
    leaf = next(i for i, left in enumerate(last["left_children"]) if left == -1)
    last["split_conditions"][leaf] = float(np.float32(last["split_conditions"][leaf]) + np.float32(1e-3))
    changed = xgboost.Booster()
    changed.load_model(bytearray(json.dumps(doc).encode()))
    changed.load_config(model.get_booster().save_config())
    flavour.save(changed, os.path.join(folder, "one_leaf.zip"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to write the temporary files")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-tree-diff-") as tmp:
        started = time.perf_counter()
        child = multiprocessing.get_context("spawn").Process(target=_write_models, args=(tmp, args.trees, args.depth))
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"training the models failed (exit {child.exitcode})")
        folder = Path(tmp)
        registered, identical, one_leaf = (folder / f"{n}.zip" for n in ("registered", "identical", "one_leaf"))
        size = registered.stat().st_size / MIB
        print(f"{args.trees} trees of depth {args.depth}: bundle {size:.1f} MiB each "
              f"(trained in {time.perf_counter() - started:.1f} s, child process); repeat {args.repeat}, median (best)")
        def native() -> None:
            flavour.load(registered)
            flavour.load(identical)

        rss_start = rss_mib()
        native()  # warm: imports xgboost and fills the page cache, so neither side pays for them
        results = {}
        load_median, load_best, load_peak = measure(native, args.repeat)
        results["native load of both"] = (load_median, load_best, load_peak, rss_mib())
        for name, other in (("diff, identical pair", identical), ("diff, one leaf changed", one_leaf)):
            diff, lines = model_diff(registered, other, "xgboost")
            median, best, peak = measure(lambda other=other: model_diff(registered, other, "xgboost"), args.repeat)
            results[name] = (median, best, peak, rss_mib())
            print(f"  {name}: identical={diff.identical}, first divergence: {lines.get('model.first_divergence', '-')}")
        print(f"\n{'what':26} {'median s':>9} {'best s':>8} {'x native':>9} {'py peak MiB':>12} {'RSS MiB':>8}")
        for name, (median, best, peak, rss) in results.items():
            print(f"{name:26} {median:9.3f} {best:8.3f} {median / load_median:9.2f} {peak:12.1f} {rss:8.1f}")
        print(f"\nRSS before the first (warm-up) load {rss_start:.1f} MiB; the two bundles are {2 * size:.1f} MiB together")
        for name, (median, _, peak, _) in list(results.items())[1:]:
            ratio = median / load_median
            print(f"acceptance, {name}: {ratio:.2f}x native ({'within' if ratio <= 3 else 'OVER'} 3x), python peak {peak:.1f} MiB "
                  f"({'within' if peak <= 4 * size else 'OVER'} twice the bundles, {4 * size:.1f} MiB)")
        print(f"load average: {Path('/proc/loadavg').read_text().strip() if Path('/proc/loadavg').exists() else 'unknown'}")


if __name__ == "__main__":
    main()
