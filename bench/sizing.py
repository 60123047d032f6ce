"""The night, sized: how many rebuild workers a registry needs (issue 43, build 3).

A **list-scheduling simulation** (no events, no queueing theory): jobs are handed, in the order the night
lists them, to whichever worker frees first (a heap of free times), which is what Airflow does with the
mapped ``audit`` tasks of ``repro_nightly_audit`` in the ``repro_gpu`` pool. A *worker* is one rebuild slot:
one accelerator (or one group of cores), one pool slot (``REPRO_GPU_POOL_SLOTS`` in docker/compose.yaml).

What it models, for N registered versions of which P serve under a production alias:

* **(a) the production audits**: the P versions, one rebuild each, within the night's window (6 h);
* **(a+) the whole night the sampler picks** (``auditor/sampling.py``): the P production versions, the
  week's new versions a night (never audited), and the rest of the registry on a rotation that keeps none
  overdue (``(N - P) / REPRO_OVERDUE_DAYS`` a night);
* **(b) the week's calibrations within a day** (the whole week's new versions at once, the worst case of
  bursty registration): ``repro_calibrate_tolerance`` maps each rerun to a task of its own in the same pool
  (``auditor/steps/mapped.py``), so a calibration's ``same-seed`` reruns go to whichever workers free first,
  and its ``seed-varied`` ones follow once its same-seed ones are done (a barrier: they are judged first),
  on whichever workers free first again.

A rebuild takes the version's training time plus a fixed per-rebuild overhead. Training times are drawn
from a lognormal fitted to this repository's measured trainings (``MEASURED_TRAINING_S``, each with its
file), or, as the second profile, one with the same spread and a median of the sampler's default cost of a
version (``DEFAULT_COST_HOURS`` = 0.25 h, ``auditor/sampling.py``). Fixed seed: the output is the same
every run. Standard library and numpy only; it runs in about a second.

Left out: GPU contention between jobs on one device, the registry's and the metadata database's limits,
the Celery broker, retries, the night's sample and publish tasks, and failed audits' re-checks.

With jobs independent and their order fixed, more workers never lengthen the wall time (each job starts
no later), so the fewest workers that fit a window are found by bisection.

    python bench/sizing.py [--seed 43] [--window-h 6] [--day-h 24] [--same-seed 2] [--reruns 19]
                           [--out bench/results/sizing.txt]
"""

from __future__ import annotations

import argparse
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEED = 43

#: measured training wall times (seconds) and where each comes from: what the lognormal is fitted to
MEASURED_TRAINING_S: tuple[tuple[float, str], ...] = (
    (8.32, "bench/results/nightly_20.txt: 20 plain trainings of the reference model (epochs=1), 166.4 s, load 1.2"),
    (13.6, "bench/results/audit_overhead_fork_fixed.txt: reference model plain training, epochs=1, quiet"),
    (18.8, "bench/results/audit_overhead_fork_fixed.txt: epochs=8, quiet"),
    (32.7, "bench/results/audit_overhead_fork_fixed.txt: epochs=32, quiet"),
    (92.1, "bench/results/audit_overhead_fork_fixed_120s.txt: epochs=180, quiet"),
    (95.5, "bench/results/tree_diff.txt: a 2,000-tree XGBoost model trained in a child process (load 12-23)"),
    (6.0, "measured for this page: examples/tabular/train.py (XGBoost, 20 or 200 trees), MLflow logging "
          "included, median of 3 at load 1.0-1.1 (docs/sizing.md)"),
)
#: the audit's fixed part beyond its rebuild, end to end, epochs=1 on a quiet machine (5.9-8.3 s over the runs)
FIXED_PER_REBUILD_S = 6.6
FIXED_SOURCE = "bench/results/audit_overhead_fork_fixed.txt: fixed beyond the rebuild, epochs=1, quiet"
#: the sampler's cost of a version with no recorded cost (auditor/sampling.py DEFAULT_COST_HOURS)
DEFAULT_COST_HOURS = 0.25

# The product's settings this page sets (auditor/settings.py), with their defaults there.
NIGHTLY_MAX_MODELS = ("REPRO_NIGHTLY_MAX_MODELS", 5)
NIGHTLY_BUDGET_HOURS = ("REPRO_NIGHTLY_BUDGET_HOURS", 4.0)
RERUN_WORKERS = ("REPRO_RERUN_WORKERS", 1)
REBUILD_TIMEOUT_S = ("REPRO_REBUILD_TIMEOUT_S", 3600)
OVERDUE_DAYS = ("REPRO_OVERDUE_DAYS", 30)
#: the compose stack's pool size (docker/compose.yaml, docker/README.md), not a library setting
POOL_SLOTS = "REPRO_GPU_POOL_SLOTS"


@dataclass(frozen=True)
class Profile:
    """A training-time distribution: lognormal with this median (seconds) and log-space spread."""

    name: str
    median_s: float
    sigma: float


@dataclass(frozen=True)
class Size:
    """A registry: N versions, P of them in production, this many new a week."""

    registered: int
    production: int
    new_per_week: int


@dataclass(frozen=True)
class Row:
    """One job of a night or a day, at the fewest workers that finish it in its window."""

    job: str
    versions: int
    rebuilds: int
    rebuild_hours: float
    workers: int | None  # None: no count fits (a single job is longer than the window)
    wall_h: float
    window_h: float
    too_long: int = 0  # versions whose one job alone is longer than the window (left out of the count)
    workers_lpt: int | None = None  # the same jobs handed out longest first


# -- the arithmetic ---------------------------------------------------------------------------------------

def fit_lognormal(values: Sequence[float]) -> tuple[float, float]:
    """``(median, sigma)`` of the lognormal whose log-mean and log-standard deviation (n - 1) are the values'."""
    logs = np.log(np.asarray(values, dtype=float))
    return float(np.exp(logs.mean())), float(logs.std(ddof=1))


def makespan(durations: Sequence[float], workers: int) -> float:
    """Wall time of the jobs on ``workers`` workers, each job in order to the worker that frees first."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    free = [0.0] * min(workers, max(len(durations), 1))
    for d in durations:
        heapq.heapreplace(free, free[0] + float(d))
    return max(free)


def workers_needed(durations: Sequence[float], window_s: float) -> int | None:
    """The fewest workers whose makespan fits ``window_s``; None when one job alone is longer."""
    if not len(durations):
        return 0
    if max(durations) > window_s:
        return None
    low = max(1, math.ceil(sum(durations) / window_s))  # no count below the work / window fits
    high = len(durations)  # one worker a job: the longest job, which fits
    while low < high:
        mid = (low + high) // 2
        if makespan(durations, mid) <= window_s:
            high = mid
        else:
            low = mid + 1
    return low


def calibrations_makespan(rebuilds: Sequence[float], same_seed: int, reruns: int, workers: int) -> float:
    """Wall time of the calibrations' reruns as mapped tasks on ``workers``: every calibration's same-seed reruns in
    order, each to the worker that frees first; then each calibration's seed-varied reruns, in order, none starting
    before that calibration's same-seed reruns have ended."""
    free = [0.0] * max(1, min(workers, len(rebuilds) * max(same_seed + reruns, 1)))
    released = []
    for r in rebuilds:
        end = 0.0
        for _ in range(same_seed):
            finish = heapq.heappop(free) + float(r)
            heapq.heappush(free, finish)
            end = max(end, finish)
        released.append(end)
    for r, at in zip(rebuilds, released, strict=True):
        for _ in range(reruns):
            heapq.heappush(free, max(heapq.heappop(free), at) + float(r))
    return max(free)


def calibration_workers_needed(rebuilds: Sequence[float], same_seed: int, reruns: int, window_s: float) -> int | None:
    """The fewest workers whose calibrations' makespan fits ``window_s`` (bisection: more workers never end later);
    None when one calibration alone (its two rounds) is longer."""
    if not len(rebuilds):
        return 0
    rounds = (1 if same_seed else 0) + (1 if reruns else 0)
    if max(rebuilds) * rounds > window_s:
        return None
    total = float(sum(rebuilds)) * (same_seed + reruns)
    low, high = max(1, math.ceil(total / window_s)), len(rebuilds) * (same_seed + reruns)
    while low < high:
        mid = (low + high) // 2
        if calibrations_makespan(rebuilds, same_seed, reruns, mid) <= window_s:
            high = mid
        else:
            low = mid + 1
    return low


def job_row(job: str, versions: int, durations: Sequence[float], window_s: float, rebuilds: int) -> Row:
    """The row of a set of jobs: the fewest workers for those that fit, and the wall at that count."""
    fits = [float(d) for d in durations if d <= window_s]
    workers = workers_needed(fits, window_s)
    wall = makespan(fits, workers) if fits and workers else 0.0
    return Row(job, versions, rebuilds, float(sum(durations)) / 3600, workers, wall / 3600, window_s / 3600,
               too_long=len(durations) - len(fits), workers_lpt=workers_needed(sorted(fits, reverse=True), window_s))


# -- one registry -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """One registry under one profile: the rows and the settings that go with them."""

    size: Size
    profile: Profile
    rows: tuple[Row, ...]
    night_versions: int
    night_training_hours: float
    longest_rebuild_s: float


def plan(size: Size, profile: Profile, args: argparse.Namespace) -> Plan:
    """Draw every version's training time (seeded), then size the night and the week's calibrations."""
    rng = np.random.default_rng([args.seed, size.registered])
    train = rng.lognormal(math.log(profile.median_s), profile.sigma, size.registered)
    rebuild = train + args.fixed_s
    p, new = size.production, size.new_per_week
    new_a_night = math.ceil(new / 7)
    rotation = math.ceil((size.registered - p) / args.overdue_days)
    night = np.concatenate([rebuild[:p], rebuild[p:p + new_a_night], rebuild[p + new:p + new + rotation]])
    night_train = np.concatenate([train[:p], train[p:p + new_a_night], train[p + new:p + new + rotation]])
    window, day = args.window_h * 3600, args.day_h * 3600
    new_rebuilds = rebuild[p:p + new]
    rounds = (1 if args.same_seed else 0) + (1 if args.reruns else 0)  # the same-seed round, then the seed-varied one
    calibratable = new_rebuilds[new_rebuilds * rounds <= day]
    calib_row = _calibrations_row(new, new_rebuilds, calibratable, args, day)
    rows = (
        job_row("(a) production audits", p, rebuild[:p], window, p),
        job_row("(a+) the whole night", len(night), night, window, len(night)),
        calib_row,
    )
    counted = np.concatenate([night[night <= window], calibratable])  # what the rows count
    longest = float(counted.max(initial=0.0))
    return Plan(size, profile, rows, len(night), float(night_train.sum()) / 3600, longest)


def _calibrations_row(new: int, rebuilds: np.ndarray, calibratable: np.ndarray, args: argparse.Namespace,
                      day: float) -> Row:
    """(b): the week's calibrations as mapped reruns, at the fewest workers (and the same count longest first)."""
    fits = [float(r) for r in calibratable]
    n, m = args.same_seed, args.reruns
    workers = calibration_workers_needed(fits, n, m, day)
    wall = calibrations_makespan(fits, n, m, workers) if fits and workers else 0.0
    return Row("(b) week's calibrations", new, new * (n + m), float(rebuilds.sum()) * (n + m) / 3600, workers,
               wall / 3600, day / 3600, too_long=len(rebuilds) - len(fits),
               workers_lpt=calibration_workers_needed(sorted(fits, reverse=True), n, m, day))


# -- the settings -----------------------------------------------------------------------------------------

def nice_up(x: float) -> float:
    """``x`` rounded up to two significant figures (1,234 -> 1,300; 0.123 -> 0.13)."""
    if x <= 0:
        return 0.0
    step = 10 ** (math.floor(math.log10(x)) - 1)
    return round(math.ceil(x / step - 1e-9) * step, 10)


def settings_for(pl: Plan) -> list[tuple[str, str]]:
    """The settings to use, each ``(NAME=value, why)``."""
    night, calib = pl.rows[1], pl.rows[2]
    slots = max(night.workers or 0, calib.workers or 0)
    out = [
        (f"{NIGHTLY_MAX_MODELS[0]}={int(nice_up(pl.night_versions * 1.1))}",
         f"the night's {pl.night_versions} picks (production first) + 10 %; default {NIGHTLY_MAX_MODELS[1]}"),
        (f"{NIGHTLY_BUDGET_HOURS[0]}={nice_up(pl.night_training_hours * 1.2):g}",
         f"their recorded training hours ({pl.night_training_hours:,.{0 if pl.night_training_hours >= 100 else 2}f} h) + 20 %; default {NIGHTLY_BUDGET_HOURS[1]:g}"),
        (f"{RERUN_WORKERS[0]}={RERUN_WORKERS[1]}", "(the default): the DAG runs each rerun as a task of its own; only "
         "the CLI's reruns share one machine"),
        (f"{POOL_SLOTS}={slots}", f"devices: max(night {night.workers}, calibrations {calib.workers})"),
    ]
    timeout = nice_up(pl.longest_rebuild_s * 1.5)
    if timeout > REBUILD_TIMEOUT_S[1]:
        out.append((f"{REBUILD_TIMEOUT_S[0]}={int(timeout)}",
                    f"the longest rebuild counted ({pl.longest_rebuild_s / 3600:.2g} h) x 1.5; default {REBUILD_TIMEOUT_S[1]} s"))
    else:
        out.append((f"{REBUILD_TIMEOUT_S[0]}={REBUILD_TIMEOUT_S[1]}", "(the default) covers the longest rebuild counted x 1.5"))
    return out


# -- the output -------------------------------------------------------------------------------------------

def hours(h: float) -> str:
    if h < 1 / 60:
        return f"{h * 3600:.0f} s"
    return f"{h * 60:.0f} min" if h < 1 else f"{h:,.1f} h"


def count(n: int | None) -> str:
    return "none" if n is None else f"{n:,}"


def table(pl: Plan) -> list[str]:
    """One registry under one profile: the three rows and the settings."""
    s, pr = pl.size, pl.profile
    lines = [
        f"-- {s.registered:,} registered, {s.production:,} in production, {s.new_per_week:,} new a week;"
        f" training times: {pr.name} (median {hours(pr.median_s / 3600)}, sigma {pr.sigma:.2f})",
        f"{'job':<26} {'versions':>8} {'rebuilds':>8} {'rebuild-h':>10} {'workers':>8} {'wall':>8} {'window':>7}"
        f" {'longest-first':>13}",
    ]
    for r in pl.rows:
        lines.append(f"{r.job:<26} {r.versions:>8,} {r.rebuilds:>8,} {r.rebuild_hours:>10,.1f} {count(r.workers):>8}"
                     f" {hours(r.wall_h):>8} {hours(r.window_h):>7} {count(r.workers_lpt):>13}")
        if r.too_long:
            alone = "a calibration whose two rounds are longer than the day" if r.job.startswith("(b)") \
                else "a rebuild longer than the window alone"
            lines.append(f"{'':<26} {r.too_long:,} version(s) with {alone}: left out of the count")
    lines.append("settings:")
    lines += [f"  {name:<34} {why}" for name, why in settings_for(pl)]
    return lines


def header(args: argparse.Namespace, measured: Profile) -> list[str]:
    lines = [
        f"bench/sizing.py: list-scheduling simulation, seed {args.seed}; night window {args.window_h:g} h,"
        f" calibrations within {args.day_h:g} h, {args.same_seed} same-seed + {args.reruns} seed-varied reruns,"
        f" rotation every {args.overdue_days} days",
        f"a rebuild = the version's training time + {args.fixed_s:g} s fixed ({FIXED_SOURCE})",
        f"measured trainings (lognormal fit: median {measured.median_s:.1f} s, sigma {measured.sigma:.2f}):",
    ]
    lines += [f"  {v:6.1f} s  {src}" for v, src in MEASURED_TRAINING_S]
    lines.append("sizes: P = 10 % of the registered versions in production, 2 % new a week")
    return lines


def sizes(registered: Sequence[int], production: float, new: float) -> list[Size]:
    return [Size(n, round(n * production), round(n * new)) for n in registered]


def report(args: argparse.Namespace) -> str:
    median, sigma = fit_lognormal([v for v, _ in MEASURED_TRAINING_S])
    measured = Profile("measured here", median, sigma)
    fifteen = Profile("the sampler's default cost", DEFAULT_COST_HOURS * 3600, sigma)
    lines = header(args, measured)
    for size in sizes(args.registered, args.production, args.new):
        for profile in (measured, fifteen):
            lines += [""] + table(plan(size, profile, args))
    return "\n".join(lines) + "\n"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--registered", type=int, nargs="+", default=[300, 3_000, 30_000])
    ap.add_argument("--production", type=float, default=0.10, help="fraction of the versions in production")
    ap.add_argument("--new", type=float, default=0.02, help="fraction of the versions new each week")
    ap.add_argument("--window-h", type=float, default=6.0, help="the night's window (hours)")
    ap.add_argument("--day-h", type=float, default=24.0, help="the window of the week's calibrations (hours)")
    ap.add_argument("--same-seed", type=int, default=2)
    ap.add_argument("--reruns", type=int, default=19, help="seed-varied reruns per calibration")
    ap.add_argument("--fixed-s", type=float, default=FIXED_PER_REBUILD_S, help="fixed seconds per rebuild")
    ap.add_argument("--overdue-days", type=int, default=OVERDUE_DAYS[1], help=f"{OVERDUE_DAYS[0]}")
    ap.add_argument("--out", type=Path, default=None, help="also write the output here")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    text = report(args)
    print(text, end="")
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
