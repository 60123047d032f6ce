"""Issue 5's GPU check, prepared for a session that is lent a GPU (none was lent so far).

Trains the reference model on CUDA twice with determinism on and twice with it off, same seed, and
records: whether the two runs' weights are bit-identical (by integer view, not torch.equal), the
metrics and their spread, and the time cost of deterministic mode. Writes JSON to
``$OUT/gpu_determinism.json`` (the device tool's output folder) or ``bench/results/``.

    python bench/gpu_determinism.py [--epochs 6] [--rows 40000]

Needs torch with CUDA, numpy, safetensors, pydantic and pyyaml; nothing else of the project's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "reference_model"))
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA initialises

import make_data  # noqa: E402
import torch  # noqa: E402
import train as reference  # noqa: E402

from auditor.seeds import dataloader_kwargs, seed_everything  # noqa: E402


def one_run(data: dict, cfg: dict, deterministic: bool) -> tuple[dict, dict, float]:
    info = seed_everything(int(cfg["seed"]), deterministic)
    torch.cuda.synchronize()
    started = time.perf_counter()
    model, metrics = reference.train(cfg, data, dataloader_kwargs(info))
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}, metrics, elapsed


def bit_identical(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k].contiguous().view(torch.int32), b[k].contiguous().view(torch.int32)) for k in a)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=40_000)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this check runs only where a GPU is lent")
    arrays = make_data.make(rows=args.rows)
    data = {name: torch.from_numpy(arrays[name]) for name in ("train_X", "train_y", "test_X", "test_y")}
    import yaml

    cfg = yaml.safe_load((ROOT / "examples/reference_model/config.yaml").read_text())
    cfg.update(device="cuda", epochs=args.epochs)
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
               "python": platform.python_version(), "epochs": args.epochs, "rows": args.rows, "modes": {}}
    for deterministic in (True, False):
        runs = [one_run(data, cfg, deterministic) for _ in range(2)]
        metrics = [m for _, m, _ in runs]
        results["modes"]["deterministic" if deterministic else "nondeterministic"] = {
            "bit_identical": bit_identical(runs[0][0], runs[1][0]),
            "max_abs_weight_diff": max(float((runs[0][0][k] - runs[1][0][k]).abs().max()) for k in runs[0][0]),
            "metrics": metrics,
            "metric_spread": {k: abs(metrics[0][k] - metrics[1][k]) for k in metrics[0]},
            "train_seconds": [round(t, 3) for _, _, t in runs],
        }
    det = sum(results["modes"]["deterministic"]["train_seconds"])
    nondet = sum(results["modes"]["nondeterministic"]["train_seconds"])
    results["deterministic_time_cost"] = round(det / nondet - 1, 4)
    out = Path(os.environ.get("OUT") or ROOT / "bench" / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_determinism.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
