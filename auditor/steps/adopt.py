"""Adopting a registry trained without the SDK: assess versions, publish an assessment, attach a supplied record.

``assess``: one version's lineage assessment (``auditor.adopt``), published like an audit (evidence, report,
in-toto attestation, ledger entry, its MLflow anchor and the version's outcome tags) unless ``publish=False``.
``assess_all``: every version, read in bulk and classified, nothing rebuilt and nothing written (``adopt
--assess-only``). ``attach``: what an owner supplies after training, stored in the reports store, signed, named
by the version's tags, and read by every later assessment, which marks it as supplied after training.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from auditor.errors import BadInput, NotFound
from auditor.steps.common import Progress, now, quiet, today

log = logging.getLogger(__name__)


@dataclass
class Assessed:
    """One assessed version: its result, and where it was published (None: not published)."""

    ref: str
    result: Any
    report: str | None = None
    skipped: bool = False  # this date's assessment was already published: the stored one is returned

    @property
    def row(self) -> dict[str, Any]:
        from auditor.adopt.assess import CODE_PREFIX
        from auditor.adopt.rules import CLASSES, CODE_OF

        labels = {code: label for label, code in CODE_OF.items()}
        classes: dict[str, str] = {}
        for f in self.result.findings:
            section, _, klass = f.code.removeprefix(CODE_PREFIX).partition(".")
            label = labels[klass]
            if CLASSES.index(label) >= CLASSES.index(classes.get(section, CLASSES[0])):
                classes[section] = label
        return {"ref": self.ref, "verdict": self.result.verdict.value, "classes": classes, "report": self.report,
                "findings": [f.model_dump() for f in self.result.findings], "skipped": self.skipped}


@dataclass
class Sweep:
    """Every version's assessment (``assess_all``): the rows and how long reading and classifying took."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        """Per input, how many versions are in each class."""
        out: dict[str, dict[str, int]] = {}
        for row in self.rows:
            for section, klass in row["classes"].items():
                out.setdefault(section, {}).setdefault(klass, 0)
                out[section][klass] += 1
        return out


def _reader(session: Any) -> Any:
    from auditor.adopt.mlflow_reader import MlflowReader
    from auditor.settings import TRACKING_URI

    settings = session.settings
    if not str(settings.tracking_uri or ""):
        raise BadInput("adopt reads an MLflow tracking server, and none is set", hint=f"set {TRACKING_URI.name}")
    return MlflowReader(settings.tracking_uri, settings.registry_uri)


def _supplied(session: Any, meta: Any) -> Any:
    """The record the owner attached (the run the version's tag names), checked against its anchored digest."""
    import dataclasses

    from auditor.adopt import supplied
    from auditor.uris import model_uri

    run_id = meta.version_tags.get(supplied.TAG_SUPPLIED)
    if not run_id:
        return meta
    where = f"{model_uri(meta.name, meta.version)}: tag {supplied.TAG_SUPPLIED} names run {run_id}"
    run = session.registry.get_run(run_id)  # NotFound names the run
    raw = session.registry.read_run_file(run_id, supplied.RECORD_FILE)
    if raw is None:
        raise NotFound(f"{where}, which holds no {supplied.RECORD_FILE}", hint="attach the record again with repro-audit adopt")
    record = supplied.load(raw, key=f"run {run_id} {supplied.RECORD_FILE}", expected_sha256=run.params.get(supplied.PARAM_SHA256),
                           model=(meta.name, str(meta.version)))
    return dataclasses.replace(meta, supplied=record)


def assess(session: Any, ref: str, *, date: str | None = None, publish: bool = True, progress: Progress = quiet) -> Assessed:
    """Assess one version (``models:/NAME/VERSION`` or an alias, resolved once) and publish the assessment."""
    from auditor.adopt.assess import AUDIT_ID_PREFIX, assessment
    from auditor.registry.mlflow import mlflow_errors
    from auditor.report.evidence import audit_of, report_stem
    from auditor.steps.publish import published_evidence

    date = date or today()
    info = session.registry.resolve(ref)
    if publish:
        stored = published_evidence(session, info, f"{AUDIT_ID_PREFIX}{date}")
        if stored is not None:  # this date's assessment is out: a repeat publishes nothing new
            stem = report_stem(info.name, str(info.version), f"{AUDIT_ID_PREFIX}{date}")
            return Assessed(ref=info.ref, result=audit_of(stored), skipped=True,
                            report=f"{session.store.uri.rstrip('/')}/{stem}.html")
    progress(f"reading what MLflow holds about {info.ref}")
    with mlflow_errors(f"model version {info.ref}", session.settings.tracking_uri):
        meta, aliases = _reader(session).read(info.name, str(info.version))
    meta = _supplied(session, meta)
    started = now()
    result = assessment(meta, date=date, started_at=started, finished_at=now(), aliases=aliases,
                        responsible_person=session.settings.responsible_person)
    if not publish:
        return Assessed(ref=info.ref, result=result)
    from auditor.steps.publish import _publish  # the audit's own publish path: report, ledger, anchor, tags

    report = _publish(session, info, result, date, progress)
    return Assessed(ref=info.ref, result=result, report=report)


def assess_all(session: Any, *, models: str | None = None, date: str | None = None, read_files: bool = True,
               progress: Progress = quiet) -> Sweep:
    """Every version's assessment, read in bulk and classified; nothing rebuilt, nothing written."""
    import time
    from fnmatch import fnmatchcase

    from auditor.adopt.assess import assessment
    from auditor.adopt.supplied import TAG_SUPPLIED
    from auditor.registry.mlflow import mlflow_errors

    date = date or today()
    started = time.perf_counter()
    reader = _reader(session)
    reader.read_files = read_files
    sweep = Sweep()
    stamp = now()
    with mlflow_errors("reading every model version", session.settings.tracking_uri):
        for meta, aliases in reader.read_all():
            if models and not (fnmatchcase(meta.name, models) or fnmatchcase(f"{meta.name}/{meta.version}", models)):
                continue
            if meta.version_tags.get(TAG_SUPPLIED):  # an owner attached a record: read it like a single assessment
                meta = _supplied(session, meta)
            result = assessment(meta, date=date, started_at=stamp, finished_at=stamp, aliases=aliases)
            sweep.rows.append(Assessed(ref=result.model.uri or "", result=result).row)
            if len(sweep.rows) % 500 == 0:
                progress(f"assessed {len(sweep.rows)} versions")
    sweep.seconds = time.perf_counter() - started
    return sweep


def attach(session: Any, ref: str, *, data: list[str], image: str | None, seed: int | None) -> dict[str, Any]:
    """Store what the owner supplies after training, signed, as a run whose immutable param anchors its digest.

    The record and its signed in-toto envelope are that run's artifacts, the version's tag names the run, and every
    later assessment reads it from there and checks it against the param (a tag can be edited, a param cannot).
    """
    import json

    from auditor import tags as t
    from auditor.adopt import supplied
    from auditor.digests import sha256_digest
    from auditor.report import attest
    from auditor.settings import SIGNER, SIGNING_KEY

    parsed = supplied.parse_data(data)
    supplied.check_image(image)
    key = session.signer
    if key is None:
        raise BadInput("a record supplied after training must be signed by whoever supplies it, and no signing key is set",
                       hint=f"set {SIGNING_KEY.name} (repro-audit evidence keygen makes one) and {SIGNER.name}")
    info = session.registry.resolve(ref)
    by = key.signer_name or session.settings.responsible_person or ""
    at = now()
    doc = supplied.document(name=info.name, version=str(info.version), run_id=info.run_id, data=parsed, image=image,
                            seed=seed, by=by, at=at)
    raw = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    sha = sha256_digest(raw)
    envelope = attest.sign(attest.statement({supplied.RECORD_FILE: sha}, {"supplied": doc, "keyid": key.keyid}), key)
    run_id = session.registry.log_run(
        experiment=session.settings.audit_experiment, identity=f"adopt-supplied {info.name} v{info.version} {sha}",
        name=f"supplied after training: {info.name} v{info.version}",
        params={supplied.PARAM_SHA256: sha, supplied.PARAM_BY: by},
        tags={t.TAG_RUN_KIND: "adopt-supplied", t.TAG_RUN_MODEL: info.name, t.TAG_RUN_MODEL_VERSION: str(info.version)},
        metrics={}, artifacts={supplied.RECORD_FILE: raw, supplied.SIGNATURE_FILE: envelope})
    session.registry.set_tags(info, {supplied.TAG_SUPPLIED: run_id})
    log.info("adopt %s: supplied record in run %s by %s", info.ref, run_id, by)
    return {"ref": info.ref, "run_id": run_id, "sha256": sha, "keyid": key.keyid, "responsible_person": by, "supplied_at": at}
