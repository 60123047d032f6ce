"""``repro-audit lineage capture|check|schema`` (``show`` lives in lineage_show.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json, table
from auditor.errors import BadInput, LineageIncomplete

lineage_app = typer.Typer(help="Capture, check and show run records.", no_args_is_help=True)
app.add_typer(lineage_app, name="lineage")


@lineage_app.command("capture")
def capture_cmd(
    config: Path = typer.Option(None, "--config", help="YAML or JSON config file"),
    overrides: list[str] = typer.Option([], "--set", help="config override key=value (repeatable)"),
    data: list[str] = typer.Option([], "--data", help="NAME=URI@VERSION (repeatable)"),
    seed: int = typer.Option(None, "--seed", help="seed to record (seeds this process too)"),
    repo: Path = typer.Option(Path("."), "--repo", help="the training repository"),
    out: Path = typer.Option(None, "--out", help="write the record (and diff.patch) into this folder"),
) -> None:
    """Print a run record for the current repository."""
    from auditor.lineage.gather import capture, parse_data_ref
    from auditor.seeds import seed_everything

    refs = dict(parse_data_ref(spec) for spec in data)
    seeds = seed_everything(seed) if seed is not None else None
    captured = capture(repo_dir=repo, config=config, overrides=overrides, data=refs, seeds=seeds)
    if out is not None:
        from auditor.lineage.files import write_record

        write_record(out, captured.record, captured.diff)
    typer.echo(captured.record.to_json())


@lineage_app.command("check")
def check_cmd(
    record_file: Path = typer.Argument(..., help="run_record.json (a diff.patch beside it is checked too)"),
    json_out: bool = typer.Option(False, "--json", help="print findings as JSON"),
    require_image: bool = typer.Option(False, "--require-image", help="block records without a container image"),
) -> None:
    """Judge a record: exit 0 when nothing blocks, 1 when something does, 2 on unreadable input."""
    from auditor.lineage.files import read_record
    from auditor.lineage.gate import GatePolicy, blocking, check

    record, diff = read_record(record_file)
    findings = check(record, diff=diff, policy=GatePolicy(require_image=require_image))
    if json_out:
        emit_json({"record_digest": record.digest(), "findings": [f.model_dump() for f in findings]})
    else:
        print_findings(findings, title=f"{record_file} ({record.digest()[:19]}…)")
    if blocking(findings):
        raise LineageIncomplete(blocking(findings), subject=str(record_file))


@lineage_app.command("schema")
def schema_cmd() -> None:
    """Print the JSON Schema of a run record."""
    from auditor.lineage.record import json_schema

    emit_json(json_schema())


def print_findings(findings: list, *, title: str) -> None:
    from rich.text import Text

    shown = table("severity", "field", "finding", "fix", title=title)
    for f in findings:
        shown.add_row(Text(f.severity, style="red" if f.blocking else "yellow"), f.path, f.message, f.hint)
    out = console()
    if findings:
        out.print(shown)
    else:
        out.print(f"{title}: no findings", markup=False, highlight=False)


__all__ = ["lineage_app", "BadInput"]
