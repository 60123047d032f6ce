"""Opening a registry by URI: the scheme registry, kept apart from the interface its backends implement.

``auditor.registry.base`` defines ``Registry`` and never imports a backend; this
module picks one (``memory://`` or MLflow) and imports it on demand, so that
opening a registry imports no MLflow until an MLflow URI is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auditor.registry.base import Registry

MEMORY_SCHEME = "memory://"


def registry_scheme(uri: str) -> str:
    """``memory`` for ``memory://NAME``, else ``mlflow`` (any tracking URI MLflow understands)."""
    return "memory" if uri.startswith(MEMORY_SCHEME) else "mlflow"


def open_registry(tracking_uri: str | None = None, registry_uri: str | None = None) -> Registry:
    """The registry a URI names: ``memory://NAME`` for the in-memory twin, anything else through MLflow.

    With no URI, the settings' tracking and registry URIs (``MLFLOW_TRACKING_URI``,
    ``MLFLOW_REGISTRY_URI``) apply.
    """
    if tracking_uri is None:
        from auditor.settings import Settings

        settings = Settings.from_env()
        tracking_uri = settings.tracking_uri
        registry_uri = registry_uri or settings.registry_uri
    if registry_scheme(tracking_uri) == "memory":
        from auditor.registry.memory import MemoryRegistry

        return MemoryRegistry.named(tracking_uri)
    from auditor.registry.mlflow import MlflowRegistry

    return MlflowRegistry(tracking_uri, registry_uri=registry_uri)
