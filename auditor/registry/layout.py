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

from auditor.digests import sha256_hex
from auditor.tags import PARAM_RECORD_DIGEST, PARAM_SEED, RECORD_ARTIFACT, WEIGHTS_ARTIFACT, run_artifacts

# MLflow's limits (mlflow/utils/validation.py): a param value holds 6,000 characters, a key 250; keys allow these
# characters only, and are read as paths: no empty, '.' or '..' segment, no leading '/', nothing starting '..'.
_MAX_PARAM_VALUE = 6000
_MAX_KEY = 250
_KEY_UNSAFE = re.compile(r"[^\w\-. /]")


def safe_key(name: str) -> str:
    """``name`` as a key MLflow accepts for a param or tag: every character it refuses replaced by ``_``, every
    segment it would read as a path step (``https://`` gives an empty one) made ``_``, and a key over its length
    cut with a short digest of the whole kept (two long keys stay two keys)."""
    key = "/".join("_" if part in ("", ".", "..") else part for part in _KEY_UNSAFE.sub("_", name).split("/"))
    if key.startswith(".."):
        key = "_" + key
    if len(key) > _MAX_KEY:
        key = f"{key[: _MAX_KEY - 9]}-{sha256_hex(name.encode('utf-8', 'surrogatepass'))[:8]}"
    return key

if TYPE_CHECKING:
    from auditor.lineage.record import RunRecord


def record_bytes(record: RunRecord) -> bytes:
    """The bytes the record digest covers, exactly as stored (UTF-8, no newline games)."""
    return record.to_json().encode("utf-8")


def flatten_params(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}``, keys made MLflow-safe, values cut to MLflow's limit."""
    out: dict[str, str] = {}
    owner: dict[str, str] = {}  # safe key -> the flattened key it came from

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, Mapping) and value:
            for key, item in value.items():
                walk(item, f"{prefix}.{key}" if prefix else str(key))
            return
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        key = safe_key(prefix) or "_"
        if key in out:  # two keys that differ only in what MLflow refuses stay two params: the earlier one moves
            earlier = owner[key]  # (the later one keeps the name, as it did when it overwrote the earlier)
            out[safe_key(f"{earlier}-{sha256_hex(earlier.encode('utf-8', 'surrogatepass'))[:8]}")] = out.pop(key)
        out[key], owner[key] = text[:_MAX_PARAM_VALUE], prefix

    walk(config, "")
    return out


def training_params(record: RunRecord) -> dict[str, str]:
    """The params a training run logs: its resolved config, flattened, and the record's anchors.

    MLflow refuses to change a logged param, so these pin the record as it was at training time:
    the audit compares the stored record with them (``auditor.registry.base.Registry.load_record``).
    """
    from auditor.lineage.redact import redact_mapping, redact_text

    # the record is redacted at capture (keys too); a param leaves the process, so it passes the redactor again,
    # its key before the key is made MLflow-safe (after, a URL's password no longer looks like one)
    resolved = redact_mapping(record.config.resolved) if record.config else {}
    params = {k: redact_text(v) for k, v in flatten_params(resolved).items()}
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
