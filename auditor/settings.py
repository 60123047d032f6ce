"""Frozen, typed settings, read once from the environment.

Every variable is ``REPRO_*`` except ``MLFLOW_TRACKING_URI`` / ``MLFLOW_REGISTRY_URI``,
which keep the names MLflow users already set. A malformed value raises
``BadInput`` naming the variable. Call ``get_settings()``; tests build their own
with ``Settings.from_env({...})``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from auditor.errors import BadInput


def _number(env: Mapping[str, str], name: str, default, cast, kind: str):
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return cast(raw)
    except ValueError:
        raise BadInput(f"environment variable {name}={raw!r} is not {kind}", hint=f"set {name} to e.g. {default}") from None


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    return _number(env, name, default, int, "an integer")


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    return _number(env, name, default, float, "a number")


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise BadInput(f"environment variable {name}={raw!r} is not a boolean", hint="use true or false")


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with the embedded defaults of ``make demo``."""

    home: Path = field(default_factory=lambda: Path(".repro"))
    snapshot_store: str = ".repro/snapshots"
    reports: str = "reports"
    tracking_uri: str = "sqlite:///.repro/mlflow.db"
    registry_uri: str | None = None
    image_ref: str | None = None
    image_digest: str | None = None
    instance_type: str | None = None
    responsible_person: str = "unassigned (set REPRO_RESPONSIBLE)"
    runner: str = "process"
    rebuild_timeout_s: int = 3600
    retry_delay_s: int = 300  # the DAGs' retry delay; tests and the demo use 1–2 s
    nightly_schedule: str = "0 2 * * *"
    nightly_max_models: int = 5
    nightly_budget_hours: float = 4.0
    require_object_lock: bool = False
    lock_retention_days: int = 365 * 7

    @property
    def git_cache(self) -> Path:
        return self.home / "git"

    @property
    def work_dir(self) -> Path:
        return self.home / "work"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        home = Path(env.get("REPRO_HOME") or ".repro")
        return cls(
            home=home,
            snapshot_store=env.get("REPRO_SNAPSHOT_STORE") or str(home / "snapshots"),
            reports=env.get("REPRO_REPORTS") or "reports",
            tracking_uri=env.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(home / 'mlflow.db').as_posix()}",
            registry_uri=env.get("MLFLOW_REGISTRY_URI") or None,
            image_ref=env.get("REPRO_IMAGE") or None,
            image_digest=env.get("REPRO_IMAGE_DIGEST") or None,
            instance_type=env.get("REPRO_INSTANCE_TYPE") or None,
            responsible_person=env.get("REPRO_RESPONSIBLE") or cls.responsible_person,
            runner=env.get("REPRO_RUNNER") or "process",
            rebuild_timeout_s=_int(env, "REPRO_REBUILD_TIMEOUT_S", 3600),
            retry_delay_s=_int(env, "REPRO_RETRY_DELAY_S", 300),
            nightly_schedule=env.get("REPRO_NIGHTLY_SCHEDULE") or "0 2 * * *",
            nightly_max_models=_int(env, "REPRO_NIGHTLY_MAX_MODELS", 5),
            nightly_budget_hours=_float(env, "REPRO_NIGHTLY_BUDGET_HOURS", 4.0),
            require_object_lock=_bool(env, "REPRO_REQUIRE_OBJECT_LOCK", False),
            lock_retention_days=_int(env, "REPRO_LOCK_RETENTION_DAYS", 365 * 7),
        )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings.from_env()
