"""A record supplied after training: what the owner of a plain-MLflow version attaches (``repro-audit adopt --data``).

Pure: parsing and checking the owner's values, and the document that the step stores (as a run of the audits
experiment, its digest anchored in a param) and signs. Every report that uses it says it was supplied after training, by whom and when: it is
an owner's attestation, never evidence captured while the model trained.

    --data NAME=STORE@ID    an input pinned by a content id (``blake3:<hex>`` snapshot id or ``sha256:<hex>``)
    --image REF@sha256:HEX  the image it was trained in
    --seed N                the integer seed it was trained with
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from auditor.adopt.rules import Supplied
from auditor.digests import DATA_VERSION_ID, SNAPSHOT_ID_HELP, is_digest_ref, sha256_digest
from auditor.errors import BadInput, Findings
from auditor.settings import RESPONSIBLE, SIGNER
from auditor.uris import model_uri

KIND = "repro-audit/adopt-supplied"
VERSION = 1
#: the version tag naming the run that holds the record; the run's params anchor its digest and who supplied it
TAG_SUPPLIED = "repro.adopt.supplied"
PARAM_SHA256 = "repro.adopt.supplied.sha256"
PARAM_BY = "repro.adopt.supplied.by"
RECORD_FILE = "supplied.json"
SIGNATURE_FILE = "supplied.intoto.json"
MARK = "supplied after training, not recorded when the model was trained"
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def parse_data(specs: list[str]) -> dict[str, str]:
    """``["train=s3://bucket/snaps@blake3:..."]`` to ``{"train": "s3://bucket/snaps@blake3:..."}``; BadInput names the spec."""
    out: dict[str, str] = {}
    for spec in specs:
        name, eq, ref = spec.partition("=")
        store, at, ident = ref.rpartition("@")
        if not eq or not _NAME.fullmatch(name):
            raise BadInput(f"--data {spec!r}: expected NAME=STORE@ID with NAME of letters, digits, '_', '.', '-'",
                           hint="e.g. --data train=s3://bucket/snapshots@blake3:<64 hex digits>")
        if not at or not store:
            raise BadInput(f"--data {spec!r}: {name} names no store and id (STORE@ID)",
                           hint=f"e.g. --data {name}=s3://bucket/snapshots@{SNAPSHOT_ID_HELP}")
        if not DATA_VERSION_ID.fullmatch(ident):
            raise BadInput(f"--data {spec!r}: {ident!r} is not a content id, so it does not pin {name} (a version label "
                           "or a path can change)", hint=f"snapshot the data (repro-audit snapshot create) and pass its id, {SNAPSHOT_ID_HELP}")
        if name in out:
            raise BadInput(f"--data {spec!r}: {name} is given twice", hint="pass each input once")
        out[name] = ref
    return out


def check_image(image: str | None) -> str | None:
    if image is not None and not is_digest_ref(image):
        raise BadInput(f"--image {image!r} is not pinned by digest (REF@sha256:<64 hex digits>): a tag moves",
                       hint="find the digest with `docker inspect --format '{{index .RepoDigests 0}}' IMAGE`")
    return image


def document(*, name: str, version: str, run_id: str | None, data: Mapping[str, str], image: str | None,
             seed: int | None, by: str, at: str) -> dict[str, Any]:
    """The record an owner supplies, as stored (and signed) in the reports store."""
    if not (data or image or seed is not None):
        raise BadInput(f"{model_uri(name, version)}: nothing to attach", hint="pass --data NAME=STORE@ID, --image or --seed")
    if not by:
        raise BadInput("a supplied record needs a responsible person", hint=f"set {RESPONSIBLE.name} or {SIGNER.name}")
    return {"kind": KIND, "version": VERSION, "model": {"name": name, "version": str(version), "run_id": run_id},
            "data": dict(sorted(data.items())), "image": image, "seed": seed, "responsible_person": by,
            "supplied_at": at, "note": MARK}


def load(raw: bytes, *, key: str, expected_sha256: str | None, model: tuple[str, str] | None = None) -> Supplied:
    """The stored record as the rules read it; Findings when it is not the one the version's tag names."""
    import json

    sha = sha256_digest(raw)
    if not expected_sha256:
        raise Findings(f"{key}: no param {PARAM_SHA256} anchors it", hint="attach it again with repro-audit adopt")
    if expected_sha256 and sha != expected_sha256:
        raise Findings(f"{key}: its sha256 is {sha} but param {PARAM_SHA256} anchors {expected_sha256}: "
                       "the supplied record was changed after it was attached", hint="attach it again with repro-audit adopt")
    doc = json.loads(raw)
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise Findings(f"{key}: not a supplied record (kind is not {KIND!r})", hint="attach it again with repro-audit adopt")
    named = doc.get("model") or {}
    if model is not None and (str(named.get("name")), str(named.get("version"))) != (model[0], str(model[1])):
        raise Findings(f"{key}: the record is for {model_uri(str(named.get('name')), str(named.get('version')))}, not "
                       f"{model_uri(model[0], model[1])}: the version's tag {TAG_SUPPLIED} was pointed at another record",
                       hint="attach the record again with repro-audit adopt")
    return Supplied(by=str(doc.get("responsible_person") or ""), at=str(doc.get("supplied_at") or ""),
                    data=dict(doc.get("data") or {}), image=doc.get("image"), seed=doc.get("seed"), key=key, sha256=sha)
