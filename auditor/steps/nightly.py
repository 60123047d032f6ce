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
    _write_night(session.store, date, None)
    refresh(session.store)
    _, page = session.coverage(write=True)  # the night has the registry's listing: the coverage page too
    return {**summary, "coverage": page}


#: the XCom key under which a night's task leaves the error it failed with (``auditor.airflow.reported_failure``)
FAILURE_KEY = "failure"
#: the night's tasks that fail by design on red verdicts (after publishing them): every other failure is the night's own
RED_BY_DESIGN = ("verdict", "publish", "retention")


def _write_night(store: Any, date: str, failed: str | None) -> None:
    from auditor.report.index import NIGHT_FILE

    store.write(NIGHT_FILE, json.dumps({"date": date, "failed": failed}, sort_keys=True).encode(), overwrite=True)


def publish_failed_night(session: Any, date: str, reason: str) -> dict[str, Any]:
    """Say on the index and coverage pages that the night of ``date`` failed before auditing, and why.

    Reads no registry (it may be what failed): the coverage page is rendered again from its stored inputs."""
    from auditor.report import ledger
    from auditor.report.index import COVERAGE_FILE, COVERAGE_INPUTS, coverage_page
    from auditor.report.publish import refresh

    reason = redacted(reason)
    _write_night(session.store, date, reason)
    if session.store.exists(COVERAGE_INPUTS):
        inputs = {**json.loads(session.store.read(COVERAGE_INPUTS)), "night": {"date": date, "failed": reason}}
        session.store.write(COVERAGE_INPUTS, json.dumps(inputs, indent=1, sort_keys=True).encode("utf-8"), overwrite=True)
        session.store.write(COVERAGE_FILE, coverage_page(inputs, ledger.entries(session.store))[0], overwrite=True)
    refresh(session.store)
    return {"date": date, "failed": reason, "audits": [], "skipped": [], "written_at": now()}


def publish_night(session: Any, date: str, sample: dict[str, Any] | None, results: list[dict[str, Any]],
                  failure: str | None) -> dict[str, Any]:
    """``publish_summary`` of a night that sampled; ``publish_failed_night`` (naming ``sample`` and its error) of one
    whose sample failed."""
    if sample is None:
        return publish_failed_night(session, date, f"sample: {failure or 'failed (see its log)'}")
    return publish_summary(session, date, sample, results)


def night_failures(states: dict[str, str], failures: dict[str, str], summary: dict[str, Any] | None) -> list[str]:
    """What made a DAG run of the night fail other than the red verdicts it publishes by design: one line per task.

    ``states``: each task's state (a mapped one as ``task[ref]``); ``failures``: the error a task left under
    ``FAILURE_KEY``; ``summary``: what ``publish`` returned (its ``failed`` names a night stopped before auditing).
    """
    lines = [f"{task}: {failures[task]}" for task in sorted(failures)]
    if summary and summary.get("failed") and not any(t.startswith("sample") for t in failures):
        lines.append(f"publish: the night of {summary.get('date')} failed before auditing: {summary['failed']}")
    for task, state in sorted(states.items()):
        base = task.split("[", 1)[0]
        if state == "failed" and task not in failures and (base not in RED_BY_DESIGN or (base == "publish" and not summary)):
            lines.append(f"{task}: failed (its error is in the task's log)")
    return lines


def nightly(session: Any, date: str, *, audit_run: str | None, progress: Progress) -> dict[str, Any]:
    """The nightly sequence without Airflow: sample, audit and publish each through the one door, then the summary."""
    from auditor.steps.options import AuditOptions

    session.preflight_store()
    try:
        chosen = sample(session, date)
    except Exception as exc:  # the night stopped before auditing: every page says so, then the error goes on
        from auditor.errors import Meaning, describe, meaning_of

        if meaning_of(exc) != Meaning.CALLER:  # a usage error (a mistyped URI) is answered and writes nothing
            publish_failed_night(session, date, f"sample: {describe(exc)}")
        raise
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
