"""Shared output helpers: human tables via rich, ``--json`` for scripts, errors and progress on stderr.

Piped, nothing is wrapped or cut: the console is as wide as the longest line, so a 64-hex digest
stays on one line whatever ``COLUMNS`` says. Progress goes to stderr: a spinner on a terminal, else
timestamped stage lines through ``logging`` (the library logs its stages there, as in an Airflow
task log), and MLflow's HTTP retries (``urllib3`` warnings) with them.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

#: wide enough that rich never wraps or truncates a line when the output is not a terminal
PIPED_WIDTH = 10**4
STAGE_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s"
_LOGGERS = ("auditor", "urllib3.connectionpool")
_HANDLER_MARK = "_repro_audit_cli"


_emitted: list[bool] = []  # whether this process printed its JSON document already


def emit_json(value: Any) -> None:
    _emitted.append(True)
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def reset() -> None:
    """A fresh command (``main`` called again in one process, as tests do)."""
    _emitted.clear()


def json_emitted() -> bool:
    """Whether a JSON document went to stdout (an error after it is not printed as a second one)."""
    return bool(_emitted)


def error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    # Text, not markup: messages quote user input, which may contain [brackets].
    console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else PIPED_WIDTH)
    console.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)


def emit_error_json(message: str, code: int, hint: str | None) -> None:
    """Under ``--json``: the error on stdout too, as one object a script can parse, unless the command
    already printed its own document (``lineage show --json`` with blocking findings, say)."""
    if not json_emitted():
        emit_json({"error": message, "exit_code": code, "hint": hint})


def console():
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else PIPED_WIDTH)


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def install_logging() -> None:
    """Stage lines on stderr: INFO and up when stderr is not a terminal (the spinner shows them there), else warnings."""
    import time

    level = logging.WARNING if stderr_is_terminal() else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(STAGE_FORMAT, datefmt="%Y-%m-%dT%H:%M:%S")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.setLevel(level)
    setattr(handler, _HANDLER_MARK, True)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if not getattr(h, _HANDLER_MARK, False)]
        logger.addHandler(handler)
        logger.setLevel(level)
