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
    python bench/bench_nightly.py --tabular [--versions 20] [--out bench/results/nightly_tabular.txt]

With ``--tabular`` the versions are small fits of ``examples/tabular`` instead (XGBoost, LightGBM, a random forest
and a scorecard in turn, plain runs of a few seconds), each trained as the user runs it (``python train.py
model=... ``, MLflow logging included): the night of small models, where every rebuild is forked from the warm worker
(``auditor.rebuild.warm``) and the fixed cost of an audit shows most.

Targets: nightly / plain trainings <= 1.15 (issue 25, the reference model); <= 1.2 (issue 41, 20 tabular versions).
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


#: small tabular fits, in turn (examples/tabular's 2,000 rows)
TABULAR = (("model=xgboost", "n_estimators=300"), ("model=lightgbm", "n_estimators=300"),
           ("model=forest", "n_estimators=100"), ("model=scorecard",))


def seed_tabular_world(root: Path, versions: int) -> tuple[dict[str, str], Path, list[tuple[str, ...]]]:
    """N small tabular versions, each trained and registered under a name of its own; (env, project, overrides)."""
    from auditor import demo

    env = _env(demo.base_env(root))
    env.pop("REPRO_TORCH_THREADS", None)  # as the demo trains its tabular models
    variants = [demo.TabularVariant(f"tab-{i:02d}", "a small tabular fit", TABULAR[i % len(TABULAR)]) for i in range(versions)]
    demo.seed_tabular(root, env, variants, progress=lambda msg: print(f"  seed: {msg}", flush=True))
    return env, root / "tabular", [v.overrides for v in variants]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--per-process", action="store_true", help="also audit each version in its own CLI process")
    parser.add_argument("--tabular", action="store_true", help="small tabular versions instead of the reference model")
    parser.add_argument("--out", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    cli = str(Path(sys.executable).with_name("repro-audit"))
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    with tempfile.TemporaryDirectory(prefix="bench-nightly-") as tmp:
        root = Path(tmp)
        if args.tabular:
            env, project, runs = seed_tabular_world(root / "world", args.versions)
            what = "small tabular versions (XGBoost, LightGBM, random forest, scorecard in turn)"
        else:
            seeded = seed_world(root / "world", args.versions, args.epochs)
            env, project, runs = _env(seeded.env), seeded.root / "project", [(f"epochs={args.epochs}",)] * args.versions
            what = f"versions of the reference model at epochs={args.epochs}"
        load = os.getloadavg()[0]
        plain = [_timed([sys.executable, "train.py", *overrides], cwd=project, env=env)[0] for overrides in runs]
        nightly_wall, out = _timed([cli, "nightly", "--date", "2026-12-02", "--json"], cwd=root, env=env)
        summary = json.JSONDecoder().raw_decode(out)[0]  # the JSON on stdout; stderr (the night's log) follows it
        verdicts = sorted({row["verdict"] for row in summary["audits"]})
        say(f"{args.versions} {what}; load average {load:.1f} at the start")
        say(f"plain trainings: {sum(plain):.1f} s in all ({min(plain):.1f}-{max(plain):.1f} s each)")
        say(f"nightly (one process, one session): {nightly_wall:.1f} s for {len(summary['audits'])} audits, verdicts {verdicts}")
        say(f"ratio nightly / plain trainings: {nightly_wall / sum(plain):.3f} (target <= {1.2 if args.tabular else 1.15})")
        say(f"beyond the trainings: {(nightly_wall - sum(plain)) / args.versions:.2f} s a version")
        if args.tabular:  # the strictest reading: the same fits in a fresh interpreter without the SDK or MLflow
            from bench_small_audits import PLAIN

            bare = [_timed([sys.executable, "-c", PLAIN, *overrides], cwd=project, env=env)[0] for overrides in runs]
            say(f"the same fits without the SDK or MLflow (bench_small_audits.PLAIN): {sum(bare):.1f} s in all; "
                f"nightly / bare fits {nightly_wall / sum(bare):.3f}")
        if args.per_process:
            refs = [row["ref"] for row in summary["audits"]]
            per = [_timed([cli, "audit", ref, "--date", "2026-12-03", "--json"], cwd=root, env=env)[0] for ref in refs]
            say(f"per-version CLI processes (one session each): {sum(per):.1f} s; ratio to plain trainings {sum(per) / sum(plain):.3f}; "
                f"nightly / per-process {nightly_wall / sum(per):.3f}")
        say(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
