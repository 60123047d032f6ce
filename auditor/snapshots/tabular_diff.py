"""What changed in a tabular file between two versions of it: its columns, their order, its rows and its values.

    describe_change(old, new, name, *, key=None) -> list[str] | None
        # old, new: the two versions, as bytes or a path; name: the file's name, whose suffix picks the reader
        # (.csv, .tsv, .parquet, .npy); None when it is no such file, pandas is not installed, or a version does not
        # parse: the caller then names the file by its hashes, as for any other file
        # -> ["columns reordered", "column added: z", "12 rows added", "37 values changed in column x"]
    compare_frames(before, after, *, key=None) -> list[str]     # the same sentences for two pandas DataFrames

pandas does the comparing, not code of ours: ``Index.difference`` for columns (and for rows when a ``key`` column
unique in both versions is given), ``hash_pandas_object`` to tell rows added, removed or moved from rows edited, and
``DataFrame.compare`` to count the values that changed. Without a key, rows are aligned by position: when every row
of one version is in the other, the rest were only added or removed (anywhere) or reordered; otherwise rows pair up
by position and the surplus at the end counts as added or removed. A file over ``MAX_BYTES`` is not loaded: the
answer says so. pandas (an extra's dependency, not the core's) and numpy are imported only when a file is compared.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

#: the suffixes compared by content; any other file keeps its hashes
TABULAR = (".csv", ".tsv", ".parquet", ".npy")
#: a version larger than this is not loaded
MAX_BYTES = 200 << 20
_NAMES_SHOWN = 10  # columns named in one sentence
_VALUE_SENTENCES = 8  # columns whose changed values get a sentence of their own
_VALUES = "values"  # the one column of a 1-d array: its sentences name no column

Version = bytes | str | Path


def is_tabular(name: str) -> bool:
    """Whether a file called ``name`` is compared by content (by its suffix)."""
    return PurePosixPath(name).suffix.lower() in TABULAR


def describe_change(old: Version, new: Version, name: str, *, key: str | None = None) -> list[str] | None:
    """Sentences saying what changed from ``old`` to ``new`` (two versions of the file ``name``); [] when nothing
    did; None when the file is not tabular, pandas is missing, or a version does not parse."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in TABULAR:
        return None
    largest = max(_size(old), _size(new))
    if largest > MAX_BYTES:
        return not_loaded(largest)
    try:
        import pandas  # noqa: F401  (an extra's dependency: without it the file keeps its hashes)
    except ImportError:
        return None
    try:
        if suffix == ".npy":
            return _compare_arrays(_read_array(old), _read_array(new), key=key)
        return compare_frames(_read_frame(old, suffix), _read_frame(new, suffix), key=key)
    except (ValueError, TypeError, OSError, EOFError, KeyError, IndexError):
        # pandas' and pyarrow's parse errors are ValueErrors (ParserError, EmptyDataError, ArrowInvalid), a mixed
        # column's comparison a TypeError (ArrowTypeError): either way, not something this module can describe
        return None


def compare_frames(before: Any, after: Any, *, key: str | None = None) -> list[str]:
    """What changed from the DataFrame ``before`` to ``after``: columns, rows, then values, in that order."""
    out = _column_sentences(before.columns, after.columns)
    common = before.columns.intersection(after.columns, sort=False)
    old, new = _comparable(before[common], after[common])
    out += _dtype_sentences(before[common], after[common])
    if key is not None and key in common and old[key].is_unique and new[key].is_unique:
        return out + _by_key(old, new, key)
    return out + _by_position(old.reset_index(drop=True), new.reset_index(drop=True))


def not_loaded(size: int) -> list[str]:
    """The answer for a file too large to load: it says so, and how large."""
    return [f"not compared: a version is {_mb(size)}, over the {_mb(MAX_BYTES)} a comparison loads"]


def _size(version: Version) -> int:
    return len(version) if isinstance(version, bytes) else Path(version).stat().st_size


def _mb(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MB"


def _bytes(version: Version) -> bytes:
    return version if isinstance(version, bytes) else Path(version).read_bytes()


def _read_frame(version: Version, suffix: str) -> Any:
    import pandas as pd

    data = io.BytesIO(_bytes(version))
    if suffix == ".parquet":
        return pd.read_parquet(data)
    return pd.read_csv(data, sep="\t" if suffix == ".tsv" else ",")


def _read_array(version: Version) -> Any:
    import numpy as np

    return np.load(io.BytesIO(_bytes(version)), allow_pickle=False)  # never unpickle a file someone overwrote


def _frame(array: Any) -> Any:
    """An array as a DataFrame: a record array's fields, a 1-d array's one column, a matrix's columns by number."""
    import pandas as pd

    if array.dtype.names:
        return pd.DataFrame(array.reshape(-1))
    if array.ndim <= 1:
        return pd.DataFrame({_VALUES: array.reshape(-1)})
    return pd.DataFrame(array.reshape(len(array), -1))


def _compare_arrays(before: Any, after: Any, *, key: str | None) -> list[str]:
    """Two arrays: their dtype, a shape that is not rows of the same kind of thing, then their frames' changes."""
    out = [f"dtype changed from {before.dtype} to {after.dtype}"] if before.dtype != after.dtype else []
    if before.ndim != after.ndim or (before.ndim > 2 and before.shape[1:] != after.shape[1:]):
        return [*out, f"shape changed from {before.shape} to {after.shape}"]  # no rows or columns to pair
    dtypes_said = bool(out)
    frames = compare_frames(_frame(before), _frame(after), key=key)
    return out + [s for s in frames if not (dtypes_said and s.startswith("column ") and " type " in s)]


def _names(index: Any) -> str:
    names = [str(n) for n in index]
    shown = ", ".join(names[:_NAMES_SHOWN])
    return shown + (f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else "")


def _column_sentences(before: Any, after: Any) -> list[str]:
    out = []
    removed, added = before.difference(after, sort=False), after.difference(before, sort=False)
    kept_old, kept_new = before.intersection(after, sort=False), after.intersection(before, sort=False)
    if list(kept_old) != list(kept_new):
        out.append("columns reordered")
    if len(added):
        out.append(f"{'column' if len(added) == 1 else 'columns'} added: {_names(added)}")
    if len(removed):
        out.append(f"{'column' if len(removed) == 1 else 'columns'} removed: {_names(removed)}")
    return out


def _dtype_sentences(before: Any, after: Any) -> list[str]:
    changed = [c for c in before.columns if before[c].dtype != after[c].dtype]
    return [f"column {c} changed type from {before[c].dtype} to {after[c].dtype}" for c in changed[:_NAMES_SHOWN]]


def _comparable(before: Any, after: Any) -> tuple[Any, Any]:
    """Both frames with the same columns in the same order; a column whose dtype changed compared as objects
    (an arrow string column refuses to be compared with numbers), each value as a number where it reads as one:
    one word in a column of numbers turns the column into text, not the other values into other values."""
    old, new = before.copy(), after[list(before.columns)].copy()
    for column in old.columns:
        if old[column].dtype != new[column].dtype:
            old[column], new[column] = _numbers_where_possible(old[column]), _numbers_where_possible(new[column])
    return old, new


def _numbers_where_possible(column: Any) -> Any:
    import pandas as pd

    if column.dtype == bool:
        return column.astype(object)
    numbers = pd.to_numeric(column, errors="coerce")
    return numbers.astype(object).where(numbers.notna(), column.astype(object))


def _rows(count: int, verb: str) -> list[str]:
    return [f"{count} {'row' if count == 1 else 'rows'} {verb}"] if count else []


def _by_key(old: Any, new: Any, key: str) -> list[str]:
    """Rows paired by ``key``: the keys only one version has are rows added or removed."""
    before, after = old.set_index(key), new.set_index(key)
    added, removed = after.index.difference(before.index), before.index.difference(after.index)
    kept = before.index.intersection(after.index)
    return _rows(len(added), "added") + _rows(len(removed), "removed") + _values(before.loc[kept], after.loc[kept])


def _by_position(old: Any, new: Any) -> list[str]:
    """Rows without a key: moved, added or removed when every row of one version is in the other, else by position."""
    import pandas as pd

    if len(old.columns) == 0:
        return _rows(max(0, len(new) - len(old)), "added") + _rows(max(0, len(old) - len(new)), "removed")
    try:
        before, after = (pd.util.hash_pandas_object(f, index=False) for f in (old, new))
    except TypeError:  # a cell that cannot be hashed (a list in a parquet column): pair rows by position
        before = after = None
    if before is not None:
        surplus = after.value_counts().sub(before.value_counts(), fill_value=0)
        added, removed = int(surplus[surplus > 0].sum()), int(-surplus[surplus < 0].sum())
        if (added, removed) == (max(0, len(new) - len(old)), max(0, len(old) - len(new))):
            # only whole rows came or went (or moved): no value changed in a row both versions have
            moved = added == removed == 0 and not before.equals(after)
            return _rows(added, "added") + _rows(removed, "removed") + (["rows reordered"] if moved else [])
    shared = min(len(old), len(new))
    out = _rows(len(new) - shared, "added") + _rows(len(old) - shared, "removed")
    return out + _values(old.iloc[:shared], new.iloc[:shared])


def _values(old: Any, new: Any) -> list[str]:
    """How many values changed in each column of two frames with the same labels (``DataFrame.compare``; a value
    missing in both is the same value)."""
    if old.empty:
        return []
    differ = old.compare(new[list(old.columns)], keep_shape=True).notna()
    per_column = differ.T.groupby(level=0, sort=False).any().sum(axis=1)
    counts = [(column, int(per_column.get(column, 0))) for column in old.columns]
    return _value_sentences([(c, n) for c, n in counts if n])


def _value_sentences(counts: Sequence[tuple[Any, int]]) -> list[str]:
    out = [f"{n} {'value' if n == 1 else 'values'} changed" + ("" if c == _VALUES else f" in column {c}")
           for c, n in counts[:_VALUE_SENTENCES]]
    rest = counts[_VALUE_SENTENCES:]
    if rest:
        total = sum(n for _, n in rest)
        out.append(f"{total} {'value' if total == 1 else 'values'} changed in {len(rest)} more columns")
    return out


__all__ = ["MAX_BYTES", "TABULAR", "compare_frames", "describe_change", "is_tabular", "not_loaded"]
