"""Canonical JSON and digests: one byte string per value, whatever the dict order.

The rules: UTF-8, keys sorted, no insignificant whitespace, no NaN/Infinity
(they have no JSON spelling and would make two platforms disagree), floats in
Python's shortest round-trip repr. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

from auditor.digests import sha256_digest, sha256_hex  # noqa: F401 - sha256_hex re-exported for its callers
from auditor.errors import MalformedRecord


def _check_finite(value: Any, path: str = "$") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise MalformedRecord(f"{path}: {value!r} has no canonical JSON form; store it as a string or null")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise MalformedRecord(f"{path}: key {key!r} is not a string")
            _check_finite(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_finite(item, f"{path}[{index}]")


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` to canonical JSON bytes (sorted keys, compact, UTF-8)."""
    _check_finite(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def digest(value: Any) -> str:
    """``sha256:<hex>`` of the canonical JSON of ``value``."""
    return sha256_digest(canonical_json(value))


def pretty_json(value: Any) -> str:
    """Human-readable JSON with sorted keys (not canonical; for display and files people read)."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; an empty mapping stays a leaf."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}
