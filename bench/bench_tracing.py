"""Input tracing's cost on the reference model: training with tracing on vs off, side by side.

Each run is a fresh interpreter (an audit hook cannot be removed, so "off" must never follow "on" in
one process) running ``examples/reference_model/train.py`` in rebuild mode (the entry-point contract:
no MLflow, the same training loop), timed from entering ``main()`` to its return: the ``track()``
block, so capture, tracing start/stop and training. Runs alternate off/on to share the machine's noise.
Target (issue 13): tracing ≤ 3 % slower.

    .venv/bin/python bench/bench_tracing.py [--repeats 5] [--epochs 6] [--rows 40000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DRIVER = """
import json, resource, runpy, sys, time
sys.path.insert(0, {root!r})
from auditor.lineage import tracing
tracing.ENABLED = {enabled!r}
module = runpy.run_path({train!r}, run_name="bench")

def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

started, cpu0 = time.perf_counter(), cpu()
module["main"]()
print("BENCH", json.dumps({{"seconds": time.perf_counter() - started, "cpu": cpu() - cpu0}}), flush=True)
"""


def run_once(enabled: bool, env: dict[str, str], out: Path) -> dict[str, float]:
    code = DRIVER.format(root=str(ROOT), enabled=enabled, train=str(ROOT / "examples" / "reference_model" / "train.py"))
    done = subprocess.run([sys.executable, "-c", code], env={**env, "REPRO_OUTPUT_DIR": str(out)}, cwd=ROOT / "examples" / "reference_model",
                          capture_output=True, text=True, timeout=1200, check=False)
    if done.returncode != 0:
        raise SystemExit(f"training failed (tracing {'on' if enabled else 'off'}):\n{done.stderr[-3000:]}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("BENCH "))
    record = json.loads((out / "run_record.json").read_text())
    if enabled and record.get("traced") is None:
        raise SystemExit("tracing was on but the record has no traced section")
    return json.loads(line.split(" ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=40_000)
    args = parser.parse_args()

    import numpy as np
    import yaml

    sys.path.insert(0, str(ROOT / "examples" / "reference_model"))
    from make_data import make

    with tempfile.TemporaryDirectory(prefix="bench-tracing-") as tmp:
        tmp_path = Path(tmp)
        data = tmp_path / "data"
        data.mkdir()
        for name, array in make(rows=args.rows).items():
            np.save(data / f"{name}.npy", array)
        config = yaml.safe_load((ROOT / "examples" / "reference_model" / "config.yaml").read_text())
        config["epochs"] = args.epochs
        (tmp_path / "config.json").write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_")}
        env.update({"REPRO_REBUILD": "1", "REPRO_CONFIG": str(tmp_path / "config.json"), "REPRO_DATA_TRAIN": str(data),
                    "REPRO_SEED": "7", "REPRO_DETERMINISTIC": "1", "REPRO_TORCH_THREADS": "2", "PYTHONHASHSEED": "0"})
        times: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        run_once(False, env, tmp_path / "warmup")  # page cache and torch's first-import costs
        for i in range(args.repeats):
            for enabled in (False, True):
                times[enabled].append(run_once(enabled, env, tmp_path / f"run-{i}-{int(enabled)}"))
                t = times[enabled][-1]
                print(f"repeat {i + 1}/{args.repeats} tracing {'on ' if enabled else 'off'}: {t['seconds']:.3f} s wall, {t['cpu']:.3f} s CPU", flush=True)
    print()
    print(f"reference model, {args.epochs} epochs, {args.rows} rows, {args.repeats} repeats of the track() block (capture, tracing, training)")
    for key, what in (("cpu", "CPU seconds (process and its DataLoader workers)"), ("seconds", "wall seconds")):
        off = [t[key] for t in times[False]]
        on = [t[key] for t in times[True]]
        pairs = [b / a for a, b in zip(off, on, strict=True)]
        print(f"  {what}:")
        print(f"    tracing off: median {statistics.median(off):.3f}, min {min(off):.3f}   ({', '.join(f'{x:.2f}' for x in off)})")
        print(f"    tracing on:  median {statistics.median(on):.3f}, min {min(on):.3f}   ({', '.join(f'{x:.2f}' for x in on)})")
        print(f"    ratio on/off: medians {statistics.median(on) / statistics.median(off):.4f}, minima {min(on) / min(off):.4f}, "
              f"median of paired ratios {statistics.median(pairs):.4f}; target <= 1.03")


if __name__ == "__main__":
    main()
