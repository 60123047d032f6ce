"""Anchoring a ledger head outside the reports folder: the second anchor store and the MLflow params.

One home for both publish paths (an audit's, ``auditor.steps.publish``; a calibration's, ``auditor.steps.calibrate``),
so neither imports the other.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def anchor_params(session: Any, entry: dict[str, Any], entry_version_id: str | None) -> dict[str, str]:
    """Anchor ``entry``'s head outside the reports folder: in the second anchor store (``REPRO_LEDGER_ANCHOR``, by
    default a write-once folder under ``REPRO_HOME``; written first and once), and as the MLflow params this returns (location,
    ledger id, seq, head), which the caller logs on its run."""
    from auditor import tags as t
    from auditor.report.anchors import ledger_id, write_anchor

    store = session.store
    lid = ledger_id(store)
    second = second_anchor_store(session)
    if second is not None:
        _, default = second_anchor_uri(session.settings)
        for conflict in write_anchor(second, location=store.identity, lid=lid, entry=entry, entry_version=entry_version_id,
                                     strict=not default):
            log.warning("%s (run repro-audit evidence verify; a reports folder deliberately started over keeps "
                        "failing it until its old heads are moved out of %s)", conflict, second.uri)
    params = {t.PARAM_LEDGER_LOCATION: store.identity, t.PARAM_LEDGER_SEQ: str(entry["seq"]), t.PARAM_LEDGER_HEAD: entry["hash"]}
    if lid:
        params[t.PARAM_LEDGER_ID] = lid
    if entry_version_id:
        params[t.PARAM_LEDGER_ENTRY_VERSION] = entry_version_id
    return params


#: the default second anchor: a folder under the auditor's home (REPRO_HOME), outside MLflow and the reports
DEFAULT_FOLDER = "anchors"
#: ``REPRO_LEDGER_ANCHOR=off``: MLflow's anchors only (an MLflow admin can then roll back the newest entries)
OFF = "off"


def second_anchor_uri(settings: Any) -> tuple[str | None, bool]:
    """(where the second anchor is, whether it is the default): ``REPRO_LEDGER_ANCHOR`` when set (``off``: none),
    else the write-once folder ``$REPRO_HOME/anchors`` (the auditor's own account writes it; MLflow's admin
    does not; files are created exclusively, read-only, never overwritten)."""
    uri = (settings.ledger_anchor or "").strip()
    if uri.lower() == OFF:
        return None, False
    if uri:
        return uri, False
    from pathlib import Path

    return str(Path(settings.home) / DEFAULT_FOLDER), True


def second_anchor_store(session: Any) -> Any:
    """The second anchor's store (locked like the reports when Object Lock is required), or None when it is off.
    The default folder under the home is not an Object Lock bucket: only a configured store is held to the lock."""
    uri, default = second_anchor_uri(session.settings)
    if uri is None:
        return None
    from auditor.report.lock import require_object_lock
    from auditor.storage import open_store

    store = open_store(uri)
    if session.settings.require_object_lock and not default:
        require_object_lock(store, session.settings.lock_retention_days)
    return store


def add_second_anchors(session: Any, anchors: Any, *, location: str, lid: str | None) -> None:
    """Add the second anchor's heads for this ledger to ``anchors`` (``auditor.report.verify.Anchors``), naming it.

    A store configured in ``REPRO_LEDGER_ANCHOR`` must anchor every entry. The default folder under the home holds
    the heads published *from this home* (entries published elsewhere, or before it existed, are not in it): every
    head it holds must still be in the ledger, unchanged (a rollback or a re-chain is named), and it is not asked
    to anchor the rest (``Anchors.partial``)."""
    from auditor.report.anchors import read_anchors
    from auditor.report.verify import Anchor
    from auditor.settings import LEDGER_ANCHOR

    second = second_anchor_store(session)
    if second is None:
        return
    _, default = second_anchor_uri(session.settings)
    what = f"the default under {session.settings.home}, {LEDGER_ANCHOR.name} unset" if default else LEDGER_ANCHOR.name
    source = f"the second anchor {second.uri} ({what})"
    anchors.sources.append(source)
    if default:
        anchors.partial.add(source)
    for seq, head, version, key in read_anchors(second, location=location, lid=lid):
        anchors.append(Anchor(seq=seq, head=head, where=f"the second anchor {second.uri}/{key}", entry_version=version,
                              source=source))


def log_calibration_anchor(session: Any, info: Any, entry: dict[str, Any], entry_version_id: str | None,
                           data: bytes) -> str:
    """Log a published calibration (``entry``, its evidence ``data``) as its run of the audits experiment, once per
    calibration: the same file, its sha256 as a param, the ledger head as its anchor; a half-made run is completed.
    Returns the run id. One home for the first publish and the repair below."""
    import json

    from auditor import tags as t

    calibration = entry.get("calibration") or {}
    sha, calibrated_at = calibration["sha256"], calibration.get("calibrated_at")
    reruns = len((json.loads(data) or {}).get("seed_varied") or [])
    params = {t.PARAM_CALIBRATION_SHA256: sha, t.PARAM_CALIBRATION_RERUNS: str(reruns),
              t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version),
              **anchor_params(session, entry, entry_version_id)}
    return session.registry.log_run(
        experiment=session.settings.audit_experiment, identity=f"calibration {info.ref} {sha}",
        name=f"calibration {info.name} v{info.version} {calibrated_at}", params=params,
        tags={t.TAG_RUN_KIND: "calibration", t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version),
              t.MLFLOW_SOURCE_NAME: t.AUDIT_RUN_SOURCE, t.MLFLOW_SOURCE_TYPE: "JOB"},
        metrics={}, artifacts={t.CALIBRATION_ARTIFACT: data},
    )


def repair_calibration_anchors(session: Any, info: Any) -> list[int]:
    """Complete the run of every calibration of ``info`` the ledger records but no MLflow run anchors: a calibration
    that stopped between its ledger entry and its run (a crash, MLflow refusing it) would otherwise stay unanchored
    for good, since a new calibration is a new entry. Returns the ledger positions repaired. An entry whose evidence
    no longer hashes to what it recorded is left to ``evidence verify`` (nothing unverified is anchored)."""
    from auditor import tags as t
    from auditor.report import ledger
    from auditor.report.calibrations import is_calibration

    store = session.store
    mine = [e for e in ledger.entries(store) if is_calibration(e)
            and (e.get("calibration") or {}).get("model") == info.name
            and str((e.get("calibration") or {}).get("version")) == str(info.version)]
    if not mine:
        return []
    runs = session.registry.find_runs(experiment=session.settings.audit_experiment,
                                      params={t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)})
    anchored = {(r.params.get(t.PARAM_LEDGER_SEQ), r.params.get(t.PARAM_LEDGER_HEAD)) for r in runs}
    repaired = []
    for entry in mine:
        if (str(entry["seq"]), entry["hash"]) in anchored:
            continue
        data = ledger.read_part(store, entry.get("evidence") or {})
        if data is None or ledger.sha256_of(data) != (entry.get("evidence") or {}).get("sha256"):
            log.warning("calibration %s of %s (ledger entry %s) is not anchored and its evidence does not verify: "
                        "left to repro-audit evidence verify", (entry.get("calibration") or {}).get("sha256"), info.ref,
                        entry["seq"])
            continue
        version = store.version_ids([ledger.entry_key(entry["seq"])]).get(ledger.entry_key(entry["seq"]))
        log_calibration_anchor(session, info, entry, version, data)
        log.info("calibration %s of %s: ledger entry %s was not anchored; its run is completed now",
                 (entry.get("calibration") or {}).get("sha256"), info.ref, entry["seq"])
        repaired.append(entry["seq"])
    return repaired
