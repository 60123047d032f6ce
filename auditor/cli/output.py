"""Shared output helpers: human tables via rich, ``--json`` for scripts, errors and progress on stderr.

Piped, nothing is wrapped or cut: the console is as wide as the longest line, so a 64-hex digest
stays on one line whatever ``COLUMNS`` says. Progress goes to stderr: a spinner on a terminal, else
timestamped stage lines through ``logging`` (the library logs its stages there, as in an Airflow
task log), and MLflow's HTTP retries (``urllib3`` warnings) with them.

Everything the CLI writes passes the one redactor (``auditor.lineage.redact``): ``main`` wraps
stdout and stderr in ``RedactingStream`` for the whole command, so tables, ``--json``, usage
errors and exception messages are covered alike, whichever part printed them.

Every character that a screen does not show as itself (a right-to-left override U+202E in a model name
from the registry, a zero-width space, a control character) is written out as ``<U+XXXX>``
(``auditor.uris.visible``), so what a terminal or a log shows is what was audited.

Our own sentences may read like an assignment (``its public key: PATH``): the redactor cannot tell
them from a secret, and must not learn to (a label is exactly what a leaked secret carries). So a
command *declares* the values it computed itself and knows to be public (``declare_public``: the
demo's public-key path); the redactor runs as always, and only a marker that stands for exactly such
a value is turned back into it. A secret is never printed that way: a marker is put back only as the
declared value (never as what it replaced), and a value is declared only if the redactor passes it
alone (a path holding a token is not declared).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

from auditor.lineage.redact import marker, redact_text
from auditor.uris import visible

#: marker -> value: what this command computed itself and prints as it is (``declare_public``)
_public: dict[str, str] = {}


def declare_public(*values: object) -> None:
    """Values this command made and knows to be public (a public key's path): printed as they are even
    where the redactor reads our own label before them (``key: …``) as naming a secret. A value the
    redactor changes on its own (it holds a credential's shape) is not declared."""
    for value in map(str, values):
        if value and redact_text(value) == value:
            _public[marker(value)] = value


def redact_out(text: str) -> str:
    """``redact_text``, then each marker of a declared public value put back as that value."""
    text = redact_text(text)
    if _public and "<redacted:" in text:
        for mark, value in _public.items():
            text = text.replace(mark, value)
    return text


class RedactingStream:
    """A text stream that redacts what it passes on, whole lines at a time (a secret split across two
    writes is still seen whole); ``flush`` passes on a partial line, so prompts and spinners still show.
    Hidden characters are written out (``<U+202E>``); a terminal keeps the escape sequences rich colours with."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self._pending = ""
        self._keep = "\n\r\t" + ("\x1b" if _isatty(inner) else "")

    def write(self, text: str) -> int:
        self._pending += text
        cut = self._pending.rfind("\n") + 1
        if cut:
            done, self._pending = self._pending[:cut], self._pending[cut:]
            self._inner.write(visible(redact_out(done), keep=self._keep))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._inner.write(visible(redact_out(self._pending), keep=self._keep))
            self._pending = ""
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, encoding, fileno… as the real stream has them
        return getattr(self._inner, name)


def redacting(stream: TextIO) -> TextIO:
    return stream if isinstance(stream, RedactingStream) else RedactingStream(stream)  # type: ignore[return-value]

#: wide enough that rich never wraps or truncates a line when the output is not a terminal
PIPED_WIDTH = 10**4
STAGE_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s"
_LOGGERS = ("auditor", "urllib3.connectionpool")
_HANDLER_MARK = "_repro_audit_cli"


_emitted: list[bool] = []  # whether this process printed its JSON document already


def emit_json(value: Any) -> None:
    _emitted.append(True)
    sys.stdout.write(redact_out(json.dumps(value, indent=2, sort_keys=True, default=str)) + "\n")


def reset() -> None:
    """A fresh command (``main`` called again in one process, as tests do)."""
    _emitted.clear()
    _public.clear()


def json_emitted() -> bool:
    """Whether a JSON document went to stdout (an error after it is not printed as a second one)."""
    return bool(_emitted)


def error(message: str) -> None:
    from rich.console import Console
    from rich.text import Text

    # Text, not markup: messages quote user input, which may contain [brackets].
    console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else PIPED_WIDTH)
    console.print(Text("error: ", style="bold red") + Text(redact_out(message)), soft_wrap=True)


def emit_error_json(message: str, code: int, hint: str | None) -> None:
    """Under ``--json``: the error on stdout too, as one object a script can parse, unless the command
    already printed its own document (``lineage show --json`` with blocking findings, say)."""
    if not json_emitted():
        emit_json({"error": message, "exit_code": code, "hint": hint})


def console():
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else PIPED_WIDTH)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def stderr_is_terminal() -> bool:
    return _isatty(sys.stderr)


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
