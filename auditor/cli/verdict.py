"""An audit's verdict in the terminal: the verdict line, its tiers and metrics, and after a red verdict the cause and
one next step (``next: …``), the last line, where the eye lands.

The next step is the top finding's own fix (``Finding.hint``: a blocking finding first, the judge's "expected"
findings next), else the one that follows from the failing evidence (``auditor.report.headline``'s cause), so
the terminal names the same cause the report leads with.
"""

from __future__ import annotations

from typing import Any

from auditor.cli.output import cell_text, console, figures, table

LOG_LINES = 40  # of the rebuild's log, printed under an audit that ended in ERROR or a crash
TIER_ORDER = ("lineage", "artifact_recovery", "statistical", "bitwise")
STATUS_STYLE = {"pass": "green", "fail": "red", "error": "magenta"}

#: the next step when no finding names a fix: by the failing evidence (``auditor.report.headline.Cause.key``)
CAUSE_STEPS = {
    "another_model": "the rebuild trained another model: compare what the record pins with what the script builds "
                     "(repro-audit lineage show {ref})",
    "unseeded": "seed every random generator the training script uses, then train and register a new version",
    "deterministic": "look for an input the record does not pin (a variable, a file outside the snapshot); "
                     "repro-audit lineage show {ref} lists what it pins",
    "floor": "look for an input the record does not pin (a variable, a file outside the snapshot); "
             "repro-audit lineage show {ref} lists what it pins",
    "no_floor": "measure the noise floors, then audit again: repro-audit calibrate {ref}",
    "bitwise": "measure the noise floors, then audit again: repro-audit calibrate {ref}",
    "metrics": "find what changed since training (the report's drift section), or re-measure the bands: "
               "repro-audit calibrate {ref}",
    "statistical": "find what changed since training (the report's drift section), or re-measure the bands: "
                   "repro-audit calibrate {ref}",
    "artifact": "the registered file no longer matches its record: restore it from a copy, or re-register the version",
    "unrecoverable": "restore the input that can no longer be recovered (the report names it), then audit again",
}
ERROR_STEP = "fix what the error above names, then audit again: repro-audit audit {ref} --no-publish --stream-output"
FALLBACK_STEP = "read the report's What went wrong, then audit again: repro-audit audit {ref} --no-publish"


def top_finding(result: Any) -> Any | None:
    """The finding that explains most: the first blocking one, else the judge's expectation that failed."""
    findings = list(result.findings)
    blocking = [f for f in findings if f.blocking]
    if blocking:
        return blocking[0]
    expected = [f for f in findings if f.code.startswith("expected.")]
    return expected[0] if expected else None


def explain(result: Any) -> tuple[str | None, str | None]:
    """(the cause in words, the one next step) of a red verdict; (None, None) when the model was reproduced."""
    from auditor.outcomes import Verdict
    from auditor.report.headline import cause
    from auditor.uris import model_uri

    if result.verdict.reproduced:
        return None, None
    ref = result.model.uri or model_uri(result.model.name, result.model.version)
    found = top_finding(result)
    if found is not None:
        others = sum(1 for f in result.findings if f.blocking and f is not found)
        more = f" (and {others} more blocking finding(s): see the report)" if others else ""
        return f"{found.message}{more}", found.hint
    if result.verdict is Verdict.ERROR:
        return None, ERROR_STEP.format(ref=ref)
    failing = cause(result)
    if failing is None:
        return None, FALLBACK_STEP.format(ref=ref)
    return failing.title, CAUSE_STEPS.get(failing.key, FALLBACK_STEP).format(ref=ref)


def print_audit(result: Any, report: str | None, *, note: str | None = None) -> None:
    """The verdict, its tiers and metrics; after a red verdict its cause and next step (the last line)."""
    from rich.text import Text

    from auditor.report.view import VERDICT_VIEW

    out = console()
    style = VERDICT_VIEW[result.verdict].terminal
    out.print(Text(result.verdict.value, style=style) + Text(f"  {cell_text(result.model.uri)}  (audit {result.audit_id})"))
    tiers = table("tier", "status", "summary")
    for name in TIER_ORDER:
        tier = result.tiers.get(name)
        if tier:
            tiers.add_row(name, Text(tier.status, style=STATUS_STYLE.get(tier.status, "")), tier.summary)
    out.print(tiers)
    if result.metrics:
        out.print(_metrics(result.metrics))
    if result.error:
        _print_error(out, result)
    why, step = explain(result)
    if why:
        out.print(Text("cause: ", style="bold") + Text(cell_text(why)))
    if report:
        out.print(f"report: {report}", markup=False, highlight=False, soft_wrap=True)
    elif note:
        out.print(note, markup=False, highlight=False, soft_wrap=True)
    if step:
        out.print(Text("next: ", style="bold") + Text(cell_text(step)))


def _metrics(metrics: list) -> Any:
    right = {"justify": "right"}
    shown = table("metric", ("registered", right), ("rebuilt", right), ("band", right), "inside")
    for m in metrics:
        band = [m.band.lower, m.band.upper] if m.band else []
        shown_values = figures([m.registered, *m.rebuilt, *band])
        registered, rebuilt, edges = shown_values[0], shown_values[1 : 1 + len(m.rebuilt)], shown_values[1 + len(m.rebuilt) :]
        shown.add_row(m.name, registered, ", ".join(rebuilt) or "none", f"[{edges[0]}, {edges[1]}]" if edges else "no band",
                      "not judged" if m.inside is None else m.inside)
    return shown


def _print_error(out: Any, result: Any) -> None:
    from rich.text import Text

    out.print(Text("error: ", style="red") + Text(cell_text(result.error)))
    if result.log_tail:
        lines = result.log_tail.rstrip().splitlines()[-LOG_LINES:]
        out.print(Text("the end of the rebuild's log", style="bold") + Text(f" (last {len(lines)} lines):"))
        out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
