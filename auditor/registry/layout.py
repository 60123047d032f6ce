"""A run's artifacts as the SDK leaves them, built on :func:`auditor.tags.run_artifacts`.

The MLflow SDK path (``tracking``), the in-memory twin (``memory``) and the test
fixtures all lay a run out through these two functions, so the layout has one
writer: ``tags.run_artifacts`` names the paths, this module turns a record into
their bytes and, for MLflow, into a folder to ``log_artifacts``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor.tags import PARAM_RECORD_DIGEST, PARAM_SEED, RECORD_ARTIFACT, WEIGHTS_ARTIFACT, run_artifacts

# MLflow's limits (mlflow/utils/validation.py): a param value holds 6,000 characters; keys allow these only.
_MAX_PARAM_VALUE = 6000
_KEY_UNSAFE = re.compile(r"[^\w\-. /]")


def safe_key(name: str) -> str:
    """``name`` with every character MLflow refuses in a param or tag key replaced by ``_``."""
    return _KEY_UNSAFE.sub("_", name)

if TYPE_CHECKING:
    from auditor.lineage.record import RunRecord


def record_bytes(record: RunRecord) -> bytes:
    """The bytes the record digest covers, exactly as stored (UTF-8, no newline games)."""
    return record.to_json().encode("utf-8")


def flatten_params(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}``, keys made MLflow-safe, values cut to MLflow's limit."""
    out: dict[str, str] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, Mapping) and value:
            for key, item in value.items():
                walk(item, f"{prefix}.{key}" if prefix else str(key))
            return
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        out[safe_key(prefix) or "_"] = text[:_MAX_PARAM_VALUE]

    walk(config, "")
    return out


def training_params(record: RunRecord) -> dict[str, str]:
    """The params a training run logs: its resolved config, flattened, and the record's anchors.

    MLflow refuses to change a logged param, so these pin the record as it was at training time:
    the audit compares the stored record with them (``auditor.registry.base.Registry.load_record``).
    """
    from auditor.lineage.redact import redact_text

    # the record is redacted at capture; a param leaves the process, so it passes the redactor again
    params = {k: redact_text(v) for k, v in flatten_params(record.config.resolved if record.config else {}).items()}
    params[PARAM_RECORD_DIGEST] = record.digest()
    if record.seeds is not None and record.seeds.seed is not None:
        params[PARAM_SEED] = str(record.seeds.seed)
    return params


def run_layout(record: RunRecord | None, diff: str | None = None, weights: bytes | None = None) -> dict[str, bytes]:
    """The run's artifacts by path; ``record=None`` is a run that holds no record (as plain MLflow leaves one)."""
    artifacts = run_artifacts(
        record_bytes(record) if record is not None else b"",
        diff=diff.encode("utf-8") if diff is not None else None,
        weights=weights,
    )
    if record is None:
        del artifacts[RECORD_ARTIFACT]
    return artifacts


def write_layout(folder: Path, artifacts: Mapping[str, bytes], *, weights_file: Path | None = None) -> None:
    """Write ``artifacts`` under ``folder`` at their run paths, ready for ``log_artifacts(run_id, folder)``.

    ``weights_file`` puts a weights file already on disk at its run path without reading it
    into memory (a hard link where the file system allows, else a copy).
    """
    for path, data in artifacts.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if weights_file is not None:
        target = folder / WEIGHTS_ARTIFACT
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(weights_file, target)
        except OSError:
            shutil.copyfile(weights_file, target)
