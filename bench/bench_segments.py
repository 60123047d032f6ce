"""Segment replay against a full retrain (issue 18, acceptance 3).

The reference model's data and architecture (``examples/reference_model``: its ``make_data.py`` data, the
24-64-64-1 MLP, AdamW, batch 256), trained by the step loop of ``tests/fixtures/segmented/train.py``,
which saves a checkpoint chain through the SDK (``auditor.checkpoint_every``): ``--steps`` steps, a
checkpoint every ``--every`` (20 segments by default). The reference model's own ``train.py`` trains
by epochs through a DataLoader and saves no chain, hence the step loop. Prints:

* the **checkpoint cost**: the same training with no chain and with the chain (seconds saving, as a
  fraction of the training loop);
* **(a)** the compute of a 2-segment audit against a full retrain: steps replayed, training-loop
  seconds, and process wall seconds (start-up included) of the replays against the full rebuild's;
* **(b)** detection of planted divergences (another data file, or the learning rate × 1.1, during
  one random segment, and throughout): one training per planted configuration, every segment
  replayed once for real, then ``--trials`` audits simulated by the date-seeded selection of 2
  segments for that many audit dates (each trial a different date; the replay result of each segment
  computed once and reused). Detection rate beside the expected one: (q−1)/(N−1) for a divergence in
  one segment that is not the last (q/N averaged over a uniformly random segment, the last included),
  and 1 when it runs throughout;
* **(c)** the wall time of replaying every segment on ``--workers`` parallel processes against a full
  retrain (the same numbers as (b)'s intact replay).

    python bench/bench_segments.py [--steps 2000] [--every 100] [--trials 50] [--workers 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOOP = re.compile(r"trained steps (\d+)-(\d+) in ([0-9.]+)s, checkpoints ([0-9.]+)s")


def _loop(log: str) -> tuple[float, float]:
    found = LOOP.findall(log)
    if not found:
        return float("nan"), float("nan")
    return float(found[-1][2]), float(found[-1][3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--plants", default="data-one,data-all,lr-one,lr-all")
    parser.add_argument("--replay-all", default="intact,data-one,data-all,lr-one,lr-all",
                        help="configurations whose every segment is replayed (the others: a 2-segment audit)")
    parser.add_argument("--no-intact", action="store_true", help="skip the intact configuration's replay")
    parser.add_argument("--default-every", type=int, default=100,
                        help="the README's k (auditor.checkpoint_every(100)): its checkpoint cost is measured too")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import logging

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    sys.path.insert(0, str(ROOT / "examples" / "reference_model"))
    import make_data

    from auditor import segments
    from auditor.rebuild.run import make_runner
    from auditor.steps import AuditOptions, Session
    from tests.fixtures import segmented_world as W

    class Recording:
        """The settings' runner, keeping every run's outcome (its log holds the training loop's seconds)."""

        def __init__(self, inner) -> None:
            self.inner, self.name, self.outcomes = inner, inner.name, []

        def run(self, spec):
            outcome = self.inner.run(spec)
            self.outcomes.append(outcome)  # list.append is atomic: segments replayed on threads share it
            return outcome

    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    n = args.steps // args.every
    common = [f"steps={args.steps}", "hidden=64", "batch_size=256", "dropout=0.0", "lr=0.003"]
    say(f"bench_segments {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores; "
        f"{args.steps} steps, a checkpoint every {args.every}: {n} segments")
    with tempfile.TemporaryDirectory(prefix="bench-segments-") as tmp:
        data = make_data.write(Path(tmp) / "reference-data")
        world = W.build(Path(tmp) / "world", reference_data=data, threads=2)
        s = W.settings(world)
        W.train(world, "no-chain", *common, "every=0")
        W.train(world, "clean", *common, f"every={args.every}")
        plain_loop, _ = _loop(world.logs["no-chain"])
        chain_loop, saving = _loop(world.logs["clean"])
        say(f"checkpoint cost: training loop {plain_loop:.2f} s without a chain, {chain_loop:.2f} s with {n} checkpoints; "
            f"saving them {saving:.2f} s = {saving / chain_loop:.1%} of the loop (target <= 5 %)")
        if args.default_every and args.default_every != args.every:
            W.train(world, "default-k", *common, f"every={args.default_every}")
            default_loop, default_saving = _loop(world.logs["default-k"])
            say(f"checkpoint cost at the README's k={args.default_every}: {args.steps // args.default_every} checkpoints, "
                f"saving them {default_saving:.2f} s = {default_saving / default_loop:.1%} of a {default_loop:.2f} s loop (target <= 5 %)")

        # (a) a 2-segment audit against a full retrain, each run recorded by the runner handed to the session
        recording = Recording(make_runner("process", s))
        session = Session(s, runner=recording)
        full = session.audit(world.versions["clean"], AuditOptions(date="2026-12-01", runner="process", publish=False)).result
        full_runs, recording.outcomes = recording.outcomes, []
        started = time.perf_counter()
        two = session.audit(world.versions["clean"], AuditOptions(date="2026-12-01", runner="process", segments=2, publish=False)).result
        two_wall = time.perf_counter() - started
        two_runs, recording.outcomes = recording.outcomes, []
        full_loop = _loop(full_runs[-1].log_tail)[0]
        two_loop = sum(_loop(r.log_tail)[0] for r in two_runs)
        say(f"(a) full audit {full.verdict.value}: rebuild {full.timings.rebuild_s:.1f} s wall, loop {full_loop:.2f} s | "
            f"2-segment audit {two.verdict.value}: {two.segments.replayed_steps}/{two.segments.total_steps} steps "
            f"= {two.segments.replayed_steps / two.segments.total_steps:.1%}, loop {two_loop:.2f} s = {two_loop / full_loop:.1%} of the full loop, "
            f"replay processes {two.timings.rebuild_s:.1f} s = {two.timings.rebuild_s / full.timings.rebuild_s:.1%} of the full rebuild's wall "
            f"(process start-up included); audit walls {two_wall:.1f} s vs {full.timings.wall_s:.1f} s")

        # (b) and (c): every segment replayed once per configuration, on --workers processes
        rng = random.Random(20261201)
        plants: dict[str, tuple[dict[str, str], int | None]] = {} if args.no_intact else {"intact": ({}, None)}
        for name in args.plants.split(","):
            kind, span = name.split("-")
            j = rng.randrange(n - 1) if span == "one" else None  # one random segment that is not the last
            window = f"{j * args.every}:{(j + 1) * args.every}" if j is not None else f"0:{args.steps}"
            plants[name] = ({"PLANT_SWAP_STEPS": window} if kind == "data" else {"PLANT_LR_SCALE": f"1.1:{window}"}, j)
        table = []
        for name, (plant, j) in plants.items():
            if name != "intact":
                W.train(world, name, *common, f"every={args.every}", plant=plant)
            key = "clean" if name == "intact" else name
            started = time.perf_counter()
            replay_all = name in args.replay_all.split(",")
            options = AuditOptions(date="2026-12-01", runner="process", publish=False, workers=args.workers,
                                   budget=1.0 if replay_all else None, segments=None if replay_all else 2)
            every = Session(s).audit(world.versions[key], options).result
            wall = time.perf_counter() - started
            failing = sorted(c.index for c in every.segments.checks if c.status == "fail")
            from auditor.registry import open_registry

            registry = open_registry(s.tracking_uri, s.registry_uri)
            record = registry.load_record(registry.resolve(world.versions[key]))[0]
            dates = [f"trial-{t:03d}" for t in range(args.trials)]
            replayed = {c.index for c in every.segments.checks}
            picks = [set(segments.pick_segments(n, seed=f"{d}:{record.digest()}", count=2)) for d in dates]
            # a trial is decided by the segments replayed for real: any failing one it picks detects; otherwise it
            # must have picked only replayed (passing) segments, or it is not decided and is not counted
            decided = [p for p in picks if p & set(failing) or p <= replayed]
            hits = sum(bool(p & set(failing)) for p in decided)
            if len(decided) < len(picks):
                say(f"  ({len(picks) - len(decided)} of {len(picks)} trials picked segments not replayed: not counted)")
            expected = 0.0 if name == "intact" else (1.0 if j is None else 1 / (n - 1))
            table.append((name, j, failing, hits, expected))
            say(f"{name:<9s} planted in {'segment ' + str(j) if j is not None else ('none' if name == 'intact' else 'every segment')}: "
                f"replay of {len(replayed)} of {n} segments {sorted(replayed) if not replay_all else '(all)'} on {args.workers} workers {wall:.1f} s "
                f"({every.timings.rebuild_s:.1f} s of replay processes), verdict {every.verdict.value}; failing segments {failing}; "
                f"sampled 2-segment audits detect {hits}/{len(decided)} = {hits / max(1, len(decided)):.0%} (expected {expected:.0%})")
        say()
        say(f"(c) see the lines replaying all segments: every segment on {args.workers} workers vs the full rebuild's "
            f"{full.timings.rebuild_s:.1f} s (loop {full_loop:.2f} s)")
        say(f"expected detection for one segment: (q-1)/(N-1) = {1 / (n - 1):.1%} for a segment that is not the last, "
            f"q/N = {2 / n:.0%} averaged over a uniformly random segment (the last, always replayed, included)")
        say("trials: " + json.dumps({name: {"segment": j, "failing": failing, "detected": hits, "trials": args.trials}
                                     for name, j, failing, hits, _ in table}))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
