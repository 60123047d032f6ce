"""The data section: references to the data a run read (``NAME=URI@VERSION``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from auditor.digests import DATA_VERSION_ID
from auditor.errors import BadInput
from auditor.lineage.record import DataRef


def parse_data_ref(spec: str) -> tuple[str, DataRef]:
    """``NAME=URI@VERSION`` -> (name, DataRef). A snapshot id (``blake3:…``) makes a snapshot ref."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise BadInput(f"data ref {spec!r} is not NAME=URI@VERSION", hint="e.g. train=.repro/snapshots@blake3:…")
    uri, at, version = rest.rpartition("@")
    if not at:
        uri, version = rest, None
    elif "://" in version or "/" in version:  # the @ was part of the URI (user@host), not a version
        uri, version = rest, None
    return name.strip(), _data_ref(uri, version)


def _data_ref(uri: str, version: str | None) -> DataRef:
    if version and DATA_VERSION_ID.fullmatch(version):
        return DataRef(kind="snapshot", uri=uri, version=version)
    if uri.startswith("delta+") or uri.endswith("_delta_log"):
        return DataRef(kind="delta", uri=uri, version=version)
    if uri.startswith("s3://") and version:
        return DataRef(kind="s3-versioned", uri=uri, version=version)
    if "://" not in uri and not uri.startswith((".", "/")) and "/" not in uri:
        return DataRef(kind="table", uri=uri, version=version)
    return DataRef(kind="path", uri=uri, version=version)


def _as_ref(value: str | DataRef | Mapping[str, Any]) -> DataRef:
    if isinstance(value, DataRef):
        return value
    if isinstance(value, Mapping):
        return DataRef.model_validate(dict(value))
    return parse_data_ref(f"x={value}")[1]
