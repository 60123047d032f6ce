"""The seed-lottery check's false alarms and detection, with one and with three headline metrics (issue 42, acceptance 5).

Every figure is the audit's own check: a ``Calibration`` of the reruns and ``auditor.judge.lottery.seed_lottery``
on the registered metrics, bands from the metrics' names (auc and ks higher, log_loss lower), exactly as
``repro-audit audit`` calls it; a version is *flagged* when the check names a winner (``seeds.lottery_winner``).

- **False alarms** (honest versions): a pool of n + 1 runs of one recipe under n + 1 seeds. An honest
  registered run is exchangeable with its reruns, so each of the n + 1 runs takes its turn as the registered
  one and the other n are its reruns; the share flagged is the pool's exact false-alarm rate (every placement
  of the registered run is equally likely), and the figure is its mean over ``--pools`` pools. No sampling of
  which run is registered: an exact test's rate cannot land above its level by chance.
- **Detection** (a picked seed): ``--search`` seeds (20) are tried, the best on the first metric (auc) is
  registered, and n other seeds are the reruns; ``--trials`` times.

Each is measured three ways, side by side: the check with the first metric alone (one headline metric); the
check with all three (one test across them, as the audit runs it now); and the rule before issue 42 (each of
the three tested alone at the level, flagged when any one is: any metric's own p-value <= alpha).

Runs come from ``--source``:

- ``gaussian`` (default): three metrics whose seed-to-seed variation shares a common factor (``--rho``, the
  correlation between any two, 0.6 unless told), independent across runs: fresh pools every trial, seconds;
- ``reference``: the reference model (``examples/reference_model``: its data, MLP, ``train`` and ``evaluate``,
  made small: ``--rows`` rows, ``--epochs`` epochs, no DataLoader workers; auc, accuracy and log_loss) trained
  once under ``--pool`` seeds, seeded as the SDK seeds it; trials draw from that pool, so they are resampling
  estimates, and accuracy's ties make every test conservative. About a minute on two shared cores.

    python bench/bench_lottery.py [--source gaussian|reference] [--counts 5,19,39] [--pools 500] [--trials 5000]
                                  [--search 20] [--rho 0.6] [--out FILE]

Times are upper bounds (the machine is shared); nothing here asserts on them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REFERENCE = ROOT / "examples" / "reference_model"
GAUSSIAN = {"auc": (0.76, 0.004), "ks": (0.40, 0.008), "log_loss": (0.50, -0.003)}  # mean, sd (negative: lower is better)
WAYS = ("one", "joint", "each")  # first metric alone; all three, one test; all three, each alone (before issue 42)

Draw = Callable[[int], list[dict[str, float]]]


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gaussian_draw(rng: random.Random, rho: float) -> Draw:
    """Runs whose metrics move together: each metric's z-score is sqrt(rho) of a shared factor plus its own noise."""
    shared, own = math.sqrt(rho), math.sqrt(1.0 - rho)

    def draw(k: int) -> list[dict[str, float]]:
        out = []
        for _ in range(k):
            common = rng.gauss(0.0, 1.0)
            out.append({name: mean + sd * (shared * common + own * rng.gauss(0.0, 1.0)) for name, (mean, sd) in GAUSSIAN.items()})
        return out

    return draw


def train_pool(seeds: list[int], *, rows: int, epochs: int, hidden: int) -> list[dict[str, float]]:
    """Each seed's held-out metrics from the reference model's own training, seeded as the SDK seeds it."""
    import torch

    from auditor.seeds import dataloader_kwargs, seed_everything

    torch.set_num_threads(1)  # one thread leaves the other core to the machine
    data_module = _module("reference_make_data", REFERENCE / "make_data.py")
    train_module = _module("reference_train", REFERENCE / "train.py")
    data = {k: torch.from_numpy(v) for k, v in data_module.make(rows=rows).items()}
    cfg = {"epochs": epochs, "lr": 0.003, "weight_decay": 0.0001, "batch_size": 256, "hidden": hidden, "num_workers": 0,
           "device": "cpu"}
    out = []
    started = time.perf_counter()
    for i, seed in enumerate(seeds):
        info = seed_everything(seed)
        with contextlib.redirect_stdout(io.StringIO()):  # its per-epoch lines
            _, metrics = train_module.train(cfg, data, dataloader_kwargs(info))
        out.append(metrics)
        if (i + 1) % 50 == 0:
            print(f"  trained {i + 1}/{len(seeds)} seeds ({time.perf_counter() - started:.0f} s)")
    return out


def pool_draw(rng: random.Random, pool: list[dict[str, float]]) -> Draw:
    """k distinct runs of the trained pool (without replacement within one draw)."""
    return lambda k: rng.sample(pool, k)


def flagged(registered: dict[str, float], reruns: list[dict[str, float]], names: list[str]) -> dict[str, bool]:
    """The audit's check on one version, each way: flagged with the first metric, with all, with each alone."""
    from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor
    from auditor.judge.lottery import lottery_findings, seed_lottery

    def check(chosen: list[str]):
        calibration = Calibration(same_seed=SameSeedFloor(runs=[], bit_identical=True),
                                  seed_varied=[FloorRun(seed=i, metrics={n: r[n] for n in chosen}) for i, r in enumerate(reruns)])
        return seed_lottery(calibration, {n: registered[n] for n in chosen})

    one, joint = check(names[:1]), check(names)
    codes = [f.code for f in lottery_findings(joint)]
    return {"one": bool(one.winners), "joint": "seeds.lottery_winner" in codes,
            "each": any(m.p_value is not None and m.p_value <= joint.alpha and m.status != "too_few" for m in joint.metrics)}


def false_alarms(draw: Draw, names: list[str], n: int, pools: int) -> dict[str, float]:
    """Mean over pools of the share of the pool's n + 1 runs flagged when each is the registered one."""
    total = dict.fromkeys(WAYS, 0)
    for _ in range(pools):
        runs = draw(n + 1)
        for i, registered in enumerate(runs):
            for way, hit in flagged(registered, runs[:i] + runs[i + 1:], names).items():
                total[way] += hit
    return {way: total[way] / (pools * (n + 1)) for way in WAYS}


def detection(draw: Draw, names: list[str], n: int, search: int, trials: int) -> dict[str, float]:
    """Share of versions flagged whose registered run is the best of ``search`` seeds on the first metric."""
    from auditor.judge.calibrate import default_direction

    sign = -1.0 if default_direction(names[0]) == "lower" else 1.0
    total = dict.fromkeys(WAYS, 0)
    for _ in range(trials):
        tried = draw(search + n)
        winner = max(tried[:search], key=lambda r: sign * r[names[0]])
        for way, hit in flagged(winner, tried[search:], names).items():
            total[way] += hit
    return {way: total[way] / trials for way in WAYS}


def _interval(rate: float, trials: int) -> float:
    """Half-width of a 95 % normal interval for a rate over ``trials``."""
    return 1.96 * math.sqrt(max(rate * (1 - rate), 1e-12) / trials)


def _correlations(runs: list[dict[str, float]], names: list[str]) -> dict[str, float]:
    """Pearson correlation of each pair of metrics, each in its better direction (so 1 means 'better together')."""
    from auditor.judge.calibrate import default_direction

    signs = {n: -1.0 if default_direction(n) == "lower" else 1.0 for n in names}
    cols = {n: [signs[n] * r[n] for r in runs] for n in names}
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ma, mb = sum(cols[a]) / len(runs), sum(cols[b]) / len(runs)
            cov = sum((x - ma) * (y - mb) for x, y in zip(cols[a], cols[b], strict=True))
            va, vb = sum((x - ma) ** 2 for x in cols[a]), sum((y - mb) ** 2 for y in cols[b])
            out[f"{a}~{b}"] = round(cov / math.sqrt(va * vb), 3) if va and vb else float("nan")
    return out


def _table(rows: list[dict], search: int, trials: int) -> None:
    from auditor.judge.lottery import ALPHA, min_reruns

    print(f"{'':>7} | {'false alarms (honest versions)':^44} | {f'detection (best of {search} on the first metric)':^44}")
    print(f"{'reruns':>7} | {'1 metric':>9} {'3, one test':>12} {'3, each alone':>14} {'x level':>7} | "
          f"{'1 metric':>9} {'3, one test':>12} {'3, each alone':>14} {'3/1':>5}")
    for row in rows:
        fa, de = row["false_alarm"], row["detection"]
        ratio = f"{de['joint'] / de['one']:.2f}" if de["one"] else "-"
        print(f"{row['reruns']:>7} | {fa['one']:>9.2%} {fa['joint']:>12.2%} {fa['each']:>14.2%} {fa['each'] / ALPHA:>6.2f}x | "
              f"{de['one']:>9.1%} {de['joint']:>12.1%} {de['each']:>14.1%} {ratio:>5}"
              + ("  too few to test: every check says so" if row["reruns"] < min_reruns(ALPHA) else ""))
    print(f"  (x level: the each-alone rule's false alarms over {ALPHA:g}; 3/1: detection with three metrics over one; "
          f"detection +/- {_interval(0.5, trials):.1%} at most, 95 %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("gaussian", "reference"), default="gaussian")
    parser.add_argument("--counts", default="5,19,39", help="seed-varied rerun counts (5: calibrate's default)")
    parser.add_argument("--pools", type=int, default=500, help="honest pools per count (each run of a pool is registered in turn)")
    parser.add_argument("--trials", type=int, default=5000, help="picked-seed versions per count")
    parser.add_argument("--search", type=int, default=20, help="seeds tried before the best is registered")
    parser.add_argument("--rho", type=float, default=0.6, help="gaussian: correlation between any two metrics")
    parser.add_argument("--pool", type=int, default=200, help="reference: seeds trained once")
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    rng = random.Random(42)
    doc: dict = {"bench": "bench_lottery", "source": args.source, "counts": counts, "pools": args.pools, "trials": args.trials,
                 "search": args.search}
    if args.source == "gaussian":
        names, draw = list(GAUSSIAN), gaussian_draw(rng, args.rho)
        doc["rho"] = args.rho
        print(f"gaussian runs: {', '.join(names)}, correlation {args.rho} between any two (each in its better direction)")
    else:
        if args.pool < args.search + max(counts):
            raise SystemExit(f"--pool {args.pool} is smaller than --search {args.search} + {max(counts)} reruns")
        print(f"training the reference model (rows={args.rows}, epochs={args.epochs}, hidden={args.hidden}) under {args.pool} seeds")
        started = time.perf_counter()
        pool = train_pool(list(range(1000, 1000 + args.pool)), rows=args.rows, epochs=args.epochs, hidden=args.hidden)
        names, draw = ["auc", "accuracy", "log_loss"], pool_draw(rng, pool)
        doc.update({"pool": args.pool, "rows": args.rows, "epochs": args.epochs, "hidden": args.hidden,
                    "train_wall_s": round(time.perf_counter() - started, 1),
                    "distinct": {n: len({r[n] for r in pool}) for n in names}})
        print(f"  {args.pool} trainings in {doc['train_wall_s']:.0f} s wall; distinct values {doc['distinct']}")
    doc["correlation"] = _correlations(draw(2000) if args.source == "gaussian" else pool, names)
    print(f"  measured correlations: {doc['correlation']}")
    started = time.perf_counter()
    rows = []
    for n in counts:
        rows.append({"reruns": n, "false_alarm": false_alarms(draw, names, n, args.pools),
                     "detection": detection(draw, names, n, args.search, args.trials)})
    doc["check_wall_s"] = round(time.perf_counter() - started, 1)
    doc["results"] = rows
    print(f"\nthe audit's lottery check on {', '.join(names)} ({args.pools} honest pools, {args.trials} picked versions per count; "
          f"{doc['check_wall_s']:.0f} s):")
    _table(rows, args.search, args.trials)
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
