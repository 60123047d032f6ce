"""The index page over every published audit, built from the ledger alone (one read, not one per report).

A sortable, filterable table (a few lines of our own inline script, allowed by
a CSP hash) and, per model, the verdicts over time and each metric's distance
to its band over time. The small SVG sparklines are written by hand: a
matplotlib figure per model costs ~50 ms, far too much for thousands of audits.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

from auditor.report.render import environment, script_hash
from auditor.report.view import VERDICT_COLORS
from auditor.storage.base import BlobStore

INDEX_FILE = "index.html"
#: the last night's status, written by every nightly publish: ``{"date", "failed"}``, ``failed`` the reason a night
#: stopped before auditing (``auditor.steps.nightly.publish_failed_night``) or null; the index and coverage pages
#: lead with it when the night failed, so a night that audited nothing never reads as "0 audits of 0 models"
NIGHT_FILE = "night.json"
# Only links the publisher itself makes: a ledger edited to hold "javascript:…" must not become one.
_SAFE_HREF = re.compile(r"^[A-Za-z0-9_-]+\.html$")
_MAX_CHIPS = 60
_SPARK_POINTS = 60


def _version_key(version: str) -> str:
    try:
        number = float(version)
    except (TypeError, ValueError):
        return ""
    return repr(number) if math.isfinite(number) else ""


def _audit_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per ledger entry, in time order (unparseable dates last, then by sequence number)."""
    rows = [
        {
            "seq": e.get("seq"),
            "model": str((e.get("audit") or {}).get("model")),
            "version": str((e.get("audit") or {}).get("version")),
            "audit_id": str((e.get("audit") or {}).get("audit_id")),
            "verdict": str(e.get("verdict")),
            "date": e.get("date") or e.get("published_at") or "",
            "report": (e.get("report") or {}).get("key") or "",
            "kind": _kind(e),
        }
        for e in entries
    ]
    return sorted(rows, key=_time_order)


def _kind(entry: dict[str, Any]) -> str:
    """``adoption`` for a lineage assessment of a version trained without the SDK (``auditor.adopt``), else ``audit``."""
    from auditor.adopt.assess import is_assessment

    return "adoption" if is_assessment((entry.get("audit") or {}).get("audit_id"), entry.get("verdict")) else "audit"


def _metric_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (entry, metric) with a numeric distance to its band, in time order."""
    rows = []
    for e in entries:
        for name, m in (e.get("metrics") or {}).items():
            distance = m.get("distance")
            if isinstance(distance, (int, float)) and not math.isnan(distance):
                rows.append({"model": str((e.get("audit") or {}).get("model")), "seq": e.get("seq"),
                             "date": e.get("date") or e.get("published_at") or "", "metric": str(name),
                             "distance": float(distance)})
    return sorted(rows, key=_time_order)


def _newest_first(row: dict[str, Any]) -> tuple[Any, ...]:
    """Newest first, then the higher sequence number; unparseable dates last (by sequence number, highest first)."""
    missing, ts, seq_missing, seq = _time_order(row)
    return (missing, -ts, seq_missing, -seq)


def _time_order(row: dict[str, Any]) -> tuple[Any, ...]:
    when, seq = parse_when(row["date"]), row["seq"]
    seq_ok = isinstance(seq, (int, float)) and not isinstance(seq, bool)
    return (when is None, when.timestamp() if when is not None else 0.0, not seq_ok, seq if seq_ok else 0)


#: a sparkline's size: px per audit, its height and the band edge's line (readable at a glance, a dot per audit)
_SPARK_STEP, _SPARK_HEIGHT = 14, 44
_SPARK_MID = _SPARK_HEIGHT / 2


def _spark(distances: list[float]) -> dict[str, Any]:
    values = distances[-_SPARK_POINTS:]
    scale = max((abs(v) for v in values), default=0.0) or 1.0
    coords = [(i * _SPARK_STEP + 5, round(_SPARK_MID - (_SPARK_MID - 5) * v / scale, 2)) for i, v in enumerate(values)]
    return {
        "width": max(len(values) * _SPARK_STEP + 10, 60), "height": _SPARK_HEIGHT, "mid": _SPARK_MID,
        "points": " ".join(f"{x},{y}" for x, y in coords),
        "outside": [c for c, v in zip(coords, values, strict=True) if v > 0],
        "dots": [(x, y, f"{v:+.3g}") for (x, y), v in zip(coords, values, strict=True)],  # each audit, its distance on hover
    }


def _models(audits: list[dict[str, Any]], metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model (by name): its audit count, latest date, the last verdict chips and each metric's sparkline."""
    history: dict[str, list[dict[str, Any]]] = {}
    series: dict[tuple[str, str], list[float]] = {}
    for row in metrics:
        series.setdefault((row["model"], row["metric"]), []).append(row["distance"])
    for (model, metric), values in sorted(series.items()):
        history.setdefault(model, []).append({
            "metric": metric, "latest": values[-1], "worst": max(values), "n": len(values),
            "n_outside": sum(1 for v in values if v > 0), **_spark(values),
        })
    by_model: dict[str, list[dict[str, Any]]] = {}
    for row in audits:
        by_model.setdefault(row["model"], []).append(row)
    models = []
    for model, rows in sorted(by_model.items()):
        chips = [{"x": i * 10, "color": VERDICT_COLORS.get(r["verdict"], "#5b636e"), "title": f"{r['date']} v{r['version']} {r['verdict']}"}
                 for i, r in enumerate(rows[-_MAX_CHIPS:])]
        models.append({"name": model, "count": len(rows), "latest": rows[-1]["date"], "chips": chips,
                       "chips_width": max(len(chips) * 10, 10), "metrics": history.get(model, [])})
    return models


def read_night(store: BlobStore) -> dict[str, Any] | None:
    """The last night's status (``NIGHT_FILE``) when it says the night failed; None otherwise."""
    if not store.exists(NIGHT_FILE):
        return None
    night = json.loads(store.read(NIGHT_FILE))
    return night if isinstance(night, dict) and night.get("failed") else None


def render_index(entries: list[dict[str, Any]], *, coverage_href: str | None = None, night: dict[str, Any] | None = None) -> str:
    """The index page for these ledger entries (linking the coverage page when there is one), led by the last
    night's failure when ``night`` (``read_night``) names one."""
    audits, metrics = _audit_rows(entries), _metric_rows(entries)
    newest = sorted(audits, key=_newest_first)
    rows = [
        {
            "seq": r["seq"], "model": r["model"], "version": r["version"], "version_key": _version_key(r["version"]),
            "audit_id": r["audit_id"], "verdict": r["verdict"], "date": r["date"], "kind": r["kind"],
            "date_text": parse_when(r["date"]).strftime("%Y-%m-%d %H:%M") if parse_when(r["date"]) is not None else r["date"],
            "href": r["report"] if _SAFE_HREF.match(r["report"]) else None,
        }
        for r in newest
    ]
    counts = sorted(Counter(r["verdict"] for r in audits).items())
    return environment().get_template("index.html.j2").render(
        audits=rows,
        models=_models(audits, metrics),
        counts=counts,
        verdicts=list(VERDICT_COLORS),
        head=entries[-1].get("hash") if entries else None,
        script_hash=script_hash("index.js"),
        coverage_href=coverage_href,
        night=night,
    )


def write_index(store: BlobStore, entries: list[dict[str, Any]]) -> None:
    """(Re)write ``index.html`` in ``store`` from the ledger entries."""
    coverage_href = COVERAGE_FILE if store.exists(COVERAGE_FILE) else None
    page = render_index(entries, coverage_href=coverage_href, night=read_night(store))
    store.write(INDEX_FILE, page.encode("utf-8"), overwrite=True)


# -- inventory coverage: every registered version against the ledger ---------------------------
COVERAGE_FILE = "coverage.html"
#: "adoption": assessed from plain MLflow metadata (``repro-audit adopt``) but never audited
COVERAGE_ORDER = {"never audited": 0, "adoption": 1, "overdue": 2, "current": 3, "retired": 4}


def coverage(versions: list[dict[str, Any]], entries: list[dict[str, Any]], *, now: Any, overdue_days: int) -> list[dict[str, Any]]:
    """Each registered version with its last audit, and whether it is current, overdue, never audited or retired.

    ``versions`` are plain rows ``{"model", "version", "aliases", "tag_audit_at", "retired"}`` (the registry's
    listing, made by the caller: this module reads no registry); the ledger's entries say when each
    version's audit was published. A version whose audit the ledger does not hold but whose registry
    tag ``repro.audit.at`` says it was audited (published elsewhere) counts by that tag, and says so.
    """
    import datetime as dt

    last: dict[tuple[str, str], dict[str, Any]] = {}
    assessed: dict[tuple[str, str], dict[str, Any]] = {}  # adoption assessments: they never count as audits
    for e in entries:
        audit = e.get("audit") or {}
        key = (str(audit.get("model")), str(audit.get("version")))
        when = parse_when(e.get("date") or e.get("published_at"))
        if when is None:
            continue
        seen_by = assessed if _kind(e) == "adoption" else last
        if key not in seen_by or when >= seen_by[key]["when"]:
            report = (e.get("report") or {}).get("key") or ""
            seen_by[key] = {"when": when, "verdict": str(e.get("verdict")),
                            "href": report if _SAFE_HREF.match(report) else None, "source": "ledger"}
    rows = []
    for v in versions:
        key = (str(v["model"]), str(v["version"]))
        seen = last.get(key)
        from auditor.adopt.assess import is_assessment

        tag_is_assessment = is_assessment(None, v.get("tag_verdict"))
        if seen is None and parse_when(v.get("tag_audit_at")) is not None and not tag_is_assessment:
            seen = {"when": parse_when(v["tag_audit_at"]), "verdict": v.get("tag_verdict") or "", "href": None, "source": "registry tag"}
        age = None if seen is None else (now - seen["when"]) / dt.timedelta(days=1)
        if v.get("retired"):  # its owner's mark (tag repro.retired): never sampled, so never overdue
            status = "retired"
        elif seen is None and (key in assessed or (tag_is_assessment and parse_when(v.get("tag_audit_at")) is not None)):
            status = "adoption"
            seen = assessed.get(key) or {"when": parse_when(v["tag_audit_at"]), "verdict": v.get("tag_verdict") or "",
                                         "href": None, "source": "registry tag"}
        elif seen is None:
            status = "never audited"
        else:
            status = "overdue" if age > overdue_days else "current"
        rows.append({
            "model": key[0], "version": key[1], "version_key": _version_key(key[1]), "aliases": list(v.get("aliases") or []),
            "status": status, "css": _status_css(status, seen["verdict"] if seen else None),
            "last": seen["when"].strftime("%Y-%m-%d %H:%M") if seen else None,
            "age_days": None if age is None else int(age), "verdict": seen["verdict"] if seen else None,
            "href": seen["href"] if seen else None, "source": seen["source"] if seen else None,
        })
    rows.sort(key=lambda r: (COVERAGE_ORDER[r["status"]], -(r["age_days"] or 0), r["model"],
                             float(r["version_key"]) if r["version_key"] else math.inf, r["version"]))
    return rows


def _status_css(status: str, verdict: str | None) -> str:
    """The status pill's class: "current" is green only beside a reproduced verdict (never green beside a red one)."""
    from auditor.outcomes import REPRODUCED

    if status == "current" and verdict not in REPRODUCED:
        return "current-not-reproduced"
    return status.replace(" ", "-")


def parse_when(text: Any) -> Any:
    """A published ISO timestamp as an aware datetime (UTC when it names no zone); None when it is not one."""
    import datetime as dt

    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _check_names() -> dict[str, str]:
    """The settings the checks below the coverage table name (their one home is ``auditor.settings``)."""
    from auditor.settings import DEPLOYED_ARTIFACTS, PRODUCTION_ALIASES, RETENTION_YEARS

    return {"PRODUCTION_ALIASES": PRODUCTION_ALIASES.name, "DEPLOYED_ARTIFACTS": DEPLOYED_ARTIFACTS.name,
            "RETENTION_YEARS": RETENTION_YEARS.name}


def render_coverage(rows: list[dict[str, Any]], *, overdue_days: int, as_of: str, registry: str,
                    checks: dict[str, Any] | None = None, night: dict[str, Any] | None = None) -> str:
    """The inventory-coverage page: every registered version, its last audit, overdue and never-audited first;
    with ``checks``, the production and retention checks of the same night (``auditor.steps.production``,
    ``auditor.steps.retention``) below it."""
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in COVERAGE_ORDER}
    return environment().get_template("coverage.html.j2").render(
        rows=rows, counts=counts, overdue_days=overdue_days, as_of=as_of, registry=registry,
        script_hash=script_hash("index.js"), checks=checks or {}, check_names=_check_names(), night=night,
    )


#: what a coverage page was rendered from, beside it: ``evidence verify`` renders the page again from these inputs
#: and the ledger entries it was written against, so an edited page is caught like an edited index
COVERAGE_INPUTS = "coverage.json"


def write_coverage(store: BlobStore, versions: list[dict[str, Any]], entries: list[dict[str, Any]], *, now: Any,
                   overdue_days: int, registry: str, checks: dict[str, Any] | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(Re)write ``coverage.html`` and its inputs (``coverage.json``) in ``store``; returns its key and its rows."""
    inputs = {"versions": versions, "now": now.isoformat(), "overdue_days": overdue_days, "registry": registry,
              "ledger_seq": max((int(e.get("seq", -1)) for e in entries), default=-1)}
    if checks:
        inputs["checks"] = checks
    store.write(COVERAGE_INPUTS, json.dumps(inputs, indent=1, sort_keys=True).encode("utf-8"), overwrite=True)
    page, rows = coverage_page(inputs, entries)
    store.write(COVERAGE_FILE, page, overwrite=True)
    return COVERAGE_FILE, rows


def coverage_page(inputs: dict[str, Any], entries: list[dict[str, Any]]) -> tuple[bytes, list[dict[str, Any]]]:
    """The coverage page's bytes and rows from its stored inputs and the entries up to the ledger head it names."""
    import datetime as dt

    now = dt.datetime.fromisoformat(str(inputs["now"]))
    upto = [e for e in entries if int(e.get("seq", -1)) <= int(inputs["ledger_seq"])]
    rows = coverage(list(inputs["versions"]), upto, now=now, overdue_days=int(inputs["overdue_days"]))
    page = render_coverage(rows, overdue_days=int(inputs["overdue_days"]), as_of=now.strftime("%Y-%m-%d %H:%M UTC"),
                           registry=str(inputs["registry"]), checks=inputs.get("checks"), night=inputs.get("night"))
    return page.encode("utf-8"), rows
