"""``repro-audit rebuild|calibrate|audit|nightly``: one pipeline call each, with progress and ``--json``."""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from pathlib import Path

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json

VERDICT_STYLE = {
    "REPRODUCED_BITWISE": "bold green",
    "REPRODUCED_WITHIN_TOLERANCE": "green",
    "OUT_OF_TOLERANCE": "bold yellow",
    "NOT_REPRODUCIBLE": "bold red",
    "ERROR": "bold magenta",
}


@contextmanager
def _progress(enabled: bool):
    """A spinner whose text follows the pipeline's progress messages (silent under --json)."""
    if not enabled:
        yield lambda _msg: None
        return
    with console().status("starting…") as status:
        yield lambda msg: status.update(msg)


@app.command("rebuild")
def rebuild_cmd(
    model_ref: str = typer.Argument(..., help="models:/NAME/VERSION or models:/NAME@ALIAS"),
    out: Path = typer.Option(..., "--out", help="folder for the workspace, rebuilt weights and metrics"),
    runner: str = typer.Option(None, "--runner", help="process or docker (default: REPRO_RUNNER or process)"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Rebuild a registered version from its recorded inputs (on-demand rebuild of a historical model)."""
    from auditor import pipeline
    from auditor.settings import get_settings

    settings = get_settings()
    with _progress(not json_out) as progress:
        result = pipeline.rebuild(model_ref, runner=runner or settings.runner, out_dir=out, settings=settings, progress=progress)
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
    out_console.print(f"rebuilt {result.model_ref} in {run.wall_s:.1f}s → {run.output_dir}")
    out_console.print(f"weights sha256 {run.weights_sha256}")
    for name, value in sorted(run.metrics.items()):
        out_console.print(f"  {name:<12} {value}")


@app.command("calibrate")
def calibrate_cmd(
    model_ref: str = typer.Argument(..., help="models:/NAME/VERSION or models:/NAME@ALIAS"),
    reruns: int = typer.Option(5, "--reruns", min=3, help="seed-varied reruns for the metric bands (3-4 give a weak band)"),
    same_seed: int = typer.Option(2, "--same-seed", min=2, help="reruns under the recorded seed: the execution-noise floor"),
    replace: bool = typer.Option(False, "--replace", help="replace bands calibrated from more reruns than --reruns"),
    runner: str = typer.Option(None, "--runner", help="process or docker (default: REPRO_RUNNER or process)"),
    json_out: bool = typer.Option(False, "--json", help="print the bands as JSON"),
) -> None:
    """Measure both noise floors (same-seed and seed-varied reruns); store them with the version."""
    from rich.table import Table

    from auditor import pipeline
    from auditor.settings import get_settings

    settings = get_settings()
    with _progress(not json_out) as progress:
        bands = pipeline.calibrate(model_ref, reruns=reruns, same_seed=same_seed, replace=replace,
                                   runner=runner or settings.runner, settings=settings, progress=progress)
    calibration = bands.calibration
    findings = calibration.findings() if calibration else []
    if json_out:
        emit_json({name: band.model_dump() for name, band in bands.items()})
        for line in findings:
            from auditor.cli.output import error

            error(f"finding: {line}")
        return
    floor = calibration.same_seed if calibration else None
    out = console()
    if floor is not None:
        if floor.bit_identical:
            out.print(f"same-seed floor: bit-identical over {floor.n} reruns (any difference in an audit is a divergence)")
        else:
            out.print(f"same-seed floor over {floor.n} reruns: max |Δ| {floor.max_abs:.3g}, rel L2 {floor.rel_l2:.3g}")
    table = Table(title=f"tolerance bands for {model_ref} ({reruns} seed-varied reruns)")
    for column in ("metric", "lower", "upper", "mean", "std", "direction"):
        table.add_column(column)
    for name, band in sorted(bands.items()):
        table.add_row(name, f"{band.lower:.6g}", f"{band.upper:.6g}", f"{band.spread.get('mean', float('nan')):.6g}", f"{band.spread.get('std', float('nan')):.3g}", band.direction)
    out.print(table)
    for line in findings:
        out.print(f"[bold yellow]finding:[/] {line}")


@app.command("audit")
def audit_cmd(
    model_ref: str = typer.Argument(..., help="models:/NAME/VERSION or models:/NAME@ALIAS"),
    reruns: int = typer.Option(1, "--reruns", min=1),
    runner: str = typer.Option(None, "--runner"),
    publish: bool = typer.Option(True, "--publish/--no-publish", help="publish the report to REPRO_REPORTS"),
    date: str = typer.Option(None, "--date", help="the audit's logical date YYYY-MM-DD, its id (default: today, UTC)"),
    json_out: bool = typer.Option(False, "--json"),
    segments: int = typer.Option(None, "--segments", min=1, help="replay N segments of the checkpoint chain (the last always) instead of all of training"),
    budget: float = typer.Option(None, "--budget", help="replay this fraction of the chain's segments, e.g. 0.1"),
) -> None:
    """Rebuild and judge one version; exit 0 reproduced, 1 out of tolerance or not reproducible, 3 error.

    Publishing, it is the same step as the nightly DAG's audit task: the same report, ledger entry
    and registry tags, keyed on (version, date), so a second audit the same day publishes nothing new.
    """
    from auditor import pipeline
    from auditor.errors import exit_code
    from auditor.settings import get_settings

    settings = get_settings()
    runner = runner or settings.runner
    report = None
    with _progress(not json_out) as progress:
        if segments is not None or budget is not None:  # segment replay of the checkpoint chain
            chosen = {"segments": segments, "budget": budget, "runner": runner, "settings": settings, "progress": progress}
            if publish:
                published = pipeline.publish_segments(model_ref, date=date or dt.datetime.now(dt.UTC).date().isoformat(), audit_run="cli", **chosen)
                result, report = published.result, published.row["report"]
            else:
                result = pipeline.audit_segments(model_ref, date=date, **chosen)
        elif publish:
            day = date or dt.datetime.now(dt.UTC).date().isoformat()
            published = pipeline.publish_audit(model_ref, date=day, audit_run="cli", runner=runner, reruns=reruns, settings=settings, progress=progress)
            result, report = published.result, published.row["report"]
        else:
            result = pipeline.audit(model_ref, runner=runner, reruns=reruns, date=date, settings=settings, progress=progress)
    if json_out:
        emit_json({"verdict": result.verdict.value, "report": report, "result": result.to_dict()})
    else:
        _print_audit(result, report)
    raise typer.Exit(exit_code(result.verdict.value))


LOG_LINES = 40  # of the rebuild's log, printed under an audit that ended in ERROR or a crash


def _print_audit(result, report: str | None) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    style = VERDICT_STYLE.get(result.verdict.value, "bold")
    out.print(f"[{style}]{result.verdict.value}[/]  {result.model.uri}  (audit {result.audit_id})")
    tiers = Table(show_header=True)
    for column in ("tier", "status", "summary"):
        tiers.add_column(column, overflow="fold")
    for name in ("lineage", "artifact_recovery", "statistical", "bitwise"):
        tier = result.tiers.get(name)
        if tier:
            tiers.add_row(name, tier.status, tier.summary)
    out.print(tiers)
    if result.metrics:
        metrics = Table(show_header=True)
        for column in ("metric", "registered", "rebuilt", "band", "inside"):
            metrics.add_column(column)
        for m in result.metrics:
            band = f"[{m.band.lower:.6g}, {m.band.upper:.6g}]" if m.band else "-"
            metrics.add_row(m.name, str(m.registered), ", ".join(str(v) for v in m.rebuilt), band, str(m.inside))
        out.print(metrics)
    if result.error:
        out.print(f"[red]error:[/] {escape(result.error)}", markup=True)
        if result.log_tail:
            lines = result.log_tail.rstrip().splitlines()[-LOG_LINES:]
            out.print(f"[bold]the end of the rebuild's log[/] (last {len(lines)} lines):")
            out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
    if report:
        out.print(f"report: {report}")


@app.command("nightly")
def nightly_cmd(
    date: str = typer.Option(None, "--date", help="logical date YYYY-MM-DD (default: today, UTC)"),
    json_out: bool = typer.Option(False, "--json"),
) -> None:
    """Run the nightly sequence without Airflow: sample, audit and publish each, summary and index."""
    from auditor import pipeline
    from auditor.settings import get_settings

    date = date or dt.datetime.now(dt.UTC).date().isoformat()
    with _progress(not json_out) as progress:
        summary = pipeline.nightly(date, settings=get_settings(), progress=progress)
    if json_out:
        emit_json(summary)
        return
    from rich.table import Table

    table = Table(title=f"nightly audit {date}")
    for column in ("model", "verdict", "why picked", "report / error"):
        table.add_column(column, overflow="fold")
    for row in summary["audits"]:
        verdict = row.get("verdict") or ("already audited" if row.get("skipped") else "")
        table.add_row(row["ref"], verdict, row.get("reason") or "", row.get("error") or row.get("report") or "")
    console().print(table)
