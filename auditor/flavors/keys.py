"""How a model's values are keyed for its digest: exactly, by their bits, never by a summarised repr. Pure.

One home for the keys both the normal form (``base.Normal.digest``) and the node arrays (``forest.Forest.key``) use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from auditor.digests import sha256_digest

#: a list of at least this many numbers of one type is keyed by the digest of its exact bits (``_packed``)
PACK_AT = 16


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        packed = _packed(value) if len(value) >= PACK_AT else None
        return packed if packed is not None else [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value.hex() if not math.isfinite(value) or value != value else repr(value)
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, np.ndarray):
        return _array_key(value)
    return value if value is None or isinstance(value, (str, int, bool)) else repr(value)


def _packed(values: Sequence[Any]) -> list[Any] | None:
    """A long list of floats only (or of ints only) as its type, length and the sha256 of its exact bits: the same
    key exactly when the values are bit-identical, in one numpy pass instead of a Python call per number (a
    2,000-tree model's JSON holds millions). None for anything else (mixed, bools, ints past int64)."""
    kinds = set(map(type, values))
    if kinds == {float}:
        return ["float64[]", len(values), sha256_digest(np.fromiter(values, dtype=np.float64, count=len(values)).tobytes())]
    if kinds == {int}:
        try:
            ints = np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            return None
        return ["int64[]", len(values), sha256_digest(ints.tobytes())]
    return None


def _array_key(a: np.ndarray) -> list[Any]:
    a = np.ascontiguousarray(a)
    if a.dtype == object:  # each element by value (an array inside by its bytes): never a summarised repr
        return [str(a.dtype), list(a.shape), [_jsonable(x) for x in a.ravel().tolist()]]
    return [str(a.dtype), list(a.shape), sha256_digest(a.tobytes())]


__all__ = ["PACK_AT", "_array_key", "_jsonable", "_packed"]
