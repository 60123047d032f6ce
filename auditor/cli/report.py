"""``repro-audit report pdf|coverage``: a report as a paginated PDF; the registry's audit coverage.

Coverage needs the registry's listing, which publishing an audit (and so the index) does without:
this command joins the listing with the ledger, prints it, and with ``--write`` publishes
``coverage.html`` beside the index, which then links it. ``repro-audit nightly`` writes it too.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json, table
from auditor.settings import REPORTS

report_app = typer.Typer(help="Published reports: print one as PDF, show the registry's audit coverage.", no_args_is_help=True)
app.add_typer(report_app, name="report")

REPORTS_HELP = f"reports location: a folder or s3://bucket/prefix (default: {REPORTS.name})"


@report_app.command("pdf")
def pdf_cmd(
    report: str = typer.Argument(..., help="a report's .html file, or its stem in the reports store (as the index lists it)"),
    out: Path = typer.Option(..., "-o", "--out", help="the PDF file to write"),
    reports: str = typer.Option(None, "--reports", help=REPORTS_HELP),
    json_out: bool = typer.Option(False, "--json", help="print {pdf, bytes} as JSON"),
) -> None:
    """Print a published report to a paginated PDF (headless Chromium), with page headers and numbers."""
    from auditor.cli.models import settings_with
    from auditor.report.pdf import print_pdf, report_file

    with tempfile.TemporaryDirectory(prefix="repro-report-") as scratch:
        html = report_file(report, settings_with(reports=reports).reports, Path(scratch))
        written = print_pdf(html, out)
    if json_out:
        emit_json({"pdf": str(written), "bytes": written.stat().st_size})
    else:
        console().print(f"{written} ({written.stat().st_size:,} bytes)", markup=False, highlight=False)


@report_app.command("coverage")
def coverage_cmd(
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI); a SQLite file must exist"),
    reports: str = typer.Option(None, "--reports", help=REPORTS_HELP),
    write: bool = typer.Option(False, "--write", help="also publish coverage.html beside the index (the index links it)"),
    json_out: bool = typer.Option(False, "--json", help="print the rows as JSON"),
) -> None:
    """Every registered version, when it was last audited, and which are overdue or never audited."""
    from auditor.cli.models import open_session

    session = open_session(tracking_uri=tracking_uri, reports=reports)
    rows, page = session.coverage(now=dt.datetime.now(dt.UTC), write=write)
    page = page if write else None
    overdue_days = session.settings.overdue_days
    if json_out:
        emit_json({"overdue_days": overdue_days, "page": page, "versions": rows})
    else:
        _print(rows, overdue_days, page)


def _print(rows: list[dict], overdue_days: int, page: str | None) -> None:
    from rich.text import Text

    from auditor.uris import visible

    out = console()
    shown = table("model", "version", "aliases", "status", "last audited", "days since", "last verdict",
                  title=f"audit coverage (overdue after {overdue_days} days)")
    for r in rows:  # the registry's names as text (never markup), every hidden character written out (<U+202E>)
        shown.add_row(Text(visible(r["model"])), Text(visible(r["version"])), Text(visible(", ".join(r["aliases"]) or "none")),
                      r["status"], r["last"] or "never", r["age_days"], r["verdict"])
    out.print(shown)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in ("never audited", "overdue", "current", "retired")}
    out.print(", ".join(f"{n} {s}" for s, n in counts.items()), markup=False)
    if page:
        out.print(f"coverage: {page}", markup=False, highlight=False)
