"""What a report shows, worked out from the evidence: problems first, lineage rows, the regulatory map.

Plain functions over ``AuditResult`` returning small dicts for the templates,
so the templates stay declarative and this logic stays testable.
"""

from __future__ import annotations

from typing import Any

from auditor.judge.result import AuditResult, Verdict
from auditor.lineage.findings import Finding

TIER_ORDER = ("lineage", "artifact_recovery", "statistical", "bitwise")
TIER_TITLES = {
    "lineage": "Lineage",
    "artifact_recovery": "Artifact recovery",
    "statistical": "Statistical",
    "bitwise": "Bitwise",
}
SECTIONS = ("code", "data", "config", "environment", "seeds", "infrastructure")

VERDICT_STYLE = {
    Verdict.REPRODUCED_BITWISE: ("ok", "Reproduced bit for bit", "The rebuilt weights are identical to the registered ones."),
    Verdict.REPRODUCED_WITHIN_TOLERANCE: (
        "ok",
        "Reproduced within tolerance",
        "Every rebuilt metric lies inside its band.",
    ),
    Verdict.OUT_OF_TOLERANCE: ("warn", "Out of tolerance", "The model was rebuilt, but a metric left its band."),
    Verdict.NOT_REPRODUCIBLE: (
        "bad",
        "Not reproducible",
        "An input of the training run is missing or mutable, so it cannot be rebuilt.",
    ),
    Verdict.ERROR: ("err", "Audit error", "The audit failed before it could judge the model."),
}

# What each tier's evidence serves. Phrased as "supports": a passing tier is
# evidence towards the expectation, never the whole of it.
SUPPORT = {
    "lineage": (
        "SR 26-2 model documentation and ongoing monitoring: every input of the registered model is "
        "identified immutably. EU AI Act Annex IV §2(g): identifies the data and code the tests ran on."
    ),
    "artifact_recovery": (
        "SR 26-2 ongoing monitoring: the recorded inputs can still be retrieved and rebuilt today."
    ),
    "statistical": (
        "SR 26-2 outcomes analysis: rebuilt metrics compared with the registered values against a measured "
        "tolerance band. EU AI Act Annex IV §2(g): metrics and the test log behind them."
    ),
    "bitwise": (
        "SR 26-2 ongoing monitoring, strongest form: the registered weights are exactly what the recorded "
        "inputs produce. EU AI Act Annex IV §2(g): a dated, re-checkable test log."
    ),
}


def tiers(audit: AuditResult) -> list[dict[str, Any]]:
    """Tier results in the fixed order, then any tier the judge added that this view does not know."""
    names = [n for n in TIER_ORDER if n in audit.tiers] + sorted(set(audit.tiers) - set(TIER_ORDER))
    return [
        {"key": n, "title": TIER_TITLES.get(n, n), **audit.tiers[n].model_dump(mode="json")} for n in names
    ]


def _section_of(finding: Finding) -> str:
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


def lineage(audit: AuditResult) -> list[dict[str, Any]]:
    """One row per input and the infrastructure: identifier, complete/mutable/missing, fix hints."""
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
        if any("mutable" in f"{f.code} {f.message}".lower() for f in found):
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
            }
        )
    return rows


def problems(audit: AuditResult) -> dict[str, Any] | None:
    """What went wrong, for the top of the report; None when the audit reproduced the model."""
    verdict = audit.verdict
    if verdict.reproduced:
        return None
    failing_tiers = [t for t in tiers(audit) if t["status"] in ("fail", "error")]
    if verdict is Verdict.ERROR:
        first_line = (audit.error or "").strip().splitlines()[0] if (audit.error or "").strip() else ""
        return {
            "kind": "error",
            "title": (first_line[:157] + "…") if len(first_line) > 160 else (first_line or "the audit failed"),
            "error": audit.error or "(no error message was recorded)",
            "log": "\n".join(audit.log_tail.splitlines()[-25:]),
            "findings": [],
            "metrics": [],
            "tiers": failing_tiers,
        }
    if verdict is Verdict.NOT_REPRODUCIBLE:
        blocking = [f.model_dump() for f in audit.findings if f.blocking]
        return {
            "kind": "missing",
            "title": f"{len(blocking)} input(s) missing or mutable" if blocking else "The run cannot be rebuilt",
            "error": audit.error,
            "log": "",
            "findings": blocking,
            "metrics": [],
            "tiers": failing_tiers,
        }
    outside = [m.model_dump(mode="json") for m in audit.metrics if m.inside is False]
    return {
        "kind": "tolerance",
        "title": f"{len(outside)} metric(s) outside the band" if outside else "A tier failed",
        "error": audit.error,
        "log": "",
        "findings": [],
        "metrics": outside,
        "tiers": failing_tiers,
    }


def support(audit: AuditResult) -> list[dict[str, str]]:
    """The regulatory map: each tier, its status in this audit, and what a pass supports."""
    status = {t["key"]: t["status"] for t in tiers(audit)}
    return [
        {"tier": TIER_TITLES[n], "status": status.get(n, "not run"), "serves": SUPPORT[n]} for n in TIER_ORDER
    ]


def context(doc: dict[str, Any], audit: AuditResult) -> dict[str, Any]:
    """Everything the report template needs, from one evidence document."""
    style, headline, explanation = VERDICT_STYLE[audit.verdict]
    drift = audit.drift
    return {
        "doc": doc,
        "audit": audit,
        "verdict_class": style,
        "headline": headline,
        "explanation": explanation,
        "problems": problems(audit),
        "tiers": tiers(audit),
        "lineage": lineage(audit),
        "support": support(audit),
        "drift": None if drift is None or drift.empty else drift,
        "digests": sorted((doc.get("digests") or {}).items()),
    }
