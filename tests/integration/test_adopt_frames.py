"""Issue 42, build 5: autolog's own training frame, verified against a Delta input of the same run.

Real Delta tables (deltalake) and MLflow's own dataset entities (``mlflow.data.from_pandas`` / ``from_numpy`` with a
``CodeDatasetSource``, as ``mlflow.sklearn.autolog()`` logs the frame ``fit`` was given): the same rows give MLflow's
digest and the frame counts as pinned; a transformed frame does not, and its fix names ``log_datasets=False`` and
shows the ``log_input`` call with the run's own table and version.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from auditor.adopt.frames import FrameCheck
from auditor.adopt.rules import MUTABLE, PINNED, Dataset, Metadata, classify

pytest.importorskip("deltalake")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    import pandas as pd
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path_factory.mktemp("frames") / "churn")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(120, 4)), columns=list("abcd"))
    frame["y"] = (frame.a > 0).astype("int64")
    write_deltalake(path, frame.iloc[:60])
    write_deltalake(path, frame.iloc[60:], mode="append")  # version 1
    return path, DeltaTable(path, version=1).to_pandas()


def _logged(dataset) -> Dataset:
    """What the reader makes of a dataset MLflow logged (``auditor.adopt.mlflow_reader._datasets``)."""
    e = dataset._to_mlflow_entity()
    return Dataset(name=e.name, digest=e.digest, source_type=e.source_type, source=json.loads(e.source), context="train",
                   schema=e.schema or "")


def _meta(path: str, *frames: Dataset) -> Metadata:
    delta = Dataset(name="churn", source_type="delta_table", source={"path": path, "delta_table_version": 1}, context="train")
    return Metadata(name="m", version="1", run_id="r", run_found=True, datasets=(delta, *frames))


def _code(df=None, **arrays) -> Dataset:
    import mlflow
    from mlflow.data.code_dataset_source import CodeDatasetSource

    source = CodeDatasetSource({"mlflow.source.name": "train.py"})
    if df is not None:
        return _logged(mlflow.data.from_pandas(df, source=source))
    return _logged(mlflow.data.from_numpy(source=source, **arrays))


def test_autologs_frame_read_from_the_delta_table_at_its_version_counts_as_pinned(table):
    path, df = table
    meta = FrameCheck().verify(_meta(path, _code(df[list("abcd")])))
    frame = meta.datasets[1]
    assert frame.verified.startswith(f"Delta table {path} @ version 1 (input churn)"), frame.unverified
    rows = {r.path: r for r in classify(meta)}
    assert rows["data.dataset"].klass == PINNED and "verified: the rows of Delta table" in rows["data.dataset"].identifier
    as_array = FrameCheck().verify(_meta(path, _code(features=df[list("abcd")].to_numpy(), targets=df["y"].to_numpy())))
    assert as_array.datasets[1].verified, as_array.datasets[1].unverified  # an array: the table's columns, y the target


def test_a_frame_that_is_not_the_tables_rows_is_refused_with_the_autolog_fix(table):
    path, df = table
    x = df[list("abcd")]
    standardised = _code((x - x.mean()) / x.std())
    meta = FrameCheck().verify(_meta(path, standardised))
    assert not meta.datasets[1].verified and "fit() was given other rows" in meta.datasets[1].unverified
    row = next(r for r in classify(meta) if r.path == "data.dataset")
    assert row.klass == MUTABLE and "not verified against a pinned input" in row.why
    assert "log_datasets=False" in row.fix
    assert f"mlflow.log_input(mlflow.data.from_pandas(df, source=DeltaDatasetSource(path={path!r}, delta_table_version=1), " \
           "name='churn'), context='train')" in row.fix
    other_rows = FrameCheck().verify(_meta(path, _code(df[list("abcd")].iloc[:100])))
    assert not other_rows.datasets[1].verified
    absent = FrameCheck().verify(_meta(path + "-typo", _code(x)))
    assert "cannot be read at that version" in absent.datasets[1].unverified
    alone = FrameCheck().verify(replace(_meta(path, _code(x)), datasets=(_code(x),)))
    assert "no Delta table at a version" in alone.datasets[0].unverified
    alone_row = next(r for r in classify(alone) if r.path == "data.dataset")
    assert "log_datasets=False" in alone_row.fix and "DeltaDatasetSource(path=TABLE, delta_table_version=N)" in alone_row.fix
