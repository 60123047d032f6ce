"""The registry interface the audit reads through, and the shared work above it.

A backend (``memory``, ``mlflow``) implements six small primitives: list
versions, get one version, get one by alias, read one file of a run, set
version tags, download an artifact. Everything the audit relies on that must
not differ between backends lives here once: reference parsing, what "no run
record" means and how it is worded, record and diff validation against the
digests registered with the version, the outcome and band tags.
"""

from __future__ import annotations

import abc
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from auditor.digests import sha256_digest
from auditor.errors import BadInput, MalformedRecord, NotFound
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.registry.layout import training_params

# Every tag and artifact name lives in auditor.tags; the ``X as X`` ones are re-exported for
# the modules that import them from here.
from auditor.tags import DIFF_ARTIFACT as DIFF_ARTIFACT
from auditor.tags import (
    MAX_VERSION_DESCRIPTION,
    PARAM_RECORD_DIGEST,
    PARAM_SEED,
    RECORD_ARTIFACT,
    TAG_AUDIT_AT,
    TAG_BANDS,
    TAG_LOGGED_MODEL,
    TAG_RECORD_DIGEST,
    TAG_REPORT,
    TAG_TIER,
    TAG_TRAIN_SECONDS,
    TAG_VERDICT,
    diff_artifact,
)
from auditor.tags import RECORD_DIR as RECORD_DIR
from auditor.tags import TAG_WEIGHTS_SHA256 as TAG_WEIGHTS_SHA256
from auditor.tags import WEIGHTS_ARTIFACT as WEIGHTS_ARTIFACT
from auditor.uris import ModelRef, model_uri, parse_ref

#: a version registered from a LoggedModel by id (``mlflow.register_model("models:/m-…")``)
_LOGGED_MODEL_SOURCE = re.compile(r"^models:/(m-[0-9a-f]{32})/?$")

#: MLflow's limits on a model-version tag
MAX_VERSION_TAG_KEY = 250
MAX_VERSION_TAG_VALUE = 100_000


@dataclass(frozen=True)
class ModelVersionInfo:
    """One registered model version, as listed: cheap facts only, no record."""

    name: str
    version: str
    aliases: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    run_id: str | None = None
    source: str | None = None
    creation_ts: int | None = None  # milliseconds since the epoch, as MLflow stores it
    run_tags: Mapping[str, str] = field(default_factory=dict)  # the run's ``repro.*`` tags, when looked up
    run_deleted: bool = False  # the run is deleted but not purged: the next ``mlflow gc`` destroys it
    run_params: Mapping[str, str] = field(default_factory=dict)  # the run's params (immutable in MLflow)
    model_id: str | None = None  # MLflow 3's ModelVersion.model_id, where the registry keeps it

    @property
    def logged_model_id(self) -> str | None:
        """The MLflow 3 LoggedModel this version was registered from, or None (a version made from a run's files).

        MLflow's SQL registry does not keep ``model_id`` on the version, so it is also read from a ``models:/m-…``
        source and from the ``repro.logged_model`` tag the SDK sets on the training run.
        """
        if self.model_id:
            return self.model_id
        found = _LOGGED_MODEL_SOURCE.match(self.source or "")
        return found.group(1) if found else self.run_tags.get(TAG_LOGGED_MODEL) or None

    @property
    def ref(self) -> str:
        """``models:/NAME/VERSION``: the immutable way to name this version."""
        return model_uri(self.name, self.version)

    @property
    def record_digest(self) -> str | None:
        """The digest registered for the run record (version tag first, then run tag), or None."""
        return self.tags.get(TAG_RECORD_DIGEST) or self.run_tags.get(TAG_RECORD_DIGEST)

    @property
    def last_audit_at(self) -> str | None:
        return self.tags.get(TAG_AUDIT_AT)

    @property
    def last_verdict(self) -> str | None:
        return self.tags.get(TAG_VERDICT)

    @property
    def tier(self) -> str | None:
        return self.tags.get(TAG_TIER)

    @property
    def train_seconds(self) -> float | None:
        """Recorded training wall time (the sampler's cost estimate), or None when unknown or unreadable."""
        raw = self.tags.get(TAG_TRAIN_SECONDS) or self.run_tags.get(TAG_TRAIN_SECONDS)
        try:
            return float(raw) if raw is not None else None
        except ValueError:
            return None


def _params_problem(record: RunRecord, params: Mapping[str, str]) -> str | None:
    """How the stored record disagrees with the immutable params its training run logged (None: it agrees).

    The record digest and the seed are logged as params at training time, beside the
    flattened resolved config; MLflow refuses to change a param, so a record rewritten
    later (and its digest tags with it) no longer matches them.
    """
    if not params:
        return None
    anchored = params.get(PARAM_RECORD_DIGEST)
    if anchored is not None and anchored != record.digest():
        return f"its digest is {record.digest()} but the training run's param {PARAM_RECORD_DIGEST} is {anchored}"
    seed = params.get(PARAM_SEED)
    recorded = record.seeds.seed if record.seeds is not None else None
    if seed is not None and seed != str(recorded):
        return f"it records seed {recorded} but the training run's param {PARAM_SEED} is {seed}"
    if anchored is None:
        return None  # logged before records were anchored by params: the config check below is all there is
    for key, value in mlflow_safe_names(training_params(record)).items():
        if key in params and params[key] != value:
            return f"its resolved config has {key}={value!r} but the training run's param says {params[key]!r}"
    return None


_NAME_UNSAFE = re.compile(r"[^\w./\- :]")
_MAX_NAME = 250  # MLflow's MAX_ENTITY_KEY_LENGTH


def mlflow_safe_name(name: str) -> str:
    """A param or metric name MLflow accepts: its characters, no ``//``, ``./``, ``..`` or leading ``/``
    (MLflow refuses a name that would resolve to another as a path), at most 250 characters."""
    parts = [p for p in _NAME_UNSAFE.sub("_", name).split("/") if p not in ("", ".")]
    safe = "/".join("_" if p == ".." else p for p in parts)[:_MAX_NAME].rstrip("/")
    return safe if safe and posixpath.normpath(safe) == safe and not safe.startswith(("..", "/")) else "_"


def mlflow_safe_names(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with MLflow-safe names; two names made equal keep the first value and number the others."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = base = mlflow_safe_name(key)
        number = 1
        while name in out:
            number += 1
            name = f"{base[: _MAX_NAME - 8]}_{number}"
        out[name] = value
    return out


class RecordMissing(NotFound):
    """A version exists but no run record can be found for it: the lineage input is missing, not the version.

    ``finding`` is the blocking gate finding the audit and ``lineage show`` report for it.
    """

    def __init__(self, info: ModelVersionInfo, why: str) -> None:
        self.info = info
        self.why = why
        if info.record_digest:  # it was registered with one (its digest is on the version): lost since
            code = "record.lost"
            message = (f"the run record of version {info.version} of {info.name!r} is lost: it was registered "
                       f"with digest {info.record_digest}, but {why}")
            hint = "restore the run's artifacts from a backup; without its record the version cannot be rebuilt"
        else:
            code = "record.missing"
            message = f"version {info.version} of {info.name!r} was registered without a run record ({why})"
            hint = "register versions through auditor.track(...) and auditor.register_model(run, name)"
        super().__init__(message, hint=hint)
        self.finding = Finding(
            code=code,
            path="record",
            severity="blocking",
            message=message,
            hint=hint,
        )


class RecordChanged(MalformedRecord):
    """The version's run record was edited after registration: a forgery until shown otherwise, never unreadable.

    ``registered`` is the digest the version was registered with (an immutable param, or its tag),
    ``found`` the digest of the record stored now, ``record`` that (edited) record as it parses. ``finding``
    is the blocking ``record.changed`` finding the audit and ``lineage show`` report: its hint says to
    investigate and never to re-register (a new registration would adopt the edited record as genuine).
    """

    HINT = ("investigate who rewrote the record and restore the original from a backup; do not re-register the "
            "version: a new registration would adopt the edited record as genuine and launder the edit")

    def __init__(self, where: str, why: str, *, registered: str | None, found: str, record: RunRecord) -> None:
        self.registered, self.found, self.record = registered, found, record
        message = f"{where}: the run record changed after registration (it was edited, not damaged): {why}"
        super().__init__(message, hint=self.HINT)
        self.finding = Finding(code="record.changed", path="record", severity="blocking", message=message, hint=self.HINT)


def _iso(at: datetime | str) -> str:
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise BadInput(f"audit time {at!r} has no time zone", hint="pass an aware datetime, e.g. in UTC")
        return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if not isinstance(at, str) or not at:
        raise BadInput(f"audit time {at!r} is neither a datetime nor an ISO 8601 string")
    try:
        datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"audit time {at!r} is not ISO 8601", hint="e.g. 2026-01-31T02:00:00Z") from None
    return at


@dataclass(frozen=True)
class RunInfo:
    """A run of the audits experiment (an audit or a calibration): its params, tags and state."""

    run_id: str
    params: Mapping[str, str]
    tags: Mapping[str, str]
    deleted: bool = False
    start_time: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)  # each metric's latest value, as MLflow shows it
    experiment_id: str | None = None  # where MLflow's UI shows it (``#/experiments/<id>/runs/<run id>``)


class Registry(abc.ABC):
    """Read registered versions and their records; write back audit outcomes and bands.

    Writes touch model-version tags only: no method here creates, deletes or
    re-points an alias.
    """

    uri: str

    # -- backend primitives ------------------------------------------------
    @abc.abstractmethod
    def list_versions(self, name: str | None = None) -> Iterator[ModelVersionInfo]:
        """Every registered version (of model ``name``, or of all models) with aliases, tags and run tags.

        Paginated: the number of backend calls grows with pages, never with versions.
        """

    @abc.abstractmethod
    def _get_version(self, name: str, version: str) -> ModelVersionInfo:
        """One version by number; ``NotFound`` naming it when absent."""

    @abc.abstractmethod
    def _get_by_alias(self, name: str, alias: str) -> ModelVersionInfo:
        """The version an alias points at; ``NotFound`` naming it when absent."""

    @abc.abstractmethod
    def _read_run_file(self, run_id: str, path: str) -> bytes | None:
        """The bytes of the run artifact ``path``, or None when the run has no such artifact.

        ``NotFound`` when the run itself does not exist.
        """

    @abc.abstractmethod
    def _set_version_tags(self, info: ModelVersionInfo, tags: Mapping[str, str]) -> None:
        """Set tags on exactly this version (nothing else changes)."""

    @abc.abstractmethod
    def download_artifact(self, info: ModelVersionInfo, artifact_path: str, dest: Path) -> Path:
        """Download the artifact ``artifact_path`` (relative to the version's run, e.g. ``model/model.safetensors``).

        Falls back to the version's ``source`` when it has no run. Writes the
        file ``dest`` (which must not exist) and returns it.
        """

    # -- shared behaviour --------------------------------------------------
    def resolve(self, ref: str | ModelRef) -> ModelVersionInfo:
        """The version ``models:/NAME/VERSION`` or ``models:/NAME@ALIAS`` names; ``NotFound`` naming the ref."""
        parsed = parse_ref(ref) if isinstance(ref, str) else ref
        if parsed.version is not None:
            return self._get_version(parsed.name, parsed.version)
        return self._get_by_alias(parsed.name, parsed.alias or "")

    def model_names(self) -> list[str]:
        """Every registered model's name, sorted: what "did you mean" picks from when a name is not found (read only
        after a lookup failed, never on the way to a version that exists). A backend lists names in one call."""
        return sorted({info.name for info in self.list_versions()})

    def version_names(self, name: str) -> tuple[list[str], list[str]]:
        """Model ``name``'s version numbers (ascending) and aliases (sorted): what "did you mean" offers when its
        version or alias is not found; ([], []) for a name that is not registered."""
        versions: set[str] = set()
        aliases: set[str] = set()
        for info in self.list_versions(name):
            versions.add(str(info.version))
            aliases.update(info.aliases)
        return sorted(versions, key=lambda v: (len(v), v)), sorted(aliases)

    def load_record(self, info: ModelVersionInfo) -> tuple[RunRecord, str | None]:
        """The version's run record and its diff (None when the tree was clean).

        ``RecordMissing`` when the version has no run or the run has no record;
        ``MalformedRecord`` when the record does not parse, its digest differs
        from the one registered, or its diff is missing or altered.
        """
        if not info.run_id:
            raise RecordMissing(info, f"it names no run; its source is {info.source or 'unknown'}")
        where = f"{info.ref} (run {info.run_id}, artifact {RECORD_ARTIFACT})"
        try:
            raw = self._read_run_file(info.run_id, RECORD_ARTIFACT)
        except NotFound:
            raise RecordMissing(info, f"its run {info.run_id} no longer exists") from None
        if raw is None:
            raise RecordMissing(info, f"no artifact {RECORD_ARTIFACT} on run {info.run_id}")
        record = RunRecord.from_json(raw, source=where)
        registered = info.record_digest
        if registered is not None and registered != record.digest():
            raise RecordChanged(where, f"its digest is {record.digest()} but it was registered with {TAG_RECORD_DIGEST} {registered}",
                                registered=registered, found=record.digest(), record=record)
        anchored_problem = _params_problem(record, info.run_params)
        if anchored_problem:
            anchored = info.run_params.get(PARAM_RECORD_DIGEST)
            raise RecordChanged(where, f"{anchored_problem} (MLflow params cannot be overwritten)",
                                registered=anchored or registered, found=record.digest(), record=record)
        return record, self._load_diff(info.run_id, record, where)

    def _load_diff(self, run_id: str, record: RunRecord, where: str) -> str | None:
        code = record.code
        if code is None or not code.diff_file:
            return None
        artifact = diff_artifact(code.diff_file)
        if "/" in code.diff_file or code.diff_file in {".", ".."}:
            raise MalformedRecord(f"{where}: code.diff_file {code.diff_file!r} is not a plain file name")
        raw = self._read_run_file(run_id, artifact)
        if raw is None:
            raise MalformedRecord(
                f"{where}: code.diff_file names {code.diff_file!r} but run {run_id} has no artifact {artifact}",
            )
        if code.diff_digest is not None and code.diff_digest != sha256_digest(raw):
            raise MalformedRecord(
                f"{where}: artifact {artifact} does not match code.diff_digest {code.diff_digest}; "
                "the diff was changed after training",
            )
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedRecord(f"{where}: artifact {artifact} is not UTF-8 (byte {exc.start})") from None

    def write_outcome(
        self, info: ModelVersionInfo, verdict: str, at: datetime | str, report_uri: str
    ) -> ModelVersionInfo:
        """Record an audit's outcome as the three ``repro.audit.*`` tags of this version; aliases stay put.

        Returns ``info`` with the new tags, without another registry call.
        """
        from auditor.judge.result import Verdict

        try:
            verdict = Verdict(str(verdict)).value
        except ValueError:
            valid = ", ".join(v.value for v in Verdict)
            raise BadInput(f"verdict {verdict!r} for {info.ref} is not one of {valid}") from None
        if not report_uri:
            raise BadInput(f"report URI for the audit of {info.ref} is empty")
        return self.set_tags(info, {TAG_VERDICT: verdict, TAG_AUDIT_AT: _iso(at), TAG_REPORT: str(report_uri)})

    # -- runs of the audits experiment ------------------------------------------------
    @abc.abstractmethod
    def log_run(
        self,
        *,
        experiment: str,
        identity: str,
        name: str,
        params: Mapping[str, str],
        tags: Mapping[str, str],
        metrics: Mapping[str, float],
        artifacts: Mapping[str, bytes],
        links: RunLinks | None = None,
    ) -> str:
        """Log a finished run once per ``identity`` (a repeat returns the run already logged); its id.

        ``links`` names the LoggedModel and the datasets the run is about (MLflow 3 run inputs).
        """

    @abc.abstractmethod
    def find_runs(self, *, experiment: str, params: Mapping[str, str]) -> list[RunInfo]:
        """Every run of ``experiment`` with these param values, deleted ones included, oldest first."""

    @abc.abstractmethod
    def get_run(self, run_id: str) -> RunInfo:
        """One run by id; ``NotFound`` naming it."""

    def read_run_file(self, run_id: str, path: str) -> bytes | None:
        """One artifact of a run (None when the run has no such file)."""
        return self._read_run_file(run_id, path)

    def set_tags(self, info: ModelVersionInfo, tags: Mapping[str, str]) -> ModelVersionInfo:
        """Set model-version tags on this version only (e.g. the nightly's audit date); aliases stay put."""
        for key, value in tags.items():
            if not isinstance(key, str) or not key or len(key) > MAX_VERSION_TAG_KEY:
                raise BadInput(f"tag key {key!r} for {info.ref} is empty, not text or over {MAX_VERSION_TAG_KEY} characters")
            if not isinstance(value, str) or len(value) > MAX_VERSION_TAG_VALUE:
                raise BadInput(f"tag {key!r} for {info.ref} must be text of at most {MAX_VERSION_TAG_VALUE} characters")
        self._set_version_tags(info, dict(tags))
        return _with_tags(info, tags)

    def get_description(self, info: ModelVersionInfo) -> str | None:
        """The version's description as it is now (markdown; ``""`` when empty), or None where the registry keeps
        none (the in-memory twin): what an audit's block at its top is spliced into."""
        return None

    def set_description(self, info: ModelVersionInfo, text: str) -> None:
        """Replace the version's description (nothing else about the version changes)."""
        if len(text) > MAX_VERSION_DESCRIPTION:
            raise BadInput(f"the description of {info.ref} would be {len(text)} characters; MLflow keeps at most "
                           f"{MAX_VERSION_DESCRIPTION}")
        self._set_description(info, text)

    def _set_description(self, info: ModelVersionInfo, text: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no model-version descriptions")

    def get_bands(self, info: ModelVersionInfo) -> str | None:
        """The tolerance bands stored with this version (JSON text, validated by the judge), or None."""
        return info.tags.get(TAG_BANDS)

    def set_bands(self, info: ModelVersionInfo, json_text: str) -> ModelVersionInfo:
        """Store tolerance bands (JSON text) as this version's ``repro.bands`` tag."""
        if len(json_text) > MAX_VERSION_TAG_VALUE:
            raise BadInput(
                f"bands for {info.ref} are {len(json_text)} characters; a model-version tag holds at most "
                f"{MAX_VERSION_TAG_VALUE}",
                hint="band fewer metrics or drop per-rerun detail",
            )
        return self.set_tags(info, {TAG_BANDS: json_text})


@dataclass(frozen=True)
class RunLinks:
    """What a logged run is about, as MLflow 3 links it: a LoggedModel and datasets (the run's inputs).

    ``datasets`` maps each data input's name to its record entry (``DataRef`` fields: uri, version, content_hash,
    kind); ``model_metrics`` names the metrics that are measurements of that model on that data, logged with
    ``model_id`` (and the dataset when there is exactly one) so they show on the LoggedModel's page too.
    """

    model_id: str | None = None
    datasets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    context: str = "audit"  # the dataset inputs' ``mlflow.data.context``
    input_tags: Mapping[str, str] = field(default_factory=dict)  # short tags on each dataset input
    model_metrics: tuple[str, ...] = ()


def _with_tags(info: ModelVersionInfo, tags: Mapping[str, str]) -> ModelVersionInfo:
    from dataclasses import replace

    return replace(info, tags={**info.tags, **tags})
