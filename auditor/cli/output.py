"""Shared output helpers: human tables via rich, ``--json`` for scripts, errors on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    # Text, not markup: messages quote user input, which may contain [brackets].
    Console(stderr=True, highlight=False).print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)


def console():
    from rich.console import Console

    return Console(highlight=False)
