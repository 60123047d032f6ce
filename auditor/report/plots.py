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

COLORS = {"band": "#cfe8d5", "spread": "#6b8f71", "registered": "#1f3b73", "inside": "#2e7d32", "outside": "#c62828",
          "spread_fails": "#f3c7c7", "not_judged": "#8a929c"}


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


def _log_axis(values: list[float]) -> tuple[float, float]:
    """Powers of ten around the positive values (a log axis: floors and distances span orders of magnitude)."""
    lo = 10 ** (math.floor(math.log10(min(values))) - 1)  # a decade below the least, so the smallest bar has length
    hi = 10 ** math.ceil(math.log10(max(values)))
    return lo, max(hi, lo * 100)


def floor_svg(diff: Any, floor: dict[str, Any] | None, *, spread_fails: bool = False) -> Markup | None:
    """The rebuild's weight distance against the same-seed floor: per measure (max |Δ|, relative L2) the largest
    distance between same-seed reruns (green bar), the limit the judge holds a rebuild to (dashed, the floor times
    its margin) and the rebuild's distance (dot, red beyond the limit). Log axis. None when there is nothing to draw.

    ``diff`` is a ``WeightDiff``; ``floor`` what the report's evidence holds of the judged calibration's floor.
    ``spread_fails``: the spread itself is the failing evidence (same-seed reruns that should be bit-identical, or a
    noise claim the verification reruns did not bear out): the bar is drawn red, the limit is left out (no rebuild is
    judged against it) and the dot grey, so the picture shows what the headline says.
    """
    limits = (floor or {}).get("thresholds") or {}
    rows = []
    for key, label in (("max_abs", "max |Δ|"), ("rel_l2", "rel L2")):
        rows.append((label, _num(getattr(diff, key, None)), _num((floor or {}).get(key)), _num(limits.get(key))))
    positive = [v for row in rows for v in row[1:] if v is not None and v > 0]
    if not positive or all(row[1] is None for row in rows):
        return None
    lo, hi = _log_axis(positive)
    width, left, right, row_h, top = 461, 62, 447, 26, 6
    axis = top + row_h * len(rows)

    def x(v: float) -> float:
        v = min(max(v, lo), hi)  # a zero floor (bit-identical reruns) sits at the axis' left end
        return left + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (right - left)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{axis + 18}" viewBox="0 0 {width} {axis + 18}" '
             f'class="floor-strip" role="img">']
    for i, (label, rebuilt, same_seed, limit) in enumerate(rows):
        y = top + i * row_h + row_h / 2
        parts.append(f'<text x="0" y="{y + 3:.2f}" font-size="8" font-family="DejaVu Sans, sans-serif">{label}</text>')
        if same_seed is not None:
            fill, stroke = (COLORS["spread_fails"], COLORS["outside"]) if spread_fails else (COLORS["band"], COLORS["spread"])
            parts.append(f'<rect x="{left}" y="{y - 6:.2f}" width="{max(x(same_seed) - left, 1.5):.2f}" height="12" fill="{fill}" '
                         f'stroke="{stroke}" stroke-width="0.6"/>')
        if limit is not None and not spread_fails:
            parts.append(f'<line x1="{x(limit):.2f}" y1="{y - 9:.2f}" x2="{x(limit):.2f}" y2="{y + 9:.2f}" stroke="{COLORS["spread"]}" '
                         f'stroke-width="1.4" stroke-dasharray="3,2"/>')
        if rebuilt is not None:
            beyond = limit is None or rebuilt > limit
            dot = COLORS["not_judged"] if spread_fails else COLORS["outside" if beyond else "inside"]
            parts.append(f'<circle cx="{x(rebuilt):.2f}" cy="{y:.2f}" r="4" fill="{dot}"/>')
    parts.append(f'<line x1="{left}" y1="{axis}" x2="{right}" y2="{axis}" stroke="#000" stroke-width="0.8"/>')
    power = round(math.log10(lo))
    while 10.0 ** power <= hi * 1.0001:
        tx = x(10.0 ** power)
        parts.append(f'<line x1="{tx:.2f}" y1="{axis}" x2="{tx:.2f}" y2="{axis + 3.5}" stroke="#000" stroke-width="0.8"/>'
                     f'<text x="{tx:.2f}" y="{axis + 13}" font-size="7" font-family="DejaVu Sans, sans-serif" text-anchor="middle">1e{power}</text>')
        power += 1
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - numbers and our own two labels only, see module docstring


def flips_svg(by_score: list[list[float]], threshold: float | None) -> Markup | None:
    """Where decisions flip, by the registered model's score: rows per score bin (grey), the flipped rows among
    them (red, drawn at least 3 px high and counted above the bar), the decision threshold dashed. One scale, so a
    reader sees that the flips sit at the threshold (or do not). None when there is nothing to draw."""
    bins = [(float(lo), float(hi), int(rows), int(flips)) for lo, hi, rows, flips in by_score or []]
    if not bins or not any(b[3] for b in bins):
        return None
    width, left, right, top, axis = 461, 30, 447, 14, 96
    lo, hi = bins[0][0], bins[-1][1]
    most = max(b[2] for b in bins) or 1

    def x(v: float) -> float:
        return left + (v - lo) / ((hi - lo) or 1.0) * (right - left)

    def h(count: int) -> float:
        return count / most * (axis - top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{axis + 18}" viewBox="0 0 {width} {axis + 18}" '
             f'class="flips-strip" role="img">']
    for b_lo, b_hi, rows, flips in bins:
        x0, w = x(b_lo) + 0.5, max(x(b_hi) - x(b_lo) - 1, 1)
        parts.append(f'<rect x="{x0:.2f}" y="{axis - h(rows):.2f}" width="{w:.2f}" height="{h(rows):.2f}" fill="#d5d9de"/>')
        if flips:
            fh = max(h(flips), 3.0)
            parts.append(f'<rect x="{x0:.2f}" y="{axis - fh:.2f}" width="{w:.2f}" height="{fh:.2f}" fill="{COLORS["outside"]}"/>'
                         f'<text x="{x0 + w / 2:.2f}" y="{axis - fh - 2:.2f}" font-size="7" font-family="DejaVu Sans, sans-serif" '
                         f'text-anchor="middle" fill="{COLORS["outside"]}">{flips}</text>')
    if threshold is not None and lo <= threshold <= hi:
        parts.append(f'<line x1="{x(threshold):.2f}" y1="{top - 6}" x2="{x(threshold):.2f}" y2="{axis}" stroke="#000" '
                     f'stroke-width="1" stroke-dasharray="3,2"/>')
    parts.append(f'<line x1="{left}" y1="{axis}" x2="{right}" y2="{axis}" stroke="#000" stroke-width="0.8"/>')
    for v, anchor in ((lo, "start"), (hi, "end")):
        parts.append(f'<text x="{x(v):.2f}" y="{axis + 12}" font-size="7" font-family="DejaVu Sans, sans-serif" '
                     f'text-anchor="{anchor}">{v:.3g}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - numbers only, from the evidence's own floats and ints
