""""Did you mean": a model reference the registry does not know gets the registered names closest to it.

Only on the error path: a lookup that succeeds never lists anything. When a verb's lookup of a ``models:/`` reference
fails with ``NotFound``, the registry lists its model names (one call) and, when the name is registered, that model's
versions and aliases (one more); the error keeps its message and gains a hint naming the closest matches
(``difflib.get_close_matches``). A ``NotFound`` about something else (a run, an artifact) passes through as it was.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from auditor.errors import NotFound, ReproError

SHOWN = 3  # suggestions at most
CUTOFF = 0.6  # difflib's similarity a name must reach to be suggested


@contextmanager
def did_you_mean(registry: Callable[[], Any], *refs: str | None) -> Iterator[None]:
    """Around a verb's lookups of ``refs``: a ``NotFound`` for one of them gains a hint with the closest registered
    names (``registry()`` is called only then)."""
    try:
        yield
    except NotFound as exc:
        hint = _hint(registry, [r for r in refs if r])
        if hint is None:
            raise
        from auditor.cli import error_message

        raise NotFound(error_message(exc), hint=f"{exc.hint}; {hint}" if exc.hint else hint) from exc


def _hint(registry: Callable[[], Any], refs: list[str]) -> str | None:
    from auditor.uris import parse_ref

    try:
        opened = registry()
        names: list[str] | None = None
        for ref in refs:
            parsed = parse_ref(ref)
            names = opened.model_names() if names is None else names
            if parsed.name not in names:
                return _other_name(parsed, names)
            versions, aliases = opened.version_names(parsed.name)
            if parsed.version is not None and parsed.version not in versions:
                return _other_version(parsed.name, versions, aliases)
            if parsed.version is None and parsed.alias not in aliases:
                return _other_alias(parsed.name, parsed.alias or "", versions, aliases)
    except ReproError:  # the listing failed too: the lookup's own error stands
        return None
    return None


def _close(word: str, known: list[str]) -> list[str]:
    """The known words closest to ``word``, case aside (``Churn`` finds ``churn``)."""
    by_lower = {k.lower(): k for k in known}
    return [by_lower[m] for m in difflib.get_close_matches(word.lower(), list(by_lower), n=SHOWN, cutoff=CUTOFF)]


def _spelled(name: str, *, version: str | None = None, alias: str | None = None) -> str:
    from auditor.uris import model_alias_uri, model_uri, visible

    return model_alias_uri(visible(name), visible(alias)) if alias is not None else model_uri(visible(name), version or "")


def _either(refs: list[str]) -> str:
    return refs[0] if len(refs) == 1 else ", ".join(refs[:-1]) + " or " + refs[-1]


def _other_name(parsed: Any, names: list[str]) -> str:
    if not names:
        return "the registry holds no registered model"
    close = _close(parsed.name, names)
    if not close:
        listed = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        return f"no registered model is named like {parsed.name!r}; registered: {listed}"
    refs = [_spelled(n, version=parsed.version, alias=parsed.alias if parsed.version is None else None) for n in close]
    return f"did you mean {_either(refs)}?"


def _other_version(name: str, versions: list[str], aliases: list[str]) -> str:
    if not versions:
        return f"model {name!r} has no version yet"
    refs = [_spelled(name, version=versions[-1])] + [_spelled(name, alias=a) for a in aliases[: SHOWN - 1]]
    return f"did you mean {_either(refs)}? {name!r} has version(s) {_span(versions)}"


def _other_alias(name: str, alias: str, versions: list[str], aliases: list[str]) -> str:
    close = _close(alias, aliases)
    if close:
        return f"did you mean {_either([_spelled(name, alias=a) for a in close])}?"
    known = f"{name!r} has the alias(es) {', '.join(aliases)}" if aliases else f"{name!r} has no alias"
    latest = f"; its latest version is {_spelled(name, version=versions[-1])}" if versions else ""
    return f"{known}{latest}"


def _span(versions: list[str]) -> str:
    """``1-7`` for consecutive numbers, else the list (``1, 3, 4``), shortened past ten."""
    numbers = [int(v) for v in versions if v.isdigit()]
    if len(numbers) == len(versions) and numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(numbers) > 2:
        return f"{numbers[0]}-{numbers[-1]}"
    return ", ".join(versions[:10]) + (", …" if len(versions) > 10 else "")
