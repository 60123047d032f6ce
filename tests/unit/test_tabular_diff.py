"""Issue 40, build 4: a changed tabular file says what changed in it (``auditor.snapshots.tabular_diff``)."""

from __future__ import annotations

import io

import numpy as np
import pytest

pd = pytest.importorskip("pandas")

from auditor.snapshots import tabular_diff  # noqa: E402
from auditor.snapshots.tabular_diff import describe_change, is_tabular  # noqa: E402


@pytest.fixture()
def frame():
    rng = np.random.default_rng(7)
    return pd.DataFrame({"id": range(200), "x": rng.normal(size=200).round(4), "y": rng.integers(0, 5, 200),
                         "region": list("abcde") * 40})


def csv(df) -> bytes:
    return df.to_csv(index=False).encode()


def parquet(df) -> bytes:
    out = io.BytesIO()
    df.to_parquet(out)
    return out.getvalue()


def npy(array) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def test_the_same_csv_has_nothing_to_say(frame):
    assert describe_change(csv(frame), csv(frame), "train.csv") == []


def test_columns_reordered(frame):
    assert describe_change(csv(frame), csv(frame[["x", "id", "region", "y"]]), "train.csv") == ["columns reordered"]


def test_twelve_rows_added(frame):
    more = pd.concat([frame, frame.iloc[:12].assign(id=range(200, 212))])
    assert describe_change(csv(frame), csv(more), "train.csv") == ["12 rows added"]


def test_rows_added_or_removed_anywhere_change_no_value(frame):
    middle = pd.concat([frame.iloc[:50], frame.iloc[:12].assign(id=range(300, 312)), frame.iloc[50:]])
    assert describe_change(csv(frame), csv(middle), "train.csv") == ["12 rows added"]
    assert describe_change(csv(frame), csv(frame.drop(index=[3, 90, 150])), "train.csv") == ["3 rows removed"]
    assert describe_change(csv(frame), csv(frame.sample(frac=1, random_state=1)), "train.csv") == ["rows reordered"]


def test_thirty_seven_values_changed_in_column_x(frame):
    edited = frame.copy()
    edited.loc[100:136, "x"] += 1.5
    assert describe_change(csv(frame), csv(edited), "train.csv") == ["37 values changed in column x"]


def test_columns_added_and_removed_rows_and_values_together(frame):
    edited = frame.copy()
    edited.loc[:36, "x"] = -1.0
    edited = pd.concat([edited, frame.iloc[:12]]).drop(columns="region").assign(score=0.5, flag=1)
    assert describe_change(csv(frame), csv(edited), "train.csv") == [
        "columns added: score, flag", "column removed: region", "12 rows added", "37 values changed in column x"]


def test_a_column_of_another_type_is_named_and_compared_value_by_value(frame):
    edited = frame.astype({"y": str})
    edited.loc[5, "y"] = "unknown"
    sentences = describe_change(csv(frame), csv(edited), "train.csv")
    assert sentences == ["column y changed type from int64 to str", "1 value changed in column y"]


def test_a_key_pairs_rows_by_it(frame):
    edited = frame.iloc[5:].copy()  # 5 rows gone from the top, 3 new ones, 2 values edited
    edited.loc[[10, 20], "y"] = 99
    edited = pd.concat([edited, frame.iloc[:3].assign(id=[900, 901, 902])])
    assert describe_change(csv(frame), csv(edited), "train.csv", key="id") == [
        "3 rows added", "5 rows removed", "2 values changed in column y"]


def test_a_tsv_and_a_parquet_file(frame):
    edited = frame.copy()
    edited.loc[:36, "x"] = 0.0
    tsv = frame.to_csv(index=False, sep="\t").encode(), edited.to_csv(index=False, sep="\t").encode()
    assert describe_change(*tsv, "train.tsv") == ["37 values changed in column x"]
    assert describe_change(parquet(frame), parquet(edited[["y", "id", "x", "region"]]), "part-0.parquet") == [
        "columns reordered", "37 values changed in column x"]


def test_numpy_arrays(tmp_path):
    labels = np.arange(100) % 2
    flipped = labels.copy()
    flipped[-1] ^= 1  # what the demo's overwritten version does to train_y.npy
    assert describe_change(npy(labels), npy(flipped), "train_y.npy") == ["1 value changed"]
    features = np.arange(60.0).reshape(20, 3)
    grown = np.vstack([features, features[:4] + 100])
    (tmp_path / "a.npy").write_bytes(npy(features))
    (tmp_path / "b.npy").write_bytes(npy(grown))
    assert describe_change(tmp_path / "a.npy", tmp_path / "b.npy", "X.npy") == ["4 rows added"]  # paths work too
    assert describe_change(npy(features), npy(features[:, :2]), "X.npy") == ["column removed: 2"]
    assert describe_change(npy(features), npy(features.astype(np.float32)), "X.npy") == ["dtype changed from float64 to float32"]
    assert describe_change(npy(features), npy(features.reshape(20, 3, 1)), "X.npy") == [
        "shape changed from (20, 3) to (20, 3, 1)"]


def test_a_binary_file_or_an_unreadable_one_keeps_its_hashes(frame):
    assert not is_tabular("weights.bin") and is_tabular("PART-0.PARQUET")
    assert describe_change(b"\x00\x01", b"\x00\x02", "weights.bin") is None
    assert describe_change(b"PAR1 not really", parquet(frame), "train.parquet") is None
    assert describe_change(npy(np.array([{"a": 1}], dtype=object)), npy(np.arange(3)), "pickled.npy") is None  # never unpickled


def test_a_file_over_the_cap_is_not_loaded(monkeypatch, frame):
    monkeypatch.setattr(tabular_diff, "MAX_BYTES", 1000)
    [sentence] = describe_change(csv(frame), csv(frame), "train.csv")
    assert sentence.startswith("not compared: a version is ") and "a comparison loads" in sentence


def test_many_changed_columns_are_summed_after_eight():
    before = pd.DataFrame(np.zeros((5, 12)), columns=[f"c{i}" for i in range(12)])
    after = before + 1
    sentences = describe_change(csv(before), csv(after), "wide.csv")
    assert sentences[:8] == [f"5 values changed in column c{i}" for i in range(8)]
    assert sentences[8:] == ["20 values changed in 4 more columns"]
