"""Parameter types shared by the verbs: a value that fails here is a usage error (exit 2) before anything runs."""

from __future__ import annotations

import datetime as dt
import inspect

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


# -- how parameters read in --help: as a person types them, never as Python types ------------------------------
#: a value's placeholder by the parameter's name, where the name alone says less (else the name in capitals)
METAVARS = {"ref": "MODEL_REF", "model_ref": "MODEL_REF", "date": "YYYY-MM-DD", "tracking_uri": "URI"}


def plain_help(command):
    """The command tree with every parameter shown as a person types it: an argument by its placeholder
    (``MODEL_REF``, not ``{model_ref} <str>``), a value option by its placeholder or its choices (``--date YYYY-MM-DD``,
    ``--runner process|docker``), a flag (``--json``, ``--help``) with nothing after it, never ``<bool>``. Only what
    ``--help`` and the usage line show changes; parsing, values and error messages do not."""
    if getattr(command, "help", None):  # a docstring's paragraphs reflowed: its own line breaks are no line breaks in --help
        command.help = "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(command.help).split("\n\n"))
    context_class = getattr(command, "context_class", None)
    if context_class is not None and hasattr(command, "get_help_option"):
        helper = command.get_help_option(context_class(command, info_name=command.name))  # made on first use, then kept
        if helper is not None:
            _plain(helper)
    for param in getattr(command, "params", ()):
        _plain(param)
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
    return command


def _plain(param) -> None:
    if param.param_type_name == "argument":
        name = param.metavar or METAVARS.get(param.name, (param.name or "").upper())
        param.metavar = name
        shown = name if param.required else f"[{name}]"
        param.get_usage_pieces = lambda ctx: [shown + ("..." if param.nargs != 1 else "")]
        param.display_type_rich = lambda ctx: None  # the placeholder says it: no type column
    elif param.metavar is None:
        flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
        param.metavar = "" if flag else "|".join(_choices(param)) or METAVARS.get(param.name, (param.name or "").upper())


def _choices(param) -> list[str]:
    """The values a choice option takes (typer >= 0.29 describes them on ``type_descriptor``, older ones on ``type``)."""
    described = getattr(param, "type_descriptor", None)
    if described is not None and getattr(described, "is_choice", False):
        return [str(getattr(c, "value", c)) for c in described.choices or ()]
    return [str(c) for c in getattr(getattr(param, "type", None), "choices", None) or ()]
