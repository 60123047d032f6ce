"""``repro-audit adopt``: assess versions trained without the SDK, and attach what their owners supply.

    repro-audit adopt models:/NAME/V                  assess one version, publish the assessment (signed, ledgered)
    repro-audit adopt --assess-only [--models PAT]   assess every version: nothing rebuilt, nothing written
    repro-audit adopt models:/NAME/V --data train=STORE@ID [--image REF@DIGEST] [--seed N]
                                                     attach a record supplied after training (signed), then assess
    repro-audit adopt models:/NAME/V --rebuild        when every input is pinned: rebuild it in the sandboxed runner,
                                                     compare with the flavour's loader there, publish the verdict

An assessment's verdict is LINEAGE_INSUFFICIENT (exit 1): it is never a pass, because nothing was rebuilt. A rebuild's
verdict is an audit's (REPRODUCED_BITWISE ... NOT_REPRODUCIBLE), its tier marked "lineage recovered from MLflow metadata"
and every assumption listed; a version whose lineage does not allow one gets its assessment, with the reason.
A version the SDK recorded is never assessed from MLflow's metadata: ``--assess-only`` gives it the audit's lineage rule
(the gate on its run record: no verdict of its own when complete, NOT_REPRODUCIBLE when blocked, as its audit says),
and the one-version verbs refuse it (audit it instead).
"""

from __future__ import annotations

import typer

from auditor.cli import app
from auditor.cli.models import JSON_HELP, TRACKING_HELP, _progress, open_session
from auditor.cli.output import console, emit_json
from auditor.cli.params import logical_date, model_ref
from auditor.errors import EXIT_OK, BadInput
from auditor.outcomes import Verdict
from auditor.settings import REPORTS
from auditor.uris import REF_HELP


@app.command("adopt")
def adopt_cmd(
    ref: str = typer.Argument(None, callback=model_ref, help=f"the version to assess: {REF_HELP}"),
    assess_only: bool = typer.Option(False, "--assess-only", help="assess every registered version; write nothing"),
    models: str = typer.Option(None, "--models", help="with --assess-only: a shell pattern on NAME or NAME/VERSION"),
    data: list[str] = typer.Option(None, "--data", help="NAME=STORE@ID: an input pinned by content id, supplied after training (repeat)"),
    image: str = typer.Option(None, "--image", help="REF@sha256:DIGEST: the image it was trained in, supplied after training"),
    seed: int = typer.Option(None, "--seed", help="the integer seed it was trained with, supplied after training"),
    date: str = typer.Option(None, "--date", callback=logical_date, help="the assessment's date (default: today, UTC)"),
    rebuild: bool = typer.Option(False, "--rebuild", help="rebuild one version whose lineage MLflow pinned, in the sandboxed runner"),
    no_publish: bool = typer.Option(False, "--no-publish", help="assess one version without publishing it"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help=TRACKING_HELP),
    reports: str = typer.Option(None, "--reports", help=f"reports location (default: {REPORTS.name})"),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Assess the lineage of versions logged with plain MLflow: each input pinned, named but mutable, or missing."""
    if assess_only == bool(ref):
        raise BadInput("give one version (models:/NAME/VERSION) or --assess-only, not both and not neither",
                       hint="repro-audit adopt --assess-only, or repro-audit adopt models:/NAME/VERSION")
    supplying = bool(data) or image is not None or seed is not None
    if assess_only and supplying:
        raise BadInput("--data, --image and --seed attach a record to one version; --assess-only takes none",
                       hint="repro-audit adopt models:/NAME/VERSION --data train=STORE@ID")
    if rebuild and (assess_only or supplying):
        raise BadInput("--rebuild rebuilds one version from what MLflow recorded; it takes no --assess-only, --data, "
                       "--image or --seed", hint="repro-audit adopt models:/NAME/VERSION --rebuild")
    session = open_session(tracking_uri=tracking_uri, reports=reports)
    if assess_only:
        with _progress(not json_out) as progress:
            sweep = session.adopt_all(models=models, progress=progress)
        if json_out:
            emit_json({"versions": len(sweep.rows), "seconds": round(sweep.seconds, 3), "counts": sweep.counts,
                       "rows": [{k: r.get(k) for k in ("ref", "verdict", "classes", "recorded", "audit")} for r in sweep.rows]})
        else:
            _print_sweep(sweep)
        raise typer.Exit(max((Verdict(r["verdict"]).exit_code for r in sweep.rows if r["verdict"]), default=EXIT_OK))
    attached = None
    if supplying:
        attached = session.adopt_attach(ref, data=data or [], image=image, seed=seed)
    with _progress(not json_out) as progress:
        verb = session.adopt_rebuild if rebuild else session.adopt
        assessed = verb(ref, date=date, publish=not no_publish, progress=progress)
    code = assessed.result.verdict.exit_code
    if json_out:
        if rebuild and assessed.result.verdict is not Verdict.LINEAGE_INSUFFICIENT:
            result = assessed.result
            emit_json({"ref": assessed.ref, "verdict": result.verdict.value, "report": assessed.report, "error": result.error,
                       "tiers": {k: t.status for k, t in result.tiers.items()},
                       "summaries": {k: t.summary for k, t in result.tiers.items()},
                       "predictions": {k: v for k, v in result.evidence.items() if k.startswith("predictions")},
                       "assumptions": result.assumptions, "exit_code": code})
        else:
            emit_json({**assessed.row, "supplied": attached, "exit_code": code})
    elif rebuild and assessed.result.verdict is not Verdict.LINEAGE_INSUFFICIENT:
        _print_rebuilt(assessed)
    else:
        _print_assessed(assessed, attached)
    raise typer.Exit(code)


def _print_rebuilt(assessed) -> None:
    """A rebuilt plain-MLflow version: its verdict, its error and every assumption, and where its report is."""
    out, result = console(), assessed.result
    out.print(f"{assessed.ref}: {result.verdict.value} (rebuilt; lineage recovered from MLflow metadata)",
              markup=False, highlight=False)
    tiers = [f"{name}: {t.status}: {t.summary}" for name, t in result.tiers.items() if name != "lineage"]
    failed = [f"  {d}" for t in result.tiers.values() if t.name != "lineage" and t.status == "fail" for d in t.details]
    lines = ([result.error] if result.error else []) + tiers + failed + [f"assumes: {a}" for a in result.assumptions]
    for line in lines:
        out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    if assessed.report:
        out.print(f"  report: {assessed.report}", markup=False, highlight=False, soft_wrap=True)


def _print_assessed(assessed, attached: dict | None) -> None:
    """One assessment: its verdict, why it was not rebuilt, each input's finding with its fix, what was supplied."""
    out = console()
    out.print(f"{assessed.ref}: {assessed.result.verdict.value} (lineage recovered from MLflow metadata; nothing rebuilt)",
              markup=False, highlight=False)
    for why in (d for d in assessed.result.tiers["lineage"].details if d.startswith("not rebuilt: ")):
        out.print(f"  {why}", markup=False, highlight=False, soft_wrap=True)
    for f in assessed.result.findings:
        fix = "" if f.severity == "warning" else f"\n      fix: {f.hint}"
        out.print(f"  {f.path}: {f.message}{fix}", markup=False, highlight=False, soft_wrap=True)
    if attached:
        out.print(f"  supplied after training by {attached['responsible_person']}: run {attached['run_id']} "
                  f"({attached['sha256']})", markup=False, highlight=False, soft_wrap=True)
    if assessed.report:
        out.print(f"  report: {assessed.report}", markup=False, highlight=False, soft_wrap=True)

def _print_sweep(sweep) -> None:
    """The sweep's counts per input, then each version the SDK recorded: judged by the audit's lineage rule."""
    out = console()
    out.print(f"{len(sweep.rows)} versions assessed in {sweep.seconds:.1f} s (lineage only: nothing rebuilt, "
              "nothing written)", markup=False, highlight=False)
    for section, by_class in sorted(sweep.counts.items()):
        shown = ", ".join(f"{n} {klass}" for klass, n in sorted(by_class.items()))
        out.print(f"  {section}: {shown}", markup=False, highlight=False)
    recorded = [r for r in sweep.rows if r.get("recorded")]
    if recorded:
        out.print(f"{len(recorded)} recorded by the SDK: lineage by the run record and the audit's gate, not MLflow's "
                  "metadata (repro-audit audit judges them)", markup=False, highlight=False)
    for row in recorded:
        blocking = [f["code"] for f in row["findings"] if f.get("severity") == "blocking"]
        said = f"{row['verdict']} (blocking: {', '.join(blocking)})" if blocking else "its record passes the lineage gate"
        audit = row.get("audit")
        if audit:
            said += f"; last audit {audit['at'] or '(no date)'}: {audit['verdict']} (its lineage tier: {audit['lineage'] or 'not tagged'})"
        out.print(f"  {row['ref']}: {said}", markup=False, highlight=False, soft_wrap=True)
