"""``repro-audit rebuild|calibrate|audit|nightly``: one call into the command's audit session each, with progress and ``--json``."""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

import typer

from auditor.cli import app
from auditor.cli.output import cell_text, console, emit_json, figures, table
from auditor.cli.params import logical_date, model_ref
from auditor.cli.suggest import did_you_mean
from auditor.cli.verdict import print_audit
from auditor.settings import REPORTS, RUNNER
from auditor.uris import REF_HELP

RUNNER_HELP = f"process or docker (default: {RUNNER.name} or process)"


class RunnerName(StrEnum):
    """``--runner``: a choice, so a typo is a usage error naming the choices."""

    process = "process"
    docker = "docker"


def _runner(value: RunnerName | None, settings) -> str:
    return value.value if value is not None else settings.runner
JSON_HELP = "print the result as JSON on stdout (errors too: {error, exit_code, hint})"
TRACKING_HELP = "MLflow tracking URI (default: MLFLOW_TRACKING_URI); a SQLite file must exist"


def settings_with(**overrides: str | None):
    """The settings, resolved once for this command, with the options given (``--tracking-uri``, ``--reports``)
    in place of their environment variables."""
    import dataclasses

    from auditor.settings import get_settings

    given = {name: value for name, value in overrides.items() if value}
    settings = get_settings()
    return dataclasses.replace(settings, **given) if given else settings


def open_session(**overrides: str | None):
    """The command's one audit session (``auditor.steps.Session``), from ``settings_with(**overrides)``."""
    from auditor.steps import Session

    return Session(settings_with(**overrides))


STREAM_HELP = "print the trainer's output (redacted) as it runs, each line prefixed '│'"


@contextmanager
def _progress(enabled: bool, stream: bool = False):
    """Progress on stderr (silent under --json): on a terminal, rich's progress line for the step under way and a
    line with its elapsed time as each step (a rerun) ends; piped, the steps' own stage logs are the progress
    (timestamped lines, see ``auditor.cli.output.install_logging``). ``stream`` prints the trainer's output too.
    """
    import time

    from auditor.cli.output import stderr_is_terminal

    with _trainer_output(stream):
        if not enabled or not stderr_is_terminal():
            yield lambda _msg: None
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True, highlight=False), transient=True) as bar:
            task = bar.add_task("starting…", total=None)
            started, current = [time.monotonic(), time.monotonic()], ["starting"]

            def step(message: str) -> None:
                now = time.monotonic()
                if current[0] != "starting":
                    bar.console.print(f"✓ {current[0]} ({now - started[1]:.1f} s; {now - started[0]:.0f} s in all)", markup=False)
                current[0], started[1] = message, now
                bar.update(task, description=message)

            yield step
            step("done")


@contextmanager
def _trainer_output(stream: bool):
    """With ``stream``: the trainer's lines (``auditor.rebuild.runners.TRAINER_OUTPUT``) on stderr while the command runs."""
    if not stream:
        yield
        return
    import sys

    from auditor.rebuild.runners import trainer_output_to

    with trainer_output_to(sys.stderr):
        yield


@app.command("rebuild")
def rebuild_cmd(
    model_ref: str = typer.Argument(..., callback=model_ref, help=REF_HELP),
    out: Path = typer.Option(..., "--out", help="folder for the workspace, rebuilt weights and metrics"),
    runner: RunnerName = typer.Option(None, "--runner", help=RUNNER_HELP, case_sensitive=False),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help=TRACKING_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    stream_output: bool = typer.Option(False, "--stream-output", help=STREAM_HELP),
) -> None:
    """Rebuild a registered version from its recorded inputs (on-demand rebuild of a historical model)."""
    session = open_session(tracking_uri=tracking_uri)
    with _progress(not json_out, stream_output) as progress, did_you_mean(lambda: session.registry, model_ref):
        result = session.rebuild(model_ref, runner=_runner(runner, session.settings), out_dir=out, progress=progress)
    run = result.first
    summary = {
        "model": result.model_ref,
        "weights": str(run.weights) if run.weights else None,
        "weights_sha256": run.weights_sha256,
        "metrics": run.metrics,
        "wall_s": round(run.wall_s, 3),
        "drift": result.drift.model_dump() if result.drift else None,
    }
    if json_out:
        emit_json(summary)
        return
    out_console = console()
    out_console.print(f"rebuilt {result.model_ref} in {run.wall_s:.1f}s → {run.output_dir}", markup=False, highlight=False)
    out_console.print(f"weights sha256 {run.weights_sha256}", markup=False, highlight=False)
    for name, value in sorted(run.metrics.items()):
        out_console.print(f"  {name:<12} {cell_text(value)}", markup=False, highlight=False)


@app.command("calibrate")
def calibrate_cmd(
    model_ref: str = typer.Argument(..., callback=model_ref, help=REF_HELP),
    reruns: int = typer.Option(5, "--reruns", min=3, help="seed-varied reruns for the metric bands (3-4 give a weak band)"),
    same_seed: int = typer.Option(2, "--same-seed", min=2, help="reruns under the recorded seed: the execution-noise floor"),
    replace: bool = typer.Option(False, "--replace", help="replace bands calibrated from more reruns than --reruns"),
    runner: RunnerName = typer.Option(None, "--runner", help=RUNNER_HELP, case_sensitive=False),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help=TRACKING_HELP),
    json_out: bool = typer.Option(False, "--json", help="print the bands as JSON"),
    stream_output: bool = typer.Option(False, "--stream-output", help=STREAM_HELP),
) -> None:
    """Measure both noise floors (same-seed and seed-varied reruns); store them with the version."""
    session = open_session(tracking_uri=tracking_uri)
    with _progress(not json_out, stream_output) as progress, did_you_mean(lambda: session.registry, model_ref):
        bands = session.calibrate(model_ref, reruns=reruns, same_seed=same_seed, replace=replace,
                                  runner=_runner(runner, session.settings), progress=progress)
    calibration = bands.calibration
    findings = calibration.findings() if calibration else []
    if json_out:
        emit_json({name: band.model_dump() for name, band in bands.items()})
        import sys

        from auditor.cli.output import redact_out

        for line in findings:  # a success: findings and a weak band's warning, never "error:" (stdout stays JSON)
            sys.stderr.write(redact_out(f"{'warning' if 'weak band' in line else 'finding'}: {line}") + "\n")
        return
    floor = calibration.same_seed if calibration else None
    out = console()
    if floor is not None:
        if floor.bit_identical:
            out.print(f"same-seed floor: bit-identical over {floor.n} reruns (any difference in an audit is a divergence)")
        else:
            out.print(f"same-seed floor over {floor.n} reruns: max |Δ| {floor.max_abs:.3g}, rel L2 {floor.rel_l2:.3g}")
    shown = table("metric", "lower", "upper", "mean", "std", "direction",
                  title=f"tolerance bands for {model_ref} ({reruns} seed-varied reruns)")
    for name, band in sorted(bands.items()):
        lower, upper, mean = figures([band.lower, band.upper, band.spread.get("mean")])
        shown.add_row(name, lower, upper, mean, band.spread.get("std"), band.direction)
    out.print(shown)
    for line in findings:
        out.print(f"[bold yellow]{'warning' if 'weak band' in line else 'finding'}:[/] {line}")


@app.command("audit")
def audit_cmd(
    model_ref: str = typer.Argument(..., callback=model_ref, help=REF_HELP),
    reruns: int = typer.Option(1, "--reruns", min=1, help="rebuilds to run and judge (each must land inside the bands)"),
    runner: RunnerName = typer.Option(None, "--runner", help=RUNNER_HELP, case_sensitive=False),
    publish: bool = typer.Option(True, "--publish/--no-publish", help=f"publish the report to {REPORTS.name}"),
    date: str = typer.Option(None, "--date", callback=logical_date, help="the audit's logical date YYYY-MM-DD, its id (default: today, UTC)"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help=TRACKING_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    segments: int = typer.Option(None, "--segments", min=1, help="replay N segments of the checkpoint chain instead of all of training; never fewer than 3 (the first, "
                                "one interior drawn at random at audit time, the last)"),
    budget: float = typer.Option(None, "--budget", help="replay this fraction of the chain's segments, e.g. 0.1"),
    stream_output: bool = typer.Option(False, "--stream-output", help=STREAM_HELP),
) -> None:
    """Rebuild and judge one version; exit 0 reproduced, 1 out of tolerance or not reproducible, 3 error.

    Publishing, it is the same step as the nightly DAG's audit task: the same report, ledger entry
    and registry tags, keyed on (version, date), so a second audit the same day publishes nothing new.
    """
    from auditor.errors import exit_code
    from auditor.steps import AuditOptions

    session = open_session(tracking_uri=tracking_uri)
    options = AuditOptions(date=date, audit_run="cli", reruns=reruns, runner=_runner(runner, session.settings), publish=publish,
                           segments=segments, budget=budget)
    with _progress(not json_out, stream_output) as progress, did_you_mean(lambda: session.registry, model_ref):
        outcome = session.audit(model_ref, options, progress=progress)
    result, failure = outcome.result, outcome.publish_failure
    if failure is not None:  # the audit finished, publishing it failed: the verdict is printed, the publish error decides the exit
        _publish_failed(result, failure, json_out)
    if json_out:
        emit_json({"verdict": result.verdict.value, "report": outcome.report, "result": result.to_dict(), "stored": outcome.skipped})
    else:
        if outcome.skipped:  # nothing was rebuilt: say so, and how to rebuild
            _print_stored(model_ref, date)
        note = None if publish else f"report: not published (--no-publish); `repro-audit audit {model_ref} --json` prints all of it"
        print_audit(result, outcome.report, note=note)
    raise typer.Exit(exit_code(result.verdict.value))


def _print_stored(ref: str, date: str | None) -> None:
    from auditor.steps.common import today

    day = date or today()
    console().print(
        f"{ref} was already audited for {day}: showing the stored result (nothing was rebuilt). To rebuild anew, audit it "
        f"without publishing (`repro-audit audit {ref} --no-publish`) or under another date (`--date YYYY-MM-DD`).",
        markup=False, highlight=False, soft_wrap=True)


def _publish_failed(result, failure, json_out: bool) -> None:
    from auditor.errors import exit_code

    if not json_out:
        print_audit(result, None, note="the report was NOT published (see the error below)")
        raise failure
    from auditor.cli.output import error

    emit_json({"verdict": result.verdict.value, "report": None, "result": result.to_dict(),
               "error": _message(failure), "exit_code": exit_code(failure), "hint": failure.hint})
    error(str(failure))
    raise typer.Exit(exit_code(failure)) from None


def _message(exc) -> str:
    from auditor.cli import error_message

    return error_message(exc)


@app.command("nightly")
def nightly_cmd(
    date: str = typer.Option(None, "--date", callback=logical_date, help="logical date YYYY-MM-DD (default: today, UTC)"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help=TRACKING_HELP),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Run the nightly sequence without Airflow: sample, audit and publish each, summary and index.

    Exit 1 when the registry holds no model version (nothing to audit is not a success).
    """
    date = date or dt.datetime.now(dt.UTC).date().isoformat()
    session = open_session(tracking_uri=tracking_uri)
    with _progress(not json_out) as progress:
        summary = session.nightly(date, progress=progress)  # the summary, the index and the coverage page
    coverage_page = summary["coverage"]
    if json_out:
        emit_json(summary)
        return
    _print_nightly(summary, date, coverage_page)


def _print_nightly(summary: dict, date: str, coverage_page: str) -> None:
    """The night's table; after a red verdict, the next step (read its report, audit it again once fixed)."""
    from rich.text import Text

    from auditor.outcomes import Verdict
    from auditor.report.view import VERDICT_VIEW
    from auditor.uris import visible

    shown = table("model", "verdict", "why picked", "report / error", title=f"nightly audit {date}")
    red = []
    for row in summary["audits"]:  # the registry's names as text (never markup), every hidden character written out
        verdict = next((v for v in Verdict if v.value == row.get("verdict")), None)
        if verdict is not None and not verdict.reproduced:
            red.append(row["ref"])
        words = Text(verdict.value, style=VERDICT_VIEW[verdict].terminal) if verdict else ("already audited" if row.get("skipped") else "")
        shown.add_row(Text(visible(row["ref"])), words, row.get("reason") or "", row.get("error") or row.get("report") or "")
    console().print(shown)
    console().print(f"coverage: {coverage_page}", markup=False, highlight=False)
    if red:
        console().print(Text("next: ", style="bold") + Text(
            f"read the report of each red verdict ({len(red)}: {', '.join(visible(r) for r in red[:3])}"
            f"{', …' if len(red) > 3 else ''}); once fixed, `repro-audit audit {visible(red[0])} --no-publish` checks it again"))
