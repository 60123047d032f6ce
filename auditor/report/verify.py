"""``evidence verify``: re-hash every published file and walk the ledger, naming the first bad entry.

The entry objects (``ledger/entries/NNNNNN.json``, conditional creates, locked
on an Object Lock bucket) are what ``ledger.jsonl`` is checked against, so an
edited, deleted, reordered or truncated ledger line shows up at its position.

What one folder cannot prove about itself is checked against what lies outside it:

* **anchors** (the ledger head after each publish, kept as params of the audit's MLflow
  run, which no client can overwrite): a re-chained ledger no longer holds the anchored
  hashes, and a ledger shorter than its newest anchor lost its tail;
* **signatures**: every entry's in-toto attestation must be signed by ``public_key`` (given or
  configured) and name the report, evidence and verdict the entry names; with no key, by the public key
  the ledger's first signed entry records (trust on first use of the key itself, checked cryptographically;
  a change of key is a finding unless a rotation signed by the old key names the new one);
* **versions** (a versioned, Object Lock bucket): each file is read by the version id its
  entry recorded, and a newer version put on top of it is reported.

Every file in the folder must be the ledger, an entry object, the index (which must be
exactly what the entries render to), a night's summary (whose verdicts must agree with the
ledger) or a file some entry's manifest names; anything else was added by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from auditor.errors import NotFound
from auditor.report.calibrations import audits, is_calibration
from auditor.report.index import COVERAGE_FILE, COVERAGE_INPUTS, INDEX_FILE, NIGHT_FILE
from auditor.report.itself import auditor_of
from auditor.report.ledger import (
    CALIBRATION_RERUNS,
    COMPARISONS,
    ENTRIES,
    GENESIS,
    LEDGER_FILE,
    describe,
    entry_hash,
    entry_key,
    read_part,
    sha256_of,
)
from auditor.report.verification import Problem, Verification
from auditor.report.verify_keys import key_at, key_problem, load_object, rotations
from auditor.settings import REPORTS
from auditor.storage.base import BlobStore

_PARTS = ("report", "evidence", "attestation")
SUMMARIES = "summaries/"
PLACEHOLDER = ".gitkeep"


@dataclass(frozen=True)
class Anchor:
    """The ledger head as it was right after one publish, kept outside the reports folder."""

    seq: int
    head: str
    where: str  # e.g. "MLflow run 3fa… (param repro.ledger.head)"
    entry_version: str | None = None  # on a versioned bucket: the entry object's version id
    source: str = "MLflow"  # which anchor holds it: each source must anchor every entry on its own


class Anchors(list):
    """The anchors of one ledger, and every source that was asked (a source holding none still counts).

    A source in ``partial`` holds only some heads (the default second anchor, under one auditor's home, holds the
    heads published from that home): each head it holds must still be in the ledger, unchanged, but an entry it does
    not hold is no finding."""

    def __init__(self, items: Any = (), *, sources: list[str] | None = None, partial: set[str] | None = None) -> None:
        super().__init__(items)
        self.sources = list(sources or [])
        self.partial = set(partial or ())


def _report_problem(store: BlobStore, entry: dict[str, Any], files: dict[str, bytes]) -> str | None:
    for label in _PARTS:
        part = entry.get(label) or {}
        if (label == "attestation" or (label == "report" and is_calibration(entry))) and not part:
            continue  # a calibration publishes its evidence (and its attestation), no report
        if label in ("report", "evidence") and entry.get("kind") == "key_rotation":
            continue  # a key rotation publishes its signed statement only
        key = part.get("key")
        if not key:
            return f"has no {label} key"
        data = read_part(store, part)
        if data is None:
            version = f" (version {part['version_id']})" if part.get("version_id") else ""
            return f"its {label} {key}{version} is missing"
        found = sha256_of(data)
        if found != part.get("sha256"):
            return f"its {label} {key} changed since it was published (sha256 {part.get('sha256')} recorded, {found} now)"
        files[key] = data
    return None


def _anchored_versions(store: Any, anchors: list[Anchor]) -> list[Problem]:
    """On a versioned bucket: the entry object's anchored version still holds the anchored head."""
    problems = []
    for anchor in anchors:
        if not anchor.entry_version or not hasattr(store, "read_version"):
            continue
        data = store.read_version(entry_key(anchor.seq), anchor.entry_version)
        try:
            held = json.loads(data).get("hash") if data is not None else None
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            held = None
        if held != anchor.head:
            problems.append(Problem(anchor.seq, (
                f"entry {anchor.seq}: version {anchor.entry_version} of {entry_key(anchor.seq)} anchored in {anchor.where} "
                f"{'is gone' if data is None else 'does not hold the anchored head'}")))
    return problems


def _by_source(anchors: list[Anchor]) -> dict[str, list[Anchor]]:
    """The anchors grouped by source, every source asked included (a plain list: the sources its anchors name)."""
    groups: dict[str, list[Anchor]] = {name: [] for name in getattr(anchors, "sources", [])}
    for anchor in anchors:
        groups.setdefault(anchor.source, []).append(anchor)
    return groups


def _anchor_problems(entries: list[dict[str, Any]], anchors: list[Anchor]) -> list[Problem]:
    """Each source on its own: an entry one source anchors is no excuse for another source to have lost it."""
    groups = _by_source(anchors)
    if not groups:
        return _source_problems(entries, [], "MLflow")
    partial = getattr(anchors, "partial", set())
    return [p for source, found in groups.items() for p in _source_problems(entries, found, source, partial=source in partial)]


def _source_problems(entries: list[dict[str, Any]], anchors: list[Anchor], source: str, *,
                     partial: bool = False) -> list[Problem]:
    if entries and not anchors and not partial:
        if source.startswith("MLflow"):
            return [Problem(0, (
                f"no anchor outside the reports folder names this ledger ({source} holds none): give the MLflow it was "
                "published with (--tracking-uri), or pass --no-anchors to check the folder alone"))]
        return [Problem(0, f"{source} holds no anchor for this ledger: it was published without it, or the anchors were removed")]
    problems = []
    for anchor in sorted(anchors, key=lambda a: a.seq):
        if anchor.seq >= len(entries):
            problems.append(Problem(anchor.seq, (
                f"entry {anchor.seq} is anchored in {anchor.where} (head {anchor.head}) but the ledger ends after "
                f"{len(entries)} entries: published entries were deleted (rolled back)")))
        elif entries[anchor.seq].get("hash") != anchor.head:
            problems.append(Problem(anchor.seq, (
                f"{describe(entries[anchor.seq], anchor.seq)}: its hash is {entries[anchor.seq].get('hash')} but "
                f"{anchor.where} anchored {anchor.head}: the ledger was rewritten and re-chained")))
    anchored = {a.seq for a in anchors}
    for seq, entry in enumerate(entries if not partial else []):
        if seq not in anchored:
            problems.append(Problem(seq, (
                f"{describe(entry, seq)}: no anchor outside the reports folder names it ({source} has none): it was added by hand, "
                "or its publish stopped before anchoring (re-run the audit to finish it)")))
    return problems


def _summary_problems(store: BlobStore, key: str, by_report: dict[str, dict[str, Any]]) -> list[Problem]:
    try:
        summary = json.loads(store.read(key))
        rows = summary["audits"]
        assert isinstance(rows, list)
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AssertionError, NotFound):
        return [Problem(None, f"summary {key} is not a summary file: it was edited or added by hand")]
    problems = []
    for row in rows:
        report = (row or {}).get("report") if isinstance(row, dict) else None
        if not report:
            continue
        name = str(report).rstrip("/").rsplit("/", 1)[-1]
        entry = by_report.get(name)
        if entry is None:
            problems.append(Problem(None, f"summary {key} names report {name}, which no ledger entry publishes"))
        elif row.get("verdict") != entry.get("verdict"):
            problems.append(Problem(entry.get("seq"), (
                f"summary {key} says {row.get('verdict')} for {name}, the ledger says {entry.get('verdict')}: "
                "the summary was edited")))
    return problems


def _version_problems(store: Any, named: dict[str, str]) -> list[Problem]:
    """On a versioned bucket: a write-once file with more than one version was replaced."""
    if not hasattr(store, "list_versions") or store.versioning_status() != "Enabled":
        return []
    counts: dict[str, list[Any]] = {}
    for version in store.list_versions(""):
        counts.setdefault(version.key, []).append(version)
    problems = []
    for key, versions in sorted(counts.items()):
        write_once = key in named or key.startswith(ENTRIES)
        if write_once and len(versions) > 1:
            latest = next((v.version_id for v in versions if v.is_latest), None)
            problems.append(Problem(None, (
                f"{key} was replaced by a newer version ({latest}); {len(versions)} versions exist of a file "
                "published once: the recorded version is the one checked")))
    return problems


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


def verify(store: BlobStore, *, public_key: Any = None, anchors: list[Anchor] | None = None,
           since_signing: bool = False) -> Verification:
    """Re-hash every published file and walk the chain; the first problem names the first bad entry.

    Per position: the ``ledger.jsonl`` line is complete, its hash matches its
    content, its ``seq`` is its position, its ``prev`` is the hash before it and
    it equals the entry object of that slot (these stop at the first break:
    after a deleted line every later line is shifted, which says nothing new);
    the entry object is intact and chained; every file it names hashes to what it
    recorded (read by version id where recorded); with ``public_key``, its attestation
    verifies (``since_signing``: entries before the first signed one are accepted unsigned, counted in
    ``unsigned_before_signing``: the key came from the configuration, and signing was switched on later; an unsigned
    entry after a signed one is always a problem). Then the anchors, the index, the summaries and files no entry names.
    """
    out = Verification(location=store.uri)
    keys = list(store.list(""))
    if not keys:
        raise NotFound(f"nothing is published at {store.uri}", hint=f"give the reports location (default: {REPORTS.name})")
    objects = _entry_objects(store, keys)
    boundaries, rotation_problems = rotations(store, objects, public_key) if public_key is not None else ([], {})
    raw_lines, lines = _parse_lines(store)
    named: dict[str, str] = {}
    found_entries: list[dict[str, Any]] = []
    by_report: dict[str, dict[str, Any]] = {}
    prev_line = prev_obj = GENESIS
    ledger_ok = True
    for index in range(max(len(raw_lines), max(objects, default=-1) + 1)):
        obj_raw = objects.get(index)
        obj = load_object(obj_raw)
        line = lines[index] if index < len(lines) else None
        raw = raw_lines[index] if index < len(raw_lines) else None
        problem = None
        if ledger_ok:
            problem = _ledger_problem(line, raw, obj_raw, index, lines, prev_line)
            ledger_ok = problem is None
            prev_line = (line or {}).get("hash") or prev_line
        entry = obj if isinstance(obj, dict) else (line or {})
        files: dict[str, bytes] = {}
        problem = problem or _object_problem(obj_raw, obj, index, prev_obj) or _report_problem(store, entry, files)
        audit_entry = entry.get("kind") != "key_rotation" and not is_calibration(entry)  # a report's evidence names its auditor
        by = auditor_of(files.get((entry.get("evidence") or {}).get("key") or "")) if audit_entry else None
        out.auditors.update({by: out.auditors.get(by, 0) + 1} if by else {})
        problem = problem or key_problem(entry, files, key_at(index, public_key, boundaries), since_signing, out,
                                          rotation_problems.get(index))
        if problem:
            out.problems.append(Problem(index, f"{describe(entry, index)}: {problem}"))
        prev_obj = entry.get("hash") or prev_obj
        found_entries.append(entry)
        if not is_calibration(entry):
            by_report[(entry.get("report") or {}).get("key") or ""] = entry
        _note_named(named, entry, line or {})
    out.entries = len(raw_lines)
    out.head = lines[-1].get("hash") if lines and lines[-1] else None
    out.reports = sum(1 for k in keys if k in named)
    _beyond_the_chain(out, store, keys, anchors, found_entries, named, by_report)
    return out


def _beyond_the_chain(out: Verification, store: BlobStore, keys: list[str], anchors: list[Anchor] | None,
                      entries: list[dict[str, Any]], named: dict[str, str], by_report: dict[str, dict[str, Any]]) -> None:
    """``verify``'s checks after the chain's walk: the anchors (where given), the index, the summaries, files no entry
    names and the stores' versions."""
    if anchors is not None:
        out.anchored = len({anchor.seq for anchor in anchors})
        out.anchor_sources = {source: len(found) for source, found in _by_source(anchors).items()}
        out.problems.extend(_anchor_problems(entries, anchors))
        out.problems.extend(_anchored_versions(store, anchors))
    out.problems.extend(_index_problems(store, keys, entries))
    out.problems.extend(_coverage_problems(store, keys, entries))
    out.problems.extend(_unnamed_problems(store, keys, named, by_report))
    out.problems.extend(_version_problems(store, named))


def _entry_objects(store: BlobStore, keys: list[str]) -> dict[int, bytes]:
    """The raw entry objects (``ledger/entries/NNNNNN.json``) by ledger position."""
    objects: dict[int, bytes] = {}
    for key in keys:
        name = key[len(ENTRIES) :].removesuffix(".json")
        if key.startswith(ENTRIES) and name.isdigit():
            objects[int(name)] = store.read(key)
    return objects


def _ledger_problem(line: dict[str, Any] | None, raw: bytes | None, obj_raw: bytes | None, index: int,
                    lines: list[dict[str, Any] | None], prev: str) -> str | None:
    """What is wrong with ledger line ``index``, including a difference from its entry object."""
    problem = _line_problem(line, raw, index, lines, prev)
    if problem is None and obj_raw is not None and obj_raw != raw + b"\n":
        problem = f"line {index + 1} of {LEDGER_FILE} differs from its entry object {entry_key(index)}"
    return problem


def _note_named(named: dict[str, str], entry: dict[str, Any], line: dict[str, Any]) -> None:
    """Record the keys of the files the entry (and its ledger line) name, with their part."""
    for source in (entry, line):
        for part in _PARTS:
            if (source.get(part) or {}).get("key"):
                named[source[part]["key"]] = part


def _unnamed_problems(store: BlobStore, keys: list[str], named: dict[str, str],
                      by_report: dict[str, dict[str, Any]]) -> list[Problem]:
    """Files no entry names: summaries are checked against the ledger, anything else was added by hand."""
    problems: list[Problem] = []
    for key in keys:
        if key in named or key in (LEDGER_FILE, INDEX_FILE, COVERAGE_FILE, COVERAGE_INPUTS, NIGHT_FILE) or key.startswith(ENTRIES):
            continue  # the derived pages are checked by the rules that know them (_index_problems, _coverage_problems)
        if key.startswith((COMPARISONS, CALIBRATION_RERUNS)):  # never ledgered, not an audit's evidence: the gate's
            continue  # readings, a mapped calibration's working files (its calibration is ledgered)
        if key == PLACEHOLDER and not store.read(key):  # an empty .gitkeep keeps a checked-in folder
            continue
        if key.startswith(SUMMARIES) and key.endswith(".json"):
            problems.extend(_summary_problems(store, key, by_report))
            continue
        what = "report" if key.endswith((".html", ".json")) and "/" not in key else "file"
        problems.append(Problem(None, (
            f"{what} {key} has no ledger entry: it was added by hand, its entry was deleted, or publishing "
            "stopped half way")))
    return problems


def _index_problems(store: BlobStore, keys: list[str], entries: list[dict[str, Any]]) -> list[Problem]:
    """The index is derived from the entries: it must be exactly what they render to."""
    from auditor.report.index import COVERAGE_FILE, read_night, render_index

    if INDEX_FILE not in keys:
        return [Problem(None, f"{INDEX_FILE} is missing")] if audits(entries) else []
    # the index links the coverage page when one is published (``report coverage --write``, ``nightly``)
    coverage_href = COVERAGE_FILE if COVERAGE_FILE in keys else None
    page = render_index(audits(entries), coverage_href=coverage_href, night=read_night(store))
    if store.read(INDEX_FILE) != page.encode("utf-8"):
        return [Problem(None, f"{INDEX_FILE} differs from what the ledger entries render to: it was edited")]
    return []


def _coverage_problems(store: BlobStore, keys: list[str], entries: list[dict[str, Any]]) -> list[Problem]:
    """The coverage page is derived from its stored inputs (the registry's listing when it was written) and the
    ledger entries up to the head it names: it must be exactly what they render to. What the listing says about
    the registry (which versions exist, their tags) can only be checked against the registry itself."""
    import json

    from auditor.report.index import coverage_page

    if COVERAGE_FILE not in keys:
        return [Problem(None, f"{COVERAGE_INPUTS} has no {COVERAGE_FILE} beside it")] if COVERAGE_INPUTS in keys else []
    if COVERAGE_INPUTS not in keys:
        return [Problem(None, f"{COVERAGE_FILE} has no {COVERAGE_INPUTS} beside it: it was not written by repro-audit")]
    try:
        inputs = json.loads(store.read(COVERAGE_INPUTS))
        page, _ = coverage_page(inputs, entries)
    except (ValueError, KeyError, TypeError) as exc:
        return [Problem(None, f"{COVERAGE_INPUTS} does not parse ({type(exc).__name__}: {exc}): it was edited")]
    if store.read(COVERAGE_FILE) != page:
        return [Problem(None, f"{COVERAGE_FILE} differs from what {COVERAGE_INPUTS} and the ledger render to: it was edited")]
    return []
