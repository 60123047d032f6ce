"""The cost of one audit beside the training it repeats (issue 18, acceptance 1).

The reference model (``examples/reference_model``) is trained for real at three lengths (``--epochs``,
about 5 s, 30 s and 120 s of training on the 2-core machine). For each length, back to back in the same
run (the machine is shared, so only ratios taken close together mean anything):

* **plain training**: ``python train.py epochs=E`` as a user runs it (MLflow logging included), its
  process wall time and the training loop's own time (``trained in X s``, printed by the script);
* **audit**: ``repro-audit audit REF --date D --json`` in a fresh interpreter, its wall time, and the
  rebuild's process wall time from the result's timings; the **fixed part** is audit wall − rebuild wall
  (what the audit costs beyond re-running the recipe once).

Then, once (the shortest length), the audit's own stages in-process, timed through the audit session's
public seams (``auditor.steps.Session``: a timing workspace step and a timing runner handed to it, the
progress callback's stage marks) and by wrapping the public report and weight functions: record and
lineage gate, registered weights, workspace, re-evaluation of the registered weights, rebuild, weight
diff, report (evidence, first render, ledger, index), plus the CLI's start-up imports measured in a fresh
interpreter (``python -m auditor --help`` and the modules an audit imports before it runs anything).

    python bench/bench_audit_overhead.py [--epochs 1,8,32] [--out bench/results/audit_overhead_after.txt]

Targets (issue 18): fixed part ≤ 5 s beyond the rebuild, and ≤ 3 % of the longest case's audit.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _env(seeded_env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **seeded_env, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _timed(argv: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if out.returncode not in (0, 1):  # 1 is a verdict (out of tolerance), still an audit
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return wall, out.stdout + out.stderr


def plain_training(seeded, epochs: int) -> tuple[float, float]:
    """(process wall, training-loop seconds) of one ordinary training run, as the user runs it."""
    wall, log = _timed([sys.executable, "train.py", f"epochs={epochs}"], cwd=seeded.root / "project", env=_env(seeded.env))
    loop = re.search(r"trained in ([0-9.]+)s", log)
    return wall, float(loop.group(1)) if loop else float("nan")


def cli_audit(seeded, ref: str, date: str) -> dict:
    wall, log = _timed([sys.executable, "-m", "auditor", "audit", ref, "--date", date, "--json"], cwd=ROOT, env=_env(seeded.env))
    start = log.index("{")
    doc = json.JSONDecoder().raw_decode(log[start:])[0]
    timings = doc["result"]["timings"]
    return {"wall": wall, "rebuild": timings.get("rebuild_s") or float("nan"), "verdict": doc["verdict"], "steps_wall": timings.get("wall_s")}


def imports(env: dict[str, str]) -> dict[str, float]:
    """Start-up: a bare interpreter, ``python -m auditor --help``, and the audit's own imports in a fresh interpreter."""
    bare, _ = _timed([sys.executable, "-c", "pass"], cwd=ROOT, env=env)
    helped, _ = _timed([sys.executable, "-m", "auditor", "--help"], cwd=ROOT, env=env)
    code = ("import time; t=time.perf_counter(); import auditor.cli; import auditor.steps.audit; import auditor.steps.publish; "
            "import auditor.registry.mlflow; import auditor.report.publish; print(time.perf_counter()-t)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return {"interpreter": bare, "cli_help": helped, "audit_imports": float(out.stdout.strip().splitlines()[-1])}


def breakdown(seeded, ref: str, date: str) -> dict[str, float]:  # noqa: C901 - one timer per stage
    """One published audit in this process, its stages timed through the session's public seams.

    The workspace step and the runner are handed to the session timed (``Session(settings, prepare=...,
    runner=...)``, the same ones it would open itself); the record and the registered weights are timed
    between the stage marks the audit reports to its progress callback; the weight diff and the report by
    wrapping those public functions. No step's private function is replaced.
    """
    import auditor.judge.weights as weights
    import auditor.report.publish as publish
    from auditor.contract import ENV_EVALUATE_THEN_TRAIN, ENV_EVALUATE_WEIGHTS
    from auditor.demo import with_env
    from auditor.rebuild.run import forked_evaluation, make_runner
    from auditor.rebuild.workspace import prepare_workspace
    from auditor.steps import AuditOptions, Session

    stages: dict[str, float] = {}

    def add(stage: str, seconds: float) -> None:
        stages[stage] = stages.get(stage, 0.0) + seconds

    def wrap(owner, name: str, stage: str):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                add(stage, time.perf_counter() - started)

        setattr(owner, name, timed)
        return original

    def prepare(record, diff, dest, settings):  # what the session runs by default, timed
        started = time.perf_counter()
        try:
            return prepare_workspace(record, diff, dest=dest, git_cache=settings.git_cache)
        finally:
            add("workspace", time.perf_counter() - started)

    class TimedRunner:
        """The settings' runner, each run timed: an evaluation alone, or a rebuild (less the evaluation it forked)."""

        def __init__(self, inner) -> None:
            self.inner, self.name = inner, inner.name

        def run(self, spec):
            started = time.perf_counter()
            outcome = self.inner.run(spec)
            seconds = time.perf_counter() - started
            if ENV_EVALUATE_WEIGHTS in spec.env and ENV_EVALUATE_THEN_TRAIN not in spec.env:
                add("re-evaluation (a second process)", seconds)
                return outcome
            hosted = (forked_evaluation(spec.output_dir)[1] or 0.0) if ENV_EVALUATE_THEN_TRAIN in spec.env else 0.0
            if hosted:
                add("re-evaluation (forked inside the rebuild)", hosted)
            add("rebuild (recipe run)", seconds - hosted)
            return outcome

    marks: list[tuple[float, str]] = []

    def progress(message: str) -> None:
        marks.append((time.perf_counter(), message))

    settings = with_env(seeded.env)
    session = Session(settings, prepare=prepare, runner=TimedRunner(make_runner("process", settings)))
    saved = [
        (weights, "diff_safetensors", wrap(weights, "diff_safetensors", "weight diff")),
        (publish, "render_report_bytes", wrap(publish, "render_report_bytes", "report render (first, in process)")),
        (publish, "publish", wrap(publish, "publish", "publish (evidence, render, ledger, index)")),
    ]
    started = time.perf_counter()
    try:
        outcome = session.audit(ref, AuditOptions(date=date, audit_run="bench", runner="process"), progress=progress)
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
    stages["total (in process)"] = time.perf_counter() - started
    if outcome.publish_failure is not None:
        raise SystemExit(f"the audit was not published: {outcome.publish_failure}")
    at = {message: when for when, message in reversed(marks)}  # each stage's first mark
    checking, preparing = at.get("checking the registered artifact"), at.get("preparing the workspace")
    if checking is not None:
        add("resolve, pre-flight, record + lineage gate", checking - started)
        if preparing is not None:
            add("download registered weights", preparing - checking)
    stages["verdict"] = outcome.result.verdict.value  # type: ignore[assignment]
    return stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", default="1,8,32", help="training lengths (epochs), comma-separated")
    parser.add_argument("--out", type=Path, help="also write the printed figures here")
    parser.add_argument("--label", default="", help="a line saying which code this measures (before/after)")
    args = parser.parse_args()
    import logging

    logging.getLogger("mlflow").setLevel(logging.WARNING)
    from auditor.demo import VARIANTS, seed

    clean = next(v for v in VARIANTS if v.key == "clean")
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"bench_audit_overhead {args.label} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        rows = []
        first_world = None
        for i, epochs in enumerate(int(e) for e in args.epochs.split(",")):
            with contextlib.redirect_stdout(io.StringIO()):
                seeded = seed(Path(tmp) / f"world-{epochs}", [clean], epochs=epochs, progress=lambda _m: None)
            ref = seeded.versions["clean"]
            first_world = first_world or (seeded, ref)
            plain_wall, loop = plain_training(seeded, epochs)
            audit = cli_audit(seeded, ref, f"2026-01-{i + 1:02d}")
            fixed = audit["wall"] - audit["rebuild"]
            rows.append((epochs, plain_wall, loop, audit, fixed))
            say(f"epochs={epochs:<3d} plain training {plain_wall:6.1f} s (loop {loop:5.1f} s) | audit {audit['wall']:6.1f} s "
                f"(rebuild {audit['rebuild']:6.1f} s) {audit['verdict']} | audit/plain {audit['wall'] / plain_wall:4.2f}x | "
                f"fixed beyond the rebuild {fixed:5.1f} s = {fixed / audit['wall']:5.1%} of the audit | load {os.getloadavg()[0]:.1f}")
        say()
        seeded, ref = first_world
        start = imports(_env(seeded.env))
        say(f"start-up: bare interpreter {start['interpreter']:.2f} s, `python -m auditor --help` {start['cli_help']:.2f} s, "
            f"the audit's imports (cli, steps, MLflow registry, report) {start['audit_imports']:.2f} s in a fresh interpreter")
        stages = breakdown(seeded, ref, "2026-02-01")
        verdict = stages.pop("verdict")
        total = stages["total (in process)"]
        say(f"stages of one audit in process (epochs={args.epochs.split(',')[0]}, {verdict}):")
        for name, seconds in sorted(stages.items(), key=lambda kv: -kv[1]):
            say(f"  {name:<45s} {seconds:6.2f} s  {seconds / total:6.1%}")
        longest = rows[-1]
        say()
        say(f"fixed part beyond the rebuild: {', '.join(f'{r[4]:.1f} s (epochs={r[0]})' for r in rows)}; "
            f"longest case {longest[4] / longest[3]['wall']:.1%} of its audit (targets: <= 5 s, <= 3 %)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
