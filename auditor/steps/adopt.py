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
            label = labels.get(klass)
            if label is None:  # a rebuild's own finding (adopt.rebuild.*), not an input's class
                continue
            if CLASSES.index(label) >= CLASSES.index(classes.get(section, CLASSES[0])):
                classes[section] = label
        return {"ref": self.ref, "verdict": self.result.verdict.value, "classes": classes, "report": self.report,
                "findings": [f.model_dump() for f in self.result.findings], "skipped": self.skipped, "recorded": False}


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
    """The reader of what MLflow holds; a SQLite database that does not exist is refused, never created (exit 2)."""
    from auditor.adopt.mlflow_reader import MlflowReader
    from auditor.registry.open import require_existing_database
    from auditor.settings import TRACKING_URI

    settings = session.settings
    if not str(settings.tracking_uri or ""):
        raise BadInput("adopt reads an MLflow tracking server, and none is set", hint=f"set {TRACKING_URI.name}")
    require_existing_database(settings.tracking_uri)
    require_existing_database(settings.registry_uri, what="registry URI")
    return MlflowReader(settings.tracking_uri, settings.registry_uri)


def _refuse_recorded(meta: Any) -> None:
    """A version the SDK recorded is not adopted: its lineage is judged by the audit's rule, from its run record."""
    from auditor.adopt.assess import recorded
    from auditor.tags import TAG_RECORD_DIGEST
    from auditor.uris import model_uri

    if recorded(meta):
        ref = model_uri(meta.name, meta.version)
        raise BadInput(f"{ref} was recorded by the SDK ({TAG_RECORD_DIGEST}): its lineage is the run record's, judged by "
                       "the audit, not assessed from MLflow's metadata",
                       hint=f"repro-audit audit {ref}; repro-audit lineage show {ref} lists the lineage gate's findings")


def _recorded_findings(session: Any, ref: str) -> list[Any]:
    """The audit's lineage rule on a version the SDK recorded: the gate's findings on its run record, or the blocking
    finding that says the record cannot be read (``auditor.steps.common.read_record``, as the audit reads it)."""
    from auditor.steps.common import gate, read_record, unreadable

    record, diff, exc = read_record(session.registry, session.registry.resolve(ref))
    if exc is not None or record is None:
        return [unreadable(exc)] if exc is not None else []
    return gate(record, diff)


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


def assess(session: Any, ref: str, *, date: str | None = None, publish: bool = True, progress: Progress = quiet,
           not_rebuilt: tuple[str, ...] = ()) -> Assessed:
    """Assess one version (``models:/NAME/VERSION`` or an alias, resolved once) and publish the assessment.

    ``not_rebuilt``: why ``adopt --rebuild`` could not rebuild it, written first in the lineage tier's details."""
    from auditor.adopt.assess import AUDIT_ID_PREFIX, assessment
    from auditor.lineage.redact import redact_text
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
    _refuse_recorded(meta)
    meta = _supplied(session, meta)
    started = now()
    result = assessment(meta, date=date, started_at=started, finished_at=now(), aliases=aliases,
                        responsible_person=session.settings.responsible_person)
    result.tiers["lineage"].details[:0] = [f"not rebuilt: {redact_text(why)}" for why in not_rebuilt]
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
            sweep.rows.append(_sweep_row(session, meta, aliases, date=date, stamp=stamp))
            if len(sweep.rows) % 500 == 0:
                progress(f"assessed {len(sweep.rows)} versions")
    sweep.seconds = time.perf_counter() - started
    return sweep


def _sweep_row(session: Any, meta: Any, aliases: tuple[str, ...], *, date: str, stamp: str) -> dict[str, Any]:
    """One version's row of the sweep: a version the SDK recorded by the audit's lineage rule (its run record through
    the gate), any other by the adoption rules on what MLflow holds."""
    from auditor.adopt.assess import assessment, recorded, recorded_row
    from auditor.adopt.supplied import TAG_SUPPLIED
    from auditor.uris import model_uri

    if recorded(meta):
        ref = model_uri(meta.name, meta.version)
        return recorded_row(ref, _recorded_findings(session, ref), meta.version_tags)
    if meta.version_tags.get(TAG_SUPPLIED):  # an owner attached a record: read it like a single assessment
        meta = _supplied(session, meta)
    result = assessment(meta, date=date, started_at=stamp, finished_at=stamp, aliases=aliases)
    return Assessed(ref=result.model.uri or "", result=result).row


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


# -- the rebuild (build 2): a version whose lineage MLflow pinned, rebuilt in the sandboxed runner ------------------
#: what the rebuild's entry point sees besides the runner's allowlist: its own MLflow store, no telemetry, and no
#: requirements inference (a child process that may reach the network; the rebuilt model's environment files are
#: not compared: the registered model's are read as text by the assessment)
SANDBOX_ENV = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "GIT_PYTHON_REFRESH": "quiet",
               "MLFLOW_REQUIREMENTS_INFERENCE_TIMEOUT": "1", "PYTHONWARNINGS": "ignore"}
COMPARE_SCRIPT = "sandbox_compare.py"


def rebuild(session: Any, ref: str, *, date: str | None = None, publish: bool = True, progress: Progress = quiet) -> Assessed:
    """Rebuild a plain-MLflow version whose assessment pins every input, judge it, publish it like an audit.

    A version whose lineage does not allow a rebuild gets its assessment (LINEAGE_INSUFFICIENT), with the reason
    the rebuild did not run in the lineage tier. The registered model is copied as bytes and loaded only inside
    the runner's sandbox, by ``auditor/adopt/sandbox_compare.py``.
    """
    import shutil

    from auditor.adopt.rebuild import AUDIT_ID_PREFIX, plan
    from auditor.adopt.rules import classify
    from auditor.registry.mlflow import mlflow_errors
    from auditor.report.evidence import audit_of, report_stem
    from auditor.steps.publish import published_evidence

    date = date or today()
    info = session.registry.resolve(ref)
    audit_id = f"{AUDIT_ID_PREFIX}{date}"
    if publish:
        stored = published_evidence(session, info, audit_id)
        if stored is not None:
            stem = report_stem(info.name, str(info.version), audit_id)
            return Assessed(ref=info.ref, result=audit_of(stored), skipped=True,
                            report=f"{session.store.uri.rstrip('/')}/{stem}.html")
    progress(f"reading what MLflow holds about {info.ref}")
    reader = _reader(session)
    with mlflow_errors(f"model version {info.ref}", session.settings.tracking_uri):
        meta, aliases = reader.read(info.name, str(info.version))
    _refuse_recorded(meta)
    meta = _supplied(session, meta)
    started = now()
    rows = classify(meta)
    the_plan = plan(meta, rows, ref=info.ref)
    if not the_plan.runnable:  # its assessment, published once a day like any, saying why it was not rebuilt
        log.info("adopt rebuild %s: not rebuilt (%d blocker(s))", info.ref, len(the_plan.blockers))
        return assess(session, info.ref, date=date, publish=publish, progress=progress, not_rebuilt=the_plan.blockers)
    work = session.scratch("adopt-rebuild-")
    try:
        result = _rebuilt_result(session, reader, info, meta, rows, the_plan, aliases, audit_id, started, work, progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not publish:
        return Assessed(ref=info.ref, result=result)
    from auditor.steps.publish import _publish

    return Assessed(ref=info.ref, result=result, report=_publish(session, info, result, date, progress))


def _rebuilt_result(session: Any, reader: Any, info: Any, meta: Any, rows: list[Any], the_plan: Any, aliases: tuple[str, ...],
                    audit_id: str, started: str, work: Any, progress: Progress) -> Any:
    """Run the rebuild and judge it; a failure becomes the verdict its meaning gives (``auditor.errors``)."""
    from dataclasses import replace

    from auditor.adopt.assess import TIER_BASIS, finding
    from auditor.adopt.rebuild import REQUIRED, evidence_lines, judge
    from auditor.errors import describe, verdict_failure
    from auditor.judge.result import AuditResult, ModelInfo, TierResult
    from auditor.lineage.findings import Finding
    from auditor.lineage.redact import redact_mapping, redact_text
    from auditor.outcomes import Verdict
    from auditor.uris import model_uri

    assumptions = [redact_text(a) for a in the_plan.assumptions]
    tiers: dict[str, Any] = {}
    # the team's text, redacted as the assessment's; an input the rebuild does not need (infrastructure) is an assumption
    rows = [replace(r, identifier=redact_text(r.identifier), why=redact_text(r.why)) for r in rows]
    findings = [finding(r) if r.section in REQUIRED else finding(r).model_copy(update={"severity": "warning"}) for r in rows]
    error = log_tail = None
    evidence: dict[str, str] = {}
    try:
        found, registered_sha, rebuilt_sha, env_drift, log_tail = _run_in_sandbox(session, reader, info, the_plan, work, progress)
        assumptions += [f"environment drift: {line}" for line in env_drift]
        verdict, judged, problems = judge(the_plan, found, registered_sha256=registered_sha, rebuilt_sha256=rebuilt_sha)
        tiers.update(judged)
        findings += [Finding(code="adopt.rebuild.differs", path="rebuild", severity="blocking", message=redact_text(p),
                             hint="see the rebuild's log; the entry point does not rebuild what was registered") for p in problems]
        evidence = {k: v for k, v in (("weights.registered", registered_sha), ("weights.rebuilt", rebuilt_sha)) if v}
        evidence.update({k: redact_text(v) for k, v in evidence_lines(found).items()})
    except Exception as exc:  # noqa: BLE001 - every failure is a verdict, named (auditor.errors decides which)
        verdict, error = Verdict(verdict_failure(exc)), redact_text(describe(exc))
        log_tail = getattr(exc, "log_tail", "") or None
        findings.append(Finding(code="adopt.rebuild.failed", path="rebuild", severity="blocking", message=error,
                                hint=getattr(exc, "hint", None) or "see the error"))
        log.info("adopt rebuild %s: %s (%s)", info.ref, verdict.value, error)
    lineage = TierResult(name="lineage", status="pass",
                         summary=f"{TIER_BASIS}: every input the rebuild needs is pinned; {len(assumptions)} assumption(s) "
                                 "listed", details=[f"{r.path}: {r.klass}: {r.identifier}" for r in rows]
                         + [f"assumption: {a}" for a in assumptions])
    return AuditResult(
        audit_id=audit_id,
        model=ModelInfo(name=meta.name, version=str(meta.version), aliases=list(aliases), run_id=meta.run_id,
                        uri=model_uri(meta.name, meta.version),
                        tags=redact_mapping({k: v for k, v in meta.version_tags.items() if not k.startswith("repro.audit.")})),
        verdict=verdict, tiers={"lineage": lineage, **tiers}, started_at=started, finished_at=now(), audit_run="adopt",
        findings=findings, evidence=evidence, responsible_person=session.settings.responsible_person,
        runner=session.settings.runner, error=error, log_tail=log_tail or "", assumptions=assumptions)


def _entry_in(checkout: Any, entry: str, commit: str) -> str:
    """The entry point as a path inside the checkout (MLflow records ``sys.argv[0]``: relative, or absolute on the trainer's machine)."""
    from pathlib import PurePath

    from auditor.errors import InputUnrecoverable

    parts = PurePath(entry).parts
    for start in range(len(parts)):
        candidate = PurePath(*parts[start:]) if not PurePath(*parts[start:]).is_absolute() else None
        if candidate is not None and (checkout / candidate).is_file():
            return str(candidate)
    raise InputUnrecoverable(f"entry point {entry} (mlflow.source.name) is not a file in commit {commit}",
                             hint="the run was started from a file outside the repository, or from a notebook")


def _delta_readable(table: str, version: int, name: str) -> None:
    """The Delta table is still readable at ``version`` (its log and every data file): a vacuum past it is named."""
    from auditor.errors import InputUnrecoverable

    try:
        from deltalake import DeltaTable

        DeltaTable(table, version=version).to_pyarrow_dataset().count_rows()
    except ImportError:
        raise InputUnrecoverable(f"dataset {name}: Delta table {table} @ version {version} cannot be checked: deltalake "
                                 "is not installed", hint="pip install 'repro-audit[delta]'") from None
    except Exception as exc:  # noqa: BLE001 - deltalake raises its own and the OS's errors
        raise InputUnrecoverable(
            f"dataset {name}: Delta table {table} @ version {version} can no longer be read ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); it was vacuumed past that version or its log was cleaned",
            hint="restore the table's files at that version, or re-train from a version the table keeps and register again") from None


def _installed(names: Any) -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _run_in_sandbox(session: Any, reader: Any, info: Any, the_plan: Any, work: Any,
                    progress: Progress) -> tuple[dict[str, Any], str | None, str | None, list[str], str]:
    """Check the data, check out the code, run the entry point, then the comparison script, both in the runner."""
    from pathlib import Path

    from auditor.adopt.rebuild import drift
    from auditor.digests import sha256_file
    from auditor.errors import RecipeCrashed
    from auditor.rebuild.runners import RunSpec
    from auditor.rebuild.workspace import checkout_commit

    work = Path(work)
    for d in the_plan.delta:
        progress(f"checking Delta table {d.table} @ version {d.version}")
        _delta_readable(d.table, d.version, d.name)
    progress(f"checking out {the_plan.commit}")
    code = checkout_commit(the_plan.repo_url, the_plan.commit, work / "code", git_cache=session.settings.git_cache)
    entry = _entry_in(code, the_plan.entry, the_plan.commit)
    registered = reader.download_model(info.name, str(info.version), work / "registered")  # bytes; never loaded here
    runner = session.runner(None)
    store = work / "sandbox"
    store.mkdir()
    env = {**SANDBOX_ENV, "MLFLOW_TRACKING_URI": f"sqlite:///{store / 'mlflow.db'}"}
    timeout = float(session.settings.rebuild_timeout_s)
    progress(f"running {entry} at {the_plan.commit[:12]} in the {runner.name} runner")
    ran = runner.run(RunSpec(argv=["python", entry], cwd=code, output_dir=work / "output", env=env, timeout_s=timeout,
                             network=False))
    if not ran.ok:
        crash = RecipeCrashed(f"entry point {entry} at commit {the_plan.commit} "
                              f"{'timed out' if ran.timed_out else f'exited {ran.exit_code}'} in the rebuild",
                              hint=f"its log's last lines are in the report; the log is {ran.log_path}")
        crash.log_tail, crash.timed_out = ran.log_tail, ran.timed_out
        raise crash
    found = _compare_in_sandbox(runner, info, the_plan, registered, code, work, env, timeout, progress)
    rebuilt_dir = Path(found["rebuilt_dir"]) if found.get("rebuilt_dir") else None
    name = the_plan.model_file
    reg_file, new_file = (registered / name, rebuilt_dir / name) if name and rebuilt_dir else (None, None)
    registered_sha = sha256_file(reg_file) if reg_file is not None and reg_file.is_file() else None
    rebuilt_sha = sha256_file(new_file) if new_file is not None and new_file.is_file() else None
    env_drift = drift(the_plan.requirements, _installed(the_plan.requirements)) if the_plan.requirements else []
    return found, registered_sha, rebuilt_sha, env_drift, ran.log_tail


def _compare_in_sandbox(runner: Any, info: Any, the_plan: Any, registered: Any, code: Any, work: Any, env: dict[str, str],
                        timeout: float, progress: Progress) -> dict[str, Any]:
    """Run ``sandbox_compare.py`` in the runner: both models loaded there, every score compared; its JSON answer, checked."""
    import json
    import shutil
    from pathlib import Path

    from auditor import adopt as adopt_package
    from auditor.errors import InputUnrecoverable, RecipeCrashed
    from auditor.rebuild.runners import RunSpec

    shutil.copyfile(Path(adopt_package.__file__).parent / COMPARE_SCRIPT, work / COMPARE_SCRIPT)
    data = the_plan.delta[0] if the_plan.delta else None
    spec = {"flavour": the_plan.flavour, "registered": str(registered), "tracking_uri": env["MLFLOW_TRACKING_URI"],
            "name": info.name, "search_root": str(code),
            "data": {"kind": "delta", "table": data.table, "version": data.version} if data else None}
    (work / "compare.json").write_text(json.dumps(spec), encoding="utf-8")
    progress(f"loading both models with mlflow.{the_plan.flavour} in the sandbox")
    compared = runner.run(RunSpec(argv=["python", COMPARE_SCRIPT, str(work / "compare.json"), str(work / "compared.json")],
                                  cwd=work, output_dir=work / "compare-output", env=env, timeout_s=timeout, network=False))
    answer = work / "compared.json"
    if not answer.is_file():
        raise RecipeCrashed(f"the sandbox's comparison wrote no answer (exit {compared.exit_code})",
                            hint=f"its log: {compared.log_tail[-500:]}")
    found = json.loads(answer.read_text("utf-8"))
    if found.get("error") and not found.get("registered_loaded"):
        raise InputUnrecoverable(f"the registered model of {info.ref} does not load with mlflow.{the_plan.flavour}.load_model "
                                 f"in the sandbox: {found['error']}", hint="see the report's log")
    rebuilt_dir = Path(found["rebuilt_dir"]) if found.get("rebuilt_dir") else None
    if rebuilt_dir is not None and not rebuilt_dir.resolve().is_relative_to(work.resolve()):
        raise InputUnrecoverable(f"the sandbox named a rebuilt model outside its workspace: {rebuilt_dir}")
    if found.get("error"):
        raise InputUnrecoverable(f"{info.ref}: the registered and the rebuilt model could not be compared in the sandbox: "
                                 f"{found['error']}",
                                 hint="see the report's log")
    return found
