"""Frozen, typed settings: each declared once, as a field, and read from the environment by pydantic-settings.

A setting is one field of ``Settings`` (or of ``KubernetesSettings``, the ``REPRO_K8S_*`` ones): the field's
annotation is its type and ``setting(...)`` states the rest once: the environment variable, the default, the
bounds and a line of help. pydantic parses and checks a value: ``Settings.from_env`` reads the whole
environment through pydantic-settings, ``Setting.get`` one variable through the same type and bounds. The
module-level names other modules import (``REPORTS``, ``HOME``, ...) are ``Setting`` views of those fields:
``.name`` is the variable, ``.default``, ``.help`` and ``.choices`` are the declaration's. ``SETTINGS`` lists
them all and ``describe()`` gives the rows a README table or ``--help`` is generated from.

Every variable is ``REPRO_*`` except ``MLFLOW_TRACKING_URI`` / ``MLFLOW_REGISTRY_URI``, which keep
the names MLflow users already set. An unset or empty variable takes the default; a malformed one
raises ``BadInput`` naming the variable and what to set it to.

A team may commit its settings instead: ``repro-audit.toml`` (or ``[tool.repro-audit]`` in
``pyproject.toml``), found from the working directory upward, one key per setting: the variable's
name without ``REPRO_`` / ``MLFLOW_``, lower-case (``reports = "s3://bucket/reports"``,
``tracking_uri = "http://mlflow:5000"``, ``nightly_budget_hours = 4``). When one folder holds both
files, ``repro-audit.toml`` is read and the table is not. Precedence: an environment variable, then
the file, then the default. Secrets (``secret=True``: the webhook's HMAC secret) are refused in a
file; they come from the environment. ``auditor.catalog`` says the rules; ``explain()`` gives each
setting's value and where it came from (``repro-audit config show``).

Resolve them once per entry point (the CLI, a DAG task, the rebuild pod) with ``get_settings()``
and pass the ``Settings`` down; tests build their own with ``Settings.from_env({...})``, which reads
that mapping alone (a file only when asked: ``config_file=`` or ``cwd=``). Code that must not raise
(a DAG file while Airflow parses it) reads one value with ``Setting.get_or_default``, which logs a
warning and falls back to the default; ``Setting.get()`` with no mapping reads the file too.

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
from typing import Annotated, Literal

from auditor.catalog import (  # noqa: F401 - the declaration types are part of the catalog
    CONFIG_FILE,
    PYPROJECT,
    TYPES,
    Configured,
    Cron,
    Directions,
    Flag,
    Lowered,
    Names,
    Pairs,
    Setting,
    _read,
    configured,
    declared,
    find_config,
    setting,
)
from auditor.errors import BadInput  # noqa: F401

log = logging.getLogger(__name__)

# -- the declarations ----------------------------------------------------------------------------

#: the SQLite file of the embedded default registry, under REPRO_HOME
MLFLOW_DB = "mlflow.db"


def _snapshot_store_under(home: Path) -> str:
    return str(home / "snapshots")


def tracking_uri_under(home: Path) -> str:
    """The embedded default's tracking URI: the SQLite registry under ``home``."""
    return f"sqlite:///{(home / MLFLOW_DB).as_posix()}"


@dataclass(frozen=True)
class KubernetesSettings:
    """What a platform team provides for the Kubernetes route (``REPRO_K8S_*``); checked by ``PodSettings``."""

    image: str | None = setting(
        "REPRO_K8S_IMAGE", None,
        "the trainer image by digest, REGISTRY/REPO@sha256:<64 hex> (required on the kubernetes route)",
    )
    namespace: str = setting("REPRO_K8S_NAMESPACE", "repro-audit", "the rebuild pods' namespace")
    gpus: int = setting("REPRO_K8S_GPUS", 1, "GPUs per rebuild pod (limit and request)", ge=1)
    cpu: str = setting("REPRO_K8S_CPU", "4", "CPU per rebuild pod (limit and request)")
    memory: str = setting("REPRO_K8S_MEMORY", "16Gi", "memory per rebuild pod (limit and request)")
    work_size: str = setting("REPRO_K8S_WORK_SIZE", "50Gi", "size of the pod's /work scratch volume")
    service_account: str = setting(
        "REPRO_K8S_SERVICE_ACCOUNT", "repro-rebuild", "the pods' service account (no API permissions needed)",
    )
    config_map: str = setting(
        "REPRO_K8S_CONFIGMAP", "repro-audit-settings", "the ConfigMap holding the non-secret settings",
    )
    secret: str = setting("REPRO_K8S_SECRET", "repro-audit-credentials", "the Secret holding the credentials")
    node_selector: Pairs = setting(
        "REPRO_K8S_NODE_SELECTOR", (), "the GPU nodes to schedule on, key=value[,key=value]",
        hint="e.g. REPRO_K8S_NODE_SELECTOR=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
    )
    priority_class: str | None = setting("REPRO_K8S_PRIORITY_CLASS", None, "the pods' priority class")
    image_pull_secret: str | None = setting(
        "REPRO_K8S_IMAGE_PULL_SECRET", None, "a pull secret, if the registry is private",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KubernetesSettings:
        """Read only the ``REPRO_K8S_*`` variables; ``BadInput`` names a malformed one."""
        return cls(**_read(cls, env))


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with the embedded defaults of ``make demo``; each field declares one setting.

    The fields are in the order the docs list them. ``snapshot_store`` and ``tracking_uri`` default to
    the folder and the SQLite registry under ``home``.
    """

    tracking_uri: str = setting(
        "MLFLOW_TRACKING_URI", None, "the registry (any MLflow URI, or memory://NAME for tests)",
        derived="sqlite:///$REPRO_HOME/mlflow.db",
        location=("databricks", "databricks-uc"),  # MLflow's own words, not paths
    )
    registry_uri: str | None = setting(
        "MLFLOW_REGISTRY_URI", None, "MLflow's model registry, when not the tracking server",
        location=("databricks", "databricks-uc"),  # MLflow's own words, not paths
    )
    home: Path = setting("REPRO_HOME", Path(".repro"), "caches: git mirrors, workspaces", location=True)
    snapshot_store: str = setting(
        "REPRO_SNAPSHOT_STORE", None,
        "default snapshot store: a path, file://..., s3://bucket/prefix or memory://...",
        derived="$REPRO_HOME/snapshots",
        location=True,
    )
    reports: str = setting(
        "REPRO_REPORTS", "reports", "where reports, the ledger and the index are published (a path or s3://...)",
        location=True,
    )
    reports_url: str | None = setting(
        "REPRO_REPORTS_URL", None,
        "the web address the reports folder is served at (https://host/reports): MLflow's version and run tags and "
        "the Airflow links then open a report there; unset: they name its storage location",
        pattern=r"^https?://[^\s\"'<>]+$",
    )
    runner: Annotated[Literal["process", "docker"], Lowered] = setting(
        "REPRO_RUNNER", "process", "how a rebuild runs: process or docker",
    )
    rebuild_timeout_s: int = setting(
        "REPRO_REBUILD_TIMEOUT_S", 3600, "seconds per run of the entrypoint (and the rebuild pod's deadline)",
        ge=1, le=30 * 86400,
    )
    retry_delay_s: int = setting(
        "REPRO_RETRY_DELAY_S", 300, "the DAGs' retry delay in seconds (tests and the demo use 1-2 s)",
        ge=0, le=86400,
    )
    nightly_schedule: Cron = setting("REPRO_NIGHTLY_SCHEDULE", "0 2 * * *", "the nightly DAG's cron schedule")
    nightly_max_models: int = setting("REPRO_NIGHTLY_MAX_MODELS", 5, "the nightly budget: models per night")
    nightly_budget_hours: float = setting(
        "REPRO_NIGHTLY_BUDGET_HOURS", 4.0, "the nightly budget: accelerator-hours per night",
    )
    responsible_person: str = setting(
        "REPRO_RESPONSIBLE", "unassigned (set REPRO_RESPONSIBLE)", "the responsible person named in reports",
    )
    require_object_lock: Flag = setting(
        "REPRO_REQUIRE_OBJECT_LOCK", False, "refuse to publish to a bucket without Object Lock in compliance mode",
    )
    lock_retention_days: int = setting("REPRO_LOCK_RETENTION_DAYS", 365 * 7, "days a published object stays locked")
    image_ref: str | None = setting(
        "REPRO_IMAGE", None, "set by your orchestrator at training time: the image training runs in",
    )
    image_digest: str | None = setting(
        "REPRO_IMAGE_DIGEST", None, "set by your orchestrator at training time: that image's digest",
    )
    instance_type: str | None = setting(
        "REPRO_INSTANCE_TYPE", None, "set by your orchestrator at training time: the instance type",
    )
    rebuild_backend: Annotated[Literal["celery", "kubernetes"], Lowered] = setting(
        "REPRO_REBUILD_BACKEND", "celery",
        "the route of rebuild tasks: celery (gpu queue) or kubernetes (one pod per rebuild)",
        hint="set REPRO_REBUILD_BACKEND=celery (gpu queue) or kubernetes (one pod per rebuild)",
    )
    production_aliases: Names = setting(
        "REPRO_PRODUCTION_ALIASES", ("champion", "live", "prod", "production", "serving"),
        "aliases that mark a version as serving: sampled first, within the night's budget (comma list)",
    )
    deployed_artifacts: Pairs = setting(
        "REPRO_DEPLOYED_ARTIFACTS", (),
        "deployed copies to hold to the audited artifact: NAME@ALIAS=URI[|URI...] (s3://bucket/key, file://... or a "
        "path of the model file a server loads), comma list; checked on the coverage page (production equals documented)",
    )
    rerun_workers: int = setting(
        "REPRO_RERUN_WORKERS", 1,
        "calibration reruns run at a time on one worker (each its own process or container; the same-seed ones, "
        "then the seed-varied ones): as many as the worker's devices or cores allow", ge=1, le=64,
    )
    metric_directions: Directions = setting(
        "REPRO_METRIC_DIRECTIONS", (),
        "which way is better for a metric: METRIC=higher|lower|none, comma list; overrides what its name says "
        "(auditor.judge.calibrate.METRIC_KINDS) for calibration's bands, the seed-lottery check and compare",
    )
    retention_years: int = setting(
        "REPRO_RETENTION_YEARS", 10,
        "years every input of an audited or production version must stay recoverable (EU AI Act Art. 18: 10)",
        ge=1, le=100,
    )

    # Airflow (read by auditor.airflow in the DAG processor and the task, never by the library).
    notify_email: str | None = setting(
        "REPRO_NOTIFY_EMAIL", None,
        "who is mailed (comma list) when an audit is not reproduced or a DAG run fails; unset: no mail",
    )
    smtp_conn_id: str = setting("REPRO_SMTP_CONN_ID", "smtp_default", "the Airflow Connection the mail goes through")
    mlflow_conn_id: str = setting(
        "REPRO_MLFLOW_CONN_ID", "repro_mlflow",
        "the Airflow Connection holding the tracking URI (else MLFLOW_TRACKING_URI)",
    )
    s3_conn_id: str = setting(
        "REPRO_S3_CONN_ID", "repro_s3",
        "the Airflow (aws) Connection holding the S3 endpoint and credentials (else AWS_* variables)",
    )
    training_asset: str = setting(
        "REPRO_TRAINING_ASSET", "mlflow://models",
        "the Asset a training DAG updates (extra model_uri) to have the new version audited",
    )
    alias_asset: str = setting(
        "REPRO_ALIAS_ASSET", "mlflow://aliases",
        "the Asset the registry webhook updates when an alias moves (extra model, alias, version): the promotion gate's",
    )
    registry_events: Annotated[Literal["poll", "webhook"], Lowered] = setting(
        "REPRO_REGISTRY_EVENTS", "poll",
        "how the promotion gate learns of an alias move: poll (every ten minutes, a reschedule-mode sensor that frees "
        "its slot between pokes) or webhook (MLflow's signed webhook, repro-audit webhook register)",
    )
    webhook_secret: str | None = setting(
        "REPRO_WEBHOOK_SECRET", None,
        "the HMAC secret MLflow signs registry webhooks with (repro-audit webhook register gives it to MLflow); "
        "unset: the receiver refuses every request", secret=True,
    )
    dag_owner: str = setting(
        "REPRO_DAG_OWNER", "model-risk",
        "the owner of every repro-audit DAG's tasks, as Airflow's DAG list shows and filters them (a team's name)",
    )

    signing_key: str | None = setting(
        "REPRO_SIGNING_KEY", None,
        "signs each audit's in-toto attestation: an Ed25519 PEM private key file (repro-audit evidence keygen) or "
        "a signer URI (awskms:, gcpkms:, azurekms:, hv:, hsm:, file2:); unset: audits are published unsigned",
        location=True,
    )
    signing_public_key: str | None = setting(
        "REPRO_SIGNING_PUBLIC_KEY", None, "the PEM public key of a signer URI in REPRO_SIGNING_KEY",
        location=True,
    )
    signer: str | None = setting(
        "REPRO_SIGNER", None, "who signs, as reports and attestations name them", derived="REPRO_RESPONSIBLE",
    )
    evidence_packs: str | None = setting(
        "REPRO_EVIDENCE_PACKS", None,
        "where every publish also writes the audit's evidence pack, <report stem>.zip (a folder or s3://bucket/prefix, "
        "outside the reports folder; an Object Lock bucket keeps it for the retention duty); unset: packs are made on "
        "demand with repro-audit evidence pack",
        location=True,
    )
    audit_experiment: str = setting(
        "REPRO_AUDIT_EXPERIMENT", "repro-audit-audits",
        "the MLflow experiment each audit (and calibration) is logged to as a run; its params anchor the ledger",
    )
    ledger_anchor: str | None = setting(
        "REPRO_LEDGER_ANCHOR", None,
        "a second anchor of the ledger that the MLflow admin does not control: a store (s3://bucket/prefix on an "
        "Object Lock bucket, or a write-once folder) receiving one write-once object per ledger head; unset: the "
        "write-once folder $REPRO_HOME/anchors (the heads published from this home); off: MLflow's anchors only",
        derived="$REPRO_HOME/anchors",
        location=("off",),
    )

    # Talking to an MLflow tracking server, and the reports' inventory view (issue 16).
    mlflow_http_retries: int = setting(
        "REPRO_MLFLOW_HTTP_RETRIES", 2,
        "retries of a failed MLflow HTTP request (each retry is logged); sets MLFLOW_HTTP_REQUEST_MAX_RETRIES "
        "unless that is set", ge=0,
    )
    mlflow_http_timeout_s: int = setting(
        "REPRO_MLFLOW_HTTP_TIMEOUT_S", 30,
        "seconds an MLflow HTTP request may take; sets MLFLOW_HTTP_REQUEST_TIMEOUT unless that is set", ge=1,
    )
    overdue_days: int = setting(
        "REPRO_OVERDUE_DAYS", 30,
        "days after its last audit a registered version counts as overdue (and the nightly samples it as stale)", ge=1,
    )
    unreproducible_recheck_days: int = setting(
        "REPRO_UNREPRODUCIBLE_RECHECK_DAYS", 90,
        "days between the nightly's re-assessments of a version whose last verdict was NOT_REPRODUCIBLE "
        "(no run record, a lost or changed input)", ge=1,
    )

    # Rebuilding a record that names no image (the process runner).
    rebuild_env: Annotated[Literal["recorded", "auditor"], Lowered] = setting(
        "REPRO_REBUILD_ENV", "auditor",
        "where the process runner rebuilds a record naming no image: recorded (a virtual environment recreated "
        "from the recorded packages with uv) or auditor (the auditor's own; the drift is reported)",
    )
    warm_rebuild: bool = setting(
        "REPRO_WARM_REBUILD", True,
        "the process runner forks each python SCRIPT rebuild from a warm worker that has imported the script's leading "
        "imports once per environment (a fork server; a fresh process per rebuild all the same); false: a fresh "
        "interpreter for every rebuild",
    )
    venv_cache: Path | None = setting(
        "REPRO_VENV_CACHE", None, "where reconstructed environments are kept, one per recorded package set",
        derived="~/.cache/repro-audit/venvs",
        location=True,
    )
    find_links: str | None = setting(
        "REPRO_FIND_LINKS", None,
        "wheels for reconstructed environments: folders of wheels or URLs of link pages, comma-separated",
    )
    index_url: str | None = setting(
        "REPRO_INDEX_URL", None, "the package index for reconstructed environments (default: uv's, PyPI)",
    )

    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)

    def __post_init__(self) -> None:
        # the defaults derived from home (declared with ``derived=``)
        if self.snapshot_store is None:
            object.__setattr__(self, "snapshot_store", _snapshot_store_under(Path(self.home)))
        if self.tracking_uri is None:
            object.__setattr__(self, "tracking_uri", tracking_uri_under(Path(self.home)))

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
    def from_env(cls, env: Mapping[str, str] | None = None, *, config_file: Path | str | None = None,
                 cwd: Path | None = None) -> Settings:
        """Every setting from ``env`` over a configuration file; ``BadInput`` names the first malformed one.

        ``env=None``: this process's, ``os.environ`` over the file found from the working directory. A mapping
        given is read alone, unless ``config_file`` names a file or ``cwd`` a folder to look one up from
        (``auditor.catalog.configured``).
        """
        values_from = configured(env, config_file=config_file, cwd=cwd)
        return cls(**_read(cls, values_from), kubernetes=KubernetesSettings.from_env(values_from))


#: the Kubernetes route's settings (``REPRO_K8S_*``)
KUBERNETES_SETTINGS = declared(KubernetesSettings)
#: every setting, in the order the docs list them
SETTINGS: tuple[Setting, ...] = declared(Settings) + KUBERNETES_SETTINGS
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
_TOP = {s.attr: s for s in declared(Settings)}
_K8S = {s.attr: s for s in KUBERNETES_SETTINGS}

# The names other modules import: each a view of one field above.
TRACKING_URI = _TOP["tracking_uri"]
REGISTRY_URI = _TOP["registry_uri"]
HOME = _TOP["home"]
SNAPSHOT_STORE = _TOP["snapshot_store"]
REPORTS = _TOP["reports"]
RUNNER = _TOP["runner"]
REBUILD_TIMEOUT_S = _TOP["rebuild_timeout_s"]
RETRY_DELAY_S = _TOP["retry_delay_s"]
NIGHTLY_SCHEDULE = _TOP["nightly_schedule"]
NIGHTLY_MAX_MODELS = _TOP["nightly_max_models"]
NIGHTLY_BUDGET_HOURS = _TOP["nightly_budget_hours"]
RESPONSIBLE = _TOP["responsible_person"]
REQUIRE_OBJECT_LOCK = _TOP["require_object_lock"]
LOCK_RETENTION_DAYS = _TOP["lock_retention_days"]
IMAGE = _TOP["image_ref"]
IMAGE_DIGEST = _TOP["image_digest"]
INSTANCE_TYPE = _TOP["instance_type"]
REBUILD_BACKEND = _TOP["rebuild_backend"]
PRODUCTION_ALIASES = _TOP["production_aliases"]
DEPLOYED_ARTIFACTS = _TOP["deployed_artifacts"]
RERUN_WORKERS = _TOP["rerun_workers"]
METRIC_DIRECTIONS = _TOP["metric_directions"]
RETENTION_YEARS = _TOP["retention_years"]
NOTIFY_EMAIL = _TOP["notify_email"]
SMTP_CONN_ID = _TOP["smtp_conn_id"]
MLFLOW_CONN_ID = _TOP["mlflow_conn_id"]
S3_CONN_ID = _TOP["s3_conn_id"]
TRAINING_ASSET = _TOP["training_asset"]
ALIAS_ASSET = _TOP["alias_asset"]
REGISTRY_EVENTS = _TOP["registry_events"]
WEBHOOK_SECRET = _TOP["webhook_secret"]
DAG_OWNER = _TOP["dag_owner"]
SIGNING_KEY = _TOP["signing_key"]
SIGNING_PUBLIC_KEY = _TOP["signing_public_key"]
SIGNER = _TOP["signer"]
EVIDENCE_PACKS = _TOP["evidence_packs"]
AUDIT_EXPERIMENT = _TOP["audit_experiment"]
REPORTS_URL = _TOP["reports_url"]
LEDGER_ANCHOR = _TOP["ledger_anchor"]
MLFLOW_HTTP_RETRIES = _TOP["mlflow_http_retries"]
MLFLOW_HTTP_TIMEOUT_S = _TOP["mlflow_http_timeout_s"]
OVERDUE_DAYS = _TOP["overdue_days"]
UNREPRODUCIBLE_RECHECK_DAYS = _TOP["unreproducible_recheck_days"]
REBUILD_ENV = _TOP["rebuild_env"]
WARM_REBUILD = _TOP["warm_rebuild"]
VENV_CACHE = _TOP["venv_cache"]
FIND_LINKS = _TOP["find_links"]
INDEX_URL = _TOP["index_url"]
K8S_IMAGE = _K8S["image"]
K8S_NAMESPACE = _K8S["namespace"]
K8S_GPUS = _K8S["gpus"]
K8S_CPU = _K8S["cpu"]
K8S_MEMORY = _K8S["memory"]
K8S_WORK_SIZE = _K8S["work_size"]
K8S_SERVICE_ACCOUNT = _K8S["service_account"]
K8S_CONFIGMAP = _K8S["config_map"]
K8S_SECRET = _K8S["secret"]
K8S_NODE_SELECTOR = _K8S["node_selector"]
K8S_PRIORITY_CLASS = _K8S["priority_class"]
K8S_IMAGE_PULL_SECRET = _K8S["image_pull_secret"]
AIRFLOW_SETTINGS = (NOTIFY_EMAIL, SMTP_CONN_ID, MLFLOW_CONN_ID, S3_CONN_ID, TRAINING_ASSET, ALIAS_ASSET, REGISTRY_EVENTS,
                    WEBHOOK_SECRET, DAG_OWNER)


def describe() -> list[tuple[str, str, str, str]]:
    """``(name, type, default, help)`` for every setting, in the docs' order (for README / ``--help``)."""
    return [(s.name, s.type_text, s.default_text, s.help) for s in SETTINGS]


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
    """The process-wide settings, read on first use: the environment over the configuration file found from the
    working directory (``repro-audit.toml`` or ``[tool.repro-audit]`` in ``pyproject.toml``)."""
    return Settings.from_env()


#: how ``explain`` shows a secret's value
REDACTED = "***"


@dataclass(frozen=True)
class Resolved:
    """One setting as resolved: its ``value`` (a derived default worked out) and its ``source``: ``environment``,
    ``file PATH`` or ``default``. ``shown`` is the value to print: a secret's is ``REDACTED``."""

    setting: Setting
    value: object
    source: str

    @property
    def shown(self) -> object:
        return REDACTED if self.setting.secret and self.value is not None else self.value


def explain(env: Mapping[str, str] | None = None, *, cwd: Path | None = None) -> tuple[Path | None, list[Resolved]]:
    """The configuration file read (or ``None``) and every setting, in the docs' order, with its value and source.

    As ``Settings.from_env(env, cwd=cwd)`` resolves them (``env=None``: this process's); ``BadInput`` alike.
    """
    values_from = configured(env, cwd=cwd)
    resolved = Settings.from_env(values_from)
    rows = [Resolved(s, getattr(resolved, s.attr), values_from.source(s.name)) for s in declared(Settings)]
    rows += [Resolved(s, getattr(resolved.kubernetes, s.attr), values_from.source(s.name)) for s in KUBERNETES_SETTINGS]
    return (values_from.file.path if values_from.file else None), rows
