"""Production equals documented: what serves under a production alias hashes to the artifact that was audited.

EU Delegated Regulation 2022/439 Art. 31(8)(b) asks for "confirmation that the rating model implemented in the
production system is the same as the one described in the documentation". The audit judged one artifact (its
sha256 is the evidence's ``weights.registered``); afterwards the registry's copy can be replaced in its artifact
store, and a serving bucket or a model server can load another file. So, for every version behind a production
alias (``REPRO_PRODUCTION_ALIASES``), this step hashes each copy that serves it, now:

* the registry's own copy of the version's model artifact (the file the record names, downloaded again), and
* each deployed file named for it in ``REPRO_DEPLOYED_ARTIFACTS`` (``NAME@ALIAS=URI``: ``s3://bucket/key``,
  ``file://…`` or a path, read through ``auditor.storage``),

and compares each with the audited digest from the version's latest published evidence (read from the reports
store, its seal checked). A copy whose bytes differ is the finding "production differs from what was audited";
a production version never audited, or whose audit recovered no artifact, says so (it is not "the same").
Comparing predictions on a golden evaluation set is not done: no record names such a set yet.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from auditor.errors import InfrastructureError, ReproError

log = logging.getLogger(__name__)

#: the one wording of the finding (report, coverage page, CLI)
DIFFERS = "production differs from what was audited"
SAME = "same as audited"
NOT_AUDITED = "never audited"
NO_AUDITED_ARTIFACT = "the audit recovered no artifact to compare"
UNREADABLE = "unreadable"


def production_versions(session: Any) -> list[Any]:
    """Every registered version behind one of the production aliases (the settings')."""
    aliases = {a.lower() for a in session.settings.production_aliases}
    return [v for v in session.registry.list_versions() if any(a.lower() in aliases for a in v.aliases)]


def audited_digests(session: Any, wanted: set[tuple[str, str]] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (model, version) (of ``wanted``, default all): the latest published audit's id, date, evidence key and
    audited weights digest (only those evidence files are read)."""
    from auditor.errors import Findings, NotFound
    from auditor.report import ledger
    from auditor.report.evidence import load_evidence

    store = session.store
    try:
        entries = ledger.entries(store)
    except (NotFound, Findings):
        return {}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in entries:  # in ledger order: the last one of a version wins
        audit = entry.get("audit") or {}
        latest[(str(audit.get("model")), str(audit.get("version")))] = entry
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for key, entry in latest.items():
        if wanted is not None and key not in wanted:
            continue
        evidence_key = (entry.get("evidence") or {}).get("key")
        weights = recorded = None
        why = None
        try:
            doc = load_evidence(store.read(evidence_key), source=f"{store.uri}/{evidence_key}")
            weights = (doc.get("digests") or {}).get("weights.registered")
            recorded = recorded_digest(doc)
        except InfrastructureError:
            raise
        except ReproError as exc:
            why = f"its evidence {evidence_key} cannot be read: {exc}"
        found[key] = {"audit_id": (entry.get("audit") or {}).get("audit_id"), "date": entry.get("date"),
                      "evidence": evidence_key, "weights": weights, "recorded": recorded, "why": why}
    return found


def recorded_digest(doc: dict[str, Any]) -> str | None:
    """The sha256 training recorded for the model artifact, as the audit's evidence holds the record (None: none)."""
    from auditor.lineage.record import RunRecord

    record = (doc.get("audit") or {}).get("record")
    if not record:
        return None
    try:
        artifact = RunRecord.model_validate(record).outputs.model()
    except ValueError:
        return None
    return artifact.sha256 if artifact is not None else None


def _already_replaced(audit: dict[str, Any]) -> str | None:
    """Why the audit itself judged an artifact other than the one training recorded (a re-audit of a replaced
    copy must not make the replaced bytes "what was audited"); None when they are the same."""
    from auditor.digests import same

    audited, recorded = audit.get("weights"), audit.get("recorded")
    if audited and recorded and not same(audited, recorded):
        return (f"the audit {audit.get('audit_id')} of {audit.get('date')} found the registered artifact ({audited}) already "
                f"differs from the one training recorded ({recorded})")
    return None


def _hash_uri(uri: str, scratch: Path) -> str:
    """sha256 of the file at ``uri`` (``s3://``, ``file://``, ``memory://`` or a path), read through the stores."""
    from auditor.digests import sha256_file
    from auditor.storage import open_store

    if "://" in uri:
        parent, _, name = uri.rstrip("/").rpartition("/")
    else:  # a plain path, relative to the working folder
        path = Path(uri).expanduser().absolute()
        parent, name = str(path.parent), path.name
    if not name or parent.endswith(":/") or parent.endswith(":"):
        from auditor.errors import BadInput

        raise BadInput(f"deployed artifact {uri!r} names no file", hint="give s3://bucket/key, file:///path or a path of the model file")
    store = open_store(parent)
    dest = scratch / f"deployed-{len(list(scratch.iterdir()))}"
    store.download(name, dest)
    return sha256_file(dest)


def _registry_copy(session: Any, info: Any, scratch: Path) -> str:
    """sha256 of the registry's copy of the version's model artifact, downloaded now."""
    from auditor.digests import sha256_file
    from auditor.tags import WEIGHTS_ARTIFACT
    from auditor.uris import run_artifact_path

    try:
        record, _ = session.registry.load_record(info)
    except InfrastructureError:
        raise
    except ReproError:  # no record (the audit said so): the registry's copy is where the SDK puts it
        record = None
    artifact = record.outputs.model() if record is not None else None
    path = (run_artifact_path(artifact.uri) if artifact is not None else None) or WEIGHTS_ARTIFACT
    dest = scratch / f"registry-{info.name}-{info.version}".replace("/", "_")
    return sha256_file(session.registry.download_artifact(info, path, dest))


def _deployed_for(settings: Any, info: Any) -> list[tuple[str, str]]:
    """(where, URI) of each deployed copy the settings name for this version (by any of its aliases)."""
    named = []
    for key, uri in settings.deployed_artifacts:
        model, _, alias = key.rpartition("@")
        if model == info.name and alias.lower() in {a.lower() for a in info.aliases}:
            named += [(f"deployed {key}", one.strip()) for one in uri.split("|") if one.strip()]
    return named


def _compare(where: str, uri: str, audited: str | None, measure: Any) -> dict[str, Any]:
    from auditor.digests import same

    row: dict[str, Any] = {"where": where, "uri": uri, "audited": audited, "found": None, "status": "", "detail": ""}
    try:
        row["found"] = measure()
    except InfrastructureError as exc:
        row.update(status=UNREADABLE, detail=f"{exc} (an outage: checked again next time)")
        return row
    except (ReproError, OSError) as exc:
        row.update(status=DIFFERS, detail=f"the copy cannot be read: {exc}")
        return row
    if audited is None:
        return row
    if same(row["found"], audited):
        row["status"] = SAME
    else:
        row.update(status=DIFFERS, detail=f"it hashes to {row['found']}, the audited artifact to {audited}")
    return row


def production_check(session: Any) -> list[dict[str, Any]]:
    """One row per production version: its aliases, its last audit, each serving copy and whether it is the same.

    A row's ``status`` is ``SAME`` only when every copy hashes to the audited digest; ``DIFFERS`` when any copy
    does not (or cannot be read); ``NOT_AUDITED`` / ``NO_AUDITED_ARTIFACT`` when there is nothing to compare with.
    """
    from auditor.lineage.redact import redact_text
    from auditor.uris import model_uri

    versions = production_versions(session)
    audits = audited_digests(session, {(v.name, str(v.version)) for v in versions})
    rows = []
    with tempfile.TemporaryDirectory(prefix="repro-production-") as tmp:
        scratch = Path(tmp)
        for info in versions:
            audit = audits.get((info.name, str(info.version)))
            audited = (audit or {}).get("weights")
            copies = [_compare("registry", info.ref, audited, lambda info=info: _registry_copy(session, info, scratch))]
            copies += [_compare(where, redact_text(uri), audited, lambda uri=uri: _hash_uri(uri, scratch))
                       for where, uri in _deployed_for(session.settings, info)]
            replaced = _already_replaced(audit) if audit is not None else None
            if audit is None:
                status, detail = NOT_AUDITED, "no published audit of this version: nothing says what serves was checked"
            elif replaced is not None:
                status, detail = DIFFERS, replaced
            elif audited is None:
                status, detail = NO_AUDITED_ARTIFACT, audit.get("why") or "its evidence names no weights.registered digest"
            elif any(c["status"] == DIFFERS for c in copies):
                status = DIFFERS
                detail = "; ".join(f"{c['where']}: {c['detail']}" for c in copies if c["status"] == DIFFERS)
            elif any(c["status"] == UNREADABLE for c in copies):
                status, detail = UNREADABLE, "; ".join(f"{c['where']}: {c['detail']}" for c in copies if c["status"] == UNREADABLE)
            else:
                status, detail = SAME, f"{len(copies)} cop{'y' if len(copies) == 1 else 'ies'} hash to the audited artifact"
            if status == DIFFERS:
                log.warning("%s (%s): %s", DIFFERS, info.ref, detail)
            rows.append({"model": info.name, "version": str(info.version), "ref": model_uri(info.name, info.version),
                         "aliases": list(info.aliases), "audit_id": (audit or {}).get("audit_id"),
                         "audited_at": (audit or {}).get("date"), "audited": audited, "status": status,
                         "detail": detail, "copies": copies})
    return rows


def registry_findings(session: Any, info: Any, actual: str | None) -> list[Any]:
    """For an audit's report: a warning when the version serves under a production alias and the registry's copy now
    hashes to other bytes than the version's previous published audit judged (or than training recorded, when that
    audit already found them replaced): "production differs from what was audited"."""
    from auditor.digests import same
    from auditor.lineage.findings import Finding

    aliases = {a.lower() for a in session.settings.production_aliases}
    if not actual or not any(a.lower() in aliases for a in info.aliases):
        return []
    audit = audited_digests(session, {(info.name, str(info.version))}).get((info.name, str(info.version)))
    if audit is None:
        return []
    before = audit.get("recorded") if _already_replaced(audit) else audit.get("weights")
    if not before or same(before, actual):
        return []
    return [Finding(code="production.differs", path="production", severity="warning",
                    message=f"{DIFFERS}: the registry's copy of {info.ref} (serving as {', '.join(info.aliases)}) now hashes "
                            f"to {actual}; the audit {audit.get('audit_id')} of {audit.get('date')} judged {before}",
                    hint="find who replaced the artifact (the artifact store's access log); register the audited model "
                         "again as a new version rather than overwriting a served one")]


def deployed_findings(session: Any, info: Any, audited: str | None) -> list[Any]:
    """For an audit's report: a warning finding for each deployed copy named for this version (by its aliases, in
    ``REPRO_DEPLOYED_ARTIFACTS``) whose bytes differ from ``audited``, the registered artifact the audit judged.

    A finding of its own: it does not change the reproducibility verdict on the registered version. The audit step
    calls it once it knows the registered artifact's digest (``evidence["weights.registered"]``).
    """
    from auditor.lineage.findings import Finding
    from auditor.lineage.redact import redact_text

    named = _deployed_for(session.settings, info)
    if not named or not audited:
        return []
    findings = []
    with tempfile.TemporaryDirectory(prefix="repro-production-") as tmp:
        scratch = Path(tmp)
        for where, uri in named:
            row = _compare(where, redact_text(uri), audited, lambda uri=uri: _hash_uri(uri, scratch))
            if row["status"] != SAME:
                findings.append(Finding(
                    code="production.differs", path="production", severity="warning",
                    message=f"{DIFFERS}: {where} ({row['uri']}) {row['detail'] or row['status']}",
                    hint="deploy the audited artifact again, or audit the version that serves"))
    return findings


__all__ = ["DIFFERS", "NOT_AUDITED", "SAME", "audited_digests", "deployed_findings", "production_check",
           "production_versions", "recorded_digest", "registry_findings"]
