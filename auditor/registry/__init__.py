"""The model registry: the training-side SDK that writes lineage, and the reader the audit uses.

Importing this package imports no MLflow: ``open_registry`` (in ``auditor.registry.open``)
picks the backend (``memory://`` or MLflow) and imports it on demand.
"""

from auditor.registry.base import ModelVersionInfo, RecordMissing, Registry
from auditor.registry.open import open_registry, registry_scheme
from auditor.registry.refs import ModelRef, parse_ref

__all__ = ["ModelRef", "ModelVersionInfo", "RecordMissing", "Registry", "open_registry", "parse_ref", "registry_scheme"]
