"""``repro-audit evidence verify [LOCATION]``: re-hash every published report and walk the ledger."""

from __future__ import annotations

from typing import Annotated

import typer

from auditor.cli import app
from auditor.cli.output import console, emit_json
from auditor.errors import Findings

evidence_app = typer.Typer(help="Check published audit evidence.", no_args_is_help=True)
app.add_typer(evidence_app, name="evidence")

_SHOWN = 10


@evidence_app.command("verify")
def verify_cmd(
    location: Annotated[
        str | None, typer.Argument(help="Reports location: a folder, file://… or s3://bucket/prefix (default: REPRO_REPORTS).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Exit 0 when every report and ledger entry is untouched; 1 naming the first bad entry."""
    from auditor.report.verify import verify
    from auditor.settings import get_settings
    from auditor.storage import open_store

    result = verify(open_store(location or get_settings().reports))
    if as_json:
        emit_json(
            {
                "location": result.location,
                "ok": result.ok,
                "entries": result.entries,
                "reports": result.reports,
                "head": result.head,
                "first_bad_entry": result.first.seq if result.first else None,
                "problems": [{"entry": p.seq, "message": p.message} for p in result.problems],
            }
        )
    if result.ok:
        if not as_json:
            console().print(
                f"ok: {result.entries} ledger entries chain to head {result.head}; {result.reports} report files re-hashed",
                markup=False,
                soft_wrap=True,
            )
        return
    if not as_json:
        out = console()
        for problem in result.problems[1:_SHOWN]:
            out.print(f"  also: {problem}", markup=False, soft_wrap=True)
        if len(result.problems) > _SHOWN:
            out.print(f"  … and {len(result.problems) - _SHOWN} more", markup=False)
    raise Findings(
        f"evidence at {result.location} failed verification ({len(result.problems)} problem(s)); first: {result.first}"
    )
