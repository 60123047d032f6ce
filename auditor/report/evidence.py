"""The JSON evidence file: one document per audit, the source the HTML report is rendered from.

The document carries the audit result, the responsible person, a table of
digests (record, snapshot manifests, image, weights) and ``evidence_digest``:
the digest of the document's own canonical JSON without that field. So the
JSON can be re-checked on its own, and the HTML (which shows that digest and
carries it in a ``<meta>`` tag) can be re-checked against the JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from auditor import __version__
from auditor.canonical import digest, pretty_json
from auditor.digests import sha256_hex
from auditor.errors import Findings, MalformedRecord
from auditor.judge.result import AuditResult
from auditor.report.itself import auditor_itself
from auditor.settings import Settings

KIND = "repro-audit/evidence"
VERSION = 1

def redact(text: str | None) -> str | None:
    """Mask secret-looking values in free text (log tails, exception messages): the one redactor's."""
    from auditor.lineage.redact import redact as redact_once

    return redact_once(text)


def _finite(value: Any) -> Any:
    # NaN and infinities have no JSON spelling; keep them as text, as the run record does.
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _slug(text: str, limit: int = 48) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:limit].strip("-")
    return slug or "x"


def report_stem(model: str, version: str, audit_id: str) -> str:
    """The file stem of an audit's report: readable, filesystem-safe, unique per (model, version, audit id).

    Slugs alone could collide (``a/b`` and ``a-b``), so a hash of the exact triple is appended.
    """
    exact = sha256_hex(json.dumps([model, version, audit_id]).encode())[:12]
    return f"{_slug(model)}_v{_slug(version, 16)}_{_slug(audit_id)}_{exact}"


def _digests(audit: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    record = audit.get("record") or {}
    if audit.get("record_digest"):
        found["record"] = audit["record_digest"]
    elif record:
        found["record"] = digest(_finite(record))
    env = record.get("environment") or {}
    if env.get("image_digest"):
        found["image"] = env["image_digest"]
    for name, ref in sorted((record.get("data") or {}).items()):
        if ref.get("version"):
            found[f"data.{name}"] = ref["version"]
    wd = audit.get("weight_diff") or {}
    if wd.get("sha256_a"):
        found["weights.registered"] = wd["sha256_a"]
    if wd.get("sha256_b"):
        found["weights.rebuilt"] = wd["sha256_b"]
    found.update(audit.get("evidence") or {})
    return found


def build_evidence(
    result: AuditResult, *, settings: Settings, signing: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The evidence document for ``result``, sealed with its own digest; ``signing`` names the key that will sign it."""
    audit = _finite(result.to_dict())
    audit["log_tail"] = redact(audit.get("log_tail")) or ""
    audit["error"] = redact(audit.get("error"))
    body = {
        "kind": KIND,
        "version": VERSION,
        "tool_version": __version__,
        "auditor": auditor_itself(),  # the auditor's own version and environment, held to the committed lock
        "audit": audit,
        "responsible_person": result.responsible_person or settings.responsible_person,
        "digests": _digests(audit),
    }
    if signing:
        body["signing"] = signing
    body["evidence_digest"] = digest(body)
    return body


def evidence_bytes(doc: dict[str, Any]) -> bytes:
    """The file form: sorted, indented JSON for people; the digest is over the canonical form."""
    return (pretty_json(doc) + "\n").encode("utf-8")


def seal_ok(doc: dict[str, Any]) -> bool:
    """Whether ``evidence_digest`` matches the rest of the document."""
    body = {k: v for k, v in doc.items() if k != "evidence_digest"}
    return doc.get("evidence_digest") == digest(body)


def load_evidence(data: bytes, *, source: str = "evidence") -> dict[str, Any]:
    """Parse an evidence file and check its seal; ``Findings`` when the seal is broken."""
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MalformedRecord(f"{source}: not a JSON evidence file ({exc})") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise MalformedRecord(f"{source}: not a repro-audit evidence file (kind is not {KIND!r})")
    if doc.get("version") != VERSION:
        raise MalformedRecord(f"{source}: evidence version {doc.get('version')!r}, this tool reads {VERSION}")
    if not seal_ok(doc):
        raise Findings(f"{source}: evidence_digest does not match the document: it was altered after publishing")
    return doc


def audit_of(doc: dict[str, Any]) -> AuditResult:
    """The typed audit result inside an evidence document."""
    return AuditResult.model_validate(doc["audit"])
