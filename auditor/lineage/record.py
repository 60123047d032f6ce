"""The run record: one typed, versioned, canonical JSON document per training run.

It names the five inputs (code, data, config, environment, seeds), the
infrastructure and the outputs, each by an immutable identifier where one
exists. Pure: pydantic for types and JSON Schema, no I/O beyond parsing text
the caller hands in.

Conventions: every section is optional at parse time so that the *gate*, not
the parser, says what is missing (a parse error is "this is not a record", a
gate finding is "this record is incomplete"). Unknown fields are refused so a
typo never passes silently.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_serializer

from auditor.canonical import canonical_json, digest, pretty_json
from auditor.errors import MalformedRecord

SCHEMA_VERSION = "1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    #: fields added after schema 1 was frozen: left out of the JSON while they hold their default, so
    #: a record captured without them (by an older SDK) keeps its canonical digest
    _omit_when_default: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit_defaults(self, handler: Any) -> Any:
        data = handler(self)
        if self._omit_when_default and isinstance(data, dict):
            for name in self._omit_when_default:
                if name in data and getattr(self, name) == type(self).model_fields[name].get_default(call_default_factory=True):
                    del data[name]
        return data


class UntrackedBinary(_Model):
    path: str
    sha256: str
    size: int


class CodeInfo(_Model):
    repo_url: str | None = None
    commit: str | None = Field(default=None, description="full 40-hex git commit")
    dirty: bool | None = None
    diff_digest: str | None = Field(default=None, description="sha256:<hex> of the diff stored beside the record")
    diff_file: str | None = Field(default=None, description="name of the diff file beside the record")
    diff_redactions: int = Field(default=0, description="added lines of the diff whose secrets were redacted")
    untracked_binary: list[UntrackedBinary] = Field(default_factory=list)
    entrypoint: list[str] | None = Field(default=None, description="argv run from the project directory")
    subdir: str = Field(default="", description="project directory relative to the repository root")
    git_error: str | None = Field(default=None, description="why git facts are missing, recorded as data")


DataKind = Literal["snapshot", "s3-versioned", "delta", "path", "table", "other"]


class DataRef(_Model):
    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"source"})

    kind: DataKind = "snapshot"
    uri: str
    version: str | None = Field(default=None, description="immutable version id (snapshot id, object version, table version)")
    content_hash: str | None = None
    split: dict[str, Any] | None = Field(default=None, description="how train/validation/test were cut, with its seed")
    source: str | None = Field(default=None, description="where the script downloaded it from (a URL, credentials redacted)")


class ConfigInfo(_Model):
    resolved: dict[str, Any] = Field(default_factory=dict)
    digest: str | None = None
    sources: dict[str, Literal["default", "file", "env", "cli"]] = Field(default_factory=dict)
    file: str | None = None


class LocalPackage(_Model):
    """A distribution installed from a local folder (editable or not): code outside the repository.

    Its version string says nothing about its content (``pip install -e`` keeps serving whatever the
    folder holds), so the record pins the folder by git commit, dirty flag and a content digest.
    """

    version: str
    path: str = Field(description="the source folder (direct_url.json's file:// URL), redacted")
    editable: bool = False
    commit: str | None = Field(default=None, description="HEAD of the git repository holding the source, when there is one")
    dirty: bool | None = Field(default=None, description="uncommitted changes under the source folder")
    tree_digest: str | None = Field(default=None, description="sha256:<hex> over (path, sha256) of the package's files")
    files: int = Field(default=0, description="how many files the digest covers")
    error: str | None = Field(default=None, description="why a fact is missing, recorded as data")


class EnvironmentInfo(_Model):
    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"local_packages"})

    python: str | None = None
    implementation: str | None = None
    platform: str | None = None
    machine: str | None = None
    packages: dict[str, str] = Field(default_factory=dict, description="distribution name -> exact version")
    lock_file: str | None = None
    lock_digest: str | None = None
    image_ref: str | None = None
    image_digest: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    driver: str | None = None
    accelerator: str | None = None
    accelerator_count: int = 0
    cpu_model: str | None = None
    cpu_flags_digest: str | None = None
    threads: dict[str, Any] = Field(default_factory=dict, description="intra-op threads, OMP/MKL settings")
    variables: dict[str, str] = Field(default_factory=dict, description="allowlisted environment variables, redacted")
    torch_error: str | None = None
    local_packages: dict[str, LocalPackage] = Field(
        default_factory=dict, description="distributions installed from a local path or in editable mode, by normalised name"
    )


class SeedInfo(_Model):
    seed: int | None = None
    generators: dict[str, int] = Field(default_factory=dict, description="generator name -> seed it was given")
    used: list[str] = Field(default_factory=list, description="generators the training declared it draws from")
    deterministic: bool | None = None
    flags: dict[str, Any] = Field(default_factory=dict, description="determinism flags actually in force")
    pythonhashseed: str | None = Field(default=None, description="PYTHONHASHSEED at interpreter start ('unset' if absent)")


class Infrastructure(_Model):
    world_size: int = 1
    hostname: str | None = None
    instance_type: str | None = None


class Artifact(_Model):
    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"flavor", "canonical_sha256", "set_aside", "knobs", "predictions"})

    name: str
    uri: str
    sha256: str
    size: int | None = None
    flavor: str | None = Field(default=None, description="model flavour (auditor.flavors); None: PyTorch safetensors weights")
    canonical_sha256: str | None = Field(default=None, description="sha256:<hex> of the normalised model (what is not the model set aside)")
    set_aside: list[str] = Field(default_factory=list, description="what the file holds that the normalised model sets aside")
    knobs: dict[str, Any] = Field(default_factory=dict, description="the library's determinism knobs as resolved at fit time")
    predictions: dict[str, Any] = Field(default_factory=dict, description="the evaluation data (rows, data_sha256) and decision threshold the audit scores both models on")


def _finite_or_text(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # 'nan', 'inf', '-inf': kept, but never mistaken for a number
    return value


class Outputs(_Model):
    metrics: dict[str, float | str | None] = Field(default_factory=dict)
    artifacts: list[Artifact] = Field(default_factory=list)

    def model(self) -> Artifact | None:
        """The run's model artifact: the last one a flavour saved, else PyTorch weights (records before flavours)."""
        flavoured = [a for a in self.artifacts if a.flavor]
        if flavoured:
            return flavoured[-1]
        return next((a for a in self.artifacts if a.name.endswith(".safetensors") or a.name == "model"), None)

    @field_validator("metrics", mode="before")
    @classmethod
    def _no_bare_nan(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: _finite_or_text(v) for k, v in value.items()}
        return value


class TracedFile(_Model):
    path: str = Field(description="absolute, or $REPO/… inside the repository, ~/… under HOME; redacted")
    size: int | None = Field(default=None, description="bytes when first opened; null: it did not exist")
    sha256: str | None = Field(default=None, description="sha256:<hex> of the content when first opened; null: missing or unreadable")
    error: str | None = None


class TracedVariable(_Model):
    name: str
    sha256: str | None = Field(default=None, description="sha256:<hex> of the value (never the value); null: it was unset")


class TracedInputs(_Model):
    """What the training process read that no other section pins (``auditor.lineage.tracing``)."""

    files: list[TracedFile] = Field(default_factory=list)
    env: list[TracedVariable] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="what the tracing could not see")


class ConsumedStream(_Model):
    """The batches of one kind a run's model consumed, in order, as digests (``auditor.sdk.consumed``)."""

    batches: int = Field(default=0, description="how many batches of this kind the model consumed")
    digest: str | None = Field(default=None, description="sha256:<hex> over every batch digest, in order")
    first: list[str] = Field(default_factory=list, description="short digest of each of the first batches, one per batch")
    blocks: list[str] = Field(default_factory=list, description="short digest of each later block of batches")
    block_size: int = Field(default=0, description="batches per block after the first ones")
    shape: str | None = Field(default=None, description="what the first batch was (types, dtypes, shapes)")


class ConsumedData(_Model):
    """A fingerprint of what the model consumed: per kind (train, eval, fit, predict), a digest per batch."""

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"params"})

    scheme: int = Field(default=1, description="what is hashed and hooked (auditor.sdk.consumed.SCHEME): only equal schemes compare")
    streams: dict[str, ConsumedStream] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list, description="what the fingerprint could not see")
    params: dict[str, str] = Field(default_factory=dict, description=(
        "the parameters of the first native training call (xgboost.train, lightgbm.train), execution knobs left out, "
        "each as its repr (sets sorted, secrets redacted): a rebuild's that differ are named, with both values"))


class RunRecord(_Model):
    """The record. Build it with the gatherers; judge it with ``auditor.lineage.gate.check``."""

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"traced", "consumed"})

    schema_version: Literal["1"] = SCHEMA_VERSION
    created_at: str | None = None
    tool_version: str | None = None
    code: CodeInfo | None = None
    data: dict[str, DataRef] = Field(default_factory=dict)
    config: ConfigInfo | None = None
    environment: EnvironmentInfo | None = None
    seeds: SeedInfo | None = None
    infrastructure: Infrastructure | None = None
    outputs: Outputs = Field(default_factory=Outputs)
    traced: TracedInputs | None = Field(default=None, description="inputs read outside the pinned ones (None: not traced)")
    consumed: ConsumedData | None = Field(default=None, description="what the model consumed, batch by batch (None: not fingerprinted)")

    # -- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def canonical(self) -> bytes:
        return canonical_json(self.to_dict())

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON; independent of dict order and platform."""
        return digest(self.to_dict())

    def to_json(self) -> str:
        return pretty_json(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "record") -> RunRecord:
        if not isinstance(data, dict):
            raise MalformedRecord(f"{source}: a run record is a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise MalformedRecord(
                f"{source}: schema_version is {version!r}, this tool reads {SCHEMA_VERSION!r}",
                hint="upgrade repro-audit or re-capture the record",
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:10]
            )
            raise MalformedRecord(f"{source}: invalid run record: {problems}") from None

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "record") -> RunRecord:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MalformedRecord(
                f"{source}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
        except UnicodeDecodeError as exc:
            raise MalformedRecord(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        return cls.from_dict(data, source=source)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a run record (``repro-audit lineage schema``)."""
    schema = RunRecord.model_json_schema()
    schema["$id"] = f"https://repro-audit.dev/schema/run-record/{SCHEMA_VERSION}.json"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema
