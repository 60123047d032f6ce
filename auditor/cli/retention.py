"""``repro-audit retention check [--years N]``: what of each production or audited version will stop being reproducible, and when.

Exit 0 when every input is kept past the horizon; 1 (findings) when any is lost or at risk before it. A local
folder store is at risk too, but while the settings ask for no write-once store (``REPRO_REQUIRE_OBJECT_LOCK`` false,
the embedded default) it is said as declared and not counted. The nightly publishes the same list on the coverage
page (``auditor.steps.retention``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json
from auditor.settings import REPORTS, RETENTION_YEARS

retention_app = typer.Typer(help="Whether every input of each audited or production version lasts as long as the duty.",
                            no_args_is_help=True)
app.add_typer(retention_app, name="retention")


@retention_app.command("check")
def check_cmd(
    years: Annotated[int | None, typer.Option("--years", min=1, max=100,
                                              help=f"the horizon in years (default {RETENTION_YEARS.name}, 10)")] = None,
    tracking_uri: Annotated[str | None, typer.Option("--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI)")] = None,
    reports: Annotated[str | None, typer.Option("--reports", help=f"reports location (default: {REPORTS.name})")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the whole check as JSON")] = False,
) -> None:
    """List, per production or audited version, each input that is lost or may be deleted before the horizon, with dates."""
    from auditor.cli.models import open_session
    from auditor.errors import Findings
    from auditor.steps.retention import at_risk, declared

    session = open_session(tracking_uri=tracking_uri, reports=reports)
    report = session.retention(years=years)
    risky = at_risk(report)
    if as_json:
        emit_json(report)
    else:
        _print(report)
        local = declared(report)
        if local:
            from auditor.settings import REQUIRE_OBJECT_LOCK

            console().print(f"{len(local)} input(s) at risk only as local stores the settings declare ({REQUIRE_OBJECT_LOCK.name} "
                            f"is false): said, not counted; set {REQUIRE_OBJECT_LOCK.name}=true to count them",
                            markup=False, highlight=False, soft_wrap=True)
    if risky:
        lost = sum(1 for i in risky if i["status"] == "lost")
        raise Findings(f"{lost} input(s) lost and {len(risky) - lost} at risk before {report['horizon']} "
                       f"across {len({i['ref'] for i in risky})} version(s)",
                       hint="each line names the fix; raise the stores' retention or lock them (docs/concepts/production-and-retention.md)")


def _print(report: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    from auditor.uris import visible

    table = Table(title=f"retention for {report['years']} years (to {report['horizon']}), checked {report['checked_at']}")
    for column in ("version", "input", "status", "until", "detail"):
        table.add_column(column)
    for row in report["versions"]:
        name = visible(row["ref"]) + (" (production)" if row["production"] else "")
        for item in row["items"]:
            detail = item["detail"] + (f"\nfix: {item['fix']}" if item["fix"] else "")
            status = item["status"] + (" (not counted)" if item.get("declared") else "")
            table.add_row(Text(name), Text(item["input"]), status, item["until"] or "-", Text(detail))
        if row.get("note"):
            table.add_row(Text(name), Text("run record"), "none recorded", "-", Text(row["note"]))
    console().print(table)
    if not report["versions"]:
        console().print("no production or audited version", markup=False)
