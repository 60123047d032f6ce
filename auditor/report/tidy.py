"""A quiet report: each line said once, where it belongs, and text shown as the reader expects it.

The judge writes every tier's details in full (the JSON evidence keeps them so); the page shows a line once: a
lineage warning in the lineage table (with its fix), a model difference under Bitwise (the statistical tier then
counts them). Backticks in our messages become code, JSON tag values become ``key: value`` lines. Pure.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from markupsafe import Markup, escape

#: the tier that keeps a line both tiers list: the model's differences belong to the bitwise comparison
KEEPER = {"statistical": "bitwise"}
_TICKS = re.compile(r"`([^`\n]{1,200})`")


def quiet_tiers(rows: list[dict[str, Any]], *, table_has_warnings: bool = True) -> list[dict[str, Any]]:
    """``rows`` (``view.tiers``) with the lineage warnings left to the lineage table (when ``table_has_warnings``: an
    adoption's table shows its classes only, so there they stay) and the lines a tier shares with its keeper shown
    under the keeper only, counted where they are left out."""
    by_key = {row["key"]: row for row in rows}
    out = []
    for row in rows:
        summary = row.get("summary") or ""
        # a detail that only repeats the summary ("weights: <the summary>") is said once, by the summary
        details = [d for d in row.get("details") or [] if not (summary and d.partition(": ")[2] == summary)]
        if row["key"] == "lineage" and table_has_warnings:
            warnings = [d for d in details if d.startswith("[warning]")]
            if warnings:
                details = [d for d in details if d not in warnings]
                details.append(f"{len(warnings)} warning(s), each with its fix, in the lineage table below")
        keeper = by_key.get(KEEPER.get(row["key"], ""))
        if keeper is not None:
            shared = set(keeper.get("details") or [])
            moved = [d for d in details if d in shared]
            if moved:
                details = [d for d in details if d not in shared]
                details.insert(0, f"the {len(moved)} model difference(s) the Bitwise tier lists (the cause first)")
        out.append({**row, "details": details})
    return out


def ticks(text: Any) -> Markup:
    """``text`` escaped, its `backticked` spans as code (our messages quote commands and names that way)."""
    escaped = str(escape("" if text is None else text))
    return Markup(_TICKS.sub(lambda m: f"<code>{m.group(1)}</code>", escaped))


def tag_lines(value: Any, limit: int = 6) -> list[str] | None:
    """A tag whose value is a JSON object, as ``key: value`` lines (nested objects flattened with dots, at most
    ``limit`` lines and a count of the rest); None for any other value, shown as it is."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(value)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    flat: list[str] = []
    _flatten(data, "", flat)
    if len(flat) > limit:
        flat = [*flat[:limit], f"… and {len(flat) - limit} more (the JSON evidence holds them all)"]
    return flat


def _flatten(data: dict[str, Any], prefix: str, out: list[str]) -> None:
    for key in sorted(data):
        value = data[key]
        if isinstance(value, dict) and value:
            _flatten(value, f"{prefix}{key}.", out)
        elif isinstance(value, list):
            out.append(f"{prefix}{key}: {', '.join(_short(v) for v in value) or '—'}")
        else:
            out.append(f"{prefix}{key}: {_short(value)}")


def _short(value: Any) -> str:
    """One tag value: a scalar as the page shows numbers (``fmt``), anything else as JSON; long text cut at 120."""
    text = fmt(value) if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:119] + "…"


def fmt(value: Any, digits: int = 4) -> str:
    """Numbers for people: four significant digits (the JSON evidence beside the page keeps every digit), text kept
    as text, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return f"{value:.{digits}g}"
    return str(value)


__all__ = ["fmt", "quiet_tiers", "tag_lines", "ticks"]
