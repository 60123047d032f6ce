"""Frozen, typed settings: one declaration per setting, read once from the environment.

Each setting is declared once below (``Setting``: the variable's name, its type, its default
and a line of help), as MLflow's ``mlflow/environment_variables.py`` does; ``SETTINGS`` lists
them all and ``describe()`` gives the rows a README table or ``--help`` is generated from.
``Settings`` takes its field defaults from the declarations, so each default is stated once.

Every variable is ``REPRO_*`` except ``MLFLOW_TRACKING_URI`` / ``MLFLOW_REGISTRY_URI``, which keep
the names MLflow users already set. An unset or empty variable takes the default; a malformed one
raises ``BadInput`` naming the variable and what to set it to.

Resolve them once per entry point (the CLI, a DAG task, the rebuild pod) with ``get_settings()``
and pass the ``Settings`` down; tests build their own with ``Settings.from_env({...})``. Code that
must not raise (a DAG file while Airflow parses it) reads one value with ``Setting.get_or_default``,
which logs a warning and falls back to the default.

The names here are settings: what an operator configures. The entry-point contract between a
training script and a rebuild (``REPRO_OUTPUT_DIR``, ``REPRO_SEED``, …) is ``auditor.contract``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from auditor.errors import BadInput

log = logging.getLogger(__name__)

#: the types a setting can have: how its text is parsed
TYPES = ("str", "path", "int", "float", "bool", "choice", "pairs", "cron", "list")
#: schedules Airflow accepts that are not cron expressions
_AIRFLOW_SCHEDULES = {"@once", "@continuous"}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, type, default and help; ``get`` parses it.

    ``attr`` is the ``Settings`` (or ``KubernetesSettings``) field it fills. ``derived`` says, for
    the docs, what a default of ``None`` is derived from. ``minimum`` bounds an int; ``choices``
    lists a choice's values (compared stripped and lower-cased); ``maximum`` caps an int; ``hint`` overrides the fix that
    a malformed value's error suggests.
    """

    name: str
    type: str
    default: Any
    help: str
    attr: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    derived: str | None = None
    hint: str | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"setting {self.name}: unknown type {self.type!r}")
        if (self.type == "choice") != bool(self.choices):
            raise ValueError(f"setting {self.name}: a choice, and only a choice, lists its choices")

    def raw(self, env: Mapping[str, str] | None = None) -> str | None:
        """The variable's text, ``None`` when unset or empty."""
        value = (os.environ if env is None else env).get(self.name)
        return value if value else None

    def get(self, env: Mapping[str, str] | None = None) -> Any:
        """The parsed value from ``env`` (default ``os.environ``), or the default when unset.

        ``BadInput`` names the variable and the fix when the value is malformed.
        """
        raw = self.raw(env)
        return self.default if raw is None else self.parse(raw)

    def get_or_default(self, env: Mapping[str, str] | None = None) -> Any:
        """Like ``get``, but never raises: a malformed value logs a warning and gives the default.

        For code that must not fail where it runs (a DAG file while Airflow parses it); the task
        that uses the setting resolves it again with ``get_settings()``, which does raise.
        """
        try:
            return self.get(env)
        except BadInput as exc:
            log.warning("%s; using the default %r", exc, self.default)
            return self.default

    def parse(self, raw: str) -> Any:
        """``raw`` as this setting's type; ``BadInput`` when it is not one."""
        if self.type == "str":
            return raw
        if self.type == "path":
            return Path(raw)
        if self.type == "int":
            return self._int(raw)
        if self.type == "float":
            try:
                return float(raw)
            except ValueError:
                raise self._bad(raw, "a number") from None
        if self.type == "bool":
            lowered = raw.strip().lower()
            if lowered in _TRUE:
                return True
            if lowered in _FALSE:
                return False
            raise self._bad(raw, "a boolean", hint="use true or false")
        if self.type == "cron":
            return self._cron(raw)
        if self.type == "list":  # comma-separated names, compared stripped and lower-cased
            return tuple(dict.fromkeys(item.strip().lower() for item in raw.split(",") if item.strip()))
        if self.type == "choice":
            lowered = raw.strip().lower()
            if lowered not in self.choices:
                raise self._bad(lowered, f"one of {', '.join(self.choices)}")
            return lowered
        return self._pairs(raw)

    def _int(self, raw: str) -> int:
        kind = "a positive integer" if self.minimum == 1 else "an integer"
        try:
            value = int(raw)
        except ValueError:
            raise self._bad(raw, kind) from None
        if self.minimum is not None and value < self.minimum:
            raise self._bad(raw, kind if self.minimum == 1 else f"an integer of at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise self._bad(raw, f"an integer of at most {self.maximum}")
        return value

    def _cron(self, raw: str) -> str:
        """A cron expression as Airflow validates it (croniter, which Airflow installs); without croniter, as given."""
        try:
            from croniter import croniter
        except ImportError:  # no Airflow here: nothing schedules by it
            return raw
        if raw in _AIRFLOW_SCHEDULES or croniter.is_valid(raw):
            return raw
        raise self._bad(raw, "a cron expression", hint=f"set {self.name} to e.g. {self.default!r} (minute hour day month weekday)")

    def _pairs(self, raw: str) -> tuple[tuple[str, str], ...]:
        """``key=value[,key=value]`` as pairs, in order (a key given twice keeps its last value)."""
        pairs: dict[str, str] = {}
        if not raw.strip():
            return ()
        for item in raw.strip().split(","):
            key, sep, value = item.strip().partition("=")
            if not sep or not key:
                raise self._bad(raw, "key=value[,key=value]")
            pairs[key] = value
        return tuple(pairs.items())

    def _bad(self, raw: str, kind: str, *, hint: str | None = None) -> BadInput:
        example = self.default if self.default not in (None, (), "") else None
        fix = hint or self.hint or (f"set {self.name} to e.g. {example}" if example is not None else f"unset {self.name}")
        return BadInput(f"environment variable {self.name}={raw!r} is not {kind}", hint=fix)

    @property
    def type_text(self) -> str:
        """The type as the docs show it (a choice with its values)."""
        return f"choice ({'|'.join(self.choices)})" if self.type == "choice" else self.type

    @property
    def default_text(self) -> str:
        """The default as the docs show it (a derived default says what it derives from)."""
        if self.derived is not None:
            return self.derived
        if self.default is None or self.default == ():
            return "-"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if self.type == "list":
            return ",".join(self.default)
        return str(self.default)


# -- the declarations -----------------------------------------------------------------------

HOME = Setting("REPRO_HOME", "path", Path(".repro"), "caches: git mirrors, workspaces", "home")
SNAPSHOT_STORE = Setting(
    "REPRO_SNAPSHOT_STORE", "str", None,
    "default snapshot store: a path, file://..., s3://bucket/prefix or memory://...", "snapshot_store",
    derived="$REPRO_HOME/snapshots",
)
REPORTS = Setting(
    "REPRO_REPORTS", "str", "reports",
    "where reports, the ledger and the index are published (a path or s3://...)", "reports",
)
TRACKING_URI = Setting(
    "MLFLOW_TRACKING_URI", "str", None,
    "the registry (any MLflow URI, or memory://NAME for tests)", "tracking_uri",
    derived="sqlite:///$REPRO_HOME/mlflow.db",
)
REGISTRY_URI = Setting(
    "MLFLOW_REGISTRY_URI", "str", None, "MLflow's model registry, when not the tracking server", "registry_uri",
)
IMAGE = Setting(
    "REPRO_IMAGE", "str", None, "set by your orchestrator at training time: the image training runs in", "image_ref",
)
IMAGE_DIGEST = Setting(
    "REPRO_IMAGE_DIGEST", "str", None, "set by your orchestrator at training time: that image's digest",
    "image_digest",
)
INSTANCE_TYPE = Setting(
    "REPRO_INSTANCE_TYPE", "str", None, "set by your orchestrator at training time: the instance type",
    "instance_type",
)
RESPONSIBLE = Setting(
    "REPRO_RESPONSIBLE", "str", "unassigned (set REPRO_RESPONSIBLE)", "the responsible person named in reports",
    "responsible_person",
)
RUNNER = Setting("REPRO_RUNNER", "choice", "process", "how a rebuild runs: process or docker", "runner", choices=("process", "docker"))
REBUILD_ENV = Setting(
    "REPRO_REBUILD_ENV", "choice", "auditor",
    "where the process runner rebuilds a record naming no image: recorded (a virtual environment recreated "
    "from the recorded packages with uv) or auditor (the auditor's own; the drift is reported)",
    "rebuild_env", choices=("recorded", "auditor"),
)
VENV_CACHE = Setting(
    "REPRO_VENV_CACHE", "path", None, "where reconstructed environments are kept, one per recorded package set",
    "venv_cache", derived="~/.cache/repro-audit/venvs",
)
FIND_LINKS = Setting(
    "REPRO_FIND_LINKS", "str", None,
    "wheels for reconstructed environments: folders of wheels or URLs of link pages, comma-separated", "find_links",
)
INDEX_URL = Setting(
    "REPRO_INDEX_URL", "str", None, "the package index for reconstructed environments (default: uv's, PyPI)",
    "index_url",
)
REBUILD_TIMEOUT_S = Setting(
    "REPRO_REBUILD_TIMEOUT_S", "int", 3600, "seconds per run of the entrypoint (and the rebuild pod's deadline)",
    "rebuild_timeout_s", minimum=1, maximum=30 * 86400,
)
RETRY_DELAY_S = Setting(
    "REPRO_RETRY_DELAY_S", "int", 300, "the DAGs' retry delay in seconds (tests and the demo use 1-2 s)",
    "retry_delay_s", minimum=0, maximum=86400,
)
NIGHTLY_SCHEDULE = Setting(
    "REPRO_NIGHTLY_SCHEDULE", "cron", "0 2 * * *", "the nightly DAG's cron schedule", "nightly_schedule",
)
NIGHTLY_MAX_MODELS = Setting(
    "REPRO_NIGHTLY_MAX_MODELS", "int", 5, "the nightly budget: models per night", "nightly_max_models",
)
NIGHTLY_BUDGET_HOURS = Setting(
    "REPRO_NIGHTLY_BUDGET_HOURS", "float", 4.0, "the nightly budget: accelerator-hours per night",
    "nightly_budget_hours",
)
REQUIRE_OBJECT_LOCK = Setting(
    "REPRO_REQUIRE_OBJECT_LOCK", "bool", False,
    "refuse to publish to a bucket without Object Lock in compliance mode", "require_object_lock",
)
LOCK_RETENTION_DAYS = Setting(
    "REPRO_LOCK_RETENTION_DAYS", "int", 365 * 7, "days a published object stays locked", "lock_retention_days",
)
PRODUCTION_ALIASES = Setting(
    "REPRO_PRODUCTION_ALIASES", "list", ("champion", "live", "prod", "production", "serving"),
    "aliases that mark a version as serving: always sampled (comma list)", "production_aliases",
)
REBUILD_BACKEND = Setting(
    "REPRO_REBUILD_BACKEND", "choice", "celery",
    "the route of rebuild tasks: celery (gpu queue) or kubernetes (one pod per rebuild)", "rebuild_backend",
    choices=("celery", "kubernetes"),
    hint="set REPRO_REBUILD_BACKEND=celery (gpu queue) or kubernetes (one pod per rebuild)",
)
SIGNING_KEY = Setting(
    "REPRO_SIGNING_KEY", "str", None,
    "signs each audit's in-toto attestation: an Ed25519 PEM private key file (repro-audit evidence keygen) or a "
    "signer URI (awskms:, gcpkms:, azurekms:, hv:, hsm:, file2:); unset: audits are published unsigned",
    "signing_key",
)
SIGNING_PUBLIC_KEY = Setting(
    "REPRO_SIGNING_PUBLIC_KEY", "str", None, "the PEM public key of a signer URI in REPRO_SIGNING_KEY",
    "signing_public_key",
)
SIGNER = Setting(
    "REPRO_SIGNER", "str", None, "who signs, as reports and attestations name them", "signer",
    derived="REPRO_RESPONSIBLE",
)
AUDIT_EXPERIMENT = Setting(
    "REPRO_AUDIT_EXPERIMENT", "str", "repro-audit-audits",
    "the MLflow experiment each audit (and calibration) is logged to as a run; its params anchor the ledger",
    "audit_experiment",
)

# Talking to an MLflow tracking server, and the reports' inventory view (issue 16).
MLFLOW_HTTP_RETRIES = Setting(
    "REPRO_MLFLOW_HTTP_RETRIES", "int", 2,
    "retries of a failed MLflow HTTP request (each retry is logged); sets MLFLOW_HTTP_REQUEST_MAX_RETRIES "
    "unless that is set", "mlflow_http_retries", minimum=0,
)
MLFLOW_HTTP_TIMEOUT_S = Setting(
    "REPRO_MLFLOW_HTTP_TIMEOUT_S", "int", 30,
    "seconds an MLflow HTTP request may take; sets MLFLOW_HTTP_REQUEST_TIMEOUT unless that is set",
    "mlflow_http_timeout_s", minimum=1,
)
OVERDUE_DAYS = Setting(
    "REPRO_OVERDUE_DAYS", "int", 30, "days after its last audit a registered version counts as overdue",
    "overdue_days", minimum=1,
)

# The Kubernetes route (REPRO_REBUILD_BACKEND=kubernetes): what the platform team provides.
K8S_IMAGE = Setting(
    "REPRO_K8S_IMAGE", "str", None,
    "the trainer image by digest, REGISTRY/REPO@sha256:<64 hex> (required on the kubernetes route)", "image",
)
K8S_NAMESPACE = Setting("REPRO_K8S_NAMESPACE", "str", "repro-audit", "the rebuild pods' namespace", "namespace")
K8S_GPUS = Setting("REPRO_K8S_GPUS", "int", 1, "GPUs per rebuild pod (limit and request)", "gpus", minimum=1)
K8S_CPU = Setting("REPRO_K8S_CPU", "str", "4", "CPU per rebuild pod (limit and request)", "cpu")
K8S_MEMORY = Setting("REPRO_K8S_MEMORY", "str", "16Gi", "memory per rebuild pod (limit and request)", "memory")
K8S_WORK_SIZE = Setting("REPRO_K8S_WORK_SIZE", "str", "50Gi", "size of the pod's /work scratch volume", "work_size")
K8S_SERVICE_ACCOUNT = Setting(
    "REPRO_K8S_SERVICE_ACCOUNT", "str", "repro-rebuild", "the pods' service account (no API permissions needed)",
    "service_account",
)
K8S_CONFIGMAP = Setting(
    "REPRO_K8S_CONFIGMAP", "str", "repro-audit-settings", "the ConfigMap holding the non-secret settings",
    "config_map",
)
K8S_SECRET = Setting(
    "REPRO_K8S_SECRET", "str", "repro-audit-credentials", "the Secret holding the credentials", "secret",
)
K8S_NODE_SELECTOR = Setting(
    "REPRO_K8S_NODE_SELECTOR", "pairs", (), "the GPU nodes to schedule on, key=value[,key=value]", "node_selector",
    hint="e.g. REPRO_K8S_NODE_SELECTOR=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
)
K8S_PRIORITY_CLASS = Setting(
    "REPRO_K8S_PRIORITY_CLASS", "str", None, "the pods' priority class", "priority_class",
)
K8S_IMAGE_PULL_SECRET = Setting(
    "REPRO_K8S_IMAGE_PULL_SECRET", "str", None, "a pull secret, if the registry is private", "image_pull_secret",
)

# Airflow (read by auditor.deploy.airflow in the DAG processor and the task, never by the library).
NOTIFY_EMAIL = Setting(
    "REPRO_NOTIFY_EMAIL", "str", None,
    "who is mailed (comma list) when an audit is not reproduced or a DAG run fails; unset: no mail", "notify_email",
)
SMTP_CONN_ID = Setting("REPRO_SMTP_CONN_ID", "str", "smtp_default", "the Airflow Connection the mail goes through", "smtp_conn_id")
MLFLOW_CONN_ID = Setting(
    "REPRO_MLFLOW_CONN_ID", "str", "repro_mlflow",
    "the Airflow Connection holding the tracking URI (else MLFLOW_TRACKING_URI)", "mlflow_conn_id",
)
S3_CONN_ID = Setting(
    "REPRO_S3_CONN_ID", "str", "repro_s3",
    "the Airflow (aws) Connection holding the S3 endpoint and credentials (else AWS_* variables)", "s3_conn_id",
)
TRAINING_ASSET = Setting(
    "REPRO_TRAINING_ASSET", "str", "mlflow://models",
    "the Asset a training DAG updates (extra model_uri) to have the new version audited", "training_asset",
)
AIRFLOW_SETTINGS = (NOTIFY_EMAIL, SMTP_CONN_ID, MLFLOW_CONN_ID, S3_CONN_ID, TRAINING_ASSET)

KUBERNETES_SETTINGS = (
    K8S_IMAGE, K8S_NAMESPACE, K8S_GPUS, K8S_CPU, K8S_MEMORY, K8S_WORK_SIZE, K8S_SERVICE_ACCOUNT, K8S_CONFIGMAP,
    K8S_SECRET, K8S_NODE_SELECTOR, K8S_PRIORITY_CLASS, K8S_IMAGE_PULL_SECRET,
)
_TOP_LEVEL = (
    TRACKING_URI, REGISTRY_URI, HOME, SNAPSHOT_STORE, REPORTS, RUNNER, REBUILD_TIMEOUT_S, RETRY_DELAY_S,
    NIGHTLY_SCHEDULE, NIGHTLY_MAX_MODELS, NIGHTLY_BUDGET_HOURS, RESPONSIBLE, REQUIRE_OBJECT_LOCK,
    LOCK_RETENTION_DAYS, IMAGE, IMAGE_DIGEST, INSTANCE_TYPE, REBUILD_BACKEND, PRODUCTION_ALIASES, *AIRFLOW_SETTINGS,
    SIGNING_KEY, SIGNING_PUBLIC_KEY, SIGNER, AUDIT_EXPERIMENT,
    MLFLOW_HTTP_RETRIES, MLFLOW_HTTP_TIMEOUT_S, OVERDUE_DAYS,
    REBUILD_ENV, VENV_CACHE, FIND_LINKS, INDEX_URL,
)
#: every setting, in the order the docs list them
SETTINGS: tuple[Setting, ...] = _TOP_LEVEL + KUBERNETES_SETTINGS
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def describe() -> list[tuple[str, str, str, str]]:
    """``(name, type, default, help)`` for every setting, in the docs' order (for README / ``--help``)."""
    return [(s.name, s.type_text, s.default_text, s.help) for s in SETTINGS]


def _snapshot_store_under(home: Path) -> str:
    return str(home / "snapshots")


#: the SQLite file of the embedded default registry, under REPRO_HOME
MLFLOW_DB = "mlflow.db"


def tracking_uri_under(home: Path) -> str:
    """The embedded default's tracking URI: the SQLite registry under ``home``."""
    return f"sqlite:///{(home / MLFLOW_DB).as_posix()}"


@dataclass(frozen=True)
class KubernetesSettings:
    """What a platform team provides for the Kubernetes route (``REPRO_K8S_*``); checked by ``PodSettings``."""

    image: str | None = K8S_IMAGE.default
    namespace: str = K8S_NAMESPACE.default
    gpus: int = K8S_GPUS.default
    cpu: str = K8S_CPU.default
    memory: str = K8S_MEMORY.default
    work_size: str = K8S_WORK_SIZE.default
    service_account: str = K8S_SERVICE_ACCOUNT.default
    config_map: str = K8S_CONFIGMAP.default
    secret: str = K8S_SECRET.default
    node_selector: tuple[tuple[str, str], ...] = K8S_NODE_SELECTOR.default
    priority_class: str | None = K8S_PRIORITY_CLASS.default
    image_pull_secret: str | None = K8S_IMAGE_PULL_SECRET.default

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KubernetesSettings:
        """Read only the ``REPRO_K8S_*`` variables; ``BadInput`` names a malformed one."""
        env = os.environ if env is None else env
        return cls(**{s.attr: s.get(env) for s in KUBERNETES_SETTINGS})


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with the embedded defaults of ``make demo`` (each from its declaration)."""

    home: Path = HOME.default
    snapshot_store: str = _snapshot_store_under(HOME.default)
    reports: str = REPORTS.default
    tracking_uri: str = tracking_uri_under(HOME.default)
    registry_uri: str | None = REGISTRY_URI.default
    image_ref: str | None = IMAGE.default
    image_digest: str | None = IMAGE_DIGEST.default
    instance_type: str | None = INSTANCE_TYPE.default
    responsible_person: str = RESPONSIBLE.default
    runner: str = RUNNER.default
    rebuild_timeout_s: int = REBUILD_TIMEOUT_S.default
    retry_delay_s: int = RETRY_DELAY_S.default
    nightly_schedule: str = NIGHTLY_SCHEDULE.default
    nightly_max_models: int = NIGHTLY_MAX_MODELS.default
    nightly_budget_hours: float = NIGHTLY_BUDGET_HOURS.default
    require_object_lock: bool = REQUIRE_OBJECT_LOCK.default
    lock_retention_days: int = LOCK_RETENTION_DAYS.default
    rebuild_backend: str = REBUILD_BACKEND.default
    signing_key: str | None = SIGNING_KEY.default
    signing_public_key: str | None = SIGNING_PUBLIC_KEY.default
    signer: str | None = SIGNER.default
    audit_experiment: str = AUDIT_EXPERIMENT.default
    mlflow_http_retries: int = MLFLOW_HTTP_RETRIES.default
    mlflow_http_timeout_s: int = MLFLOW_HTTP_TIMEOUT_S.default
    overdue_days: int = OVERDUE_DAYS.default
    production_aliases: tuple[str, ...] = PRODUCTION_ALIASES.default
    notify_email: str | None = NOTIFY_EMAIL.default
    smtp_conn_id: str = SMTP_CONN_ID.default
    mlflow_conn_id: str = MLFLOW_CONN_ID.default
    s3_conn_id: str = S3_CONN_ID.default
    training_asset: str = TRAINING_ASSET.default
    rebuild_env: str = REBUILD_ENV.default
    venv_cache: Path | None = VENV_CACHE.default
    find_links: str | None = FIND_LINKS.default
    index_url: str | None = INDEX_URL.default
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)

    @property
    def git_cache(self) -> Path:
        return self.home / "git"

    @property
    def work_dir(self) -> Path:
        return self.home / "work"

    @property
    def venvs(self) -> Path:
        """Reconstructed environments: ``REPRO_VENV_CACHE``, else the user's cache (shared by every home)."""
        if self.venv_cache is not None:
            return self.venv_cache
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "repro-audit" / "venvs"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Every setting from ``env`` (default ``os.environ``); ``BadInput`` names the first malformed one."""
        env = os.environ if env is None else env
        values = {s.attr: s.get(env) for s in _TOP_LEVEL}
        home = values["home"]
        values["snapshot_store"] = values["snapshot_store"] or _snapshot_store_under(home)
        values["tracking_uri"] = values["tracking_uri"] or tracking_uri_under(home)
        return cls(**values, kubernetes=KubernetesSettings.from_env(env))


# A training process (the SDK) reads only what it uses: a malformed setting of the auditor's own
# (a retry delay, a Kubernetes limit) must not stop a training run.
def tracking_uri_from(env: Mapping[str, str] | None = None) -> str:
    """``MLFLOW_TRACKING_URI``, else the SQLite registry under ``REPRO_HOME``; reads no other setting."""
    return TRACKING_URI.get(env) or tracking_uri_under(HOME.get(env))


def snapshot_store_from(env: Mapping[str, str] | None = None) -> str:
    """``REPRO_SNAPSHOT_STORE``, else the folder under ``REPRO_HOME``; reads no other setting."""
    return SNAPSHOT_STORE.get(env) or _snapshot_store_under(HOME.get(env))


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings.from_env()
