"""Metric-against-band pictures as inline SVG, written by hand (no plotting library).

The pictures hold numbers only: metric names and other text from the audit
stay in the HTML around them, where the template escapes them. So the SVG
markup can be inlined as-is without ever carrying data into markup.
"""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from auditor.judge.result import MetricResult

COLORS = {"band": "#cfe8d5", "spread": "#6b8f71", "registered": "#1f3b73", "inside": "#2e7d32", "outside": "#c62828"}


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _limits(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.15 or abs(hi) * 0.05 or 0.05
    return lo - pad, hi + pad


def _ticks(lo: float, hi: float) -> tuple[list[float], int]:
    """About five round tick positions in [lo, hi], and the decimals that tell them apart."""
    span = hi - lo
    raw = span / 5 if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) * step
    ticks = [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]
    decimals = max(0, -math.floor(math.log10(step) + 1e-12)) + (1 if step / power == 2.5 else 0)
    return ticks, decimals


def metric_svg(metric: MetricResult, index: int) -> Markup | None:
    """One strip for one metric: band, calibration spread, registered value, each rerun. None if nothing to draw.

    Written by hand (no matplotlib: its import and first figure cost about a second of every audit's
    report): the same evidence gives the same bytes, and every value in the markup is a number we format.
    """
    registered = _num(metric.registered)
    reruns = [v for v in (_num(x) for x in metric.rebuilt) if v is not None]
    band = metric.band
    spread = band.spread if band else {}
    values = [*reruns] + ([registered] if registered is not None else [])
    if band:
        values += [v for v in (_num(band.lower), _num(band.upper)) if v is not None]
    if not values:
        return None
    width, height, left, right, top, axis = 461, 79, 14, 447, 6, 54  # the axes' box in px, the x axis at y=axis
    lo, hi = _limits(values)

    def x(v: float) -> str:
        return f"{left + (v - lo) / (hi - lo) * (right - left):.2f}"

    def y(fraction: float) -> str:  # 0 at the axis, 1 at the top
        return f"{axis - fraction * (axis - top):.2f}"

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'class="metric-strip" id="m{index}" role="img">']
    if band and _num(band.lower) is not None and _num(band.upper) is not None:
        parts.append(f'<rect x="{x(band.lower)}" y="{top}" width="{float(x(band.upper)) - float(x(band.lower)):.2f}" height="{axis - top}" fill="{COLORS["band"]}"/>')
        for edge in (band.lower, band.upper):
            parts.append(f'<line x1="{x(edge)}" y1="{top}" x2="{x(edge)}" y2="{axis}" stroke="{COLORS["spread"]}" stroke-width="0.8"/>')
    mean, std = _num(spread.get("mean")), _num(spread.get("std"))
    if mean is not None and std is not None:
        a, b, c = x(mean - std), x(mean + std), y(0.75)
        parts.append(f'<path d="M{a} {c}H{b}M{a} {float(c) - 3:.2f}v6M{b} {float(c) - 3:.2f}v6M{x(mean)} {float(c) - 4:.2f}v8" '
                     f'stroke="{COLORS["spread"]}" stroke-width="1.2" fill="none"/>')
    smin, smax = _num(spread.get("min")), _num(spread.get("max"))
    if smin is not None and smax is not None:
        parts.append(f'<line x1="{x(smin)}" y1="{y(0.75)}" x2="{x(smax)}" y2="{y(0.75)}" stroke="{COLORS["spread"]}" stroke-width="0.6" stroke-dasharray="1,2"/>')
    if registered is not None:
        cx, cy = float(x(registered)), float(y(0.5))
        parts.append(f'<path d="M{cx:.2f} {cy - 5:.2f}L{cx + 5:.2f} {cy:.2f}L{cx:.2f} {cy + 5:.2f}L{cx - 5:.2f} {cy:.2f}Z" fill="{COLORS["registered"]}"/>')
    for value in reruns:
        inside = band is None or band.lower <= value <= band.upper
        parts.append(f'<circle cx="{x(value)}" cy="{y(0.25)}" r="3" fill="{COLORS["inside" if inside else "outside"]}"/>')
    parts.append(f'<line x1="{left}" y1="{axis}" x2="{right}" y2="{axis}" stroke="#000" stroke-width="0.8"/>')
    ticks, decimals = _ticks(lo, hi)
    for tick in ticks:
        parts.append(f'<line x1="{x(tick)}" y1="{axis}" x2="{x(tick)}" y2="{axis + 3.5}" stroke="#000" stroke-width="0.8"/>'
                     f'<text x="{x(tick)}" y="{axis + 13}" font-size="7" font-family="DejaVu Sans, sans-serif" text-anchor="middle">{tick:.{decimals}f}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - numbers only, see module docstring
