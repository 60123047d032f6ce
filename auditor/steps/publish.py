"""Publishing an audit, exactly once per (version, date): the report, the ledger entry, its MLflow anchor, the tags.

Also the pre-flight that runs before any rebuild (what would fail after an hour of rebuilding is
said first) and the ledger anchors ``evidence verify`` holds the ledger to.
"""

from __future__ import annotations

import logging
from typing import Any

from auditor.errors import BadInput, InfrastructureError, ReproError
from auditor.judge.result import AuditResult, Verdict
from auditor.settings import EVIDENCE_PACKS, REPORTS
from auditor.steps.anchoring import add_second_anchors, anchor_params
from auditor.steps.common import Progress, now
from auditor.steps.mlflow_view import describe_version, run_note
from auditor.tags import TAG_AUDIT_DATE, TAG_AUDIT_PREVIOUS_DATE, TAG_AUDIT_RUN, TAG_REPORT

log = logging.getLogger(__name__)


def preflight_store(session: Any) -> None:
    """The report store opens, is reachable and (when required) locked; a local one is a folder, not a file."""
    from auditor.report.index import INDEX_FILE
    from auditor.report.ledger import LEDGER_FILE
    from auditor.report.lock import require_object_lock

    store, settings = session.store, session.settings
    local = store.local_path(INDEX_FILE)
    if local is not None and local.parent.exists() and not local.parent.is_dir():
        raise BadInput(f"the report store {local.parent} is a file, not a folder", hint=f"set {REPORTS.name} to a folder or s3://bucket/prefix")
    if settings.require_object_lock:
        require_object_lock(store, settings.lock_retention_days)
    store.exists(LEDGER_FILE)  # reachable: an outage or a refused credential fails here, not after the rebuild


def preflight(session: Any, info: Any, *, publishing: bool) -> None:
    """Before any rebuild: the version's bands and calibration parse, and the report store is usable.

    A malformed band is the caller's to fix (``MalformedRecord``, exit 2), said now rather than as an
    ERROR verdict after an hour of rebuilding.
    """
    from auditor.judge.floors import calibration_from_json
    from auditor.judge.tolerance import bands_from_json
    from auditor.tags import TAG_BANDS, TAG_CALIBRATION

    log.info("pre-flight %s: bands%s", info.ref, " and the report store" if publishing else "")
    bands_text = session.registry.get_bands(info)
    if bands_text:
        bands_from_json(bands_text, source=f"{info.ref} tag {TAG_BANDS}")
    calibration_text = info.tags.get(TAG_CALIBRATION)
    if calibration_text:
        calibration_from_json(calibration_text, source=f"{info.ref} tag {TAG_CALIBRATION}")
    if publishing:
        preflight_store(session)


def published_evidence(session: Any, info: Any, date: str) -> dict[str, Any] | None:
    """The stored evidence of this version's audit for ``date``, if its evidence was published."""
    from auditor.report.evidence import load_evidence, report_stem

    stem = report_stem(info.name, str(info.version), date)
    store = session.store
    if not store.exists(f"{stem}.json"):
        return None
    return load_evidence(store.read(f"{stem}.json"), source=f"{store.uri}/{stem}.json")


def publish_version(session: Any, info: Any, options: Any, progress: Progress, rebuild_step: Any = None) -> Any:
    """Audit ``info`` for ``options.date`` (unless its evidence is already published) and publish it.

    Every step is safe to repeat: once the evidence is stored, a retry finishes publishing *that*
    evidence (report, ledger, registry tags) instead of auditing again. A failure while publishing is
    returned beside the verdict (``AuditOutcome.publish_failure``), not raised.
    """
    from auditor.report.evidence import audit_of
    from auditor.steps.audit import audit_version
    from auditor.steps.common import today
    from auditor.steps.options import AuditOutcome

    date = options.date or today()
    options = options if options.date else _dated(options, date)
    stored = published_evidence(session, info, date)
    if stored is not None:
        result = audit_of(stored)
    else:
        result = audit_version(session, info, options, progress, rebuild_step)
        if result.verdict is Verdict.ERROR and not options.last_try:  # an orchestrator's retry audits it afresh
            raise InfrastructureError(f"{info.ref}: verdict ERROR, not published yet: {result.error}",
                                      hint="retried; the last try publishes the ERROR verdict")
    outcome = AuditOutcome(ref=info.ref, result=result, skipped=stored is not None)
    try:
        outcome.report = _publish(session, info, result, date, progress)
    except ReproError as exc:
        outcome.publish_failure = exc
    return outcome


def _dated(options: Any, date: str) -> Any:
    import dataclasses

    return dataclasses.replace(options, date=date)


def _publish(session: Any, info: Any, result: AuditResult, date: str, progress: Progress) -> str:
    """The report, the ledger and its MLflow anchor, then the version's tags; returns the report's URI."""
    from auditor.report.publish import publish

    progress("publishing the report")
    publication = publish(result, session.store, settings=session.settings, key=session.signer)  # completes a half-done publish
    if publication.created:
        log.info("publish %s: %s to %s", info.ref, result.verdict.value, session.settings.reports)
    else:  # a second audit the same day: the day's evidence stands, nothing was rebuilt or written again
        log.info("publish %s: the %s audit of %s is already published in %s; checking its anchor and tags",
                 info.ref, result.verdict.value, date, session.settings.reports)
    report_uri = f"{publication.location.rstrip('/')}/{publication.report_key}"
    progress("anchoring the ledger in MLflow")
    try:
        run_id = log_audit_run(session, info, result, publication, date=date)
    except BadInput as exc:  # the report is out, its anchor is not: infrastructure to retry, not the caller's input
        raise InfrastructureError(
            f"{info.ref}: the report is published but ledger entry {publication.seq} is not anchored in MLflow ({exc})",
            hint="re-run the same audit: it completes the anchor, then evidence verify passes") from exc
    short = outcome_tags(session, result, publication)  # the tiers and the report's web address, beside the verdict
    if (info.tags.get(TAG_AUDIT_DATE) != date or info.tags.get(TAG_REPORT) != report_uri or info.tags.get(TAG_AUDIT_RUN) != run_id
            or any(info.tags.get(k) != v for k, v in short.items())):
        session.registry.write_outcome(info, result.verdict.value, result.finished_at or now(), report_uri)
        tags = {TAG_AUDIT_DATE: date, TAG_AUDIT_RUN: run_id, **short}
        previous = info.tags.get(TAG_AUDIT_DATE)
        if previous and previous != date:
            tags[TAG_AUDIT_PREVIOUS_DATE] = previous
        session.registry.set_tags(info, tags)
    # the verdict where a person looks: atop the version's description, with links to the report and the audit run
    describe_version(session, info, result.verdict.value, date, publication.report_key, run_id,
                     report_url(session.settings, publication.report_key))
    if session.settings.evidence_packs:
        from auditor.errors import ReproError

        try:  # the audit is published and anchored: a pack that cannot be written is said, never a failed publish
            write_evidence_pack(session, publication.stem, progress)
        except ReproError as exc:
            log.warning("publish %s: the evidence pack was not written (%s); `repro-audit evidence pack %s` writes it",
                        info.ref, exc, publication.stem)
    log.info("publish %s: %s", info.ref, report_uri)
    return report_uri


def write_evidence_pack(session: Any, stem: str, progress: Progress) -> str | None:
    """``<stem>.zip`` in ``REPRO_EVIDENCE_PACKS``: what ``repro-audit evidence pack`` writes, once per audit (a pack
    already there is kept: it is a function of the published audit). Outside the reports store, whose every file a
    ledger entry names. None when the audits are not signed (a pack carries the signature)."""
    from auditor.report.pack import build_pack, settings_public_key
    from auditor.storage import open_store

    packs = open_store(session.settings.evidence_packs)
    key = f"{stem}.zip"
    if packs.exists(key):
        return f"{packs.uri.rstrip('/')}/{key}"
    public = settings_public_key(session.settings)
    if public is None:
        log.warning("publish %s: %s is set but no signing key is configured: no evidence pack (it carries the signature)",
                    stem, EVIDENCE_PACKS.name)
        return None
    progress("writing the evidence pack")
    pack = build_pack(session.store, stem, public_key=public, registry=lambda: session.registry)
    packs.write(key, pack.data)
    return f"{packs.uri.rstrip('/')}/{key}"


def report_url(settings: Any, report_key: str) -> str | None:
    """The report's web address under ``REPRO_REPORTS_URL``; None when the reports folder is not served."""
    base = getattr(settings, "reports_url", None)
    return f"{base.rstrip('/')}/{report_key}" if base else None


def outcome_tags(session: Any, result: AuditResult, publication: Any) -> dict[str, str]:
    """Short version tags beside the verdict: each tier's status, the report's web address when it has one, and the
    verdict again under the key MLflow's UI lists first (``TAG_SUMMARY``)."""
    from auditor.tags import TAG_AUDIT_TIER_PREFIX, TAG_REPORT_URL, TAG_SUMMARY

    tags = {TAG_SUMMARY: result.verdict.value}
    tags.update({f"{TAG_AUDIT_TIER_PREFIX}{name}": tier.status for name, tier in result.tiers.items()})
    url = report_url(session.settings, publication.report_key)
    if url:
        tags[TAG_REPORT_URL] = url
    return tags


def log_audit_run(session: Any, info: Any, result: AuditResult, publication: Any, *, date: str | None = None) -> str:
    """Log the audit as a run of the audits experiment, once per audit; its params anchor the ledger head.

    MLflow refuses to change a param once logged, so the head written here (sequence number
    and entry hash, for this reports location and ledger id) is what ``evidence verify`` holds the ledger
    to: a rewritten, re-chained or rolled-back ledger no longer matches it. The run's description names the version
    it audited (``date``: the audit's), with a link to its page.
    """
    from auditor import tags as t

    entry = publication.entry or {"seq": publication.seq, "hash": publication.entry_hash}
    params = {
        **anchor_params(session, entry, publication.entry_version_id),
        t.PARAM_EVIDENCE_SHA256: (entry.get("evidence") or {}).get("sha256", ""),
        t.PARAM_RECORD_DIGEST: result.record_digest or "",
        t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version),  # earlier audits of a version, wherever published
    }
    if entry.get("attestation"):
        params[t.PARAM_ATTESTATION_SHA256] = entry["attestation"]["sha256"]
    run_tags = {
        t.TAG_RUN_KIND: "audit", t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version),
        t.TAG_VERDICT: result.verdict.value, t.MLFLOW_SOURCE_NAME: t.AUDIT_RUN_SOURCE, t.MLFLOW_SOURCE_TYPE: "JOB",
        **{f"{t.TAG_RUN_TIER_PREFIX}{name}": tier.status for name, tier in result.tiers.items()},
    }
    url = report_url(session.settings, publication.report_key)
    if url:
        run_tags[t.TAG_REPORT_URL] = url
    run_tags[t.MLFLOW_NOTE] = run_note(info.name, str(info.version), result.verdict.value, date, url, publication.report_key)
    # the audit's real durations (MLflow's own Duration column is the time this run took to log)
    metrics = {f"audit.{k}": float(v) for k, v in result.timings.model_dump().items() if isinstance(v, (int, float))}
    for m in result.metrics:
        values = [v for v in m.rebuilt if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
        if values:
            metrics[f"rebuilt.{m.name}"] = float(values[0])
    return session.registry.log_run(
        experiment=session.settings.audit_experiment, identity=publication.stem, name=f"audit {info.name} v{info.version} {result.audit_id}",
        params=params, tags=run_tags, metrics=metrics, artifacts=publication.files or {}, links=audit_links(info, result, metrics),
    )


def audit_links(info: Any, result: AuditResult, metrics: dict[str, float]) -> Any:
    """What the audit run is about, as MLflow 3 links runs: the audited LoggedModel (its page then lists the audit's
    rebuilt metrics) and the datasets the record names, as inputs of context ``audit`` tagged with the lineage tier's
    status (the tier that checks each snapshot still holds its registered bytes)."""
    from auditor import tags as t
    from auditor.registry.base import RunLinks

    data = (result.record or {}).get("data") or {}
    datasets = {name: ref for name, ref in data.items() if isinstance(ref, dict) and ref.get("uri")}
    lineage = result.tiers.get("lineage")
    return RunLinks(model_id=getattr(info, "logged_model_id", None), datasets=datasets,
                    input_tags={f"{t.TAG_RUN_TIER_PREFIX}lineage": lineage.status} if lineage else {},
                    model_metrics=tuple(k for k in metrics if k.startswith("rebuilt.")))


def ledger_anchors(session: Any, location: str) -> list[Any]:
    """The ledger heads anchored for the ledger at ``location`` (``evidence verify`` compares them): MLflow runs of the
    audits experiment naming this location or this ledger's id, and the second anchor store's objects when one is
    configured (by default a folder under REPRO_HOME). A source configured but holding nothing for this ledger still
    appears (with no anchors)."""
    from auditor.report.anchors import ledger_id
    from auditor.report.verify import Anchor, Anchors
    from auditor.storage import open_store
    from auditor.tags import (
        PARAM_LEDGER_ENTRY_VERSION,
        PARAM_LEDGER_HEAD,
        PARAM_LEDGER_ID,
        PARAM_LEDGER_LOCATION,
        PARAM_LEDGER_SEQ,
    )

    experiment = session.settings.audit_experiment
    store = open_store(location)
    uri, lid = store.identity, ledger_id(store)
    runs = {r.run_id: r for r in session.registry.find_runs(experiment=experiment, params={PARAM_LEDGER_LOCATION: uri})}
    if lid:
        runs.update({r.run_id: r for r in session.registry.find_runs(experiment=experiment, params={PARAM_LEDGER_ID: lid})})
    mlflow_source = f"MLflow experiment {experiment!r}"
    anchors = Anchors(sources=[mlflow_source])
    for run in sorted(runs.values(), key=lambda r: r.start_time or 0):
        seq, head = run.params.get(PARAM_LEDGER_SEQ), run.params.get(PARAM_LEDGER_HEAD)
        if seq is not None and seq.isdigit() and head:
            state = " (deleted)" if run.deleted else ""
            anchors.append(Anchor(seq=int(seq), head=head, where=f"MLflow run {run.run_id}{state} of {experiment!r}",
                                  entry_version=run.params.get(PARAM_LEDGER_ENTRY_VERSION), source=mlflow_source))
    add_second_anchors(session, anchors, location=uri, lid=lid)
    return anchors


def record_rotation(session: Any, old_key: str, new_key: str) -> dict[str, Any]:
    """Record the hand-over of the auditor's signing key from ``old_key`` to ``new_key`` (PEM private key files or
    signer URIs): a statement signed by both, a ledger entry and its anchors (MLflow, and the second anchor)."""
    from auditor import tags as t
    from auditor.report import attest
    from auditor.report.publish import refresh
    from auditor.report.rotation import publish_rotation

    public = session.settings.signing_public_key
    old = attest.load_signing_key(old_key, public_key=public)
    new = attest.load_signing_key(new_key, public_key=public)
    entry = publish_rotation(session.store, old, new)
    refresh(session.store)
    version = session.store.version_ids([_entry_key(entry)]).get(_entry_key(entry))
    session.registry.log_run(
        experiment=session.settings.audit_experiment, identity=entry["id"], name=f"key rotation {old.keyid[:12]} to {new.keyid[:12]}",
        params=anchor_params(session, entry, version),
        tags={t.TAG_RUN_KIND: "key_rotation", t.MLFLOW_SOURCE_NAME: t.AUDIT_RUN_SOURCE, t.MLFLOW_SOURCE_TYPE: "JOB"},
        metrics={}, artifacts={})
    return entry


def _entry_key(entry: dict[str, Any]) -> str:
    from auditor.report.ledger import entry_key

    return entry_key(entry["seq"])
