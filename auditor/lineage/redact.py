"""Secret hygiene: redact credential-shaped values before they reach a record, log or report.

Two tests, applied everywhere a value is captured: the *key* looks secret
(password, token, secret, key…) or the *value* looks like a credential (AWS key
ids, bearer tokens, JWTs, private keys, URIs with a password). A redacted value
becomes ``<redacted:xxxxxxxx>`` where the suffix is a short hash, so two runs
with the same secret still compare equal without the secret being stored.
Pure: no I/O.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Mapping
from typing import Any

# A loose hint for scanning lines of text; ``is_secret_key`` makes the real decision.
_SECRET_KEY = re.compile(r"(pass|secret|token|credential|cookie|session|signature|dsn|key|auth)", re.IGNORECASE)
# Whole words only, so that ordinary settings (``max_tokens``, ``tokenizer``, ``num_passes``,
# ``sort_key``) keep their values: a marker there would break the rebuild that reads them.
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "pwd", "secret", "token", "credential", "credentials", "cookie",
    "dsn", "auth", "authorization", "apikey", "signature", "sessionid", "privatekey", "accesskey",
})
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "secret", "signing", "encryption", "master", "ssh", "account", "session"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_CREDENTIAL_VALUE = [
    re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b"),  # AWS access key ids
    re.compile(r"\bbearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE),
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # JWT
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),  # GitHub tokens
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"),  # Slack tokens
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),  # common API secret keys
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face tokens
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
]
# scheme://user:password@host  -> the password part only
_URI_PASSWORD = re.compile(r"(?P<head>(?<![a-zA-Z0-9+.-])[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)(?P<pw>[^@\s/]+)(?P<tail>@)")
_MARKER = re.compile(r"^<redacted:[0-9a-f]{8}>$")
# one pass that says whether any credential pattern could match (most lines: no)
_ANY_CREDENTIAL = re.compile("|".join(f"(?:{p.pattern})" for p in [*_CREDENTIAL_VALUE, _URI_PASSWORD]), re.IGNORECASE)


def marker(value: str) -> str:
    """The redaction marker for ``value``: stable across runs, reveals nothing useful."""
    return f"<redacted:{hashlib.sha256(value.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}>"


def is_redacted(value: Any) -> bool:
    return isinstance(value, str) and bool(_MARKER.match(value))


def is_secret_key(key: str) -> bool:
    """Whether a config key, variable or argument name names a secret (``db.password``, ``apiKey``, ``hf_token``)."""
    words = [w.lower() for w in _WORD_SPLIT.split(key) if w]
    if words == ["key"]:
        return True
    for i, word in enumerate(words):
        if word in _SECRET_WORDS:
            return True
        if word == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS:
            return True
        if word == "id" and i > 0 and words[i - 1] == "session":
            return True
    return False


def redact_text(text: str) -> str:
    """Redact credential-shaped substrings of free text (URIs keep everything but the password)."""
    if not _ANY_CREDENTIAL.search(text):
        return text
    text = _URI_PASSWORD.sub(lambda m: m.group("head") + marker(m.group("pw")) + m.group("tail"), text)
    for pattern in _CREDENTIAL_VALUE:
        text = pattern.sub(lambda m: marker(m.group(0)), text)
    return text


def redact_value(key: str, value: Any) -> Any:
    """Redact one value given its key; recurse into containers."""
    if isinstance(value, Mapping):
        return redact_mapping(value)
    if isinstance(value, list | tuple):
        return [redact_value(key, item) for item in value]
    if value is None or isinstance(value, bool):
        return value
    if is_secret_key(key) and not is_redacted(value):
        return marker(str(value))
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): redact_value(str(k), v) for k, v in values.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """Redact ``key=value`` and ``--key value``/``--key=value`` arguments whose key looks secret."""
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next:
            out.append(marker(arg))
            secret_next = False
            continue
        if "=" in arg:
            key, _, value = arg.partition("=")
            if is_secret_key(key.lstrip("-")):
                out.append(f"{key}={marker(value)}")
                continue
        elif arg.startswith("--") and is_secret_key(arg[2:]):
            secret_next = True
        out.append(redact_text(arg))
    return out


_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.-])(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>[\"']?\s*[:=]\s*[\"']?)(?P<val>[^\s\"',#}]+)")


def redact_assignments(line: str) -> str:
    """Redact ``key: value`` / ``key = "value"`` in a line of source when the key looks secret."""
    if not _SECRET_KEY.search(line):
        return redact_text(line)
    line = _ASSIGNMENT.sub(
        lambda m: m.group(0) if not is_secret_key(m.group("key")) or is_redacted(m.group("val"))
        else m.group("key") + m.group("sep") + marker(m.group("val")),
        line,
    )
    return redact_text(line)


# Every secret key or credential pattern above contains one of these literals.
_TRIGGERS = ("pass", "secret", "token", "credential", "cookie", "session", "signature", "dsn", "key", "auth",
             "akia", "asia", "agpa", "aida", "aroa", "bearer", "eyj", "gh", "xox", "sk-", "-----begin", "://")


def redact_diff(diff: str) -> tuple[str, int]:
    """Redact secrets on the *added* lines of a unified diff; returns (diff, lines changed).

    Only ``+`` lines: context and removed lines must match the committed file for
    the patch to apply, and what is committed is already in the repository.
    One regex pass over the whole diff finds the few candidate lines, so a
    megabyte of ordinary code costs milliseconds.
    """
    lines = diff.splitlines(keepends=True)
    starts: list[int] = []
    offset = 0
    for line in lines:
        starts.append(offset)
        offset += len(line)
    # str.find per literal is C-speed; the regexes then run on candidate lines only
    lowered = diff.lower()
    candidates: set[int] = set()
    for needle in _TRIGGERS:
        at = lowered.find(needle)
        while at != -1:
            candidates.add(bisect.bisect_right(starts, at) - 1)
            at = lowered.find(needle, at + 1)
    changed = 0
    for index in sorted(candidates):
        line = lines[index]
        if line.startswith("+") and not line.startswith("+++"):
            new = "+" + redact_assignments(line[1:])
            if new != line:
                changed += 1
                lines[index] = new
    return "".join(lines), changed
