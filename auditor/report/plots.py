"""Metric-against-band pictures as inline SVG (matplotlib, Agg-free SVG canvas, imported lazily).

The pictures hold numbers only: metric names and other text from the audit
stay in the HTML around them, where the template escapes them. So the SVG
markup can be inlined as-is without ever carrying data into markup.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any

from markupsafe import Markup

from auditor.judge.result import MetricResult

# Fixed salt and no date: the same evidence gives the same bytes, so a report
# can be re-rendered from its JSON and compared.
_RC = {"svg.hashsalt": "repro-audit", "svg.fonttype": "path", "font.size": 8, "font.family": "DejaVu Sans"}
_LOCK = threading.Lock()  # rc_context mutates process-global state
_IDS = re.compile(r'(id="|url\(#|xlink:href="#|href="#)([^")]+)')

COLORS = {"band": "#cfe8d5", "spread": "#6b8f71", "registered": "#1f3b73", "inside": "#2e7d32", "outside": "#c62828"}


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _limits(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.15 or abs(hi) * 0.05 or 0.05
    return lo - pad, hi + pad


def metric_svg(metric: MetricResult, index: int) -> Markup | None:
    """One strip for one metric: band, calibration spread, registered value, each rerun. None if nothing to draw."""
    registered = _num(metric.registered)
    reruns = [v for v in (_num(x) for x in metric.rebuilt) if v is not None]
    band = metric.band
    spread = band.spread if band else {}
    values = [*reruns] + ([registered] if registered is not None else [])
    if band:
        values += [v for v in (_num(band.lower), _num(band.upper)) if v is not None]
    if not values:
        return None
    from matplotlib import rc_context
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    with _LOCK, rc_context(_RC):
        fig = Figure(figsize=(6.4, 1.1), dpi=72)
        FigureCanvasSVG(fig)
        ax = fig.add_axes((0.03, 0.34, 0.94, 0.6))
        if band and _num(band.lower) is not None and _num(band.upper) is not None:
            ax.axvspan(band.lower, band.upper, color=COLORS["band"], zorder=0)
            ax.axvline(band.lower, color=COLORS["spread"], lw=0.8)
            ax.axvline(band.upper, color=COLORS["spread"], lw=0.8)
        mean, std = _num(spread.get("mean")), _num(spread.get("std"))
        if mean is not None and std is not None:
            ax.errorbar([mean], [0.75], xerr=[[std], [std]], fmt="|", color=COLORS["spread"], capsize=3, lw=1.2)
        lo, hi = _num(spread.get("min")), _num(spread.get("max"))
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [0.75, 0.75], color=COLORS["spread"], lw=0.6, ls=":")
        if registered is not None:
            ax.plot([registered], [0.5], marker="D", ms=7, color=COLORS["registered"], ls="none")
        for value in reruns:
            inside = band is None or band.lower <= value <= band.upper
            ax.plot([value], [0.25], marker="o", ms=6, ls="none", color=COLORS["inside" if inside else "outside"])
        ax.set_ylim(0, 1)
        ax.set_xlim(*_limits(values))
        ax.set_yticks([])
        for side in ("left", "right", "top"):
            ax.spines[side].set_visible(False)
        ax.tick_params(axis="x", labelsize=7)
        from io import StringIO

        out = StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    svg = out.getvalue()
    svg = svg[svg.index("<svg") :]
    # Several SVGs share one HTML document: keep their ids (clip paths, markers) apart.
    svg = _IDS.sub(lambda m: f"{m.group(1)}m{index}-{m.group(2)}", svg)
    return Markup(svg)  # noqa: S704 - numbers only, see module docstring
