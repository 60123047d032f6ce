"""MLflow's URI grammars, in one place: model references (``models:/``) and run artifacts (``runs:/``).

Two forms are accepted: ``models:/NAME/VERSION`` (a fixed version number) and
``models:/NAME@ALIAS`` (whatever version the alias points at when resolved).
MLflow's other forms are refused on purpose: ``models:/NAME/latest`` and
``models:/NAME/<stage>`` move under the caller's feet (and stages are
deprecated since MLflow 2.9), and ``models:/<model_id>`` names a logged model,
not a registered version. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from auditor.errors import BadInput

_SCHEME = "models:/"
_RUNS = "runs:/"
#: the forms a command's or a task's ref argument takes (help texts)
REF_HELP = f"{_SCHEME}NAME/VERSION or {_SCHEME}NAME@ALIAS"
# The rules MLflow's own validators apply (mlflow/utils/validation.py).
_ALIAS = re.compile(r"^[\w\-]+$")
_RESERVED_ALIAS = re.compile(r"^(latest|[vV]\d+)$", re.IGNORECASE)
_MAX_ALIAS = 255

_FORMS = "use models:/NAME/VERSION (e.g. models:/churn/3) or models:/NAME@ALIAS (e.g. models:/churn@champion)"


@dataclass(frozen=True)
class ModelRef:
    """A parsed reference: ``name`` plus exactly one of ``version`` or ``alias``."""

    name: str
    version: str | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        if (self.version is None) == (self.alias is None):
            raise BadInput(f"model reference for {self.name!r} needs exactly one of a version or an alias", hint=_FORMS)

    @property
    def uri(self) -> str:
        """The reference in MLflow's spelling."""
        suffix = f"/{self.version}" if self.version is not None else f"@{self.alias}"
        return f"{_SCHEME}{self.name}{suffix}"

    def __str__(self) -> str:
        return self.uri


#: Unicode categories that change how the text around them is shown without showing themselves: format
#: characters (the bidi overrides U+202A-U+202E, isolates U+2066-U+2069, marks U+200E/U+200F/U+061C, zero-width
#: characters, U+FEFF), control characters, line and paragraph separators, lone surrogates
_HIDDEN_CATEGORIES = frozenset({"Cf", "Cc", "Zl", "Zp", "Cs"})


def hidden_characters(text: str) -> list[str]:
    """The characters of ``text`` that a screen does not show as themselves (``U+202E RIGHT-TO-LEFT OVERRIDE``…)."""
    return [ch for ch in dict.fromkeys(text) if unicodedata.category(ch) in _HIDDEN_CATEGORIES]


def _spelled(ch: str) -> str:
    return f"U+{ord(ch):04X}"


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with each hidden character (``hidden_characters``) written out as ``<U+XXXX>``, so a name shown
    is the name registered (a right-to-left override cannot make ``evil`` read as another name); ``keep``: ones
    left as they are (a terminal's newline)."""
    if text.isprintable():  # False for every hidden category (and for spaces other than ' ', kept below)
        return text
    return "".join(f"<{_spelled(ch)}>" if ch not in keep and unicodedata.category(ch) in _HIDDEN_CATEGORIES else ch for ch in text)


def _bad(ref: str, why: str) -> BadInput:
    return BadInput(f"model reference {visible(ref)!r} {why}", hint=_FORMS)


def _named(hidden: list[str]) -> str:
    return ", ".join(f"{_spelled(ch)} ({unicodedata.name(ch, 'a control character')})" for ch in hidden)


def _name_fault(name: str) -> str | None:
    """What makes ``name`` a model name the audit refuses, in words that follow "a model name"; None when it has none.

    The one rule for model names: the name of every reference the CLI and the audit parse (``parse_ref``) and every
    name registered (``registrable_name``) are held to it, so nothing is registered that could not then be audited."""
    if not name.strip():
        return "that is empty"
    hidden = hidden_characters(name)
    if hidden:
        return f"holding {_named(hidden)}, which changes how the name is displayed"
    if ":" in name:
        return "containing ':', which MLflow does not allow"
    return None


def _check_name(ref: str, name: str) -> str:
    fault = _name_fault(name)
    if fault is None:
        return name
    if not name.strip():
        raise _bad(ref, "has an empty model name")
    if hidden_characters(name):
        raise BadInput(f"model reference {visible(ref)!r} has a model name {fault}: refused, so that what is shown is "
                       "what is audited", hint="type the name without it; the CLI shows such a character as <U+XXXX>")
    raise _bad(ref, f"has a model name {name!r} {fault}")


#: what a name may not hold for ``models:/NAME/VERSION`` to name a version of it: '/' ends the name, '@' starts an
#: alias, '?' and '#' a query or a fragment (``parse_ref``)
_REF_SYNTAX = {"/": "'/' ends the name in a reference (MLflow refuses it too)",
               "@": "'@' starts an alias in a reference, so models:/NAME/VERSION could not name a version of it",
               "?": "'?' starts a query in a reference, which the audit refuses",
               "#": "'#' starts a fragment in a reference, which the audit refuses"}


def registrable_name(name: str) -> str:
    """The name a model version is registered under: ``name`` in Unicode's composed form (NFC), so that one name typed
    on two keyboards is one model; ``BadInput`` (nothing registered) when the audit would refuse it.

    Held to the rule every reference's name is held to (``_name_fault``: no bidi control, zero-width or other hidden
    character, no ':', not empty), and to what ``models:/NAME/VERSION`` needs (no '/', '@', '?', '#'): a version
    registered under a name the audit refuses could never be audited, and would be listed "never audited" for ever."""
    if not isinstance(name, str):
        raise BadInput(f"a model name must be a string, got {type(name).__name__}")
    normal = unicodedata.normalize("NFC", name)
    fault = _name_fault(normal)
    if fault is None:
        syntax = next((c for c in _REF_SYNTAX if c in normal), None)
        fault = f"containing {syntax!r}: {_REF_SYNTAX[syntax]}" if syntax else None
    if fault is not None:
        raise BadInput(f"model name {visible(name)!r} is refused: a model name {fault}; nothing was registered",
                       hint=_registrable_hint(normal))
    parse_ref(model_uri(normal, 1))  # the audit's own parser has the last word (BadInput if it ever disagrees)
    return normal


def _registrable_hint(name: str) -> str:
    hidden = hidden_characters(name)
    clean = "".join("-" if ch in _REF_SYNTAX or ch == ":" else ch for ch in name if ch not in hidden).strip()
    fix = f"register it as {clean!r}" if clean and clean != name.strip() else "name the model with visible characters"
    why = "the audit refuses references to such a name, so a version registered under it could never be audited"
    return f"{fix}: {why}"


def name_skeleton(name: str) -> str:
    """What a reader sees of a model name: compatibility-normalised (NFKC), case folded, runs of white space as one
    space, stripped. Names with one skeleton are look-alikes: ``churn`` and ``Churn``, an ``é`` composed and
    decomposed, fullwidth ``ｃｈｕｒｎ``, a no-break space. (Letters of other scripts that look alike, a Cyrillic
    ``а`` for a Latin ``a``, are not mapped: that needs Unicode's confusables table.)"""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return " ".join(folded.split())


def look_alikes(name: str, names: Iterable[str]) -> list[str]:
    """The names among ``names``, other than ``name`` itself, that look like it (one ``name_skeleton``), sorted."""
    skeleton = name_skeleton(name)
    return sorted({n for n in names if n != name and name_skeleton(n) == skeleton})


def parse_ref(ref: str) -> ModelRef:
    """Parse ``models:/NAME/VERSION`` or ``models:/NAME@ALIAS``; anything else is ``BadInput`` naming ``ref``."""
    if not isinstance(ref, str):
        raise BadInput(f"model reference must be a string, got {type(ref).__name__}", hint=_FORMS)
    if not ref.startswith(_SCHEME) or ref.startswith(_SCHEME + "/"):
        raise _bad(ref, "does not start with 'models:/'")
    body = ref[len(_SCHEME) :]
    if not body:
        raise _bad(ref, "names no model")
    if ref != ref.strip():
        raise _bad(ref, "has leading or trailing whitespace")
    if "?" in body or "#" in body:
        raise _bad(ref, "contains '?' or '#'; a model reference has no query or fragment")
    parts = body.split("/")
    if len(parts) == 2:
        name, suffix = parts
        _check_name(ref, name)
        if "@" in name:
            raise _bad(ref, "has both an alias and a version")
        if suffix.isdigit() and suffix.isascii():
            if int(suffix) < 1:
                raise _bad(ref, "has version 0; MLflow numbers versions from 1")
            return ModelRef(name=name, version=str(int(suffix)))
        if suffix.lower() == "latest":
            raise _bad(ref, "asks for 'latest', which moves whenever a version is registered; name a version or an alias")
        if not suffix:
            raise _bad(ref, "has an empty version")
        raise _bad(ref, f"has version {suffix!r}, which is not a number (registry stages are deprecated; use an alias)")
    if len(parts) > 2:
        raise _bad(ref, "has more than one '/' after the model name (MLflow model names cannot contain '/')")
    if "@" not in body:
        raise _bad(ref, "has neither a version nor an alias (models:/<id> names a logged model, not a registered version)")
    name, alias = body.rsplit("@", 1)
    _check_name(ref, name)
    if not alias:
        raise _bad(ref, "has an empty alias")
    if not _ALIAS.match(alias) or len(alias) > _MAX_ALIAS:
        raise _bad(ref, f"has alias {alias!r}; aliases are letters, digits, '_' and '-', at most {_MAX_ALIAS} characters")
    if _RESERVED_ALIAS.match(alias):
        raise _bad(ref, f"has alias {alias!r}, a name MLflow reserves ('latest' and v<N>); use models:/NAME/VERSION")
    return ModelRef(name=name, alias=alias)


def model_uri(name: str, version: str | int) -> str:
    """``models:/NAME/VERSION``."""
    return f"{_SCHEME}{name}/{version}"


def model_alias_uri(name: str, alias: str) -> str:
    """``models:/NAME@ALIAS``."""
    return f"{_SCHEME}{name}@{alias}"


def name_and_version(ref: str) -> tuple[str, str]:
    """(NAME, VERSION-or-'') of a ``models:/NAME/VERSION`` string, without validating it (display only)."""
    name, _, version = ref.removeprefix(_SCHEME).rpartition("/")
    return name, version


def run_artifact_uri(run_id: str, path: str) -> str:
    """``runs:/RUN_ID/PATH``: an artifact of a run, as MLflow spells it."""
    return f"{_RUNS}{run_id}/{path.lstrip('/')}"


def run_artifact_path(uri: str) -> str | None:
    """The artifact path inside its run of a ``runs:/RUN_ID/PATH`` URI; None for any other URI."""
    if not uri.startswith(_RUNS) or uri.count("/") < 2:
        return None
    return uri[len(_RUNS):].split("/", 1)[1]


def sqlite_file(uri: str | None) -> Path | None:
    """The database file a ``sqlite:///…`` URI names; None for other URIs and in-memory SQLite."""
    if not uri or not uri.startswith("sqlite:"):
        return None
    rest = uri[len("sqlite:") :]
    if not rest.startswith("///"):
        return None  # sqlite:// is SQLAlchemy's in-memory database
    path = rest[3:].split("?", 1)[0]
    if path in ("", ":memory:"):
        return None
    return Path(path)
