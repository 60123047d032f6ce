"""How a setting is declared and read: the catalog machinery behind ``auditor.settings``.

A setting is a field of a frozen dataclass declared with ``setting(...)`` (its environment variable,
default, help and bounds, as a pydantic ``Field``); ``Setting`` is the view of one declaration other
modules import (``REPORTS.name``, ``REPORTS.get()``); ``read`` fills a whole class from the environment
through pydantic-settings. The declarations themselves are ``auditor.settings``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache, cached_property
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from annotated_types import Ge, Le
from pydantic import AfterValidator, BeforeValidator, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from auditor.errors import BadInput

log = logging.getLogger(__name__)

#: the types a setting can have, as the docs name them
TYPES = ("str", "path", "int", "float", "bool", "choice", "pairs", "cron", "list")
#: schedules Airflow accepts that are not cron expressions
_AIRFLOW_SCHEDULES = {"@once", "@continuous"}
#: where ``setting()`` keeps a declaration in the dataclass field's metadata
_DECLARED = "setting"

# -- the types beyond pydantic's own --------------------------------------------------------


@dataclass(frozen=True)
class _Format:
    """Marks a type in ``Annotated``: its name in the docs, what a malformed value is not, and the fix.

    ``hint`` may name ``{name}`` and ``{default}``, the setting's.
    """

    type: str
    expected: str
    hint: str | None = None


def _stripped(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _lowered(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _cron(value: str) -> str:
    """A cron expression as Airflow validates it (croniter, which Airflow installs); without croniter, as given."""
    try:
        from croniter import croniter
    except ImportError:  # no Airflow here: nothing schedules by it
        return value
    if value in _AIRFLOW_SCHEDULES or croniter.is_valid(value):
        return value
    raise ValueError("not a cron expression")


def _pairs(value: Any) -> Any:
    """``key=value[,key=value]`` as pairs, in order (a key given twice keeps its last value)."""
    if not isinstance(value, str):
        return value
    pairs: dict[str, str] = {}
    for item in value.split(",") if value.strip() else ():
        key, sep, text = item.strip().partition("=")
        if not sep or not key:
            raise ValueError("not key=value")
        pairs[key] = text
    return tuple(pairs.items())


def _directions(value: Any) -> Any:
    """``metric=higher|lower|none[,...]``: which way is better for metrics whose name does not say."""
    pairs = _pairs(value)
    for key, text in pairs:
        if text.strip().lower() not in ("higher", "lower", "none"):
            raise ValueError(f"{key}={text}: a direction is higher, lower or none")
    return tuple((key.strip(), text.strip().lower()) for key, text in pairs)


def _names(value: Any) -> Any:
    """Comma-separated names, stripped and lower-cased, each kept once, in order."""
    if not isinstance(value, str):
        return value
    return tuple(dict.fromkeys(item.strip().lower() for item in value.split(",") if item.strip()))


#: true/false, yes/no, on/off, 1/0 (any case, spaces around ignored)
Flag = Annotated[bool, BeforeValidator(_stripped), _Format("bool", "a boolean", "use true or false")]
#: a cron expression, or a schedule Airflow accepts instead of one (``@daily``, ``@once``)
Cron = Annotated[
    str, AfterValidator(_cron),
    _Format("cron", "a cron expression", "set {name} to e.g. {default!r} (minute hour day month weekday)"),
]
#: ``key=value[,key=value]``
Pairs = Annotated[tuple[tuple[str, str], ...], BeforeValidator(_pairs), _Format("pairs", "key=value[,key=value]")]
#: ``metric=higher|lower|none[,...]``
Directions = Annotated[tuple[tuple[str, str], ...], BeforeValidator(_directions),
                       _Format("pairs", "metric=higher|lower|none[,metric=...]")]
#: a comma-separated list of names, compared stripped and lower-cased
Names = Annotated[tuple[str, ...], BeforeValidator(_names), _Format("list", "a comma-separated list")]
#: a choice is a ``Literal`` of its values, annotated with this: compared stripped and lower-cased
Lowered = BeforeValidator(_lowered)


def _unwrapped(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``annotation`` without ``| None`` and without ``Annotated``: the base type, and the annotations."""
    if get_origin(annotation) in (Union, UnionType):
        annotation = next(arg for arg in get_args(annotation) if arg is not NoneType)
    if get_origin(annotation) is Annotated:
        base, *extras = get_args(annotation)
        return base, tuple(extras)
    return annotation, ()


# -- a declaration, and the view of it other modules import ----------------------------------


def setting(env: str, default: Any, help: str, *, derived: str | None = None, hint: str | None = None,
            **bounds: int) -> Any:
    """Declare a settings field as one setting: its variable ``env``, its ``default``, ``help`` and ``bounds``.

    ``bounds`` are pydantic's (``ge``, ``le``). ``derived`` says, for the docs, what a default of ``None`` is
    derived from; ``hint`` replaces the fix that a malformed value's error suggests.
    """
    info = Field(default, validation_alias=env, description=help, **bounds)
    return field(default=default, metadata={_DECLARED: (info, derived, hint)})


@dataclass(frozen=True, eq=False)
class Setting:
    """One environment variable, as a field of ``Settings`` declares it; ``get`` reads and validates it.

    ``attr`` is the field it fills, ``annotation`` its type (pydantic's, with the checks), ``info`` the
    pydantic field: ``validation_alias`` is the variable, then the default, the help (``description``)
    and the bounds.
    """

    attr: str
    annotation: Any
    info: FieldInfo
    derived: str | None = None
    hint: str | None = None

    @property
    def name(self) -> str:
        return str(self.info.validation_alias)

    @property
    def default(self) -> Any:
        return self.info.default

    @property
    def help(self) -> str:
        return self.info.description or ""

    @property
    def choices(self) -> tuple[str, ...]:
        base, _ = _unwrapped(self.annotation)
        return get_args(base) if get_origin(base) is Literal else ()

    @property
    def minimum(self) -> int | None:
        return next((bound.ge for bound in self.info.metadata if isinstance(bound, Ge)), None)

    @property
    def maximum(self) -> int | None:
        return next((bound.le for bound in self.info.metadata if isinstance(bound, Le)), None)

    @property
    def type(self) -> str:
        """One of ``TYPES``."""
        if self._format is not None:
            return self._format.type
        if self.choices:
            return "choice"
        return {Path: "path", int: "int", float: "float", bool: "bool"}.get(_unwrapped(self.annotation)[0], "str")

    @property
    def _format(self) -> _Format | None:
        return next((extra for extra in _unwrapped(self.annotation)[1] if isinstance(extra, _Format)), None)

    @cached_property
    def _adapter(self) -> TypeAdapter:
        bounds = tuple(self.info.metadata)
        return TypeAdapter(Annotated[(self.annotation, *bounds)] if bounds else self.annotation)

    def raw(self, env: Mapping[str, str] | None = None) -> str | None:
        """The variable's text, ``None`` when unset or empty."""
        value = (os.environ if env is None else env).get(self.name)
        return value if value else None

    def get(self, env: Mapping[str, str] | None = None) -> Any:
        """The parsed value from ``env`` (default ``os.environ``), or the default when unset.

        ``BadInput`` names the variable and the fix when the value is malformed.
        """
        raw = self.raw(env)
        return self.default if raw is None else self.parse(raw)

    def get_or_default(self, env: Mapping[str, str] | None = None) -> Any:
        """Like ``get``, but never raises: a malformed value logs a warning and gives the default.

        For code that must not fail where it runs (a DAG file while Airflow parses it); the task
        that uses the setting resolves it again with ``get_settings()``, which does raise.
        """
        try:
            return self.get(env)
        except BadInput as exc:
            log.warning("%s; using the default %r", exc, self.default)
            return self.default

    def parse(self, raw: str) -> Any:
        """``raw`` as this setting's type, validated by pydantic; ``BadInput`` when it is not one."""
        try:
            return self._adapter.validate_python(raw)
        except ValidationError as exc:
            raise self.malformed(raw, exc.errors()[0]) from None

    def malformed(self, raw: str, error: ErrorDetails) -> BadInput:
        """The ``BadInput`` for ``raw``, which pydantic refused with ``error``: the variable, and the fix."""
        marked = self._format
        example = self.default if self.default not in (None, (), "") else None
        fix = self.hint or (marked.hint.format(name=self.name, default=self.default) if marked and marked.hint else None)
        fix = fix or (f"set {self.name} to e.g. {example}" if example is not None else f"unset {self.name}")
        expected = marked.expected if marked else self._expected(error)
        return BadInput(f"environment variable {self.name}={raw!r} is not {expected}", hint=fix)

    def _expected(self, error: ErrorDetails) -> str:
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.type == "float":
            return "a number"
        if self.type != "int":
            return f"a {self.type}"
        if error["type"] == "less_than_equal":
            return f"an integer of at most {self.maximum}"
        if self.minimum == 1:
            return "a positive integer"
        return f"an integer of at least {self.minimum}" if error["type"] == "greater_than_equal" else "an integer"

    @property
    def type_text(self) -> str:
        """The type as the docs show it (a choice with its values)."""
        return f"choice ({'|'.join(self.choices)})" if self.type == "choice" else self.type

    @property
    def default_text(self) -> str:
        """The default as the docs show it (a derived default says what it derives from)."""
        if self.derived is not None:
            return self.derived
        if self.default is None or self.default == ():
            return "-"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if self.type == "list":
            return ",".join(self.default)
        return str(self.default)


@cache
def declared(cls: type) -> tuple[Setting, ...]:
    """The settings a settings class declares, in the order of its fields."""
    hints = get_type_hints(cls, include_extras=True)
    return tuple(
        Setting(f.name, hints[f.name], *f.metadata[_DECLARED]) for f in fields(cls) if _DECLARED in f.metadata
    )


# -- reading a whole class from the environment: pydantic-settings ---------------------------
# Imported on the first whole read (``from_env``): a DAG file being parsed, or a training process, reads
# single variables (``Setting.get``, pydantic alone) and does not load pydantic-settings.


@cache
def _environment_model(cls: type) -> Any:
    """``cls`` as pydantic-settings reads it: a ``BaseSettings`` with one field per declaration, by variable."""
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class FromEnvironment(BaseSettings):
        # names are case-sensitive and an empty variable is unset; no JSON decoding of the list-like
        # values; a default is not validated (a derived default is None)
        model_config = SettingsConfigDict(
            case_sensitive=True, env_ignore_empty=True, enable_decoding=False, validate_default=False,
        )

    declarations = {s.attr: (s.annotation, s.info) for s in declared(cls)}
    return create_model(f"{cls.__name__}FromEnvironment", __base__=FromEnvironment, **declarations)


def _read(cls: type, env: Mapping[str, str] | None) -> dict[str, Any]:
    """``cls``'s settings from ``env`` (default ``os.environ``); ``BadInput`` names the first malformed one."""
    from pydantic_settings import EnvSettingsSource

    model = _environment_model(cls)
    source = EnvSettingsSource(model)  # over os.environ
    if env is not None:  # over the caller's mapping instead, by the same rules
        source.env_vars = {name: value for name, value in env.items() if value}
    try:
        values = model.model_validate(source())
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        raise {s.name: s for s in declared(cls)}[name].malformed(source.env_vars[name], error) from None
    return {attr: getattr(values, attr) for attr in model.model_fields}


