"""The MLflow dataset inputs of a run: one per recorded data ref, the snapshot id as its digest.

Used by the training run (``auditor.registry.tracking``) and by the audit run (``auditor.registry.mlflow``); it
imports neither, so neither imports the other back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from auditor.lineage.record import DataRef
from auditor.tags import MLFLOW_DATASET_CONTEXT, TAG_DATASET_VERSION

_DATASET_DIGEST = 36  # MLflow's column width for a dataset digest


def dataset_inputs(data: Mapping[str, DataRef], *, context: str | None = None,
                    extra_tags: Mapping[str, str] | None = None) -> list[Any]:
    """One MLflow ``DatasetInput`` per data ref (its snapshot id as digest); the context is the input's name unless given.

    The training run logs them (context: the input's name); an audit run logs the same datasets it verified
    (context ``audit``, ``auditor.registry.mlflow``): one home for both, below either.
    """
    from mlflow.data.dataset_source import DatasetSource
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    class SnapshotSource(DatasetSource):
        """Where a recorded data ref lives: its URI and immutable version, nothing to load from MLflow."""

        def __init__(self, uri: str, version: str | None, kind: str) -> None:
            self.uri, self.version, self.kind = uri, version, kind

        @staticmethod
        def _get_source_type() -> str:
            return "repro_snapshot"

        def load(self) -> Any:
            raise NotImplementedError("materialise the snapshot with repro-audit snapshot materialize")

        @staticmethod
        def _can_resolve(raw_source: Any) -> bool:
            return False

        @classmethod
        def _resolve(cls, raw_source: Any) -> DatasetSource:
            raise NotImplementedError

        def to_dict(self) -> dict[str, Any]:
            return {"uri": self.uri, "version": self.version, "kind": self.kind}

        @classmethod
        def from_dict(cls, source_dict: dict[Any, Any]) -> DatasetSource:
            return cls(source_dict["uri"], source_dict.get("version"), source_dict.get("kind", "snapshot"))

    inputs = []
    for name, ref in data.items():
        identity = ref.version or ref.content_hash or "unversioned"
        dataset = MetaDataset(SnapshotSource(ref.uri, ref.version, ref.kind), name=name, digest=identity[:_DATASET_DIGEST])
        tags = [InputTag(MLFLOW_DATASET_CONTEXT, context or name), InputTag(TAG_DATASET_VERSION, identity),
                *(InputTag(k, v) for k, v in (extra_tags or {}).items())]
        inputs.append(DatasetInput(dataset=dataset._to_mlflow_entity(), tags=tags))
    return inputs
