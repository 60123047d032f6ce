"""How a setting is declared and read: the catalog machinery behind ``auditor.settings``.

A setting is a field of a frozen dataclass declared with ``setting(...)`` (its environment variable,
default, help and bounds, as a pydantic ``Field``); ``Setting`` is the view of one declaration other
modules import (``REPORTS.name``, ``REPORTS.get()``); ``_read`` fills a whole class from the environment
through pydantic-settings. The declarations themselves are ``auditor.settings``.

Where values come from (``configured``): the environment (an empty variable is unset), over a configuration
file a team commits: ``repro-audit.toml``, else ``pyproject.toml``'s ``[tool.repro-audit]``, the first found from
the working directory upward (both in one folder: the former, with a warning). A key is the variable's name without
``REPRO_``/``MLFLOW_``, lower-case (``Setting.key``); each value becomes the text a variable would hold and goes
through the same parser, types and bounds, and a relative path in a ``location`` setting is from the file's folder.
An unknown key, a secret (``secret=True``) and a URL carrying a password are ``BadInput`` naming the file and the
key (docs/how-to/configure.md). ``tomllib`` reads the file, not pydantic-settings' TOML sources: those match keys
by the variables' names and say neither where a value came from (``repro-audit config show``) nor which key was meant.

``env=None`` (or ``os.environ`` itself) means this process's configuration: the environment over the file found
from the working directory. Any other mapping is all there is (tests stay hermetic): a file joins it only when
asked (``configured(env, config_file=...)`` or ``cwd=...``).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import cache, cached_property, lru_cache
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
            secret: bool = False, location: bool | tuple[str, ...] = False, **bounds: int) -> Any:
    """Declare a settings field as one setting: its variable ``env``, its ``default``, ``help`` and ``bounds``.

    ``bounds`` are pydantic's (``ge``, ``le``). ``derived`` says, for the docs, what a default of ``None`` is
    derived from; ``hint`` replaces the fix that a malformed value's error suggests. ``secret``: the value is
    a secret (refused in a configuration file, redacted where it is shown), not where one is kept. ``location``:
    the value is a local path or a URI; a relative path in a configuration file is taken from the file's folder
    (a tuple: also the words that are no path and stay as written, e.g. ``("off",)``).
    """
    info = Field(default, validation_alias=env, description=help, **bounds)
    return field(default=default, metadata={_DECLARED: (info, derived, hint, secret, location)})


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
    secret: bool = False
    location: bool | tuple[str, ...] = False  # a path or URI: relative in a file means from the file's folder

    @property
    def name(self) -> str:
        return str(self.info.validation_alias)

    @property
    def key(self) -> str:
        """Its key in a configuration file: the variable without ``REPRO_`` or ``MLFLOW_``, lower-case."""
        return _key_of(self.name)

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
        """The variable's text, ``None`` when unset or empty; ``env=None``: this process's (``configured()``)."""
        value = (configured() if env is None else env).get(self.name)
        return value if value else None

    def get(self, env: Mapping[str, str] | None = None) -> Any:
        """The parsed value from ``env`` (default: the environment over the configuration file), or the default.

        ``BadInput`` names the variable (or the file and key) and the fix when the value is malformed, and
        the file when it cannot be read (``configured``).
        """
        env = configured() if env is None or env is os.environ else env  # os.environ itself: this process's
        raw = self.raw(env)
        if raw is None:
            return self.default
        return self.parse(raw, file=env.file_of(self.name) if isinstance(env, Configured) else None)

    def get_or_default(self, env: Mapping[str, str] | None = None) -> Any:
        """Like ``get``, but never raises: a malformed value logs a warning and gives the default.

        For code that must not fail where it runs (a DAG file while Airflow parses it); the task
        that uses the setting resolves it again with ``get_settings()``, which does raise.
        """
        tries = (env, dict(os.environ)) if env is None or env is os.environ else (env,)
        for i, mapping in enumerate(tries):  # this process's: the file may be what failed, the environment still counts
            try:
                return self.get(mapping)
            except BadInput as exc:
                log.warning("%s; using %s", exc, "the environment alone" if i + 1 < len(tries) else f"the default {self.default!r}")
        return self.default

    def parse(self, raw: str, *, file: ConfigFile | None = None) -> Any:
        """``raw`` as this setting's type, validated by pydantic; ``BadInput`` when it is not one (naming
        the ``file`` and key when the value was written there)."""
        try:
            return self._adapter.validate_python(raw)
        except ValidationError as exc:
            raise self.malformed(raw, exc.errors()[0], file=file) from None

    def malformed(self, raw: str, error: ErrorDetails, *, file: ConfigFile | None = None) -> BadInput:
        """The ``BadInput`` for ``raw``, which pydantic refused with ``error``: the variable (or the ``file``
        and key it was written at), and the fix."""
        marked = self._format
        example = self.default if self.default not in (None, (), "") else None
        fix = self.hint or (marked.hint.format(name=self.name, default=self.default) if marked and marked.hint else None)
        fix = fix or (f"set {self.name} to e.g. {example}" if example is not None else f"unset {self.name}")
        expected = marked.expected if marked else self._expected(error)
        if file is not None:
            return BadInput(f"{file.where(self.name)} = {raw!r} is not {expected}",
                            hint=f"{fix.replace(self.name, self.key)} in {file.path}")
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
        return self.text(self.default) or "-"

    def text(self, value: Any) -> str | None:
        """``value`` written as the variable would hold it (``true``, ``a,b``, ``k=v,k2=v2``); ``None`` when unset."""
        if value is None or value == ():
            return None
        if isinstance(value, bool):
            return str(value).lower()
        if self.type == "pairs":
            return ",".join(f"{key}={text}" for key, text in value)
        if self.type == "list":
            return ",".join(value)
        return str(value)


def _key_of(name: str) -> str:
    lowered = name.lower()
    return lowered.split("_", 1)[1] if lowered.startswith(("repro_", "mlflow_")) else lowered


#: every setting declared so far, by variable (``declared`` adds a class's): the keys a configuration file may hold
_KNOWN: dict[str, Setting] = {}


@cache
def declared(cls: type) -> tuple[Setting, ...]:
    """The settings a settings class declares, in the order of its fields (and known to ``configured`` from now on)."""
    hints = get_type_hints(cls, include_extras=True)
    found = tuple(
        Setting(f.name, hints[f.name], *f.metadata[_DECLARED]) for f in fields(cls) if _DECLARED in f.metadata
    )
    _KNOWN.update((s.name, s) for s in found)
    return found


# -- the configuration file: repro-audit.toml, or [tool.repro-audit] in pyproject.toml ------------

CONFIG_FILE = "repro-audit.toml"
PYPROJECT = "pyproject.toml"
_TABLE = "repro-audit"  # pyproject.toml's [tool.repro-audit]
#: where a value came from, as ``Configured.source`` and ``repro-audit config show`` say it
ENVIRONMENT, DEFAULT, FILE = "environment", "default", "file"


@dataclass(frozen=True)
class ConfigFile:
    """One configuration file's settings: each value as the text its variable would hold (``texts``), and the
    key it was written at (``keys``), both by variable name."""

    path: Path
    texts: Mapping[str, str]
    keys: Mapping[str, str]

    def where(self, name: str) -> str:
        """Where ``name``'s value is written, for a message: ``PATH: key`` (``PATH [tool.repro-audit]: key``)."""
        return _where(self.path, self.keys[name])


def _where(path: Path, key: str) -> str:
    return f"{path}{f' [tool.{_TABLE}]' if path.name == PYPROJECT else ''}: {key}"


class Configured(Mapping[str, str]):
    """The text of each variable a setting reads: ``env`` over the configuration ``file``; an empty variable is
    unset (so the file's value, if any, applies). ``source`` says where a value came from."""

    def __init__(self, env: Mapping[str, str], file: ConfigFile | None = None) -> None:
        self.env = {name: value for name, value in env.items() if value}
        self.file = file
        self._merged = {**(file.texts if file else {}), **self.env}

    def __getitem__(self, name: str) -> str:
        return self._merged[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged)

    def __len__(self) -> int:
        return len(self._merged)

    def over(self, variables: Mapping[str, str]) -> Configured:
        """These values with ``variables`` set over them, as environment variables (a Connection's, in a task)."""
        return Configured({**self.env, **variables}, self.file)

    def file_of(self, name: str) -> ConfigFile | None:
        """The file, when ``name``'s value is the file's (no variable over it)."""
        return self.file if self.file and name in self.file.texts and name not in self.env else None

    def source(self, name: str) -> str:
        """``environment``, ``file PATH`` or ``default``."""
        if name in self.env:
            return ENVIRONMENT
        file = self.file_of(name)
        return f"{FILE} {file.path}" if file else DEFAULT


def configured(env: Mapping[str, str] | None = None, *, config_file: Path | str | None = None,
               cwd: Path | None = None) -> Configured:
    """What settings are read from: ``env`` (default ``os.environ``) over a configuration file.

    The file is ``config_file`` when given; else the one found from ``cwd`` upward (``find_config``) when
    ``cwd`` is given or ``env`` is not (this process); else none: a mapping given is hermetic. ``BadInput``
    names the file when it cannot be read or holds what it must not (``read_config``).
    """
    if isinstance(env, Configured) and config_file is None and cwd is None:
        return env
    if config_file is None and (env is None or env is os.environ or cwd is not None):
        config_file = find_config(cwd)
    file = read_config(Path(config_file)) if config_file is not None else None
    return Configured(os.environ if env is None else env, file)


def find_config(cwd: Path | None = None) -> Path | None:
    """The configuration file of the project ``cwd`` (default: the working directory) lies in, or ``None``.

    From ``cwd`` upward, the first folder holding ``repro-audit.toml`` or ``pyproject.toml`` ends the search:
    its ``repro-audit.toml``, else its ``pyproject.toml`` if that has a ``[tool.repro-audit]`` table, else none.
    """
    start = (cwd or Path.cwd()).absolute()
    for folder in (start, *start.parents):
        own, pyproject = folder / CONFIG_FILE, folder / PYPROJECT
        if own.is_file():
            if pyproject.is_file() and _has_table(pyproject):
                _warn_unread(own, pyproject)
            return own
        if pyproject.is_file():
            return pyproject if _has_table(pyproject) else None
    return None


@cache
def _warn_unread(own: Path, pyproject: Path) -> None:
    log.warning("%s and the [tool.%s] table of %s both hold settings: only %s is read", own, _TABLE, pyproject, own)


def _has_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{pyproject}: cannot be read as UTF-8 TOML ({exc})",
                       hint=f"fix or remove {pyproject}, or put a repro-audit.toml beside it") from None
    return _TABLE in text and _table(pyproject, _toml(pyproject)) is not None


def _toml(path: Path) -> dict[str, Any]:
    """The parsed file (cached while its size and modification time stay); ``BadInput`` when it is not TOML."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _parsed(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"configuration file {path} is not valid TOML: {exc}", hint="fix the place it names") from None


def _table(path: Path, data: dict[str, Any]) -> dict[str, Any] | None:
    tools = data.get("tool") if path.name == PYPROJECT else {_TABLE: data}
    table = tools.get(_TABLE) if isinstance(tools, dict) else None
    if table is not None and not isinstance(table, dict):
        raise BadInput(f"{path}: tool.{_TABLE} is not a table", hint=f"write the settings under [tool.{_TABLE}]")
    return table


def read_config(path: Path) -> ConfigFile:
    """The settings ``path`` holds (a ``repro-audit.toml``, or a ``pyproject.toml``'s ``[tool.repro-audit]``).

    ``BadInput`` names the file and the key, and the fix: for a key no setting has (with the closest one), a
    secret (it belongs in the environment), a URL carrying a password, a value of a TOML type the setting
    cannot take. A value's own format is checked where it is read, as a variable's is.
    """
    path = path.absolute()
    table = _table(path, _toml(path)) or {}
    by_key = {s.key: s for s in _KNOWN.values()}
    texts: dict[str, str] = {}
    keys: dict[str, str] = {}
    for key, value in table.items():
        declared_as = _setting_at(path, key, by_key)
        text = _text(path, key, declared_as, value)
        if text:
            texts[declared_as.name], keys[declared_as.name] = _anchored(path.parent, text, declared_as.location) if declared_as.location else text, key
    return ConfigFile(path, texts, keys)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def _anchored(folder: Path, text: str, words: bool | tuple[str, ...] = ()) -> str:
    """A relative path in a configuration file, from the file's folder (it is found from any subfolder, so the working
    directory cannot say): ``sqlite:///rel`` becomes ``sqlite:////abs``; a URI, an absolute path or ``~`` stays."""
    if isinstance(words, tuple) and text in words:  # a word the setting takes, not a path ("off")
        return text
    if text.startswith("sqlite:///") and not text.startswith("sqlite:////"):
        return "sqlite:///" + (folder / text[len("sqlite:///"):]).as_posix()
    if _SCHEME.match(text) or text.startswith(("/", "~")):  # s3://, memory://, a signer URI (awskms:...)
        return text
    return str(folder / text)


def _setting_at(path: Path, key: str, by_key: Mapping[str, Setting]) -> Setting:
    """The setting ``key`` names; ``BadInput`` for an unknown key (the closest one named) and for a secret."""
    found = by_key.get(key)
    if found is None:
        written = _key_of(key)  # a variable's name written as a key: REPRO_REPORTS for reports
        close = [written] if written in by_key else difflib.get_close_matches(written, by_key, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise BadInput(f"{_where(path, key)}: no setting has this key",
                       hint=f"{hint}a key is a setting's variable without its REPRO_ or MLFLOW_ prefix, lower-case "
                            "(repro-audit config show lists them)")
    if found.secret:
        raise BadInput(f"{path}: {key} is a secret ({found.name}), and a committed file is no place for one",
                       hint=f"remove {key} from {path} and set {found.name} in the environment of the processes that "
                            "need it, from an Airflow connection or your secrets backend (a Kubernetes Secret, Vault)")
    return found


#: what a value of each type is written as in the file (any type may also be written as the variable's text)
_TOML_KINDS = {"int": "a number", "float": "a number", "bool": "true or false",
               "list": "an array of strings, or one string of comma-separated names",
               "pairs": "a table, or one string of key=value pairs separated by commas"}
_SCALARS = (str, int, float)


def _text(path: Path, key: str, declared_as: Setting, value: Any) -> str:
    """A TOML value as the text a variable would hold: an array joined by commas, a table as ``key=value`` pairs."""
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, _SCALARS):
        text = str(value)
    elif isinstance(value, list) and declared_as.type in ("list", "pairs") and all(isinstance(v, _SCALARS) for v in value):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict) and declared_as.type == "pairs" and all(isinstance(v, _SCALARS) for v in value.values()):
        text = ",".join(f"{k}={v}" for k, v in value.items())
    else:
        toml_type = {dict: "table", list: "array"}.get(type(value), "date or time")
        raise BadInput(f"{_where(path, key)} is a TOML {toml_type}, which {declared_as.name} cannot take",
                       hint=f"write {key} as {_TOML_KINDS.get(declared_as.type, 'a string')} in {path}")
    if _has_password(text):
        raise BadInput(f"{_where(path, key)}: the URL carries a password, and a committed file is no place for one",
                       hint=f"write it without user:password in {path}; give the credentials in the environment "
                            "(MLflow reads MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD) or an Airflow connection")
    return text


def _has_password(text: str) -> bool:
    from urllib.parse import urlsplit

    try:
        return any("://" in part and urlsplit(part.strip()).password for part in text.split(","))
    except ValueError:  # not a URL (an unbalanced [ in a host)
        return False


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

        @classmethod
        def settings_customise_sources(cls, settings_cls: Any, init_settings: Any, **others: Any) -> tuple[Any, ...]:
            # validated from what ``_read`` gathered alone: os.environ must not fill what a given mapping left unset
            return (init_settings,)

    declarations = {s.attr: (s.annotation, s.info) for s in declared(cls)}
    return create_model(f"{cls.__name__}FromEnvironment", __base__=FromEnvironment, **declarations)


def _read(cls: type, env: Mapping[str, str] | None) -> dict[str, Any]:
    """``cls``'s settings from ``env`` (default: ``configured()``, the environment over the configuration file);
    ``BadInput`` names the first malformed one (its variable, or its file and key)."""
    from pydantic_settings import EnvSettingsSource

    values_from = configured(env)
    model = _environment_model(cls)
    source = EnvSettingsSource(model)
    source.env_vars = dict(values_from)  # over the variables and the file's values, by the same rules
    try:
        values = model.model_validate(source())
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        wrong = {s.name: s for s in declared(cls)}[name]
        raise wrong.malformed(source.env_vars[name], error, file=values_from.file_of(name)) from None
    return {attr: getattr(values, attr) for attr in model.model_fields}


