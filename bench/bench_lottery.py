"""The seed-lottery check against real seed lotteries (issue 31, acceptance 1).

The reference model (``examples/reference_model``: its data generator, its MLP, its ``train`` and
``evaluate``), made small so that a pool of seeds trains in minutes on two shared cores: ``--rows`` rows,
``--epochs`` epochs, no DataLoader workers; every training is seeded as the SDK seeds one
(``auditor.seeds.seed_everything`` and the seeded DataLoader generator). A pool of ``--pool`` seeds is
trained once; then, ``--trials`` times, the pool is shuffled and

- the first ``--search`` seeds (40) are one user's seed search: the **best** of them is registered as a
  *lottery winner*, a **random** one of them as an *honest* run;
- the next ``n`` seeds, disjoint from the search, are the calibration's seed-varied reruns, at the default
  number of reruns (``repro-audit calibrate --reruns``, 5) and at two others (19, the fewest an exact rank
  test at 0.05 can use, and 39);
- the lottery check the audit runs (``auditor.judge.lottery.seed_lottery`` over a ``Calibration``) judges
  each registered run. Detection rate: winners flagged; false-alarm rate: honest runs flagged. A check
  with too few reruns flags nothing: it says so (``too_few``), never passes; the table counts those apart.

    python bench/bench_lottery.py [--pool 200] [--search 40] [--trials 1000] [--metric auc] [--out FILE]

Trials share one pool, so they are not independent draws: the rates are resampling estimates. The exact
test's false-alarm rate is at most its level by construction; the detection rate at n reruns for the best
of k seeds is about k / (k + n) when the registered value must beat every rerun (p = 1 / (n + 1)).
Times are upper bounds (the machine is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REFERENCE = ROOT / "examples" / "reference_model"


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_pool(seeds: list[int], *, rows: int, epochs: int, hidden: int, progress=print) -> dict[int, dict[str, float]]:
    """Each seed's held-out metrics from the reference model's own training, seeded as the SDK seeds it."""
    import torch

    from auditor.seeds import dataloader_kwargs, seed_everything

    torch.set_num_threads(1)  # the record pins the thread count; one also leaves the other core to the machine
    data_module = _module("reference_make_data", REFERENCE / "make_data.py")
    train_module = _module("reference_train", REFERENCE / "train.py")
    data = {k: torch.from_numpy(v) for k, v in data_module.make(rows=rows).items()}
    cfg = {"epochs": epochs, "lr": 0.003, "weight_decay": 0.0001, "batch_size": 256, "hidden": hidden, "num_workers": 0,
           "device": "cpu"}
    out = {}
    started = time.perf_counter()
    for i, seed in enumerate(seeds):
        info = seed_everything(seed)
        with contextlib.redirect_stdout(io.StringIO()):  # its per-epoch lines
            _, metrics = train_module.train(cfg, data, dataloader_kwargs(info))
        out[seed] = metrics
        if (i + 1) % 20 == 0:
            progress(f"  trained {i + 1}/{len(seeds)} seeds ({time.perf_counter() - started:.0f} s)")
    return out


def lottery_status(registered: float, reruns: list[float], metric: str) -> str:
    """The audit's own check: a Calibration of these reruns, and seed_lottery on the registered value."""
    from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor
    from auditor.judge.lottery import seed_lottery

    calibration = Calibration(same_seed=SameSeedFloor(runs=[], bit_identical=True),
                              seed_varied=[FloorRun(seed=i, metrics={metric: v}) for i, v in enumerate(reruns)])
    check = seed_lottery(calibration, {metric: registered})
    return check.metrics[0].status


def trials(pool: dict[int, dict[str, float]], *, metric: str, search: int, counts: list[int], n_trials: int,
           rng: random.Random) -> dict[int, dict[str, int]]:
    """Per rerun count: winners flagged, honest runs flagged, and checks that said too few."""
    from auditor.judge.calibrate import default_direction

    sign = -1.0 if default_direction(metric) == "lower" else 1.0
    seeds = sorted(pool)
    tally = {n: {"winner_flagged": 0, "honest_flagged": 0, "too_few": 0} for n in counts}
    for _ in range(n_trials):
        rng.shuffle(seeds)
        searched = seeds[:search]
        winner = max(searched, key=lambda s: sign * pool[s][metric])
        honest = rng.choice(searched)
        rest = seeds[search:]
        for n in counts:
            reruns = [pool[s][metric] for s in rest[:n]]
            for who, seed in (("winner", winner), ("honest", honest)):
                status = lottery_status(pool[seed][metric], reruns, metric)
                tally[n][f"{who}_flagged"] += status == "lottery"
                if who == "winner":
                    tally[n]["too_few"] += status == "too_few"
    return tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=200, help="seeds trained once (at least --search + the largest count)")
    parser.add_argument("--search", type=int, default=40, help="the seeds a user tries before registering the best")
    parser.add_argument("--counts", default="5,19,39", help="seed-varied rerun counts compared (the first: calibrate's default)")
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--metric", default="auc")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    if args.pool < args.search + max(counts):
        raise SystemExit(f"--pool {args.pool} is smaller than --search {args.search} + {max(counts)} reruns")

    print(f"training the reference model (rows={args.rows}, epochs={args.epochs}, hidden={args.hidden}) under {args.pool} seeds")
    started = time.perf_counter()
    cpu = time.process_time()
    pool = train_pool(list(range(1000, 1000 + args.pool)), rows=args.rows, epochs=args.epochs, hidden=args.hidden)
    train_s, train_cpu = time.perf_counter() - started, time.process_time() - cpu
    values = sorted(m[args.metric] for m in pool.values())
    spread = values[-1] - values[0]
    print(f"  {args.pool} trainings in {train_s:.0f} s wall, {train_cpu:.0f} s CPU (upper bounds: shared machine); "
          f"{args.metric} from {values[0]:.4f} to {values[-1]:.4f} (range {spread:.4f}), {len(set(values))} distinct values")

    from auditor.judge.lottery import ALPHA, min_reruns

    tally = trials(pool, metric=args.metric, search=args.search, counts=counts, n_trials=args.trials, rng=random.Random(31))
    print(f"\nlottery check at alpha {ALPHA} (an exact rank test needs {min_reruns(ALPHA)} reruns), {args.trials} trials, "
          f"best of {args.search} seeds vs a random one of them:")
    print(f"{'reruns':>7} | {'detection (winners flagged)':>28} | {'false alarms (honest flagged)':>30} | {'said too few to test':>21}")
    rows = []
    for n in counts:
        t = tally[n]
        detection, false_alarm = t["winner_flagged"] / args.trials, t["honest_flagged"] / args.trials
        note = " (calibrate's default)" if n == counts[0] else ""
        print(f"{n:>7} | {detection:>27.1%} | {false_alarm:>29.1%} | {t['too_few'] / args.trials:>20.0%}{note}")
        rows.append({"reruns": n, "detection": detection, "false_alarm": false_alarm, "too_few": t["too_few"] / args.trials,
                     "expected_detection_if_registered_must_beat_all": args.search / (args.search + n)})
    doc = {"bench": "bench_lottery", "model": "examples/reference_model (MLP), in process", "rows": args.rows,
           "epochs": args.epochs, "hidden": args.hidden, "pool": args.pool, "search": args.search, "trials": args.trials,
           "metric": args.metric, "alpha": ALPHA, "metric_range": [values[0], values[-1]], "distinct_values": len(set(values)),
           "train_wall_s": round(train_s, 1), "train_cpu_s": round(train_cpu, 1), "results": rows}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
