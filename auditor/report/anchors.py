"""The second anchor: one write-once object per ledger head, in a store the MLflow admin does not control.

MLflow's anchors (params of the audit and calibration runs) hold until someone who administers MLflow
purges the runs (``mlflow gc``): then the newest entries can be rolled back with nothing left to say so.
``REPRO_LEDGER_ANCHOR`` names a second store (an S3 bucket with Object Lock in compliance mode, or a
folder only the auditor's account can write) that receives, after each publish, one object per ledger
head, created conditionally (never overwritten). Each is written twice, under the ledger's location and
under the ledger's id (the hash of its entry 0), so that neither moving the reports folder nor
re-chaining it from genesis loses its anchors.
"""

from __future__ import annotations

import json
from typing import Any

from auditor.canonical import canonical_json
from auditor.digests import sha256_hex
from auditor.errors import Findings, NotFound
from auditor.report import ledger
from auditor.storage.base import BlobStore

ROOT = "ledger-anchors/"


def ledger_id(store: BlobStore) -> str | None:
    """The hash of the ledger's entry 0 (None while the ledger is empty or entry 0 is unreadable)."""
    try:
        entry = json.loads(store.read(ledger.entry_key(0)))
    except (NotFound, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return entry.get("hash") if isinstance(entry, dict) else None


def _folders(location: str, lid: str | None) -> list[str]:
    folders = [f"{ROOT}location-{sha256_hex(location.encode())[:32]}/"]
    if lid:
        folders.append(f"{ROOT}ledger-{sha256_hex(lid.encode())[:32]}/")
    return folders


def write_anchor(anchor_store: BlobStore, *, location: str, lid: str | None, entry: dict[str, Any],
                 entry_version: str | None, strict: bool = True) -> list[str]:
    """Anchor ``entry``'s head in ``anchor_store``, once (a repeat finds the same object and moves on).

    An object already anchoring another head for this slot is never overwritten: ``strict`` raises ``Findings``
    naming it; otherwise (the default folder under REPRO_HOME, where a reports folder deleted and started over meets
    its old heads) the conflicts are returned for the caller to log, and ``evidence verify`` reports them."""
    body = {"location": location, "ledger_id": lid, "seq": entry["seq"], "head": entry["hash"], "entry_version": entry_version}
    data = canonical_json(body) + b"\n"
    conflicts = []
    for folder in _folders(location, lid):
        key = f"{folder}{int(entry['seq']):06d}.json"
        if anchor_store.write(key, data):
            continue
        held = _load(anchor_store, key)
        if held is None or held.get("head") != entry["hash"]:
            conflicts.append(f"{anchor_store.uri}/{key} anchors another head for ledger entry {entry['seq']} of {location}: "
                             "the ledger was rewritten after it was anchored")
    if conflicts and strict:
        raise Findings(conflicts[0], hint="run repro-audit evidence verify")
    return conflicts


def _load(store: BlobStore, key: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(store.read(key))
    except (NotFound, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def read_anchors(anchor_store: BlobStore, *, location: str, lid: str | None) -> list[tuple[int, str, str | None, str]]:
    """Every (seq, head, entry version, object key) anchored for this ledger, by location or by ledger id."""
    found: dict[tuple[int, str], tuple[int, str, str | None, str]] = {}
    for folder in _folders(location, lid):
        for key in anchor_store.list(folder):
            doc = _load(anchor_store, key)
            if doc is None or not isinstance(doc.get("seq"), int) or not doc.get("head"):
                continue
            found.setdefault((doc["seq"], doc["head"]), (doc["seq"], doc["head"], doc.get("entry_version"), key))
    return sorted(found.values())
