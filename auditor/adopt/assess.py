"""A lineage assessment as an audit result: verdict LINEAGE_INSUFFICIENT, one finding per input, never a pass.

The assessment travels the audit's publish path unchanged (evidence, report, in-toto attestation, ledger entry,
MLflow anchor), so ``evidence verify`` holds it like any audit. What makes it an assessment and not an audit:
the verdict (``Verdict.LINEAGE_INSUFFICIENT``, exit 1, never reproduced), the audit id (``adopt-<date>``), no
run record (``record`` stays None: nothing was captured at training time), and its findings, whose codes are
``adopt.<input>.<class>`` (``auditor.adopt.rules``). Nothing was rebuilt, so no tier past lineage has evidence.
"""

from __future__ import annotations

from dataclasses import replace

from auditor.adopt.rules import CODE_OF, MISSING, MUTABLE, PINNED, Metadata, Row, classify, counts
from auditor.judge.result import AuditResult, ModelInfo, TierResult
from auditor.lineage.findings import Finding
from auditor.lineage.redact import redact_mapping, redact_text
from auditor.outcomes import Verdict
from auditor.tags import TAG_RECORD_DIGEST
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
    if meta.version_tags.get(TAG_RECORD_DIGEST):
        details.insert(0, f"this version was registered with a run record ({TAG_RECORD_DIGEST}): audit it with "
                          f"repro-audit audit {model_uri(meta.name, meta.version)} instead")
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
