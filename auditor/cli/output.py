"""Shared output helpers: human tables via rich, ``--json`` for scripts, errors on stderr.

Everything the CLI writes passes the one redactor (``auditor.lineage.redact``): ``main`` wraps
stdout and stderr in ``RedactingStream`` for the whole command, so tables, ``--json``, usage
errors and exception messages are covered alike, whichever part printed them.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from auditor.lineage.redact import redact_text


class RedactingStream:
    """A text stream that redacts what it passes on, whole lines at a time (a secret split across two
    writes is still seen whole); ``flush`` passes on a partial line, so prompts and spinners still show."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        cut = self._pending.rfind("\n") + 1
        if cut:
            done, self._pending = self._pending[:cut], self._pending[cut:]
            self._inner.write(redact_text(done))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._inner.write(redact_text(self._pending))
            self._pending = ""
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno… as the real stream has them
        return getattr(self._inner, name)


def redacting(stream: TextIO) -> TextIO:
    return stream if isinstance(stream, RedactingStream) else RedactingStream(stream)  # type: ignore[return-value]


def emit_json(value: Any) -> None:
    sys.stdout.write(redact_text(json.dumps(value, indent=2, sort_keys=True, default=str)) + "\n")


def error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    # Text, not markup: messages quote user input, which may contain [brackets].
    Console(stderr=True, highlight=False).print(Text("error: ", style="bold red") + Text(redact_text(message)), soft_wrap=True)


def console():
    from rich.console import Console

    return Console(highlight=False)
