"""An argparse config: the parser or namespace a script hands ``track``, read as values and their sources.

Named ``argparse_source`` so that it never shadows the standard library's ``argparse``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from auditor.errors import BadInput


def parse_scalar(text: str) -> Any:
    """A value as an environment variable or a ``key=value`` override spells it: a YAML scalar, else the text."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


@dataclass(frozen=True)
class ArgparseSource:
    """An argparse config as ``track`` holds it: the parser or namespace, the parser when known, the command line."""

    source: argparse.ArgumentParser | argparse.Namespace
    parser: argparse.ArgumentParser | None
    argv: tuple[str, ...]

    def parse(self) -> argparse.Namespace:
        """The namespace: the one given, or the parser's reading of ``argv``."""
        if isinstance(self.source, argparse.Namespace):
            return self.source
        namespace, _ = _parse_quietly(self.source, list(self.argv))
        if namespace is None:
            raise BadInput(f"the command line {' '.join(self.argv)!r} does not parse with the script's ArgumentParser")
        return namespace

    def given(self) -> set[str]:
        """The dests the command line sets."""
        if self.parser is None:
            return _spelled_in_argv(vars(self.parse()), list(self.argv))
        return _given_on_command_line(self.parser, list(self.argv))

    def action(self, dest: str) -> argparse.Action | None:
        for each in _all_parsers(self.parser) if self.parser is not None else []:
            for action in each._actions:
                if action.dest == dest:
                    return action
        return None


def argparse_config(
    source: argparse.ArgumentParser | argparse.Namespace,
    *,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The values of an argparse config as JSON-able data, and where each came from.

    ``source`` is a parser (parsed here against ``argv``, default ``sys.argv[1:]``)
    or a parsed namespace (its values as they are). Each value's source is

    - ``"cli"`` when ``argv`` gives it: ``argv`` is parsed again by the parser with
      every default suppressed, so only what the command line set comes back
      (abbreviated options and ``--opt=value`` included, as argparse reads them);
    - ``"env"`` when it was not on the command line and an environment variable
      named after the option (``LR`` or ``MY_LR`` for ``--lr``) holds exactly the
      default: the usual ``default=os.environ.get("LR", 0.1)``. argparse keeps no
      trace of where a default came from, so this is by name and value;
    - ``"default"`` otherwise.

    For a namespace without its parser, ``"cli"`` falls back to looking for the
    option's spelling (``--batch-size``, ``--batch_size``) in ``argv``; a value given
    positionally then reads ``"default"``. Values that are not JSON are recorded by
    a stable text: a path as its string, a function as ``module.qualname``, a file as its name.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if isinstance(source, argparse.ArgumentParser):
        parser = source
        namespace, _unknown = _parse_quietly(parser, argv)
        if namespace is None:
            raise BadInput(
                f"the command line {' '.join(argv)!r} does not parse with the script's ArgumentParser",
                hint="run the script with arguments its parser accepts",
            )
    else:
        namespace = source
    values = {key: argparse_jsonable(value) for key, value in vars(namespace).items()}
    given = _given_on_command_line(parser, argv) if parser is not None else _spelled_in_argv(values, argv)
    defaults = _argparse_defaults(parser) if parser is not None else {}
    sources: dict[str, str] = {}
    for key, value in values.items():
        if key in given:
            sources[key] = "cli"
        elif _default_from_env(key, value, defaults, env):
            sources[key] = "env"
        else:
            sources[key] = "default"
    return values, sources


def argparse_jsonable(value: Any) -> Any:
    """An argparse value as JSON data with a stable spelling (no memory addresses)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [argparse_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): argparse_jsonable(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "read") or hasattr(value, "write"):  # argparse.FileType
        return str(getattr(value, "name", type(value).__name__))
    if callable(value):  # set_defaults(func=train)
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}"
    import enum

    if isinstance(value, enum.Enum):
        return argparse_jsonable(value.value)
    return str(value)


def _parse_quietly(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.Namespace | None, list[str]]:
    """``parse_known_args`` without printing usage or exiting on a bad command line."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_known_args(argv)
    except SystemExit:
        return None, []


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _all_parsers(child)
    return found


def _argparse_defaults(parser: argparse.ArgumentParser) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for each in _all_parsers(parser):
        for action in each._actions:
            if action.dest is not argparse.SUPPRESS and action.default is not argparse.SUPPRESS:
                defaults.setdefault(action.dest, argparse_jsonable(action.default))
        defaults.update({k: argparse_jsonable(v) for k, v in each._defaults.items()})
    return defaults


def _given_on_command_line(parser: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """The dests ``argv`` sets: parsed with every default suppressed (restored after), so only given ones appear."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for each in _all_parsers(parser):
            for action in each._actions:
                saved.append((action, "default", action.default))
                action.default = argparse.SUPPRESS
            saved.append((each, "_defaults", each._defaults))
            each._defaults = {}
            saved.append((each, "argument_default", each.argument_default))
            each.argument_default = argparse.SUPPRESS
        namespace, _ = _parse_quietly(parser, argv)
    finally:
        for owner, attribute, value in reversed(saved):
            setattr(owner, attribute, value)
    return set(vars(namespace)) if namespace is not None else set()


def _spelled_in_argv(values: Mapping[str, Any], argv: list[str]) -> set[str]:
    given: set[str] = set()
    tokens = {token.split("=", 1)[0] for token in argv if token.startswith("-")}
    for key in values:
        spellings = {f"--{key}", f"--{key.replace('_', '-')}"}
        if tokens & spellings:
            given.add(key)
    return given


def _default_from_env(key: str, value: Any, defaults: Mapping[str, Any], env: Mapping[str, str]) -> bool:
    if key in defaults and defaults[key] != value:
        return False
    name = re.sub(r"[^A-Za-z0-9]", "_", key).upper()
    for var, raw in env.items():
        if var == name or var.endswith("_" + name):
            parsed = parse_scalar(raw)
            if raw == value or (
                not isinstance(value, str) and value is not None and parsed == value and isinstance(parsed, bool) == isinstance(value, bool)
            ):
                return True
    return False
