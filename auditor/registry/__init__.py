"""The model registry: the MLflow writing the training SDK (``auditor.sdk``) calls, and the reader the audit uses.

Importing this package imports no MLflow: ``open_registry`` (in ``auditor.registry.open``)
picks the backend (``memory://`` or MLflow) and imports it on demand.
"""

from auditor.registry.base import ModelVersionInfo, RecordChanged, RecordMissing, Registry
from auditor.registry.open import open_registry, registry_scheme
from auditor.uris import ModelRef, parse_ref

__all__ = ["ModelRef", "ModelVersionInfo", "RecordChanged", "RecordMissing", "Registry", "open_registry", "parse_ref", "registry_scheme"]
