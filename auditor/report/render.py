"""HTML from the JSON evidence: one self-contained page per audit (inline CSS and SVG, no script).

Jinja2 with autoescaping on for every template, and nothing from the evidence
is ever marked safe: the only ``Markup`` is the SVG of ``plots`` (numbers only)
and our own static CSS/JS files.
"""

from __future__ import annotations

import base64
import hashlib
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from auditor.report import plots, view
from auditor.report.evidence import audit_of

TEMPLATES = Path(__file__).with_name("templates")


def fmt(value: Any, digits: int = 6) -> str:
    """Numbers for people: significant digits, text kept as text, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return f"{value:.{digits}g}"
    return str(value)


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
    env.globals["static"] = static
    return env


@lru_cache(maxsize=8)
def static(name: str) -> Markup:
    """Our own CSS or script file, inlined verbatim (never data)."""
    return Markup((TEMPLATES / name).read_text(encoding="utf-8"))  # noqa: S704 - a file we ship


@lru_cache(maxsize=8)
def script_hash(name: str) -> str:
    """The CSP hash source for an inline script file, so the page allows that script and nothing else."""
    raw = hashlib.sha256((TEMPLATES / name).read_bytes()).digest()
    return "'sha256-" + base64.b64encode(raw).decode() + "'"


def render_report(doc: dict[str, Any]) -> str:
    """The HTML report for one evidence document (see ``auditor.report.evidence``)."""
    audit = audit_of(doc)
    ctx = view.context(doc, audit)
    ctx["metric_rows"] = [
        {"metric": m, "svg": plots.metric_svg(m, i)} for i, m in enumerate(audit.metrics)
    ]
    return environment().get_template("report.html.j2").render(**ctx)


def render_report_bytes(doc: dict[str, Any]) -> bytes:
    """``render_report`` encoded as the UTF-8 file that is published."""
    return render_report(doc).encode("utf-8")
