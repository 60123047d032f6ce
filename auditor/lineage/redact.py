"""Secret hygiene: the one redactor for everything that leaves the process.

Records, the stored diff, MLflow params and tags, log tails, error texts, reports, Python ``logging``
records and CLI output (plain and ``--json``) all pass through here. Four tests:

- the *key* names a secret (``password``, ``PGPASSWORD``, ``DB_PASS``, ``MYSQL_PWD``, ``apiKey``,
  ``hf_token``…; whole words, so ``max_tokens``, ``tokenizer``, ``num_passes``, ``sort_key`` keep
  their values: a marker there would break the rebuild that reads them), or *is* one: a mapping key
  that text rules redact, an opaque random token, or an entry of ``hmac_keys``/``api_keys``/``secrets``
  that is not a plain name (``auditor.lineage.redact_keys``);
- the *shape* of free text carries one: ``key=value`` and quoted keys as in dict and JSON text
  (``{'db_password': 'x'}``, ``{"api_key": "x"}``, ``KeyError('token=x')``), passwords in URLs with
  or without a user (``redis://:pw@host``), secret query parameters (``?password=``, ``&sig=``),
  ``Authorization:`` headers, whole ``-----BEGIN … PRIVATE KEY-----`` blocks;
- a maintained detector says so: the regexes of detect-secrets' plugins (AWS, private keys, basic
  auth, JWTs, GitHub, GitLab, Slack, Stripe, … and its keyword rules). Its entropy detectors are left
  out on purpose: they flag the sha256 and blake3 digests the evidence is made of;
- decoded, it holds one: base64 text is decoded and scanned (nested too), and a Docker auth config is
  a secret whatever key holds it (``auditor.lineage.redact_encoded``).

A redacted value becomes ``<redacted:xxxxxxxx>``, the suffix a short hash, so two runs with the same
secret still compare equal without the secret being stored. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from auditor.digests import sha256_hex
from auditor.lineage.redact_encoded import (
    MAX_DEPTH,
    base64_runs,
    basic_credentials,
    docker_auth_text,
    is_docker_auth_config,
)
from auditor.lineage.redact_keys import WORD_SPLIT as _WORD_SPLIT
from auditor.lineage.redact_keys import (
    is_opaque_token,
    is_plain_name,
    is_secret_key,
    names_secret_collection,
    yaml_block_spans,
)
from auditor.lineage.redact_shapes import BARE_LOOK, OWN, TRIGGERS, detectors

MARKER_PREFIX = "<redacted:"
_MARKER = re.compile(r"^<redacted:[0-9a-f]{8}>$")
_MARKER_ANY = re.compile(r"<redacted:[0-9a-f]{8}>")
_DEPTH: ContextVar[int] = ContextVar("redact_base64_depth", default=0)  # how many base64 layers the scan is inside


def marker(value: str) -> str:
    """The redaction marker for ``value``: stable across runs, reveals nothing useful."""
    return f"{MARKER_PREFIX}{sha256_hex(value.encode('utf-8', 'surrogateescape'))[:8]}>"


def is_redacted(value: Any) -> bool:
    return isinstance(value, str) and bool(_MARKER.match(value))


# -- shapes of free text --------------------------------------------------------------------------
_KEY = r"[A-Za-z_][A-Za-z0-9_.-]*"
# a whole private key block, or (a truncated log) the BEGIN line onwards to the end of its line
_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.{0,20000}?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"|-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[^\"'\n]*",
    re.DOTALL,
)
# scheme://[user]:password@host -> the password part only (redis://:pw@host has no user)
_URI_PASSWORD = re.compile(r"(?P<head>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@\"'<>]*:)(?P<pw>[^@\s/\"'<>\\]+)(?P<tail>@)")
# https://TOKEN@host (a token as the user, no password): git remotes carry PATs this way
_URI_USER = re.compile(r"(?P<head>(?<![a-zA-Z0-9+.-])(?:https?|git\+https?)://)(?P<pw>[^/\s:@\"'<>\\]+)(?P<tail>@)")
# ?password=… &sig=… ;token=…
_QUERY = re.compile(r"(?P<head>[?&;](?P<key>[A-Za-z0-9_.-]+)=)(?P<val>[^&;#\s\"'<>\\]+)")
_AUTH_HEADER = re.compile(r"(?P<head>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|negotiate)\s+)?)(?P<val>[^\s\"',}\\]+)", re.IGNORECASE)
# key=value, key: value, 'key': 'value', "key": "value", key="value", --key value
_ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z0-9_.-])(?P<q>(?:\\?[\"'])?)(?P<key>{_KEY})(?P=q)(?P<sep>\s*(?:[:=]|=>)\s*|\s+(?=\\?[\"']))"
    r"(?:(?P<quote>\\?[\"'])(?P<qval>(?:(?!(?P=quote))(?:\\.|.))*)(?P=quote)|(?P<val>(?!<redacted:)(?![{\[])[^\s,;&\"'}\])\\]+))"
)
_FLAG = re.compile(r"(?<!\S)(?P<head>--?(?P<key>[A-Za-z][A-Za-z0-9_-]*)\s+)(?P<val>(?!-)[^\s\"'\\]+)")
# plain prose: "the password is hunter2", "our API key for prod was: abc" (a value that is a word of ours is kept)
_PROSE = re.compile(
    r"(?i)\b(?P<key>passwords?|passphrase|passwd|pwd|secret|token|(?:api|access|secret|private|signing)[ _-]?key|credentials?)"
    r"(?:\s+(?:for|of|to|on)(?:\s+[^\s:=]{1,64}){1,3}?)?\s+(?:(?:was\s+|is\s+)?(?:set|changed)\s+to|is|was|are|were|became)\s*:?\s+"
    r"[\"'`]?(?P<val>(?!<redacted:)[^\s\"'`,;\\]+?)(?=[.)!?]*(?:[\s\"'`,;\\]|$))"
)
_PROSE_WORDS = frozenset({
    "a", "an", "the", "not", "no", "missing", "invalid", "expired", "empty", "required", "unset", "none", "null", "wrong",
    "incorrect", "too", "set", "stored", "given", "used", "needed", "configured", "redacted", "ok", "valid", "correct",
    "shown", "kept", "read", "in", "from", "at", "only", "being", "never", "also", "still", "now", "already", "available",
    "present", "absent", "revoked", "blank", "unknown", "checked", "signed", "rotated", "changed", "loaded", "found",
    "written", "optional", "off", "on", "true", "false", "yes", "this", "that", "its", "their", "your", "our",
})
def _mark(text: str) -> str:
    return text if _MARKER_ANY.fullmatch(text) else marker(text)


def _spans(text: str) -> list[tuple[int, int]]:
    """Where detect-secrets' plugins and our own credential shapes see a secret."""
    spans: list[tuple[int, int]] = []
    done = [m.span() for m in _MARKER_ANY.finditer(text)]  # never a span into a marker (basic auth sees "://<redacted:…>@")
    for pattern in OWN:
        spans.extend(m.span() for m in pattern.finditer(text))
    spans += _encoded_spans(text) + _collection_spans(text)
    lowered = text.lower()
    for triggers, rules in detectors():
        if not any(t in lowered for t in triggers):
            continue
        for pattern, group in rules:
            for m in pattern.finditer(text):
                start, end = m.span(group)
                if end - start >= 4 and MARKER_PREFIX not in text[start:end] and text[start:end] not in _LITERALS:
                    spans.append((start, end))
    return [(a, b) for a, b in spans if not any(a < e and s < b for s, e in done)] if done else spans


def _encoded_spans(text: str) -> list[tuple[int, int]]:
    """The base64 runs of ``text`` whose decoded text holds a secret (decoded again inside, ``MAX_DEPTH`` deep)."""
    depth = _DEPTH.get()
    if depth >= MAX_DEPTH:
        return []
    return [(start, end) for start, end, decoded in base64_runs(text) if _decoded_secret(decoded, depth + 1)]


def _decoded_secret(decoded: str, depth: int) -> bool:
    if basic_credentials(decoded) or docker_auth_text(decoded):
        return True
    token = _DEPTH.set(depth)
    try:
        return redact_text(decoded) != decoded
    finally:
        _DEPTH.reset(token)


# hmac_keys.<secret>: a flattened config key (a config's sources, a param name) naming an entry of a secret collection
_COLLECTION_PATH = re.compile(r"(?<![A-Za-z0-9_-])(?P<coll>[A-Za-z][A-Za-z0-9_-]*)(?=\.(?P<val>[^\s.'\"`=:,;()\[\]{}<>\\]+))")


def _collection_spans(text: str) -> list[tuple[int, int]]:
    return [m.span("val") for m in _COLLECTION_PATH.finditer(text)
            if names_secret_collection(m.group("coll")) and not is_plain_name(m.group("val")) and MARKER_PREFIX not in m.group("val")]


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    merged: list[list[int]] = []
    # a span never ends inside an escape (JSON's \\" would lose its backslash and end the string early)
    spans = [(start, end - (len(text[start:end]) - len(text[start:end].rstrip("\\")))) for start, end in spans]
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, at = [], 0
    for start, end in merged:
        out.append(text[at:start])
        out.append(_mark(text[start:end]))
        at = end
    out.append(text[at:])
    return "".join(out)


def _sub_value(pattern: re.Pattern[str], text: str, keep: Callable[[re.Match[str]], bool] = lambda m: True) -> str:
    def repl(m: re.Match[str]) -> str:
        if not keep(m):
            return m.group(0)
        start, end = m.span("val")
        base = m.start()
        return m.group(0)[: start - base] + _mark(m.group("val")) + m.group(0)[end - base :]

    return pattern.sub(repl, text)


def _assignment(m: re.Match[str]) -> str | None:
    key = m.group("key")
    value = m.group("qval") if m.group("quote") else m.group("val")
    if not value or not is_secret_key(key) or is_redacted(value) or (not m.group("sep").strip() and not m.group("quote")):
        return None
    if _names_a_key_file(m, key, value) or (not m.group("quote") and value in _LITERALS):
        return None
    start, end = m.span("qval") if m.group("quote") else m.span("val")
    base = m.start()
    # a bare value after a quoted key ("pin": 1234) becomes a quoted marker, so JSON and dict text stay valid
    quote = "" if m.group("quote") else m.group("q")
    return m.group(0)[: start - base] + quote + marker(value) + quote + m.group(0)[end - base :]


_LITERALS = frozenset({"null", "None", "true", "false", "True", "False", "value", "VALUE", "...", "…", "***"})  # and placeholders
_PATH_VALUE = re.compile(r"^(?:~|\.{1,2})?/\S*$|^[A-Za-z]:\\")


def _names_a_key_file(m: re.Match[str], key: str, value: str) -> bool:
    """``public key: …`` in prose, or ``signing key: /path/key.pem``: a key's name or path, not the secret itself."""
    words = [w.lower() for w in _WORD_SPLIT.split(key) if w]
    if not words or words[-1] != "key":
        return False
    before = m.string[: m.start()].rstrip().lower()
    return (len(words) == 1 and before.endswith(("public", "public-", "verification"))) or bool(_PATH_VALUE.match(value))


def _candidate_lines(text: str) -> list[int] | None:
    """Indices of the lines of ``text`` holding a trigger; None when the text is a single line that holds one."""
    lowered = text.lower()
    hits = [at for needle in TRIGGERS for at in _find_all(lowered, needle)]
    hits += [m.start() for m in BARE_LOOK.finditer(text)]
    if _DEPTH.get() < MAX_DEPTH:
        hits += [start for start, _, _ in base64_runs(text)]
    if not hits:
        return []
    if "\n" not in text:
        return None
    starts = [0]
    at = text.find("\n")
    while at != -1:
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return sorted({bisect.bisect_right(starts, hit) - 1 for hit in hits})


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def redact_text(text: str) -> str:
    """Redact credential-shaped substrings of free text: URIs and assignments keep everything but the secret.

    Line by line after the multi-line private key blocks: a cheap first look skips the lines that
    cannot hold a secret, so a long log or record costs little more than one regex pass.
    """
    if not text:
        return text
    document = _json_document(text)
    if document is not None:
        return document
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(lambda m: marker(m.group(0)), text)
    if "\n" in text:  # a YAML block under a secret's key: its lines say nothing of the key on their own
        text = _replace_spans(text, yaml_block_spans(text, MARKER_PREFIX))
    candidates = _candidate_lines(text)
    if candidates is None:
        return _structured_line(text) or _redact_line(text)
    if not candidates:
        return text
    lines = text.split("\n")
    for index in candidates:
        lines[index] = _structured_line(lines[index]) or _redact_line(lines[index])
    return "\n".join(lines)


def _structured_line(line: str) -> str | None:
    """A log line that is a JSON document or a printed Python dict/list, redacted by its structure (None: it is not)."""
    body = line.strip()
    if body[:1] not in ("{", "[") or body[-1:] not in ("}", "]"):
        return None
    found = _json_document(line)
    if found is not None:
        return found
    import ast

    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    if not isinstance(value, dict | list) or repr(value) != body:
        return None
    return line.replace(body, repr(redact_value("", value)))


def _redact_line(text: str) -> str:
    text = _URI_PASSWORD.sub(lambda m: m.group("head") + _mark(m.group("pw")) + m.group("tail"), text)
    text = _URI_USER.sub(lambda m: m.group("head") + _mark(m.group("pw")) + m.group("tail"), text)
    text = _sub_value(_PROSE, text, lambda m: m.group("val").lower() not in _PROSE_WORDS and not _MARKER_ANY.search(m.group("val")))
    text = _sub_value(_QUERY, text, lambda m: is_secret_key(m.group("key")) and not is_redacted(m.group("val")))
    text = _sub_value(_AUTH_HEADER, text, lambda m: not is_redacted(m.group("val")))
    text = _assignments(text)
    text = _sub_value(_FLAG, text, lambda m: is_secret_key(m.group("key")) and not is_redacted(m.group("val")))
    return _replace_spans(text, _spans(text))


def _assignments(text: str) -> str:
    """Each ``key <sep> value`` with a secret key; a match that is not one resumes after its separator
    (``env: PGPASSWORD=x`` holds two candidates)."""
    out: list[str] = []
    at = 0
    while True:
        m = _ASSIGNMENT.search(text, at)
        if m is None:
            out.append(text[at:])
            return "".join(out)
        replaced = _assignment(m)
        if replaced is None:
            out.append(text[at : m.end("sep")])
            at = m.end("sep")
        else:
            out.append(text[at : m.start()] + replaced)
            at = m.end()


def redact(text: str | None) -> str | None:
    """``redact_text`` that passes ``None`` (and the empty string) through: for optional messages."""
    return redact_text(text) if text else text


def redact_value(key: str, value: Any, *, secret: bool = False) -> Any:
    """Redact one value given its key; recurse into containers (everything under a secret key is secret)."""
    secret = secret or bool(key and is_secret_key(key))
    if isinstance(value, Mapping):
        return redact_mapping(value, secret=secret or is_docker_auth_config(value),
                              keyed_by_secrets=bool(key) and names_secret_collection(key))
    if isinstance(value, list | tuple):
        return [redact_value("", item, secret=secret) for item in value]
    if value is None or isinstance(value, bool):  # no secret in a flag or a null (and text rules keep them too)
        return value
    if secret and not is_redacted(value):
        return marker(str(value))
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_mapping(values: Mapping[str, Any], *, secret: bool = False, keyed_by_secrets: bool = False) -> dict[str, Any]:
    """Keys too: a key can be the secret (``{'https://u:pw@host/simple': 1}``, a token as a config key, an entry
    of ``hmac_keys``: ``keyed_by_secrets``). Two keys never become one: a second marker is told apart (``~2``)."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        name = str(k)
        key = _redact_key(name, keyed_by_secrets)
        at, n = key, 1
        while key != name and (at in out or at in values):
            n += 1
            at = f"{key}~{n}"
        out[at] = redact_value(name, v, secret=secret)
    return out


def _redact_key(name: str, keyed_by_secrets: bool) -> str:
    shown = redact_text(name)
    if shown != name or MARKER_PREFIX in name:
        return shown
    if (keyed_by_secrets and not is_plain_name(name)) or is_opaque_token(name):
        return marker(name)
    return name


def _json_document(text: str) -> str | None:
    """A whole JSON object or array redacted by its structure and printed as it was laid out; None if not JSON.

    Text rules alone cannot keep JSON valid (a mapping or a number under a secret key) nor see a nested
    mapping's secret context; the structure can.
    """
    body = text.strip()
    if body[:1] not in ("{", "[") or body[-1:] not in ("}", "]") or len(body) > 50_000_000:
        return None
    import json

    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    redacted = redact_value("", doc)
    if redacted == doc:
        return text
    lines = body.split("\n")
    indent = len(lines[1]) - len(lines[1].lstrip(" ")) if len(lines) > 1 else None
    out = json.dumps(redacted, indent=indent or None, ensure_ascii=body.isascii(),
                     separators=(",", ": ") if indent else ((", ", ": ") if ", " in body or ": " in body else (",", ":")))
    start = text.find(body[0])
    return text[:start] + out + text[start + len(body):]


def redact_argv(argv: list[str]) -> list[str]:
    """Redact ``key=value`` and ``--key value``/``--key=value`` arguments whose key looks secret."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next:
            out.append(marker(arg))
            secret_next = False
            continue
        if "=" in arg and not arg.startswith(("http:", "https:")):
            key, _, value = arg.partition("=")
            if is_secret_key(key.lstrip("-")):
                out.append(f"{key}={marker(value)}")
                continue
        elif arg.startswith("--") and is_secret_key(arg[2:]):
            secret_next = True
        out.append(redact_text(arg))
    return out


def redact_assignments(line: str) -> str:
    """Redact ``key: value`` / ``key = "value"`` in a line of source when the key looks secret (``redact_text``)."""
    return redact_text(line)


# -- the stored diff ----------------------------------------------------------------------------
_HUNK = re.compile(r"^@@ -(?P<old>\d+)(?:,\d+)? \+(?P<new>\d+)(?:,\d+)? @@")
_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_BEGIN_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_END_KEY = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")


def _lines(text: str) -> list[str]:
    """Lines split at ``\\n`` only, each keeping it: diffs and files may hold a lone ``\\r`` or a form feed."""
    return [line for line in re.split(r"(?<=\n)", text) if line]


def redact_diff(diff: str) -> tuple[str, int]:
    """Redact secrets on the changed lines of a unified diff; returns (diff, lines changed).

    Added lines get markers (the rebuild sees the marker there, and the gate names the file and
    line); the committed line git quotes after a hunk header is dropped. Removed and context lines are lines of committed files: they get markers too, and
    ``restore_committed_lines`` puts the committed text back from the checkout before the diff is
    applied, so a committed secret is never copied into the stored diff. Lines inside a private key
    block are replaced whole. Only lines that the cheap first look flags are examined, so a
    megabyte of ordinary code costs milliseconds.
    """
    lines = _lines(diff)
    changed = 0
    in_key = False
    in_hunk = False
    for index, line in enumerate(lines):
        if line.startswith("diff --git"):
            in_hunk, in_key = False, False
            continue
        if line.startswith("@@"):
            in_hunk = True
            # git quotes the line before the hunk after the second @@ ("function context"): a committed line
            header = _HUNK_HEADER.match(line)
            if header and header.end() < len(line.rstrip("\n")):
                lines[index] = header.group(0) + "\n"
            continue
        if not in_hunk or line[:1] not in ("+", "-", " "):
            continue
        sign, body = line[0], line[1:]
        newline = "\n" if body.endswith("\n") else ""
        content = body[: len(body) - len(newline)]
        if in_key or _BEGIN_KEY.search(content):
            new = marker(content)
            in_key = not _END_KEY.search(content)
        elif _candidate_lines(content) is None:
            new = _redact_line(content)
        else:
            continue
        if new != content:
            lines[index] = sign + new + newline
            changed += sign == "+"
    return "".join(lines), changed


def redacted_diff_lines(diff: str) -> list[str]:
    """``path:line`` (of the new file) of each added line of ``diff`` that holds a redaction marker."""
    found: list[str] = []
    path, line_no = "", 0
    for line in (raw.removesuffix("\n") for raw in _lines(diff)):
        if line.startswith("+++ "):
            name = line[4:].rstrip("\n").removesuffix("\t")
            path = name[2:] if name.startswith(("b/", '"b/')) else name
            path = path.strip('"')
            continue
        match = _HUNK.match(line)
        if match:
            line_no = int(match.group("new"))
            continue
        if line.startswith("+"):
            if MARKER_PREFIX in line:
                found.append(f"{path}:{line_no}")
            line_no += 1
        elif line.startswith(" "):
            line_no += 1
    return found


def restore_committed_lines(diff: str, read_old: Callable[[str], str | None]) -> str:
    """The diff with its removed and context lines taken from the committed files (``read_old(path)``).

    Exact by construction: a hunk's old side *is* lines ``old..`` of the committed file. A file
    ``read_old`` cannot give (new, binary, unreadable) keeps its lines as stored.
    """
    lines = _lines(diff)
    old: list[str] | None = None
    at = 0
    for index, line in enumerate(lines):
        if line.startswith("diff --git"):
            old = None
            continue
        if line.startswith("--- "):
            name = line[4:].rstrip("\n").removesuffix("\t")
            text = read_old(name[2:]) if name.startswith("a/") else None
            old = _lines(text) if text is not None else None
            continue
        match = _HUNK.match(line)
        if match:
            at = int(match.group("old")) - 1
            continue
        if old is None or line[:1] not in ("-", " "):
            continue
        if 0 <= at < len(old):
            committed = old[at]
            ending = "\n" if line.endswith("\n") else ""
            lines[index] = line[0] + committed.removesuffix("\n") + ending
        at += 1
    return "".join(lines)


# -- logging -------------------------------------------------------------------------------------
class RedactingFilter(logging.Filter):
    """Redacts a record's message and traceback text before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is the handler's to report
            return True
        record.msg, record.args = redact_text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info)
        return True


_FILTER = RedactingFilter()


def redacted_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the redacting filter; also puts it on every ``auditor`` logger made so far.

    A logger's filters do not reach its children, so each library logger carries its own; the sweep
    covers the ones of modules below this one (``auditor.settings``), which cannot import it.
    """
    for known in ["auditor", *(n for n in list(logging.root.manager.loggerDict) if n.startswith("auditor."))]:
        logger = logging.getLogger(known)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


redacted_logger("auditor")


__all__ = [
    "RedactingFilter", "is_redacted", "is_secret_key", "marker", "redact", "redact_argv", "redact_assignments",
    "redact_diff", "redact_mapping", "redact_text", "redact_value", "redacted_diff_lines", "redacted_logger",
    "restore_committed_lines",
]
