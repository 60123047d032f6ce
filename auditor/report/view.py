"""What a report shows, worked out from the evidence: problems first, lineage rows, the regulatory map.

Plain functions over ``AuditResult`` returning small dicts for the templates,
so the templates stay declarative and this logic stays testable.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from markupsafe import Markup

from auditor.judge.result import AuditResult, Verdict
from auditor.lineage.findings import Finding
from auditor.report.headline import cause as failing_cause
from auditor.report.tidy import quiet_tiers

TIER_ORDER = ("lineage", "artifact_recovery", "statistical", "bitwise")
TIER_TITLES = {
    "lineage": "Lineage",
    "artifact_recovery": "Artifact recovery",
    "statistical": "Statistical",
    "bitwise": "Bitwise",
}
SECTIONS = ("code", "data", "config", "environment", "seeds", "infrastructure")
NOT_RUN = "not run"

class VerdictView(NamedTuple):
    """How one verdict is shown: the report's CSS class, headline and explanation, the index's colour, the
    terminal's style (rich markup)."""

    css: str
    headline: str
    explanation: str
    color: str
    terminal: str


#: The one presentation table of the verdicts (what they mean is ``auditor.outcomes``).
VERDICT_VIEW: dict[Verdict, VerdictView] = {
    Verdict.REPRODUCED_BITWISE: VerdictView(
        "ok", "Reproduced bit for bit", "The rebuilt weights are identical to the registered ones.", "#2e7d32", "bold green"),
    Verdict.REPRODUCED_WITHIN_TOLERANCE: VerdictView(
        "ok", "Reproduced within tolerance", "Every rebuilt metric lies inside its band.", "#2e7d32", "green"),
    Verdict.OUT_OF_TOLERANCE: VerdictView(
        "warn", "Out of tolerance", "The model was rebuilt, but a metric left its band.", "#b26a00", "bold yellow"),
    Verdict.NOT_REPRODUCIBLE: VerdictView(
        "bad", "Not reproducible", "An input of the training run is missing or mutable, so it cannot be rebuilt.", "#c62828",
        "bold red"),
    Verdict.LINEAGE_INSUFFICIENT: VerdictView(
        "warn", "Adoption: lineage insufficient",
        "An adoption assessment of a version trained without the SDK: its lineage was recovered from MLflow metadata "
        "(not a record captured at training time) and nothing was rebuilt, so nothing is reproduced. Each input "
        "below is pinned, named but mutable, or missing, with the one change that pins it.", "#6a1b9a", "bold magenta"),
    Verdict.ERROR: VerdictView("err", "Audit error", "The audit failed before it could judge the model.", "#5d1a1a", "bold magenta"),
}
#: the index's colour by verdict name (the ledger holds names)
VERDICT_COLORS = {verdict.value: view.color for verdict, view in VERDICT_VIEW.items()}


# What each tier's evidence serves. Phrased as "supports": a passing tier is
# evidence towards the expectation, never the whole of it. Each sentence claims only what its tier
# checks: artifact recovery checks the registered file, not that the inputs can be rebuilt today
# (that is the statistical and bitwise tiers' claim, made only when they pass).
SUPPORT = {
    "lineage": (
        "SR 26-2 model documentation and ongoing monitoring: every input of the registered model is "
        "identified immutably. EU AI Act Annex IV §2(g): identifies the data and code the tests ran on."
    ),
    "artifact_recovery": (
        "SR 26-2 ongoing monitoring: the registered artifact is still retrievable and is, byte for byte, the "
        "one the run record names."
    ),
    "statistical": (
        "SR 26-2 outcomes analysis: the model was rebuilt today from its recorded inputs and its metrics "
        "compared with the registered values against a measured tolerance band. EU AI Act Annex IV §2(g): "
        "metrics and the test log behind them."
    ),
    "bitwise": (
        "SR 26-2 ongoing monitoring, strongest form: rebuilt today from the recorded inputs, the weights are "
        "exactly the registered ones. EU AI Act Annex IV §2(g): a dated, re-checkable test log."
    ),
}
#: what an adoption's passing tier supports instead (``auditor.adopt``: lineage recovered from MLflow metadata, the
#: model rebuilt in the sandbox and both loaded by the flavour's loader there; no run record, band or weight diff)
ADOPTION_SUPPORT = {
    "lineage": (
        "SR 26-2 model documentation: every input the rebuild needs is identified from MLflow metadata (recovered after "
        "training, not captured by a run record), with each assumption listed. EU AI Act Annex IV §2(g): identifies the "
        "data and code, as MLflow recorded them."
    ),
    "artifact_recovery": (
        "SR 26-2 ongoing monitoring: the registered model is still retrievable and loads with its flavour's own loader."
    ),
    "statistical": (
        "SR 26-2 outcomes analysis: the model was rebuilt today from the inputs MLflow pinned, and every score it exposes "
        "on the training data equals the registered model's within float resolution."
    ),
    "bitwise": (
        "SR 26-2 ongoing monitoring, strongest form: rebuilt today from the inputs MLflow pinned, the model file is "
        "byte for byte the registered one. EU AI Act Annex IV §2(g): a dated, re-checkable test log."
    ),
}
#: added to artifact recovery's claim only when the registered weights were re-evaluated and matched
RECOVERY_EVALUATED = " Re-evaluated by the recorded recipe, it gives the registered metrics."
#: what the page says of a tier that did not pass, instead of the claim a pass would make
NO_SUPPORT = {
    "fail": "Supports nothing here: this tier failed (see the tier results).",
    "error": "Supports nothing here: this tier could not be judged (see What went wrong).",
    NOT_RUN: "Supports nothing here: this tier did not run ({why}).",
}
#: the legend of every "distance to band" on the page (``auditor.judge.tolerance.check_metric``'s sign)
DISTANCE_LEGEND = (
    "Distance to band: the signed distance from the rebuilt value to the band's nearest edge. Negative: inside "
    "the band by that margin; 0: on an edge (edges are inside); positive: outside by that much."
)
SEE_PROBLEMS = "see What went wrong above"


def _stopped_because(audit: AuditResult) -> str:
    """Why the rebuild's tiers have no evidence: what stopped the audit before them."""
    if audit.record is None:
        return "no run record could be read, so there was nothing to rebuild"
    lineage_tier = audit.tiers.get("lineage")
    if lineage_tier is not None and lineage_tier.status == "fail":
        return "the lineage gate blocked the rebuild: an input is missing or mutable"
    if audit.verdict is Verdict.ERROR:
        return f"the audit stopped on an error before this tier; {SEE_PROBLEMS}"
    recovery = audit.tiers.get("artifact_recovery")
    if audit.error:
        return f"the model could not be rebuilt; {SEE_PROBLEMS}"
    if recovery is not None and recovery.status == "fail":
        return "no rebuild was judged: the registered artifact failed its check (see Artifact recovery)"
    return ""


def adopted(audit: AuditResult) -> bool:
    """Whether ``audit`` is an adoption of a version trained with plain MLflow (an assessment or a rebuild,
    ``auditor.adopt``): no run record, its tiers' evidence is the sandbox's comparison, not metrics and weights."""
    from auditor.adopt.assess import is_assessment

    return is_assessment(audit.audit_id, audit.verdict.value)


def not_run_reason(audit: AuditResult, name: str) -> str | None:
    """Why a tier did not run, or None when it ran (its pass or fail then stands as the judge gave it).

    A tier ran when its evidence exists: the lineage gate always runs; artifact recovery when it was
    checked; the statistical tier when metrics were compared; the bitwise tier when weights were. An adoption's
    tiers ran when the judge gave them a status (``auditor.adopt.rebuild.judge``: the sandbox compared scores and
    hashed the model files; there is no run record, metric band or weight diff to look for).
    """
    tier = audit.tiers[name]
    if name == "lineage":
        return None
    if adopted(audit):
        return None if tier.status != "skipped" else (tier.summary or "no evidence for this tier")
    ran = {
        "artifact_recovery": tier.status != "skipped",
        "statistical": bool(audit.metrics),
        "bitwise": audit.weight_diff is not None,
    }.get(name, tier.status != "skipped")
    if name == "artifact_recovery" and ran and audit.record is not None:
        return None
    if name == "artifact_recovery" and not ran and audit.record is not None and audit.verdict is not Verdict.ERROR:
        return tier.summary or "not checked"
    if ran and tier.status != "skipped":
        return None
    return _stopped_because(audit) or tier.summary or "no evidence for this tier"


def tiers(audit: AuditResult) -> list[dict[str, Any]]:
    """Tier results in the fixed order, then any tier the judge added that this view does not know.

    A tier that did not run reads ``not run`` and why (the judge's ``fail: cannot be rebuilt`` or
    ``error: not judged`` for a tier that never had evidence is not a failure of that tier).
    """
    names = [n for n in TIER_ORDER if n in audit.tiers] + sorted(set(audit.tiers) - set(TIER_ORDER))
    rows = []
    for n in names:
        row = {"key": n, "title": TIER_TITLES.get(n, n), **audit.tiers[n].model_dump(mode="json"), "why": None}
        why = not_run_reason(audit, n)
        if why is not None:
            details = row["details"] if audit.tiers[n].status == "skipped" else []
            row.update(status=NOT_RUN, summary=why, why=why, details=details)
        row["css"] = row["status"].replace(" ", "-")
        rows.append(row)
    return rows


#: findings that say the data a rebuild trained on differs from training's: they belong on the data row, in red
#: (a changed snapshot, a traced file read outside the snapshots, what the model consumed)
DATA_CHANGED = ("data.changed", "traced.file", "consumed.")


def _section_of(finding: Finding) -> str:
    if finding.code.startswith(DATA_CHANGED):
        return "data"
    head = finding.path.split(".", 1)[0]
    return head if head in SECTIONS else "other"


def _identifier(section: str, body: Any) -> list[str]:
    if not body:
        return []
    if section == "code":
        ident = [f"{body.get('repo_url') or '(no remote)'} @ {body.get('commit') or '(no commit)'}"]
        if body.get("dirty"):
            ident.append(f"uncommitted diff {body.get('diff_digest') or '(not stored)'}")
        if body.get("entrypoint"):
            ident.append("entrypoint: " + " ".join(body["entrypoint"]))
        return ident
    if section == "data":
        return [f"{name}: {ref.get('uri')} @ {ref.get('version') or '(no version)'}" for name, ref in sorted(body.items())]
    if section == "config":
        return [body.get("digest") or "(no digest)"]
    if section == "environment":
        if body.get("image_digest"):
            return [f"image {body.get('image_ref') or ''}@{body['image_digest']}"]
        if body.get("lock_digest"):
            return [f"lock file {body.get('lock_file') or ''} {body['lock_digest']}"]
        return [f"Python {body.get('python') or '?'}, {len(body.get('packages') or {})} packages (no image or lock digest)"]
    if section == "seeds":
        return [f"seed {body.get('seed')}, deterministic={body.get('deterministic')}"]
    if section == "infrastructure":
        return [f"{body.get('instance_type') or 'unknown instance'}, world size {body.get('world_size')}"]
    return []


def adoption(audit: AuditResult) -> list[dict[str, Any]]:
    """An adoption assessment's rows: each input's class (pinned / named but mutable / missing), what was found, the fix.

    The finding codes are ``adopt.<input>.<class>`` (``auditor.adopt.assess``)."""
    from auditor.adopt.assess import CODE_PREFIX as ADOPT_CODE
    from auditor.adopt.rules import CODE_OF

    classes = {code: label for label, code in CODE_OF.items()}
    rows = []
    for f in audit.findings:
        if not f.code.startswith(ADOPT_CODE):
            continue
        section, _, klass = f.code[len(ADOPT_CODE):].partition(".")
        if klass not in classes:  # the rebuild's own finding (adopt.rebuild.differs, adopt.rebuild.failed)
            rows.append({"section": section, "path": f.path, "status": klass, "css": "fail", "identifier": [],
                         "supplied": False, "findings": [f.model_dump()]})
            continue
        label = classes[klass]
        rows.append({"section": section, "path": f.path, "status": label, "css": {"pinned": "complete"}.get(klass, klass),
                     "identifier": [f.message.removeprefix(f"{label}: ")], "supplied": "supplied after training" in f.message,
                     "findings": [] if klass == "pinned" else [f.model_dump()]})
    return rows


def adoption_table(audit: AuditResult) -> bool:
    """Whether the lineage table is an adoption's (its classes only, not every finding)."""
    return adopted(audit) and any(f.code.startswith("adopt.") for f in audit.findings)


def lineage(audit: AuditResult) -> list[dict[str, Any]]:
    """One row per input and the infrastructure: identifier, complete/mutable/missing, fix hints. An adoption's rows
    (an assessment's or a rebuild's, whatever its verdict) are its classes: pinned, named but mutable, missing."""
    if adoption_table(audit):
        return adoption(audit)
    record = audit.record or {}
    by_section: dict[str, list[Finding]] = {}
    for finding in audit.findings:
        by_section.setdefault(_section_of(finding), []).append(finding)
    rows = []
    for section in (*SECTIONS, "other"):
        found = by_section.get(section, [])
        if section == "other" and not found:
            continue
        ident = _identifier(section, record.get(section))
        if section == "data" and any(f.blocking and (f.code.startswith(DATA_CHANGED) or "changed" in f.code or "differ" in f.code)
                                     for f in found):
            status = "changed"  # the data differs from training's: red, the files named in the findings
        elif any("mutable" in f"{f.code} {f.message}".lower() for f in found):
            status = "mutable"
        elif (not ident and section != "other") or any(f.blocking for f in found):
            status = "missing"
        else:
            status = "complete"
        rows.append(
            {
                "section": section,
                "status": status,
                "identifier": ident,
                "findings": [f.model_dump() for f in found],
                "path": None, "css": None, "supplied": False,  # the adoption rows' keys (the template reads both kinds)
            }
        )
    return rows


def adoption_cause(audit: AuditResult) -> Any:
    """An adoption rebuild's OUT_OF_TOLERANCE in its own words (``auditor.report.headline.Cause``); None otherwise. Its
    statistical tier compares scores (its summary names the difference and the decisions it flips), and no band or
    same-seed floor is involved."""
    from auditor.report.headline import Cause

    if audit.verdict is not Verdict.OUT_OF_TOLERANCE or not adopted(audit):
        return None
    stat = audit.tiers.get("statistical")
    if stat is not None and stat.status == "fail":
        return Cause("scores", "the rebuilt model's scores differ from the registered model's",
                     f"The version was rebuilt from what MLflow pinned, but {stat.summary}.")
    return Cause("rebuild", "the rebuilt run differs from the registered one",
                 "The version was rebuilt from what MLflow pinned, but the rebuilt run is not the registered one: see the "
                 "findings below.")


def problems(audit: AuditResult) -> dict[str, Any] | None:
    """What went wrong, for the top of the report; None when the audit reproduced the model."""
    verdict = audit.verdict
    if verdict.reproduced:
        return None
    failing_tiers = [t for t in tiers(audit) if t["status"] in ("fail", "error")]
    if verdict is Verdict.ERROR:
        text = (audit.error or "").strip()
        first_line = text.splitlines()[0] if text else ""
        title = (first_line[:157] + "…") if len(first_line) > 160 else (first_line or "the audit failed")
        return {
            "kind": "error",
            "title": title,
            # the banner shows the title: the full text again only when it says more (each error text once)
            "error": None if text == title else (text or "(no error message was recorded)"),
            "log": "\n".join(audit.log_tail.splitlines()[-25:]),
            "findings": [],
            "metrics": [],
            "tiers": failing_tiers,
        }
    if verdict is Verdict.LINEAGE_INSUFFICIENT:
        blocking = [f.model_dump() for f in audit.findings if f.blocking]
        return {"kind": "missing", "title": f"{len(blocking)} input(s) not pinned" if blocking else "nothing was rebuilt",
                "error": audit.error, "log": "", "findings": blocking, "metrics": [], "tiers": []}
    if verdict is Verdict.NOT_REPRODUCIBLE:
        blocking = [f.model_dump() for f in audit.findings if f.blocking]
        return {
            "kind": "missing",
            "title": failing_cause(audit).title,  # the failing evidence's own words (``auditor.report.headline``)
            "error": audit.error,
            "log": "",
            "findings": blocking,
            "metrics": [],
            "tiers": failing_tiers,
        }
    outside = [m.model_dump(mode="json") for m in audit.metrics if m.inside is False]
    own = adoption_cause(audit)
    return {
        "kind": "tolerance",
        "title": own.title if own else failing_cause(audit).title,
        "error": audit.error,
        "log": "",
        "findings": [f.model_dump() for f in audit.findings if f.blocking] if own else [],
        "metrics": outside,
        "tiers": failing_tiers,
    }


def support(audit: AuditResult) -> list[dict[str, str]]:
    """The regulatory map: each tier, its status in this audit, and what it supports *here*.

    Only a passing tier gets its claim; any other status says it supports nothing, and why, so that
    no sentence on the page claims more than the tier results above it show.
    """
    shown = {t["key"]: t for t in tiers(audit)}
    claims = ADOPTION_SUPPORT if adopted(audit) else SUPPORT
    rows = []
    for n in TIER_ORDER:
        tier = shown.get(n)
        status = tier["status"] if tier else NOT_RUN
        why = (tier or {}).get("why") or "the judge reported nothing for it"
        serves = claims[n] if status == "pass" else NO_SUPPORT.get(status, NO_SUPPORT["fail"]).format(why=why)
        if n == "artifact_recovery" and status == "pass" and "reproduce the metrics" in (tier or {}).get("summary", ""):
            serves += RECOVERY_EVALUATED  # the judge's summary when the re-evaluation ran and matched
        rows.append({"tier": TIER_TITLES[n], "status": status, "css": status.replace(" ", "-"), "serves": serves,
                     "would_serve": None if status == "pass" else claims[n]})
    return rows


#: how each lottery status is shown: the pill's CSS class and its words
LOTTERY_PILLS = {
    "lottery": ("fail", "ranks above its reruns"),
    "consistent": ("pass", "an ordinary seed"),
    "too_few": ("not-run", "too few reruns to test"),
    "no_direction": ("not-run", "no better direction"),
    "not_numeric": ("not-run", "not numeric"),
}
LOTTERY_LEGEND = (
    "Each circle is one seed-varied rerun of the recorded recipe, the diamond the registered value. The p-value of each "
    "metric is exact for that metric alone: the chance that an ordinary seed ranks this well among {n1} draws. The pill "
    "follows one test over every headline metric at once (best rank first, then the next), so several metrics do not "
    "multiply false alarms. A registered run better than nearly every rerun is what choosing the best of several seeds "
    "produces; an honest seed does it about 1 time in {n1}."
)


def lottery_svg(registered: float | None, reruns: list[float], index: int) -> Markup | None:
    """The registered value (diamond) on the reruns' distribution (a dot strip, equal values stacked). Numbers only."""
    from auditor.report.plots import COLORS, _limits, _ticks

    if registered is None or not reruns:
        return None
    width, left, right, axis = 461, 14, 447, 54
    lo, hi = _limits([*reruns, registered])

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (right - left)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="79" viewBox="0 0 {width} 79" '
             f'class="lottery-strip" id="l{index}" role="img">']
    stacked: dict[str, int] = {}
    for value in sorted(reruns):
        key = f"{x(value):.0f}"
        level = stacked.get(key, 0)
        stacked[key] = level + 1
        parts.append(f'<circle cx="{x(value):.2f}" cy="{axis - 5 - 6 * min(level, 6):.2f}" r="3" fill="{COLORS["spread"]}" fill-opacity="0.8"/>')
    cx = x(registered)
    parts.append(f'<line x1="{cx:.2f}" y1="6" x2="{cx:.2f}" y2="{axis}" stroke="{COLORS["registered"]}" stroke-width="1" stroke-dasharray="2,2"/>'
                 f'<path d="M{cx:.2f} 6L{cx + 5:.2f} 11L{cx:.2f} 16L{cx - 5:.2f} 11Z" fill="{COLORS["registered"]}"/>')
    parts.append(f'<line x1="{left}" y1="{axis}" x2="{right}" y2="{axis}" stroke="#000" stroke-width="0.8"/>')
    ticks, decimals = _ticks(lo, hi)
    for tick in ticks:
        parts.append(f'<line x1="{x(tick):.2f}" y1="{axis}" x2="{x(tick):.2f}" y2="{axis + 3.5}" stroke="#000" stroke-width="0.8"/>'
                     f'<text x="{x(tick):.2f}" y="{axis + 13}" font-size="7" font-family="DejaVu Sans, sans-serif" '
                     f'text-anchor="middle">{tick:.{decimals}f}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - numbers only (as auditor.report.plots)


def lottery(audit: AuditResult) -> dict[str, Any] | None:
    """The seed-lottery section: per metric its entry, picture and pill; None when the version was not calibrated."""
    check = audit.lottery
    if check is None:
        return None
    rows = []
    for i, entry in enumerate(check.metrics):
        css, label = LOTTERY_PILLS.get(entry.status, ("not-run", entry.status))
        rows.append({"entry": entry, "css": css, "label": label, "svg": lottery_svg(entry.registered, entry.reruns, i)})
    return {"check": check, "rows": rows, "legend": LOTTERY_LEGEND.format(n1=check.reruns + 1)}


#: the observed tier, from the verdict, in the expected tier's words (``auditor.judge.expected``)
OBSERVED_TIER = {Verdict.REPRODUCED_BITWISE: "bitwise", Verdict.REPRODUCED_WITHIN_TOLERANCE: "statistical"}


def expected(audit: AuditResult) -> dict[str, Any] | None:
    """Expected (from the record alone) beside observed; None when the record could not be read."""
    exp = audit.expected
    if exp is None:
        return None
    judged = audit.verdict in (Verdict.OUT_OF_TOLERANCE, Verdict.NOT_REPRODUCIBLE)
    observed = OBSERVED_TIER.get(audit.verdict, "not reproduced" if judged else "not judged")
    bits = audit.tiers.get("bitwise")
    stronger = exp.tier == "bitwise" and bits is not None and bits.status == "fail"
    if stronger:
        note = "Expected bitwise from the record, and not bitwise: the stronger finding (an input the record does not pin)."
    elif exp.tier != "bitwise" and observed == "statistical":
        note = "As expected: the record says this run cannot be bitwise, so the noise floor and the bands judged it."
    else:
        note = ""
    return {"expected": exp.tier.replace("_", " "), "words": exp.words, "observed": observed, "reasons": exp.reasons,
            "stronger": stronger, "note": note, "css": "fail" if stronger else "pass" if observed in ("bitwise", "statistical") else "mutable"}


def noise(audit: AuditResult) -> dict[str, Any] | None:
    """Predictive multiplicity and the rerun cost behind the report; None when the version was not calibrated."""
    if audit.multiplicity is None and audit.rerun_cost is None:
        return None
    cost = audit.rerun_cost or {}
    spent = [f"{cost.get('reruns', 0)} reruns ({cost.get('same_seed', 0)} same-seed, {cost.get('seed_varied', 0)} seed-varied)"]
    if cost.get("wall_s") is not None:
        spent.append(f"{cost['wall_s']:.1f} s wall")
    if cost.get("mapped") and cost.get("elapsed_s") is not None:
        spent.append(f"{cost['elapsed_s']:.1f} s elapsed as one mapped task per rerun")
    elif (cost.get("workers") or 1) > 1 and cost.get("elapsed_s") is not None:
        spent.append(f"{cost['elapsed_s']:.1f} s elapsed with {cost['workers']} at a time")
    spent.append(f"{cost['cpu_s']:.1f} CPU s" if cost.get("cpu_s") is not None else "CPU seconds not measured")
    if cost.get("accelerator_s") is not None:
        spent.append(f"{cost['accelerator_s']:.1f} GPU s")
    line = ", ".join(spent) + (f", run by the {cost['runner']} runner" if cost.get("runner") else "")
    if cost.get("calibrated_at"):
        line += f" at the calibration of {cost['calibrated_at']}"
    if cost.get("reused_by"):
        line += "; reused by " + ", ".join(cost["reused_by"]) + ", never rerun"
    return {"multiplicity": audit.multiplicity, "cost": line if cost else None}


def context(doc: dict[str, Any], audit: AuditResult) -> dict[str, Any]:
    """Everything the report template needs, from one evidence document."""
    style, headline, explanation = VERDICT_VIEW[audit.verdict][:3]
    failed = adoption_cause(audit) or failing_cause(audit)
    if failed is not None:  # the sentence of the tier that failed, not the verdict's generic one
        explanation = failed.explanation
    drift = audit.drift
    return {
        "doc": doc,
        "audit": audit,
        "verdict_class": style,
        "headline": headline,
        "explanation": explanation,
        "problems": problems(audit),
        "distance_legend": DISTANCE_LEGEND,
        "tiers": quiet_tiers(tiers(audit), table_has_warnings=not adoption_table(audit)),
        "lineage": lineage(audit),
        "support": support(audit),
        "drift": None if drift is None or drift.empty else drift,
        "digests": sorted((doc.get("digests") or {}).items()),
        "lottery": lottery(audit),
        "expected": expected(audit),
        "noise": noise(audit),
        # an adoption that rebuilt the version (not an assessment): its evidence is the sandbox's comparison
        "rebuilt_adoption": adopted(audit) and audit.verdict is not Verdict.LINEAGE_INSUFFICIENT,
    }
