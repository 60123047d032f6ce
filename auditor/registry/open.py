"""Opening a registry by URI: the scheme registry, kept apart from the interface its backends implement.

``auditor.registry.base`` defines ``Registry`` and never imports a backend; this
module picks one (``memory://`` or MLflow) and imports it on demand, so that
opening a registry imports no MLflow until an MLflow URI is opened.

Opening is for reading: a SQLite URI whose file does not exist is refused here
(MLflow would create an empty database and every read would find nothing), and
MLflow's HTTP retries are bounded before MLflow is first used (its defaults retry
a refused connection for over four minutes, silently).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from auditor.errors import NotFound
from auditor.uris import sqlite_file

if TYPE_CHECKING:
    from auditor.registry.base import Registry
    from auditor.settings import Settings

MEMORY_SCHEME = "memory://"
#: MLflow's own variables, set from our settings unless the operator set them
_MLFLOW_RETRIES = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
_MLFLOW_TIMEOUT = "MLFLOW_HTTP_REQUEST_TIMEOUT"
_MLFLOW_BACKOFF = "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"
_BACKOFF = "1"  # an int to MLflow: urllib3 waits 0, 2, 4 s ... between retries, not MLflow default 0, 4, 8 s ...


def registry_scheme(uri: str) -> str:
    """``memory`` for ``memory://NAME``, else ``mlflow`` (any tracking URI MLflow understands)."""
    return "memory" if uri.startswith(MEMORY_SCHEME) else "mlflow"


def require_existing_database(uri: str | None, *, what: str = "tracking URI") -> None:
    """``NotFound`` naming the file when ``uri`` is a SQLite URI whose database file does not exist."""
    path = sqlite_file(uri)
    if path is not None and not path.exists():
        raise NotFound(
            f"the MLflow database {path.resolve()} named by the {what} {uri} does not exist (nothing was created)",
            hint="check MLFLOW_TRACKING_URI or --tracking-uri; a registry is created by registering a model "
            "(auditor.register_model), never by reading it",
        )


def bound_mlflow_http(settings: Settings | None = None) -> None:
    """Set MLflow's HTTP retry count, timeout and backoff from our settings, unless the operator set them."""
    from auditor.settings import MLFLOW_HTTP_RETRIES, MLFLOW_HTTP_TIMEOUT_S

    retries = settings.mlflow_http_retries if settings else MLFLOW_HTTP_RETRIES.get()
    timeout = settings.mlflow_http_timeout_s if settings else MLFLOW_HTTP_TIMEOUT_S.get()
    os.environ.setdefault(_MLFLOW_RETRIES, str(retries))
    os.environ.setdefault(_MLFLOW_TIMEOUT, str(timeout))
    os.environ.setdefault(_MLFLOW_BACKOFF, _BACKOFF)


def open_registry(tracking_uri: str | None = None, registry_uri: str | None = None, *, settings: Settings | None = None) -> Registry:
    """The registry a URI names: ``memory://NAME`` for the in-memory twin, anything else through MLflow.

    With no URI, the settings' tracking and registry URIs (``MLFLOW_TRACKING_URI``,
    ``MLFLOW_REGISTRY_URI``) apply. A SQLite URI must name an existing file (``NotFound``).
    An entry point passes the ``settings`` it resolved; without them they are read here.
    """
    if tracking_uri is None:
        if settings is None:
            from auditor.settings import Settings

            settings = Settings.from_env()
        tracking_uri = settings.tracking_uri
        registry_uri = registry_uri or settings.registry_uri
    if registry_scheme(tracking_uri) == "memory":
        from auditor.registry.memory import MemoryRegistry

        return MemoryRegistry.named(tracking_uri)
    require_existing_database(tracking_uri)
    require_existing_database(registry_uri, what="registry URI")
    bound_mlflow_http(settings)
    from auditor.registry.mlflow import MlflowRegistry

    return MlflowRegistry(tracking_uri, registry_uri=registry_uri)
