"""The append-only ledger: one hash-chained entry per published audit.

Each entry is first claimed as its own object, ``ledger/entries/000042.json``,
with a conditional create (temp + link locally, ``IfNoneMatch="*"`` on S3).
Whoever creates slot N owns it; a loser reads the slot and moves on, so two
publishers can never both write entry N, and a publisher that finds its own
audit in a slot stops: one entry per audit, even when Airflow runs a task
twice. ``ledger.jsonl`` is then rewritten from the entry objects: it is the
file people and tools read, and the entry objects are what it is checked
against, so deleting, reordering or truncating lines in it is caught.

Each entry holds ``prev``, the hash of the entry before it, and ``hash``, the
sha256 of its own canonical JSON without ``hash``. ``auditor.report.verify``
checks all of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from auditor.canonical import canonical_json, digest
from auditor.digests import sha256_digest, spelled
from auditor.errors import Findings, NotFound
from auditor.storage.base import BlobStore

LEDGER_FILE = "ledger.jsonl"
ENTRIES = "ledger/entries/"
#: the promotion gate's comparisons and their MLflow thresholds (``auditor.steps.compare``): written beside the
#: reports, never ledgered (a comparison is a reading of two calibrations' stored reruns, not an audit)
COMPARISONS = "comparisons/"
#: a mapped calibration's rerun results (``auditor.steps.mapped``): working files, never ledgered
CALIBRATION_RERUNS = "calibration-reruns/"
GENESIS = spelled("0" * 64)


def entry_key(seq: int) -> str:
    """The object that claims ledger slot ``seq``."""
    return f"{ENTRIES}{seq:06d}.json"


def sha256_of(data: bytes) -> str:
    """``sha256:<hex>`` of raw bytes (reports are hashed as stored, byte for byte)."""
    return sha256_digest(data)


def entry_hash(entry: dict[str, Any]) -> str:
    """The hash an entry must carry: digest of its canonical JSON without ``hash``."""
    return digest({k: v for k, v in entry.items() if k != "hash"})


def entry_bytes(entry: dict[str, Any]) -> bytes:
    """One ledger line (also the bytes of the entry object)."""
    return canonical_json(entry) + b"\n"


def describe(entry: dict[str, Any] | None, seq: int) -> str:
    """``entry 4 (churn v3, audit a-1)`` for messages."""
    audit = (entry or {}).get("audit") or {}
    if not audit:
        return f"entry {seq}"
    return f"entry {seq} ({audit.get('model')} v{audit.get('version')}, audit {audit.get('audit_id')})"


def _parse(data: bytes, where: str) -> dict[str, Any]:
    try:
        entry = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise Findings(f"{where} is not a JSON ledger entry", hint="run repro-audit evidence verify") from None
    if not isinstance(entry, dict):
        raise Findings(f"{where} is not a JSON ledger entry", hint="run repro-audit evidence verify")
    return entry


def _slots(store: BlobStore) -> int:
    """How many entry objects exist; refuses a ledger with a gap (an entry object was deleted)."""
    names = (k[len(ENTRIES) :].removesuffix(".json") for k in store.list(ENTRIES) if k.endswith(".json"))
    seqs = sorted(int(name) for name in names if name.isdigit())
    for expected, seq in enumerate(seqs):
        if seq != expected:
            raise Findings(f"ledger at {store.uri}: {entry_key(expected)} is missing", hint="run repro-audit evidence verify")
    return len(seqs)


def _chain_ok(entries: list[dict[str, Any]]) -> int | None:
    """Index of the first entry that breaks the chain, or None."""
    prev = GENESIS
    for index, entry in enumerate(entries):
        if entry.get("seq") != index or entry.get("prev") != prev or entry.get("hash") != entry_hash(entry):
            return index
        prev = entry["hash"]
    return None


def entries(store: BlobStore) -> list[dict[str, Any]]:
    """Every entry in order, checked as a chain.

    ``ledger.jsonl`` serves as a cache of the prefix (one read instead of one
    per entry), trusted only when its chain holds and its last entry is the
    entry object of that slot; the objects after it are read one by one.
    """
    # Read the cache before listing: any line in it was an object before the listing.
    try:
        cached = [_parse(line, LEDGER_FILE) for line in store.read(LEDGER_FILE).splitlines() if line.strip()]
    except (NotFound, Findings):
        cached = []
    count = _slots(store)
    usable = (
        len(cached) <= count
        and _chain_ok(cached) is None
        and (not cached or _parse(store.read(entry_key(len(cached) - 1)), entry_key(len(cached) - 1)) == cached[-1])
    )
    found = cached if usable else []
    found += [_parse(store.read(entry_key(seq)), entry_key(seq)) for seq in range(len(found), count)]
    broken = _chain_ok(found)
    if broken is not None:
        raise Findings(
            f"ledger at {store.uri}: {describe(found[broken], broken)} breaks the hash chain",
            hint="run repro-audit evidence verify; publish nothing until it passes",
        )
    return found


def append(store: BlobStore, fields: dict[str, Any], *, identity: str) -> tuple[dict[str, Any], bool]:
    """Add one entry for ``identity`` unless the ledger already has one; (entry, created).

    Walks slots upward from the end of the known chain: a slot taken by someone
    else is read (to chain onto it and to see whether it is ours) and skipped.
    """
    known = entries(store)
    for entry in known:
        if entry.get("id") == identity:
            return entry, False
    seq, prev = len(known), (known[-1]["hash"] if known else GENESIS)
    while True:
        entry = {**fields, "id": identity, "seq": seq, "prev": prev,
                 "published_at": datetime.now(UTC).isoformat(timespec="seconds")}
        entry["hash"] = entry_hash(entry)
        if store.write(entry_key(seq), entry_bytes(entry)):
            return entry, True
        other = _parse(store.read(entry_key(seq)), entry_key(seq))
        if other.get("prev") != prev or other.get("hash") != entry_hash(other):
            raise Findings(f"ledger at {store.uri}: {describe(other, seq)} breaks the hash chain",
                           hint="run repro-audit evidence verify")
        if other.get("id") == identity:
            return other, False
        seq, prev = seq + 1, other["hash"]


def rewrite(
    store: BlobStore, *, also: Callable[[BlobStore, list[dict[str, Any]]], None] | None = None
) -> list[dict[str, Any]]:
    """Rewrite ``ledger.jsonl`` (and whatever ``also(store, entries)`` writes) until it holds every entry.

    Concurrent publishers each rewrite; one with an older view may land last,
    so each checks after writing and goes again if a slot appeared meanwhile.
    """
    while True:
        current = entries(store)
        store.write(LEDGER_FILE, b"".join(entry_bytes(e) for e in current), overwrite=True)
        if also is not None:
            also(store, current)
        if _slots(store) == len(current):
            return current


def read_part(store: BlobStore, part: dict[str, Any]) -> bytes | None:
    """A published file as its entry recorded it: by version id where one was recorded, else the current bytes;
    None when the part names no file or the file is gone."""
    key, version = part.get("key"), part.get("version_id")
    if not key:
        return None
    if version and hasattr(store, "read_version"):
        return store.read_version(key, version)
    try:
        return store.read(key)
    except NotFound:
        return None
