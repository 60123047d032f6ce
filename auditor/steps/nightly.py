"""The nightly sequence: sample the registry under the budget, audit and publish each pick, then the summary."""

from __future__ import annotations

import json
import logging
from typing import Any

from auditor.errors import Findings
from auditor.judge.result import Verdict
from auditor.steps.common import Progress, now, redacted
from auditor.tags import TAG_COST_HOURS

log = logging.getLogger(__name__)


def sample(session: Any, date: str, *, models: str | None = None) -> dict[str, Any]:
    """Tonight's sample from the registry under the configured budget (see ``auditor.sampling``).

    ``models``, a shell pattern, keeps only the versions whose name (``credit-*``) or ``NAME/VERSION``
    (``credit-scorer/3``) matches.
    """
    from fnmatch import fnmatchcase

    from auditor.sampling import Budget, Candidate, choose

    settings = session.settings
    candidates = []
    for info in session.registry.list_versions():
        if models and not (fnmatchcase(info.name, models) or fnmatchcase(f"{info.name}/{info.version}", models)):
            continue
        candidate = Candidate.from_tags(info.name, str(info.version), info.aliases, dict(info.tags))
        if info.train_seconds and TAG_COST_HOURS not in info.tags:
            candidate = Candidate(**{**candidate.__dict__, "cost_hours": info.train_seconds / 3600})
        candidates.append(candidate)
    budget = Budget(max_models=settings.nightly_max_models, max_hours=settings.nightly_budget_hours,
                    production_aliases=settings.production_aliases, stale_after_days=settings.overdue_days,
                    recheck_unreproducible_days=settings.unreproducible_recheck_days)
    return choose(candidates, date, budget).to_dict()


def publish_summary(session: Any, date: str, sample: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the night's summary (every sampled model with its verdict or error), the coverage page and the index."""
    from auditor.report.publish import refresh

    by_ref = {r.get("ref"): r for r in results if r}
    rows = []
    for pick in sample.get("picks", []):
        row = by_ref.get(pick["ref"]) or {"ref": pick["ref"], "verdict": Verdict.ERROR.value, "report": None,
                                          "error": "the audit task failed (see the orchestrator's log)", "skipped": False}
        rows.append({**row, "reason": pick.get("reason")})
    summary = {"date": date, "hours": sample.get("hours"), "audits": rows, "skipped": sample.get("skipped", []), "written_at": now()}
    session.store.write(f"summaries/{date}.json", json.dumps(summary, indent=2, sort_keys=True).encode(), overwrite=True)
    refresh(session.store)
    _, page = session.coverage(write=True)  # the night has the registry's listing: the coverage page too
    return {**summary, "coverage": page}


def nightly(session: Any, date: str, *, audit_run: str | None, progress: Progress) -> dict[str, Any]:
    """The nightly sequence without Airflow: sample, audit and publish each through the one door, then the summary."""
    from auditor.steps.options import AuditOptions

    session.preflight_store()
    chosen = sample(session, date)
    if not chosen["picks"] and not chosen["skipped"]:
        raise Findings(f"the registry at {redacted(session.settings.tracking_uri)} has no registered model versions: nothing to audit",
                       hint="check MLFLOW_TRACKING_URI (or --tracking-uri), or register a model first")
    log.info("nightly %s: %d pick(s), %d skipped", date, len(chosen["picks"]), len(chosen["skipped"]))
    options = AuditOptions(date=date, audit_run=audit_run or f"cli-nightly-{date}", task=True)
    results = []
    for pick in chosen["picks"]:
        progress(f"auditing {pick['ref']} ({pick['reason']})")
        results.append(session.audit(pick["ref"], options, progress=progress).row)
    return publish_summary(session, date, chosen, results)
