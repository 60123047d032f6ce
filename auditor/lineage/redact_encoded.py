"""Secrets in encodings and in known credential shapes: base64 text and Docker auth configs (``auditor.lineage.redact``).

A base64 value hides its secret from every text rule: a Docker config given whole as a base64 string under an
innocuous key, or the ``auth`` of a registry (base64 of ``user:password``). So the redactor decodes: a run of
16+ base64 characters (standard or URL-safe alphabet) that decodes to printable UTF-8 text is scanned as text,
and redacted whole when the decoded text holds a secret, is a ``user:password`` pair or a Docker auth config (the
scan decodes again, to a depth of three).

Nothing of ours is mangled and little time is spent: a hex digest, a commit or a run id has no upper-case letter,
so it is never tried; an identifier or a random token almost never has the shape of base64 of ASCII text (the regex
engine checks it), and when tried decodes to bytes that are not text; and decoded text is only redacted when the
rules find a secret in it.

A Docker auth config (``{"auths": {"<registry>": {"auth" | "password" | "identitytoken" | "registrytoken": …}}}``)
is a secret whatever key holds it: every value in it is redacted, its registries' names kept.
"""

from __future__ import annotations

import binascii
import functools
import json
import re
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 3  # base64 inside base64 inside base64
_MIN_LENGTH = 16
# base64 of 12 bytes of ASCII text: in each group of four characters, the first below 32 (a byte under 0x80), the
# second with its low four bits under 8, the third with its low two bits under 2. A random identifier or token
# passes 1 time in 4,096, so the regex engine, not Python, passes over everything but the base64 of text.
_TEXT_GROUPS = r"(?:[A-Za-f][A-HQ-Xg-nw-z0-3][ABEFIJMNQRUVYZcdghklopstwx014589][A-Za-z0-9+/_-]){4}"
_TEXT_START = re.compile(_TEXT_GROUPS)
# such a start, then the rest of the run of base64 characters (standard or URL-safe) and its padding. A start may
# follow a "/", "-" or "_" (base64 at the end of a path or a name) or a "=" (key=value), never a letter or digit.
_RUN = re.compile(rf"(?<![A-Za-z0-9+]){_TEXT_GROUPS}[A-Za-z0-9+/_-]*={{0,2}}(?![A-Za-z0-9+/_=-])")
_CREDENTIAL_FIELDS = ("auth", "password", "identitytoken", "registrytoken")


def base64_runs(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, decoded text)`` of each run of ``text`` that is base64 of printable UTF-8 text."""
    if len(text) < _MIN_LENGTH:
        return []
    found = []
    for m in _RUN.finditer(text):
        decoded = decode_base64(m.group(0))
        if decoded is not None:
            found.append((m.start(), m.end(), decoded))
    return found


@functools.lru_cache(maxsize=4096)
def decode_base64(token: str) -> str | None:
    """The text ``token`` is the base64 of (standard or URL-safe alphabet, padding optional), or None.

    None for anything that is not both: letters of both cases (hex and lower-case words are never tried), a
    length base64 can have, one alphabet, and bytes that are UTF-8 text of printable characters and line breaks,
    the first twelve of them ASCII (JSON, ``user:password``, a config: text that starts in ASCII).
    """
    body = token.rstrip("=")
    if len(body) < _MIN_LENGTH or len(body) % 4 == 1 or body.islower() or body.isupper() or not _TEXT_START.match(body):
        return None
    urlsafe, standard = ("-" in body or "_" in body), ("+" in body or "/" in body)
    if urlsafe and standard:
        return None
    if urlsafe:
        body = body.replace("-", "+").replace("_", "/")
    try:
        raw = binascii.a2b_base64(body + "=" * (-len(body) % 4), strict_mode=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not text.strip() or not all(c.isprintable() or c in "\n\r\t" for c in text):
        return None
    return text


def is_docker_auth_config(value: Any) -> bool:
    """A Docker (or Podman, or Kubernetes ``.dockerconfigjson``) auth config holding a credential for a registry."""
    if not isinstance(value, Mapping):
        return False
    auths = value.get("auths")
    if not isinstance(auths, Mapping):
        return False
    return any(isinstance(entry, Mapping) and any(entry.get(field) for field in _CREDENTIAL_FIELDS)
               for entry in auths.values())


def docker_auth_text(text: str) -> bool:
    """Whether ``text`` is a Docker auth config written as JSON."""
    body = text.strip()
    if not body.startswith("{") or '"auths"' not in body:
        return False
    try:
        return is_docker_auth_config(json.loads(body))
    except (ValueError, RecursionError):
        return False


_BASIC = re.compile(r"[^:\s/]{1,128}:(?!//)\S{4,}")


def basic_credentials(text: str) -> bool:
    """``user:password``, what a registry's ``auth`` field and a ``Basic`` header hold base64-encoded (not a URL)."""
    return bool(_BASIC.fullmatch(text))


__all__ = ["MAX_DEPTH", "base64_runs", "basic_credentials", "decode_base64", "docker_auth_text", "is_docker_auth_config"]
