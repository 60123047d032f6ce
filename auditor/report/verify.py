"""``evidence verify``: re-hash every published report and walk the ledger, naming the first bad entry.

The entry objects (``ledger/entries/NNNNNN.json``, conditional creates, locked
on an Object Lock bucket) are what ``ledger.jsonl`` is checked against, so an
edited, deleted, reordered or truncated ledger line shows up at its position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from auditor.errors import NotFound
from auditor.report.ledger import ENTRIES, GENESIS, LEDGER_FILE, describe, entry_hash, entry_key, sha256_of
from auditor.storage.base import BlobStore


@dataclass
class Problem:
    """One thing verify found wrong; ``seq`` is the ledger position (None for a report with no entry)."""

    seq: int | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class Verification:
    """The outcome of ``verify``: counts, the chain head, and the problems in ledger order."""

    location: str
    entries: int = 0
    reports: int = 0
    head: str | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None


def _report_problem(store: BlobStore, entry: dict[str, Any]) -> str | None:
    for label in ("report", "evidence"):
        part = entry.get(label) or {}
        key = part.get("key")
        if not key:
            return f"has no {label} key"
        try:
            found = sha256_of(store.read(key))
        except NotFound:
            return f"its {label} {key} is missing"
        if found != part.get("sha256"):
            return f"its {label} {key} changed since it was published (sha256 {part.get('sha256')} recorded, {found} now)"
    return None


def _line_problem(line: dict[str, Any] | None, raw: bytes | None, index: int, lines: list[dict[str, Any] | None],
                  prev: str) -> str | None:
    if raw is None:
        if index == 0:
            return f"{LEDGER_FILE} is missing or empty although entry objects exist: the ledger was truncated"
        return f"is missing from {LEDGER_FILE}, which ends after entry {index - 1}: the ledger was truncated"
    if line is None:
        return f"line {index + 1} of {LEDGER_FILE} is cut short or not JSON: the ledger was truncated or edited"
    if line.get("hash") != entry_hash(line):
        return f"line {index + 1} of {LEDGER_FILE} was edited: its hash no longer matches its content"
    seq = line.get("seq")
    if seq != index:
        if any(other is not None and other.get("seq") == index for other in lines[index + 1 :]):
            return f"is out of order: line {index + 1} of {LEDGER_FILE} holds entry {seq}"
        if isinstance(seq, int) and seq > index:
            return f"was deleted from {LEDGER_FILE} (line {index + 1} holds entry {seq})"
        return f"line {index + 1} of {LEDGER_FILE} holds entry {seq} again: reordered or duplicated"
    if line.get("prev") != prev:
        return "does not chain onto the entry before it: an earlier entry was deleted, reordered or rewritten"
    return None


def _read_lines(store: BlobStore) -> tuple[list[bytes], bool]:
    try:
        raw = store.read(LEDGER_FILE)
    except NotFound:
        return [], True
    if not raw:
        return [], True
    parts = raw.split(b"\n")
    complete = raw.endswith(b"\n")
    return (parts[:-1] if complete else parts), complete


def _object_problem(raw: bytes | None, entry: Any, index: int, prev: str) -> str | None:
    if raw is None:
        return f"its entry object {entry_key(index)} is missing: it was deleted"
    if not isinstance(entry, dict):
        return f"its entry object {entry_key(index)} is not a JSON entry"
    if entry.get("hash") != entry_hash(entry):
        return f"its entry object {entry_key(index)} was edited: its hash no longer matches its content"
    if entry.get("seq") != index:
        return f"its entry object {entry_key(index)} holds entry {entry.get('seq')}: entry objects were renamed"
    if entry.get("prev") != prev:
        return f"its entry object {entry_key(index)} does not chain onto the entry before it"
    return None


def _parse_lines(store: BlobStore) -> tuple[list[bytes], list[dict[str, Any] | None]]:
    raws, complete = _read_lines(store)
    parsed: list[dict[str, Any] | None] = []
    for number, raw in enumerate(raws):
        try:
            # An unterminated last line was cut: never trust it, even when it happens to parse.
            value = json.loads(raw) if (complete or number < len(raws) - 1) else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            value = None
        parsed.append(value if isinstance(value, dict) else None)
    return raws, parsed


def verify(store: BlobStore) -> Verification:
    """Re-hash every report and walk the chain; the first problem names the first bad entry.

    Per position: the ``ledger.jsonl`` line is complete, its hash matches its
    content, its ``seq`` is its position, its ``prev`` is the hash before it and
    it equals the entry object of that slot (these stop at the first break:
    after a deleted line every later line is shifted, which says nothing new);
    the entry object is intact and chained; both files it names hash to what it
    recorded. Last: report files that no entry names.
    """
    out = Verification(location=store.uri)
    keys = list(store.list(""))
    if not keys:
        raise NotFound(f"nothing is published at {store.uri}", hint="give the reports location (default: REPRO_REPORTS)")
    objects: dict[int, bytes] = {}
    for key in keys:
        name = key[len(ENTRIES) :].removesuffix(".json")
        if key.startswith(ENTRIES) and name.isdigit():
            objects[int(name)] = store.read(key)
    raw_lines, lines = _parse_lines(store)
    named: set[str] = set()
    prev_line = prev_obj = GENESIS
    ledger_ok = True
    for index in range(max(len(raw_lines), max(objects, default=-1) + 1)):
        obj_raw = objects.get(index)
        try:
            obj = json.loads(obj_raw) if obj_raw is not None else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            obj = None
        line = lines[index] if index < len(lines) else None
        raw = raw_lines[index] if index < len(raw_lines) else None
        problem = None
        if ledger_ok:
            problem = _line_problem(line, raw, index, lines, prev_line)
            if problem is None and obj_raw is not None and obj_raw != raw + b"\n":
                problem = f"line {index + 1} of {LEDGER_FILE} differs from its entry object {entry_key(index)}"
            ledger_ok = problem is None
            prev_line = (line or {}).get("hash") or prev_line
        entry = obj if isinstance(obj, dict) else (line or {})
        problem = problem or _object_problem(obj_raw, obj, index, prev_obj) or _report_problem(store, entry)
        if problem:
            out.problems.append(Problem(index, f"{describe(entry, index)}: {problem}"))
        prev_obj = entry.get("hash") or prev_obj
        for source in (entry, line or {}):
            named.update(((source.get(part) or {}).get("key") or "") for part in ("report", "evidence"))
    out.entries = len(raw_lines)
    out.head = lines[-1].get("hash") if lines and lines[-1] else None
    reports = [k for k in keys if "/" not in k and k.endswith((".html", ".json")) and k != "index.html"]
    out.reports = sum(1 for k in reports if k in named)
    for key in reports:
        if key not in named:
            out.problems.append(
                Problem(None, f"report {key} has no ledger entry: its entry was deleted, or publishing stopped half way")
            )
    return out
