"""The one redactor applied to Python source: a copied training script stays valid Python without its secrets.

The pyfunc LoggedModel serves the training script's factory from its own copy of the script
(``code/<script>.py``); that copy is this function's output, never the raw file. The rules are
``auditor.lineage.redact``'s; this module only knows where Python keeps a value.
"""

from __future__ import annotations

import re
from typing import Any

from auditor.lineage.redact import is_secret_key, marker, redact_text

_ENV_OR_FLAG = re.compile(r"^(?:--?[a-z][a-z0-9_-]*|[A-Z][A-Z0-9_]*)$")
_NAME_LIKE = re.compile(r"^-{0,2}[A-Za-z_][A-Za-z0-9_.-]*$")


def redact_source(text: str) -> str:
    """A Python file with its secrets redacted, still valid Python: what is copied next to a served model.

    Token by token: after a name that names a secret (``DB_PASSWORD =``, ``password=``, ``"api_key":``,
    ``getenv("PGPASSWORD", …``), every literal of the statement becomes a marker string (the names of
    secrets themselves, ``"PGPASSWORD"`` or ``"--password"``, are kept); other strings and comments pass
    ``redact_text`` and a string it changes is replaced whole. Not Python (or not valid after): ``redact_text``.
    """
    import ast
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return redact_text(text)
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    edits: list[tuple[int, int, str]] = []
    secret, depth, at, prev = False, 0, 0, ""  # at: the bracket depth of the secret's name; prev: the last token
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or tok.string == ";":
            secret, depth = False, 0
        elif tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
            secret = secret and depth >= at
        elif tok.string == "," and depth == at and not prev.startswith("name:"):
            secret = False  # the next item of a dict or call: ``getenv("PGPASSWORD", default)`` keeps its default secret
        new = _source_token(tokenize, ast, tok, secret)
        if new is True:
            secret, at = True, depth
        elif new is not None and new != tok.string:
            edits.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1], new))
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = f"name:{tok.string}" if new is True else tok.string
    out = text
    for begin, end, new in reversed(edits):
        out = out[:begin] + new + out[end:]
    try:
        compile(out, "<redacted source>", "exec")
    except (SyntaxError, ValueError):
        return redact_text(text)
    return out


def _source_token(tokenize: Any, ast: Any, tok: Any, secret: bool) -> str | bool | None:
    """True: the token names a secret; a string: its replacement; None: kept."""
    if tok.type == tokenize.NAME and is_secret_key(tok.string):
        return True
    if tok.type == tokenize.NUMBER and secret:
        return repr(marker(tok.string))
    if tok.type == tokenize.COMMENT:
        return redact_text(tok.string)
    if tok.type != tokenize.STRING:
        return None
    try:
        value = ast.literal_eval(tok.string)
    except (ValueError, SyntaxError):
        value = None  # an f-string
    named = isinstance(value, str) and bool(_NAME_LIKE.match(value)) and is_secret_key(value)
    if named and (not secret or _ENV_OR_FLAG.match(value)):
        return True
    if secret or (value is None and redact_text(tok.string) != tok.string):
        return repr(marker(tok.string))
    return repr(redact_text(value)) if isinstance(value, str) and redact_text(value) != value else None
