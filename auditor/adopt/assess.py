"""A lineage assessment as an audit result: verdict LINEAGE_INSUFFICIENT, one finding per input, never a pass.

The assessment travels the audit's publish path unchanged (evidence, report, in-toto attestation, ledger entry,
MLflow anchor), so ``evidence verify`` holds it like any audit. What makes it an assessment and not an audit:
the verdict (``Verdict.LINEAGE_INSUFFICIENT``, exit 1, never reproduced), the audit id (``adopt-<date>``), no
run record (``record`` stays None: nothing was captured at training time), and its findings, whose codes are
``adopt.<input>.<class>`` (``auditor.adopt.rules``). Nothing was rebuilt, so no tier past lineage has evidence.

A version the SDK recorded (``recorded``) is not assessed from MLflow's metadata: its lineage is the audit's, the
lineage gate on its run record, and ``recorded_row`` words that rule's findings as the sweep's row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from auditor.adopt.rules import CLASSES, CODE_OF, MISSING, MUTABLE, PINNED, SECTIONS, Metadata, Row, classify, counts
from auditor.judge.result import AuditResult, ModelInfo, TierResult
from auditor.lineage.findings import Finding
from auditor.lineage.redact import redact_mapping, redact_text
from auditor.outcomes import Verdict
from auditor.tags import TAG_AUDIT_AT, TAG_AUDIT_TIER_PREFIX, TAG_RECORD_DIGEST, TAG_VERDICT
from auditor.uris import model_uri

#: the audit-id prefix of an assessment (its report stem differs from any audit's of the same day)
AUDIT_ID_PREFIX = "adopt-"
#: every finding of an assessment starts with this code prefix
CODE_PREFIX = "adopt."
TIER_BASIS = "lineage recovered from MLflow metadata, not a record captured at training time"


def finding(row: Row) -> Finding:
    """One input's class as a finding: blocking unless pinned; the message names the class and the identifier."""
    supplied = f" [{row.why}]" if row.supplied_by else f" ({row.why})"
    return Finding(
        code=f"{CODE_PREFIX}{row.section}.{CODE_OF[row.klass]}",
        path=row.path,
        severity="warning" if row.klass == PINNED else "blocking",
        message=f"{row.klass}: {row.identifier}{supplied}",
        hint=row.fix or "nothing to change for this input",
    )


def assessment(meta: Metadata, *, date: str, started_at: str, finished_at: str, aliases: tuple[str, ...] = (),
               audit_run: str = "adopt", responsible_person: str | None = None) -> AuditResult:
    """The assessment of one version for ``date``: verdict LINEAGE_INSUFFICIENT whatever the classes are."""
    # what MLflow holds is the team's text (a repo URL with a token, a presigned dataset URI): the one redactor's
    rows = [replace(r, identifier=redact_text(r.identifier), why=redact_text(r.why)) for r in classify(meta)]
    n = counts(rows)
    summary = (f"{TIER_BASIS}: {n[PINNED]} input(s) pinned, {n[MUTABLE]} named but mutable, {n[MISSING]} missing; "
               "nothing was rebuilt")
    details = [f"{r.path}: {r.klass}: {r.identifier}" + (f" (fix: {r.fix})" if r.fix else "") for r in rows]
    if meta.supplied is not None:
        details.append(f"supplied after training by {meta.supplied.by} on {meta.supplied.at}: "
                       f"{meta.supplied.key} ({meta.supplied.sha256})")
    status = "fail" if n[MUTABLE] or n[MISSING] else "skipped"
    tags = redact_mapping({k: v for k, v in meta.version_tags.items() if not k.startswith("repro.audit.")})
    evidence = {}
    if meta.supplied is not None and meta.supplied.sha256:
        evidence["adopt.supplied"] = meta.supplied.sha256
    return AuditResult(
        audit_id=f"{AUDIT_ID_PREFIX}{date}",
        model=ModelInfo(name=meta.name, version=str(meta.version), aliases=list(aliases), tags=tags, run_id=meta.run_id,
                        uri=model_uri(meta.name, meta.version)),
        verdict=Verdict.LINEAGE_INSUFFICIENT,
        tiers={"lineage": TierResult(name="lineage", status=status, summary=summary, details=details)},
        started_at=started_at,
        finished_at=finished_at,
        audit_run=audit_run,
        findings=[finding(r) for r in rows],
        evidence=evidence,
        responsible_person=responsible_person,
        error=None if meta.run_found or not meta.run_id else f"run {meta.run_id} of this version no longer exists",
    )


def is_assessment(audit_id: str | None, verdict: str | None) -> bool:
    """Whether a ledger entry or result is an adoption assessment rather than an audit."""
    return verdict == Verdict.LINEAGE_INSUFFICIENT.value or str(audit_id or "").startswith(AUDIT_ID_PREFIX)


def recorded(meta: Metadata) -> bool:
    """Whether the SDK recorded this version: its record's digest is a tag of the version or of its run, or its run's
    anchoring param (the places ``auditor.registry`` reads it from)."""
    return any(str(where.get(TAG_RECORD_DIGEST) or "").strip() for where in (meta.version_tags, meta.tags, meta.params))


def _gate_class(f: Finding) -> str:
    """An input's class by the gate's finding on it: pinned unless blocking; missing when the code says it is absent."""
    if not f.blocking:
        return PINNED
    tail = f.code.rsplit(".", 1)[-1]
    return MISSING if tail in ("missing", "none", "lost", "unreadable") or tail.endswith("_missing") else MUTABLE


def last_audit(version_tags: Mapping[str, str]) -> dict[str, str | None] | None:
    """The version's last audit as its tags say (verdict, when, its lineage tier's status); None when never audited."""
    verdict = version_tags.get(TAG_VERDICT)
    if not verdict or is_assessment(None, verdict):
        return None
    return {"verdict": verdict, "at": version_tags.get(TAG_AUDIT_AT),
            "lineage": version_tags.get(f"{TAG_AUDIT_TIER_PREFIX}lineage")}


def recorded_row(ref: str, findings: list[Finding], version_tags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The sweep's row of a version the SDK recorded, by the audit's own rule: ``findings`` are the lineage gate's on
    its run record (or the blocking one that says the record cannot be read). Each input is pinned unless a blocking
    finding names it; the verdict is NOT_REPRODUCIBLE when one does (what its audit says without rebuilding), and
    there is none when the lineage is complete: only an audit's rebuild judges such a version (its last one, from
    the version's tags, is beside it: an audit also reads the data's bytes, which the sweep never does)."""
    classes = dict.fromkeys(SECTIONS, PINNED)
    for f in findings:
        section = re.split(r"[.:]", f.path, maxsplit=1)[0]
        klass = _gate_class(f)
        if klass != PINNED and CLASSES.index(klass) > CLASSES.index(classes.get(section, PINNED)):
            classes[section] = klass
    blocked = any(f.blocking for f in findings)
    return {"ref": ref, "verdict": Verdict.NOT_REPRODUCIBLE.value if blocked else None, "classes": classes,
            "report": None, "findings": [redact_mapping(f.model_dump()) for f in findings], "skipped": False,
            "recorded": True, "lineage": "blocked" if blocked else "complete", "audit": last_audit(version_tags or {})}
