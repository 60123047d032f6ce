"""What an audit reads of the version's own run record before it rebuilds: the record itself (a blocking finding
when it was edited after registration or publication), the metrics MLflow shows beside it, the knobs' rule table,
and the finding a changed snapshot gives. Split from ``auditor.steps.audit``; ``_Audit``, what one audit gathers, lives here so both read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.errors import Findings, NotFound, describe, verdict_failure
from auditor.judge.result import EnvDrift, Timings, Verdict
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.steps.common import Progress, gate, read_record, unreadable


@dataclass
class _Audit:
    """What one audit gathers, step by step, until the judge reads it."""

    session: Any
    info: Any
    runner: Any
    tmp: Path
    progress: Progress
    findings: list[Finding] = field(default_factory=list)
    record: RunRecord | None = None
    diff: str | None = None
    recovery: Any = None  # judge.verdict.RecoveryCheck
    weights: Path | None = None  # the registered model artifact (PyTorch weights or another flavour's file), downloaded
    flavor: str | None = None  # its flavour (auditor.flavors); None: PyTorch weights
    metric_results: list = field(default_factory=list)
    weight_diff: Any = None
    calibration: Any = None  # judge.floors.Calibration, when the version was calibrated
    calibrations: list[dict[str, Any]] = field(default_factory=list)  # every calibration run, newest last
    platform: dict | None = None  # the rebuild's platform fingerprint
    drift: EnvDrift | None = None
    log_tail: str = ""
    timings: Timings = field(default_factory=Timings)
    evidence: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # ERROR: no evidence could be produced (retryable)
    unrecoverable: str | None = None  # NOT_REPRODUCIBLE: an input cannot be recovered
    segments: Any = None  # judge.result.SegmentReplay, in a segment audit
    lottery: Any = None  # judge.result.SeedLottery, when the version was calibrated
    calibration_lookup: Any = None  # stored_calibrations' answer and its findings, read once, before the rebuild
    expected: Any = None  # judge.expected.ExpectedTier: what the record alone lets the audit reach
    multiplicity: Any = None  # judge.multiplicity.Multiplicity, from the calibration's stored decisions

    def failed(self, exc: BaseException) -> None:
        """Turn a failure into the verdict ``verdict_failure`` gives it; keep the run's log tail."""
        self.log_tail = getattr(exc, "log_tail", "") or self.log_tail
        self.findings += _data_changed(self.record, exc)
        if verdict_failure(exc) == Verdict.ERROR.value:
            self.error = describe(exc)
        else:
            self.unrecoverable = describe(exc)


def _data_changed(record: RunRecord | None, exc: BaseException) -> list[Finding]:
    """A recorded snapshot whose bytes changed since registration: a blocking finding on its data input, naming the
    files, so the data row (not the model file or a generator) carries the blame. A tabular file whose registered
    bytes are still at hand says what changed in it (rows, columns, values: ``auditor.snapshots.changed``); any
    other file is named by its hashes."""
    from auditor.errors import SnapshotCorrupt
    from auditor.snapshots.changed import problems_text

    if record is None or not isinstance(exc, SnapshotCorrupt):
        return []
    refs = {name: ref for name, ref in record.data.items() if ref.version == exc.snapshot_id}
    names = list(refs) or ["?"]
    files = problems_text(exc.snapshot_id, next((ref.uri for ref in refs.values()), None), exc.problems)
    return [Finding(code="data.changed", path=f"data.{name}", severity="blocking",
                    message=f"the data changed: snapshot {exc.snapshot_id} of data input {name!r} no longer holds the bytes it was "
                            f"registered with ({files})",
                    hint="restore the snapshot's files from a backup; never re-create a snapshot over the same id")
            for name in names]


def _logged_metrics(a: _Audit) -> list[Finding]:
    """The registered MLflow run's metrics the record does not hold or holds otherwise (``auditor.judge.logged``)."""
    from auditor.judge.logged import logged_metric_findings

    if not a.info.run_id:
        return []
    try:
        logged = a.session.registry.get_run(a.info.run_id).metrics
    except NotFound:  # the run is gone: the record's own findings say so
        return []
    return logged_metric_findings(a.record.outputs.metrics, logged, run_id=a.info.run_id)


def _read_record(a: _Audit) -> None:
    """The version's record and diff, or the finding that says why there is none."""
    record, diff, exc = read_record(a.session.registry, a.info)
    if exc is not None or record is None:
        a.findings = [unreadable(exc)] if exc is not None else []
        if exc is not None:
            _record_edited(a, exc)
        return
    a.record, a.diff = record, diff
    from auditor.judge.expected import expected_findings, expected_tier

    a.expected = expected_tier(a.record)  # the determinism lint: the tier to expect, before any rebuild
    a.findings = gate(a.record, a.diff) + _knob_findings(a.record) + expected_findings(a.expected) + _logged_metrics(a)
    if a.info.run_deleted:
        a.findings.append(Finding(
            code="run.deleted", path="record", severity="warning",
            message=f"run {a.info.run_id} of {a.info.ref} is deleted (not yet purged): the next `mlflow gc` destroys its record and weights",
            hint=f"restore it: `mlflow runs restore --run-id {a.info.run_id}`"))
    changed = _record_changed_since_published(a.session, a.info, a.record.digest())
    if changed:
        from auditor.registry import RecordChanged

        a.findings.append(Finding(
            code="record.changed", path="record", severity="blocking",
            message=f"the run record changed after registration (it was edited, not damaged): {changed}",
            hint=RecordChanged.HINT))
        _chain_edited(a, a.record, a.record.digest())
    a.evidence["record"] = a.record.digest()
    a.evidence.update({f"snapshot.{n}": r.version for n, r in a.record.data.items() if r.version})
    if a.record.environment and a.record.environment.image_digest:
        a.evidence["image"] = a.record.environment.image_digest


def _record_edited(a: _Audit, exc: BaseException) -> None:
    """A record edited after registration (``RecordChanged``): both digests into the evidence, and an edited
    checkpoint chain named as edited (its segments are never replayed from the edited record)."""
    from auditor.errors import MalformedRecord
    from auditor.registry import RecordChanged

    if isinstance(exc, MalformedRecord) and not isinstance(exc, RecordChanged) and a.info.record_digest:
        # it read as a record when it was registered (its digest is on the version); whether it was edited or damaged
        # cannot be told from bytes that do not parse, but re-registering them would launder an edit either way
        a.findings = [Finding(code="record.unreadable", path="record", severity="blocking",
                              message=f"{exc} (it was registered with digest {a.info.record_digest})",
                              hint="investigate why it no longer reads and restore the original from a backup; do not "
                                   "re-register the version: a new registration would adopt whatever the record holds now")]
        a.evidence["record.registered"] = a.info.record_digest
        a.evidence["record.found"] = "unreadable"
        return
    if not isinstance(exc, RecordChanged):
        return
    a.evidence["record.registered"] = exc.registered or "unknown"
    a.evidence["record.found"] = exc.found
    _chain_edited(a, exc.record, exc.found)


def _chain_edited(a: _Audit, record: RunRecord, digest: str) -> None:
    """An edited record's checkpoint chain, named as edited (against an earlier published record when there is one)."""
    from auditor import segments as seg
    from auditor.registry import RecordChanged

    if not seg.chain(record):
        return
    edited = seg.chain_edited(record, _published_record(a.session, a.info, other_than=digest))
    if edited:
        a.findings.append(Finding(code="chain.edited", path="outputs.artifacts", severity="blocking", message=edited,
                                  hint=RecordChanged.HINT))


def _published_record(session: Any, info: Any, *, other_than: str) -> RunRecord | None:
    """The record held by this version's newest published evidence whose record digest is not ``other_than`` and
    whose bytes still hash as the ledger says (None: none such, or unreadable)."""
    import json

    from auditor.report import ledger

    try:
        entries = ledger.entries(session.store)
    except (NotFound, Findings):
        return None
    for entry in reversed(entries):
        audit, evidence = entry.get("audit") or {}, entry.get("evidence") or {}
        if (audit.get("model") != info.name or str(audit.get("version")) != str(info.version)
                or entry.get("record_digest") in (None, other_than) or not evidence.get("key")):
            continue
        try:
            data = session.store.read(evidence["key"])
            if ledger.sha256_of(data) != evidence.get("sha256"):
                continue
            return RunRecord.model_validate(json.loads(data)["audit"]["record"])
        except Exception:  # noqa: BLE001, S112 - a broken earlier evidence only loses the comparison (evidence verify names it)
            continue
    return None


def _knob_findings(record: RunRecord) -> list[Finding]:
    """The rule table's findings on the determinism knobs the model's flavour recorded at fit time."""
    artifact = record.outputs.model()
    if artifact is None or not artifact.flavor:
        return []
    from auditor.flavors.rules import findings

    return findings(artifact.flavor, artifact.knobs)


def _record_changed_since_published(session: Any, info: Any, digest: str) -> str | None:
    """How this version's earlier published evidence disagrees with its record's digest now (None: it agrees)."""
    from auditor.report import ledger
    try:
        entries = ledger.entries(session.store)
    except (NotFound, Findings):
        return None  # nothing published yet, or a broken ledger (evidence verify names it)
    for entry in entries:
        audit = entry.get("audit") or {}
        earlier = entry.get("record_digest")
        if audit.get("model") == info.name and str(audit.get("version")) == str(info.version) and earlier and earlier != digest:
            return (f"its digest is {digest} but the evidence of audit {audit.get('audit_id')} (ledger entry "
                    f"{entry.get('seq')}) recorded {earlier}")
    return _record_changed_since_anchored(session, info, digest)


def _record_changed_since_anchored(session: Any, info: Any, digest: str) -> str | None:
    """The same check against every earlier audit run of this version in MLflow, wherever its report was published
    (a version re-pointed to another run, then audited into a new reports location, still disagrees with them)."""
    from auditor import tags as t

    runs = session.registry.find_runs(experiment=session.settings.audit_experiment,
                                      params={t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)})
    for run in runs:
        earlier = run.params.get(t.PARAM_RECORD_DIGEST)
        if earlier and earlier != digest:
            return (f"its digest is {digest} but audit run {run.run_id} of this version (its report published to "
                    f"{run.params.get(t.PARAM_LEDGER_LOCATION)}) recorded {earlier}")
    return None
