"""Autolog's own training frame, verified against a pinned input of the same run (issue 42, build 5). I/O: reads Delta.

``mlflow.<flavour>.autolog()`` logs the frame ``fit`` was given as a dataset whose source is ``code``: a frame built
in code, named only by MLflow's digest. When the run also logged a Delta table at a version (``mlflow.log_input``
with a ``DeltaDatasetSource``), that frame may be those rows: ``verify`` reads the table at its logged version, takes
the frame's columns (its logged schema names them; an array's shape picks the table's columns in order, with or
without one target column), and computes MLflow's own digest (``mlflow.data.digest_utils``: an MD5 of the first
10,000 rows with their index, the row count and the column names, cut to 8 hex digits). The same digest: the frame is
those rows, and the assessment counts it as pinned (``auditor.adopt.rules``). Another digest, an unreadable table or
no Delta input at a version: it stays named but mutable, and ``unverified`` says why.

What this proves is what MLflow's digest covers: the first 10,000 rows (with their index), the row count and the
column names; a frame that differs only past row 10,000 gives the same digest. The rebuild then reads the table
itself and its scores are compared (``auditor.adopt.sandbox_compare``). Nothing here is unpickled: Delta data is
Parquet.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from auditor.adopt.rules import Dataset, Metadata, delta_version

#: the most table columns tried as the target of an array frame (one digest per column)
MAX_TARGETS = 64


class FrameCheck:
    """Verifies code-source frames against Delta inputs; the tables read and the digests computed are kept."""

    def __init__(self) -> None:
        self._tables: dict[tuple[str, int], Any] = {}  # (table, version) -> frame, or the error text
        self._digests: dict[tuple[str, int, str, str], bool] = {}

    def verify(self, meta: Metadata) -> Metadata:
        """``meta`` with each code-source dataset's ``verified`` (or ``unverified``) filled in."""
        frames = [d for d in meta.datasets if (d.source_type or "").lower() == "code"]
        if not frames:
            return meta
        pinned = [(d, at) for d in meta.datasets if (at := delta_version(d)) is not None]
        datasets = tuple(self._one(d, pinned) if d in frames else d for d in meta.datasets)
        return replace(meta, datasets=datasets)

    def _one(self, frame: Dataset, pinned: list[tuple[Dataset, tuple[str, int]]]) -> Dataset:
        if not pinned:
            return replace(frame, unverified="the run logged no Delta table at a version to check its rows against")
        tried = []
        for d, (table, version) in pinned:
            said = f"Delta table {table} @ version {version}"
            why = self._matches(frame, table, version)
            if why is None:
                return replace(frame, verified=f"{said} (input {d.name or d.context or 'input'}), MLflow's digest {frame.digest}")
            tried.append(f"{said}: {why}")
        return replace(frame, unverified="; ".join(tried))

    def _table(self, table: str, version: int) -> Any:
        key = (table, version)
        if key not in self._tables:
            if len(self._tables) >= 4:  # a sweep reads many runs of few tables: keep the last few
                self._tables.pop(next(iter(self._tables)))
            try:
                from deltalake import DeltaTable

                self._tables[key] = DeltaTable(table, version=version).to_pandas()
            except ImportError:
                self._tables[key] = "deltalake is not installed (pip install 'repro-audit[delta]')"
            except Exception as exc:  # noqa: BLE001 - deltalake raises its own and the OS's errors
                first = str(exc).splitlines()[0] if str(exc) else ""
                self._tables[key] = f"the table cannot be read at that version ({type(exc).__name__}: {first[:200]})"
        return self._tables[key]

    def _matches(self, frame: Dataset, table: str, version: int) -> str | None:
        """None when the table's rows give the frame's digest; else why not."""
        key = (table, version, frame.schema, frame.digest)
        if self._digests.get(key):
            return None
        df = self._table(table, version)
        if isinstance(df, str):
            return df
        try:
            found = candidates(df, frame.schema)
        except ValueError as exc:
            return str(exc)
        for digest in found:
            if digest == frame.digest:
                self._digests[key] = True
                return None
        return (f"its rows give MLflow digest {', '.join(sorted(set(found))) or '(none)'}, the frame logged {frame.digest}: "
                "fit() was given other rows, columns or values")


def _schema(text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        parsed = {}
    return parsed if isinstance(parsed, dict) else {}


def candidates(df: Any, schema: str) -> list[str]:
    """The MLflow digests the frame could have, read from the table ``df``: the columns a frame's schema names, or, for an
    array (no names), the table's columns in order, all of them or all but one as the target. ``ValueError``: none fits."""
    from mlflow.data.digest_utils import compute_numpy_digest, compute_pandas_digest

    parsed = _schema(schema)
    if "mlflow_colspec" in parsed:
        names = [c.get("name") for c in parsed["mlflow_colspec"] if isinstance(c, dict)]
        absent = [n for n in names if n not in df.columns]
        if not names or absent:
            raise ValueError(f"the frame's column(s) {', '.join(map(str, absent or names)) or '(unnamed)'} are not the "
                             "table's")
        return [compute_pandas_digest(df[names])]
    if "mlflow_tensorspec" in parsed:
        columns = list(df.columns)
        found = [compute_numpy_digest(df.to_numpy())]
        for target in columns[:MAX_TARGETS]:
            rest = [c for c in columns if c != target]
            found.append(compute_numpy_digest(df[rest].to_numpy(), df[target].to_numpy()))
        return found
    raise ValueError("MLflow logged no schema for the frame: its columns are not known")
