"""A nightly of N small versions beside the N plain trainings it repeats (issue 25, acceptance 5).

One audit session audits every version of a nightly, so the start-up an audit used to pay per version
(the CLI's interpreter, MLflow's import, the registry's and the reports store's opening: 5.9-8.3 s end to
end beyond the rebuild, bench/README.md) is paid once a night. This measures it, back to back in one run:

* **plain trainings**: ``python train.py epochs=E`` run N times, as the user runs it (MLflow logging
  included): the sum of the process wall times;
* **nightly**: ``repro-audit nightly --date D --json`` in one fresh interpreter over the N registered
  versions of the reference model (each audited and published: rebuild, re-evaluation, judge, report,
  ledger, MLflow anchor), its wall time;
* with ``--per-process``, also N separate ``repro-audit audit REF --date D --json`` processes (one
  session each: what every audit paid before), for the same ratio.

    python bench/bench_nightly.py [--versions 20] [--epochs 1] [--per-process] [--out bench/results/nightly.txt]

Target (issue 25): nightly / plain trainings <= 1.15.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_audit_overhead import _env, _timed  # noqa: E402 - one way to time a process and pass the checkout


def seed_world(root: Path, versions: int, epochs: int):
    """N versions of the reference model, each trained and registered (nothing else in the registry)."""
    from auditor import demo

    variants = [demo.Variant(f"v{i:02d}", "the reference model") for i in range(versions)]
    return demo.seed(root, variants, epochs=epochs, progress=lambda msg: print(f"  seed: {msg}", flush=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--per-process", action="store_true", help="also audit each version in its own CLI process")
    parser.add_argument("--out", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    cli = str(Path(sys.executable).with_name("repro-audit"))
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with tempfile.TemporaryDirectory(prefix="bench-nightly-") as tmp:
        root = Path(tmp)
        seeded = seed_world(root / "world", args.versions, args.epochs)
        env, project = _env(seeded.env), seeded.root / "project"
        load = os.getloadavg()[0]
        plain = [_timed([sys.executable, "train.py", f"epochs={args.epochs}"], cwd=project, env=env)[0] for _ in range(args.versions)]
        nightly_wall, out = _timed([cli, "nightly", "--date", "2026-12-02", "--json"], cwd=root, env=env)
        summary = json.loads(out)
        verdicts = sorted({row["verdict"] for row in summary["audits"]})
        say(f"{args.versions} versions of the reference model at epochs={args.epochs}; load average {load:.1f} at the start")
        say(f"plain trainings: {sum(plain):.1f} s in all ({min(plain):.1f}-{max(plain):.1f} s each)")
        say(f"nightly (one process, one session): {nightly_wall:.1f} s for {len(summary['audits'])} audits, verdicts {verdicts}")
        say(f"ratio nightly / plain trainings: {nightly_wall / sum(plain):.3f} (target <= 1.15)")
        say(f"beyond the trainings: {(nightly_wall - sum(plain)) / args.versions:.2f} s a version")
        if args.per_process:
            per = [_timed([cli, "audit", ref, "--date", "2026-12-03", "--json"], cwd=root, env=env)[0] for ref in seeded.versions.values()]
            say(f"per-version CLI processes (one session each): {sum(per):.1f} s; ratio to plain trainings {sum(per) / sum(plain):.3f}; "
                f"nightly / per-process {nightly_wall / sum(per):.3f}")
        say(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
