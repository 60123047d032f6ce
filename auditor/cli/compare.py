"""``repro-audit compare CANDIDATE INCUMBENT``: is the candidate better than the incumbent beyond seed noise?

One call into the command's audit session (``Session.compare``). Exit 0 when the candidate is an
improvement beyond seed noise, 1 when it is within seed noise or worse (a gate: only a real improvement
passes), 2 for bad input, 3 for an infrastructure error. ``--json`` prints the comparison document.
"""

from __future__ import annotations

import typer

from auditor.cli import app
from auditor.cli.models import JSON_HELP, RUNNER_HELP, TRACKING_HELP, RunnerName, _progress, _runner, open_session
from auditor.cli.output import console, emit_json
from auditor.cli.params import model_ref
from auditor.cli.suggest import did_you_mean
from auditor.errors import EXIT_CODES, EXIT_OK, Meaning
from auditor.settings import REPORTS
from auditor.uris import REF_HELP

#: the exit code of each gate: only an improvement beyond seed noise passes
GATE_EXIT = {"beyond_noise": EXIT_OK, "within_noise": EXIT_CODES[Meaning.FINDINGS], "worse": EXIT_CODES[Meaning.FINDINGS],
             "no_direction": EXIT_CODES[Meaning.FINDINGS]}


@app.command("compare")
def compare_cmd(
    candidate: str = typer.Argument(..., callback=model_ref, help=f"the candidate version: {REF_HELP}"),
    incumbent: str = typer.Argument(..., callback=model_ref, help=f"the incumbent, usually the production alias: {REF_HELP}"),
    reruns: int = typer.Option(5, "--reruns", min=3, help="seed-varied reruns when a version has no calibration yet"),
    metric: list[str] = typer.Option(None, "--metric", help="a headline metric (repeat; default: every metric with a better direction)"),
    no_calibrate: bool = typer.Option(False, "--no-calibrate", help="refuse instead of calibrating a version that has no reruns"),
    no_publish: bool = typer.Option(False, "--no-publish", help="write neither the comparison nor its thresholds to the reports store"),
    runner: RunnerName = typer.Option(None, "--runner", help=RUNNER_HELP, case_sensitive=False),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help=TRACKING_HELP),
    reports: str = typer.Option(None, "--reports", help=f"reports location (default: {REPORTS.name})"),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Compare two versions through their seed-varied reruns: improvement beyond seed noise, within it, or worse."""
    session = open_session(tracking_uri=tracking_uri, reports=reports)
    with _progress(not json_out) as progress, did_you_mean(lambda: session.registry, candidate, incumbent):
        result = session.compare(candidate, incumbent, reruns=reruns, metrics=metric or None, runner=_runner(runner, session.settings),
                                 calibrate_missing=not no_calibrate, publish=not no_publish, progress=progress)
    code = GATE_EXIT[result.gate]
    if json_out:
        emit_json({**result.model_dump(mode="json"), "thresholds": result.thresholds(), "exit_code": code})
        raise typer.Exit(code)
    out = console()
    out.print(f"{result.candidate} vs {result.incumbent}: {result.words}", markup=False, highlight=False)
    for row in result.metrics:
        out.print(f"  {row.sentence}", markup=False, highlight=False, soft_wrap=True)
    for ref, spent in sorted(result.cost.items()):
        how = "stored reruns reused" if spent.get("reused") else "calibrated now"
        cpu = f", {spent['cpu_s']:.1f} CPU s" if spent.get("cpu_s") is not None else ""
        wall = f", {spent['wall_s']:.1f} s wall" if spent.get("wall_s") is not None else ""
        out.print(f"  reruns of {ref}: {result.reruns.get(ref, 0)} seed-varied ({how}{wall}{cpu})", markup=False,
                  highlight=False, soft_wrap=True)
    for line in result.findings:
        out.print(f"  finding: {line}", markup=False, highlight=False, soft_wrap=True)
    for what, uri in sorted(result.published.items()):
        out.print(f"  {what}: {uri}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)
