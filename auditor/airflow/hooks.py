"""The auditor's hook: a running task's settings, with Airflow's Connections over the environment.

``AuditHook`` resolves, when a task runs (never while a DAG file is parsed), the MLflow tracking URI
from the Connection ``REPRO_MLFLOW_CONN_ID`` (default ``repro_mlflow``) and S3's endpoint and
credentials from the aws-type Connection ``REPRO_S3_CONN_ID`` (default ``repro_s3``); a Connection
that is not defined leaves the environment as it is. ``get_conn()`` gives the resolved ``Settings``,
``session()`` the task's one audit session (``auditor.steps.Session``) opened from them.

``task_session(context)`` is what a ``@task`` calls: the session, its settings kept on the task's
operator for its links and lineage.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from auditor.settings import MLFLOW_CONN_ID, S3_CONN_ID, TRACKING_URI, Settings, configured

if TYPE_CHECKING:
    from auditor.steps import Session


def tracking_uri_of(conn: Any) -> str:
    """A Connection's MLflow tracking URI: ``extra.tracking_uri``, else ``schema://host:port/path``."""
    extra = conn.extra_dejson or {}
    if extra.get("tracking_uri"):
        return str(extra["tracking_uri"])
    scheme = conn.schema or "http"
    port = f":{conn.port}" if conn.port else ""
    path = extra.get("path", "")
    return f"{scheme}://{conn.host}{port}{path}"


def s3_env(conn: Any) -> dict[str, str]:
    """The ``AWS_*`` variables boto3 reads, from an aws-type Connection (login/password, extra endpoint_url)."""
    extra = conn.extra_dejson or {}
    env = {}
    if conn.login:
        env["AWS_ACCESS_KEY_ID"] = conn.login
    if conn.password:
        env["AWS_SECRET_ACCESS_KEY"] = conn.password
    endpoint = extra.get("endpoint_url") or (conn.host if conn.host and "://" in conn.host else None)
    if endpoint:
        env["AWS_ENDPOINT_URL"] = str(endpoint)
    if extra.get("region_name"):
        env["AWS_DEFAULT_REGION"] = str(extra["region_name"])
    return env


class AuditHook(BaseHook):
    """A task's ``Settings``: the environment, with the MLflow and S3 Connections over it.

    ``mlflow_conn_id`` and ``s3_conn_id`` default to ``REPRO_MLFLOW_CONN_ID`` and ``REPRO_S3_CONN_ID``
    of ``env`` (default: this process's environment over the configuration file; a mapping given is read alone).
    """

    conn_name_attr = "mlflow_conn_id"
    default_conn_name = MLFLOW_CONN_ID.default
    hook_name = "repro-audit"

    def __init__(self, mlflow_conn_id: str | None = None, s3_conn_id: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.env = configured(env)
        self.mlflow_conn_id = mlflow_conn_id or MLFLOW_CONN_ID.get(self.env)
        self.s3_conn_id = s3_conn_id or S3_CONN_ID.get(self.env)

    @classmethod
    def connection_or_none(cls, conn_id: str | None) -> Any:
        """The Airflow Connection ``conn_id``, or None when it is not defined (then the environment applies)."""
        if not conn_id:
            return None
        from airflow.sdk.exceptions import AirflowNotFoundException

        try:
            return cls.get_connection(conn_id)
        except AirflowNotFoundException:
            return None

    def get_conn(self) -> Settings:
        """The settings of a running task.

        The S3 credentials go into this process's environment (boto3 reads them there; they never leave
        the task's process); the tracking URI into the settings.
        """
        over: dict[str, str] = {}  # the Connections, over the environment and the configuration file
        mlflow = self.connection_or_none(self.mlflow_conn_id)
        if mlflow is not None:
            over[TRACKING_URI.name] = tracking_uri_of(mlflow)
        s3 = self.connection_or_none(self.s3_conn_id)
        if s3 is not None:
            aws = s3_env(s3)
            os.environ.update(aws)
            over.update(aws)
        return Settings.from_env(self.env.over(over))

    def session(self, settings: Settings | None = None) -> Session:
        """The task's one audit session, opened from ``settings`` (default: ``get_conn()``)."""
        from auditor.steps import Session

        return Session(settings or self.get_conn())


def task_settings(env: Mapping[str, str] | None = None) -> Settings:
    """``AuditHook(env=env).get_conn()``: a running task's settings."""
    return AuditHook(env=env).get_conn()


def remember_settings(context: Mapping[str, Any], settings: Settings) -> Settings:
    """Keep a task's resolved settings on its operator (for its links and lineage); returns them."""
    task = context["task"]
    task.lineage_settings = settings
    task.tracking_uri = settings.tracking_uri
    return settings


def task_session(context: Mapping[str, Any], settings: Settings | None = None) -> Session:
    """A ``@task``'s one audit session: its settings resolved once (Connections over the environment), kept on the operator."""
    hook = AuditHook()
    return hook.session(remember_settings(context, settings or hook.get_conn()))
