"""Parameter types shared by the verbs: a value that fails here is a usage error (exit 2) before anything runs."""

from __future__ import annotations

import datetime as dt

import typer


def logical_date(value: str | None) -> str | None:
    """``--date``: a calendar date spelled YYYY-MM-DD (``2026-13-45`` and ``2026-5-1`` are refused), or None."""
    if value is None:
        return None
    try:
        parsed = dt.datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError:
        parsed = None
    if parsed is None or parsed.isoformat() != value:
        raise typer.BadParameter(f"{value!r} is not a calendar date YYYY-MM-DD (e.g. {dt.date(2026, 5, 1).isoformat()})")
    return value


def model_ref(value: str | None) -> str | None:
    """A ``models:/`` argument, parsed at the door (``auditor.uris.parse_ref``): a malformed one, or a name holding
    a character that changes how it is displayed (U+202E), is a usage error before any registry is opened."""
    if value is None:
        return None
    from auditor.errors import BadInput
    from auditor.uris import parse_ref

    try:
        parse_ref(value)
    except BadInput as exc:
        raise typer.BadParameter(str(exc)) from None
    return value
