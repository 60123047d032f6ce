"""HTML from the JSON evidence: one self-contained page per audit (inline CSS and SVG, no script).

Jinja2 with autoescaping on for every template, and nothing from the evidence
is ever marked safe: the only ``Markup`` is the SVG of ``plots`` (numbers only)
and our own static CSS/JS files.
"""

from __future__ import annotations

import base64
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from auditor.digests import sha256_file_raw
from auditor.report import plots, regmap, view
from auditor.report.evidence import audit_of
from auditor.report.headline import SPREAD_CAUSES, WEIGHT_CAUSES, cause
from auditor.report.tidy import fmt, tag_lines, ticks  # fmt: numbers for people, one home for the page and its tags
from auditor.settings import OVERDUE_DAYS, SIGNING_KEY
from auditor.tags import TAG_BANDS
from auditor.uris import visible

TEMPLATES = Path(__file__).with_name("templates")


def fmt_seconds(value: float | None) -> str:
    """A duration as ``1 h 02 min``, ``3 min 05 s`` or ``4.2 s``."""
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(round(value)), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


# An absolute local path or file:// URI inside a text, not the path part of models:/, s3:// or https://.
_LOCAL_PATH = re.compile(r"(?<![\w:/.~-])(?:file://)?/(?:[^\s/@,;()'\"<>]+/)+[^\s/@,;()'\"<>]+")


def short_uri(text: Any) -> Markup:
    """A text whose machine paths are shown by their last part (relative to their store or folder), the
    full path on hover (``title``); everything escaped."""
    text = "" if text is None else str(text)
    out, last = [], 0
    for match in _LOCAL_PATH.finditer(text):
        full = match.group(0)
        out.append(escape(text[last : match.start()]))
        out.append(Markup('<span class="path" title="{}">…/{}</span>').format(full, full.rstrip("/").rsplit("/", 1)[-1]))
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("").join(out)


def css_string(text: Any) -> Markup:
    """``text`` as a CSS string literal, every character that could end it (or the ``<style>``) hex-escaped."""
    safe = "".join(c if c.isalnum() or c in " .-_:·" else f"\\{ord(c):06x}" for c in str(text))
    return Markup(f'"{safe}"')  # noqa: S704 - only alphanumerics and hex escapes


_LINKS = (("mlflow_version_url", "MLflow model version"), ("audit_run_url", "MLflow audit run"))


def links(doc: dict[str, Any]) -> list[dict[str, str | None]]:
    """Links to the MLflow model version and audit run, when the evidence knows them (http(s) only)."""
    places = [doc, doc.get("audit") or {}, doc.get("mlflow") if isinstance(doc.get("mlflow"), dict) else {}]
    found = []
    for key, label in _LINKS:
        value = next((p.get(key) for p in places if isinstance(p.get(key), str) and p.get(key)), None)
        if value:
            href = value if re.match(r"^https?://[^\s\"'<>]+$", value) else None
            found.append({"label": label, "href": href, "text": value})
    run = next((p.get("mlflow_run") for p in places if p.get("mlflow_run")), None)
    if run and not any(link["label"] == "MLflow audit run" for link in found):
        run_id = run.get("run_id") if isinstance(run, dict) else str(run)
        if run_id:
            found.append({"label": "MLflow audit run", "href": None, "text": str(run_id)})
    return found


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The one Jinja environment: autoescape on for every template, strict about undefined names."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["seconds"] = fmt_seconds
    env.filters["short_uri"] = short_uri
    env.filters["css_string"] = css_string
    env.filters["visible"] = visible  # a registry-provided name, its hidden characters written out (auditor.uris)
    env.filters["ticks"] = ticks  # our messages' `backticked` commands as code
    env.filters["tag_lines"] = tag_lines
    env.globals["static"] = static
    # names the pages print come from their one home, as in the Python modules
    env.globals["names"] = {"TAG_BANDS": TAG_BANDS, "SIGNING_KEY": SIGNING_KEY.name, "OVERDUE_DAYS": OVERDUE_DAYS.name}
    return env


@lru_cache(maxsize=8)
def static(name: str) -> Markup:
    """Our own CSS or script file, inlined verbatim (never data)."""
    return Markup((TEMPLATES / name).read_text(encoding="utf-8"))  # noqa: S704 - a file we ship


@lru_cache(maxsize=8)
def script_hash(name: str) -> str:
    """The CSP hash source for an inline script file, so the page allows that script and nothing else."""
    raw = sha256_file_raw(TEMPLATES / name)
    return "'sha256-" + base64.b64encode(raw).decode() + "'"


def render_report(doc: dict[str, Any]) -> str:
    """The HTML report for one evidence document (see ``auditor.report.evidence``)."""
    audit = audit_of(doc)
    ctx = view.context(doc, audit)
    ctx["links"] = links(doc)
    ctx["see_problems"] = view.SEE_PROBLEMS
    ctx["page_header"] = f"repro-audit · {audit.model.name} v{audit.model.version} · {audit.verdict.value}"
    ctx["metric_rows"] = [
        {"metric": m, "svg": plots.metric_svg(m, i)} for i, m in enumerate(audit.metrics)
    ]
    ctx["regmap"] = regmap.for_report(doc)
    floor = next((c.get("floor") for c in audit.calibrations if c.get("judged") and c.get("floor")), None)
    ctx["floor"] = floor
    failed = cause(audit)
    ctx["weights_failed"] = failed is not None and failed.key in WEIGHT_CAUSES
    ctx["failed_key"] = failed.key if failed is not None else None
    ctx["flips_svg"] = _flips_picture(audit.evidence or {})
    ctx["twin"] = _twin(audit.evidence or {})
    ctx["spread_fails"] = ctx["failed_key"] in SPREAD_CAUSES
    ctx["floor_svg"] = (plots.floor_svg(audit.weight_diff, floor, spread_fails=ctx["spread_fails"])
                        if audit.weight_diff is not None and not audit.weight_diff.identical else None)
    return environment().get_template("report.html.j2").render(**ctx)


def _flips_picture(evidence: dict[str, Any]) -> Markup | None:
    """Where the decisions flip, by score (``predictions.flips_by_score``); None when none flips or it is unreadable."""
    import json

    try:
        bins = json.loads(evidence.get("predictions.flips_by_score") or "[]")
        threshold = float(evidence["predictions.threshold"]) if evidence.get("predictions.threshold") else None
        return plots.flips_svg(bins, threshold)
    except (ValueError, TypeError):  # an evidence file from another version: the numbers above still say it
        return None


def _twin(evidence: dict[str, Any]) -> dict[str, Any] | None:
    """The first divergent tree beside its registered twin (``model.first_tree``), rows as (node, a, b, differs)."""
    import json

    try:
        twin = json.loads(evidence.get("model.first_tree") or "null")
        if not isinstance(twin, dict):
            return None
        rows = [(int(n), str(a), str(b), a != b) for n, a, b in twin["nodes"]]
        return {"tree": int(twin["tree"]), "rows": rows}
    except (ValueError, TypeError, KeyError):  # an evidence file from another version: the findings still say it
        return None


def render_report_bytes(doc: dict[str, Any]) -> bytes:
    """``render_report`` encoded as the UTF-8 file that is published."""
    return render_report(doc).encode("utf-8")
