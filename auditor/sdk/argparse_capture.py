"""Argparse scripts: ``track(config=parser)`` or ``track(config=args)`` records the parsed values and their sources.

At training time the namespace is the script's own; in a rebuild the namespace (and the parser's
defaults) are made the recorded values, and a command line that disagrees with the record is warned.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from auditor.errors import BadInput
from auditor.lineage.redact import redacted_logger
from auditor.sdk.run import Run

log = redacted_logger(__name__)  # the warnings quote config values


def argparse_source(config: Any, parser: Any) -> Any:
    """An ``ArgumentParser`` or parsed ``Namespace`` as an ``ArgparseSource``; anything else unchanged."""
    import argparse

    if parser is not None and not isinstance(parser, argparse.ArgumentParser):
        raise BadInput(f"parser= must be an argparse.ArgumentParser, not {type(parser).__name__}")
    if not isinstance(config, (argparse.ArgumentParser, argparse.Namespace)):
        if parser is not None:
            raise BadInput("parser= goes with config=args (the namespace it parsed)", hint="track(config=args, parser=parser)")
        return config
    from auditor.lineage.gather import ArgparseSource

    if isinstance(config, argparse.ArgumentParser):
        parser = config
    elif parser is None:
        parser = _find_parser(config)
    return ArgparseSource(source=config, parser=parser, argv=tuple(sys.argv[1:]))


def _find_parser(namespace: Any) -> Any:
    """The ``ArgumentParser`` that made ``namespace``: looked for among the calling code's variables.

    Scripts keep it in a local (``parser = argparse.ArgumentParser(...)``) of the function that
    calls ``track``/``start``, or at module level. It must know every name in the namespace.
    """
    import argparse

    from auditor.lineage.gather import _all_parsers

    names = set(vars(namespace))
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("auditor"):
        frame = frame.f_back
    for scope in (frame.f_locals, frame.f_globals) if frame is not None else ():
        for value in list(scope.values()):
            if isinstance(value, argparse.ArgumentParser):
                dests = {a.dest for p in _all_parsers(value) for a in p._actions} | {
                    k for p in _all_parsers(value) for k in p._defaults
                }
                if names <= dests:
                    return value
    log.info("repro: no ArgumentParser found beside the namespace; command-line values are told by their spelling")
    return None


def _get_path(mapping: Mapping[str, Any], dotted: str) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def _from_recorded(value: Any, action: Any) -> Any:
    """A recorded (JSON) value as the script's parser would have typed it (``type=Path`` gives a Path again)."""
    kind = getattr(action, "type", None)
    if not callable(kind) or kind is str:
        return value
    try:
        if isinstance(value, str):
            return kind(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [kind(v) for v in value]
    except Exception:  # noqa: BLE001 - keep the recorded value as it is
        return value
    return value


def script_args(source: Any, run: Run, *, seed_given: bool) -> Any:
    """The script's argparse namespace when ``source`` is an ``ArgparseSource`` (else None): in a rebuild, the recorded values.

    ``seed_given``: ``track`` was given ``seed=``, so the config's ``seed`` is not the run's seed.
    """
    from auditor.lineage.gather import ArgparseSource

    if not isinstance(source, ArgparseSource):
        return None
    if not run.rebuild:
        return source.parse()
    return _recorded_args(source, run, seed_given=seed_given)


def _recorded_args(source: Any, run: Run, *, seed_given: bool) -> Any:
    """In a rebuild, make the script's argparse values the recorded ones (REPRO_CONFIG), and say where argv disagrees.

    The namespace passed as ``config=args`` is updated in place; the parser's defaults are set to the
    recorded values so that a later ``parser.parse_args()`` returns them too. Values the command line
    gives come from the recorded argv and must agree with the record; a disagreement is logged and the
    record wins. Redacted values are left as the script parsed them. The seed, when it came from the
    config's ``seed``, becomes the audit's (``run.seed``), so calibration's reruns reach it.
    """
    from auditor.lineage.gather import argparse_jsonable
    from auditor.lineage.redact import is_redacted

    recorded = run.config
    namespace = source.parse()
    given = source.given()
    seed_from_config = not seed_given and "seed" in recorded and run.seed is not None
    for dest in sorted(set(vars(namespace)) | {k for k in recorded if k not in vars(namespace)}):
        value = _get_path(recorded, dest)
        if value is _MISSING or is_redacted(value):
            continue
        if dest == "seed" and seed_from_config:
            value = run.seed
        current = getattr(namespace, dest, _MISSING)
        if current is not _MISSING and argparse_jsonable(current) == value:
            continue
        if dest in given and dest != "seed":
            log.warning(
                "repro: the command line gives %s=%r but the recorded config holds %r; the rebuild uses the recorded value",
                dest, argparse_jsonable(current), value,
            )
        typed = _from_recorded(value, source.action(dest))
        setattr(namespace, dest, typed)
        if source.parser is not None:
            source.parser.set_defaults(**{dest: typed})
    return namespace
