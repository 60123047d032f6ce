"""Digests, spelled one way: ``sha256:<64 hex>``, file hashing (``hashlib.file_digest``) and the id grammars.

Every SHA-256 the product writes or checks is made and spelled here: the ``sha256:`` prefix, bytes and
files hashed, a streaming hasher for data that arrives in pieces, and the grammars of the ids it
checks (a snapshot id of our store, a pinned data version, a SHA-256 digest such as an image's).
Canonical JSON is ``auditor.canonical``; a snapshot's content hashes (BLAKE3) are ``auditor.snapshots.hashing``.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

SHA256 = "sha256:"
#: a SHA-256 digest as the product spells it (an image digest, a file's digest)
SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: a snapshot id of our store: ``blake3:`` and the manifest's 64 hex digits
SNAPSHOT_ID = re.compile(r"blake3:[0-9a-f]{64}")
#: what a record may pin a data input to: one of our snapshot ids, or a source's own SHA-256 version
DATA_VERSION_ID = re.compile(r"(?:blake3|sha256):[0-9a-f]{64}")
SNAPSHOT_ID_HELP = "blake3:<64 hex digits>"


def hasher() -> Any:
    """A streaming SHA-256 (``update`` it, then ``spelled(h.hexdigest())``)."""
    return hashlib.sha256()


def sha256_hex(data: bytes) -> str:
    """The bare hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_digest(data: bytes | str) -> str:
    """``sha256:<hex>`` of ``data`` (text is hashed as UTF-8, lone surrogates kept)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return SHA256 + sha256_hex(data)


def sha256_file(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a file's bytes, read in chunks (``hashlib.file_digest``)."""
    with open(path, "rb") as handle:
        return SHA256 + hashlib.file_digest(handle, "sha256").hexdigest()


def sha256_file_raw(path: str | os.PathLike[str]) -> bytes:
    """The raw 32-byte SHA-256 of a file (a CSP hash source is its base64)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").digest()


def spelled(hexdigest: str) -> str:
    """``sha256:<hex>`` from a bare hex digest (or one already spelled)."""
    return hexdigest if hexdigest.startswith(SHA256) else SHA256 + hexdigest


def bare(digest: str) -> str:
    """The hex of ``sha256:<hex>`` (a bare hex digest is returned as it is)."""
    return digest.removeprefix(SHA256)


def same(a: str | None, b: str | None) -> bool:
    """Whether two SHA-256 digests, spelled or bare, in any case, are the same digest."""
    return bool(a) and bool(b) and bare(a.lower()) == bare(b.lower())


def is_digest_ref(image: str) -> bool:
    """``REGISTRY/REPO@sha256:<64 hex>``: an image named by its digest (a tag alone moves)."""
    name, at, digest = (image or "").partition("@")
    return bool(at) and bool(name) and not any(c.isspace() for c in name) and is_sha256(digest)


def is_sha256(text: str) -> bool:
    return bool(SHA256_DIGEST.fullmatch(text or ""))


def looks_like_digest_id(text: str) -> bool:
    """Whether ``text`` is spelled as an algorithm-prefixed id (``blake3:…``, ``sha256:…``, ``MD5:…``): a word of
    letters and digits, a colon, then something; a version label (``v3``, ``latest``, an S3 version id) is not."""
    algorithm, colon, rest = (text or "").partition(":")
    return bool(colon) and algorithm.isascii() and algorithm.isalnum() and not rest.startswith("/")


def snapshot_id_problem(text: str) -> str | None:
    """What makes ``text`` not a snapshot id of our store (``SNAPSHOT_ID``), in words; None when it is one."""
    if SNAPSHOT_ID.fullmatch(text or ""):
        return None
    algorithm, _, hexdigits = (text or "").partition(":")
    if algorithm != "blake3":
        if algorithm.lower() == "blake3":
            return f"its prefix is {algorithm!r}: snapshot ids are lower case"
        return f"{algorithm!r} is not the snapshot hash (ids are BLAKE3, spelled blake3:)"
    if hexdigits.lower() != hexdigits:
        return "its hex digits are upper case: snapshot ids are lower case"
    if len(hexdigits) != 64:
        return f"it has {len(hexdigits)} hex digits, not 64"
    return "its digest holds characters other than 0-9 and a-f"
