"""Shared output helpers: human tables via rich, ``--json`` for scripts, errors and progress on stderr.

Piped, a line is never wrapped or cut: the console is as wide as the longest line. A table fits the
terminal (``COLUMNS``, else 80 columns piped) by wrapping its cells at spaces, and is widened only as far
as its longest unbreakable word needs: a 64-hex digest stays whole on one line (``fit_width``). Values in
a table are shown one way everywhere (``cell``): words for booleans and missing values, rounded figures.
``--json`` prints the values as they are. Progress goes to stderr: a spinner on a terminal, else
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

import functools
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
    """stdout's console. Piped, a line is never wrapped (``PIPED_WIDTH``); a table still fits (``fit_width``)."""
    return _console_class()(highlight=False, width=None if sys.stdout.isatty() else PIPED_WIDTH)


@functools.cache
def _console_class():
    from rich.console import Console
    from rich.table import Table

    class FittingConsole(Console):
        """A console that fits each table it prints to the terminal (``fit_table``), whoever built the table."""

        def print(self, *objects: Any, **options: Any) -> None:
            if not self.is_terminal and len(objects) == 1 and isinstance(objects[0], Table):
                import shutil

                fit_table(self, objects[0], shutil.get_terminal_size().columns)
            super().print(*objects, **options)

    return FittingConsole


def _levelled(lows: list[int], highs: list[int], level: int) -> int:
    return sum(min(high, max(low, level)) for low, high in zip(lows, highs, strict=True))


def fit_table(out: Any, shown: Any, room: int) -> None:
    """Fix the widths of ``shown``'s columns so that it is at most ``room`` columns wide (piped: ``COLUMNS``, else 80,
    as ``shutil.get_terminal_size`` says; on a terminal rich fits it itself), wrapping cells at spaces and never
    inside a word: a digest or a path stays whole on one line (copied, it is still the digest), so the table is
    wider than ``room`` only by what its longest words need. Each column gets its longest word; the room left
    goes to the narrowest columns first, so that no column is squeezed to a word a line while another is wide."""
    columns = list(shown.columns)
    if not columns:
        return
    # rich measures a column (its header and cells, with padding) only through Table's own helpers (rich 13 to 15)
    ranges = [shown._measure_column(out, out.options, column) for column in columns]
    highs = [r.maximum for r in ranges]
    lows = [high if column.no_wrap else min(r.minimum, high) for r, high, column in zip(ranges, highs, columns, strict=True)]
    space = room - shown._extra_width
    if sum(highs) <= space:
        return
    level = max(highs)  # the widest level every column may grow to (its longest word at least, its whole at most)
    while level > 0 and _levelled(lows, highs, level) > space:
        level -= 1
    widths = [min(high, max(low, level)) for low, high in zip(lows, highs, strict=True)]
    for index in range(len(columns)):  # what the levelling left over, one column each
        if sum(widths) < space and widths[index] < highs[index]:
            widths[index] += 1
    for column, width in zip(columns, widths, strict=True):
        column.width = max(width - shown._get_padding_width(column._index), 1)


# -- values in tables: every table of the CLI shows a value the same way -------------------------------------
#: a missing value, in words (never ``None``)
MISSING = "none"
FIGURES = 4  # significant digits of a figure in a table; more only where fewer would make two values look equal
MOST_FIGURES = 6


def figure(value: float, digits: int = FIGURES) -> str:
    """A number as a person reads it: an integral value whole (``512``), else ``digits`` significant digits
    (``1.7532749938964844`` -> ``1.753``, ``3.2e-06`` stays), never a tail of float noise."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return cell_text(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)  # nan, inf, -inf
    if value.is_integer() and abs(value) < 10**15:
        return str(int(value))
    if abs(value) >= 10**digits:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def figures(values: list[Any]) -> list[str]:
    """Numbers shown side by side (a metric registered and rebuilt, a band's edges): the fewest significant digits,
    from ``FIGURES`` to ``MOST_FIGURES``, that keep values that differ looking different."""
    numbers = {v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    digits = FIGURES
    while digits < MOST_FIGURES and len({figure(v, digits) for v in numbers}) < len(numbers):
        digits += 1
    return [figure(v, digits) for v in values]


def cell_text(value: Any, *, missing: str = MISSING) -> str:
    """The words a table shows for ``value``: ``yes``/``no`` for a boolean, ``missing`` for None, a rounded figure
    for a number, a list joined by commas; text as it is, but for a character a screen does not show as itself
    (``<U+202E>``; a newline stays a line break inside its cell)."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return figure(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(figures(list(value))) if value else missing
    return visible(str(value), keep="\n\t")


def cell(value: Any, *, missing: str = MISSING) -> Any:
    """A table cell: a rich renderable (``Text`` with its style) as it is, anything else as plain ``Text`` (never
    markup: registry names and error texts may hold ``[brackets]``) of ``cell_text``."""
    from rich.text import Text

    if hasattr(value, "__rich_console__") or hasattr(value, "__rich__"):
        return value
    return Text(cell_text(value, missing=missing))


def table(*columns: Any, title: Any = None, **options: Any) -> Any:
    """A rich ``Table`` whose rows pass each value through ``cell`` (``add_row(name, 0.1234567, True, None)`` shows
    ``name 0.1235 yes none``). A column is a name, or ``(name, {column options})``; text columns fold."""
    from rich.text import Text

    made = _table_class()(title=Text(title) if isinstance(title, str) else title, title_justify="left", **options)
    for column in columns:
        name, settings = (column, {}) if isinstance(column, str) else column
        made.add_column(name, **{"overflow": "fold", **settings})
    return made


@functools.cache
def _table_class():
    from rich.table import Table

    class FormattedTable(Table):
        def add_row(self, *values: Any, **options: Any) -> None:
            super().add_row(*(cell(v) for v in values), **options)

    return FormattedTable


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
