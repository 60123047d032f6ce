"""The config section: a file, a dict or an argparse config, then environment variables and CLI overrides."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from auditor.canonical import digest, flatten
from auditor.contract import ENV_CONFIG_PREFIX
from auditor.errors import BadInput
from auditor.lineage.gather.argparse_source import ArgparseSource, argparse_config, parse_scalar
from auditor.lineage.record import ConfigInfo
from auditor.lineage.redact import redact_mapping, redact_text


def _load_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text) if path.suffix.lower() in {".yaml", ".yml"} else json.loads(text)
    except (yaml.YAMLError, ValueError) as exc:
        raise BadInput(f"config file {path} does not parse: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(f"config file {path} must hold a mapping at the top level, not {type(data).__name__}")
    return data


def _set_path(target: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _overrides(items: Sequence[str]) -> list[tuple[str, Any]]:
    """``a.b=v`` command-line overrides as (key, parsed value); anything else is ``BadInput``."""
    out = []
    for item in items:
        if "=" not in item or item.startswith("="):
            raise BadInput(f"config override {item!r} is not key=value", hint="write e.g. lr=0.01 or model.hidden=64")
        key, _, raw = item.partition("=")
        out.append((key.strip().lstrip("-"), parse_scalar(raw)))
    return out


def resolve_config(
    source: Path | str | Mapping[str, Any] | argparse.ArgumentParser | argparse.Namespace | None = None,
    overrides: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    argv: Sequence[str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> ConfigInfo:
    """Merge file (or dict, or argparse), ``REPRO_CFG__a__b=v`` environment variables and ``a.b=v`` CLI overrides.

    Later sources win; each flattened key remembers where its value came from.
    Credential-shaped values are redacted before the digest is taken. An
    ``ArgumentParser`` is parsed against ``argv`` (default ``sys.argv[1:]``); a
    parsed ``Namespace`` is taken as it is, with ``parser`` (when known) telling
    defaults from command-line values: see ``argparse_config``.
    """
    env = os.environ if env is None else env
    resolved: dict[str, Any] = {}
    sources: dict[str, str] = {}
    file_name: str | None = None
    origins: dict[str, str] = {}
    if isinstance(source, ArgparseSource):
        source, argv, parser = source.source, source.argv, source.parser
    if isinstance(source, (argparse.ArgumentParser, argparse.Namespace)):
        if overrides:
            raise BadInput(
                "config overrides (key=value) were passed beside an argparse config",
                hint="with config=parser or config=args the command line is read through argparse; drop overrides=",
            )
        base, origins = argparse_config(source, argv=argv, env=env, parser=parser)
        origin = "default"
    elif isinstance(source, Mapping):
        base, origin = dict(source), "default"
    elif source is not None:
        path = Path(source)
        base, origin, file_name = _load_config_file(path), "file", path.name
    else:
        base, origin = {}, "default"
    for key, value in flatten(base).items():
        if key:
            _set_path(resolved, key, value)
            sources[key] = origins.get(key, origin)
    for name in sorted(env):
        if name.startswith(ENV_CONFIG_PREFIX):
            key = name[len(ENV_CONFIG_PREFIX) :].lower().replace("__", ".")
            _set_path(resolved, key, parse_scalar(env[name]))
            sources[key] = "env"
    for key, value in _overrides(overrides):
        _set_path(resolved, key, value)
        sources[key] = "cli"
    # a key overridden as a whole mapping drops its children's stale sources
    flat = flatten(resolved)
    sources = {k: v for k, v in sources.items() if k in flat or any(f.startswith(k + ".") for f in flat)}
    redacted = redact_mapping(resolved)
    # a key can hold a secret too (mirrors: {'https://user:pw@host/simple': 1}): the sources name keys
    sources = {redact_text(k): v for k, v in sources.items()}
    return ConfigInfo(resolved=redacted, digest=digest(redacted), sources=sources, file=file_name)
