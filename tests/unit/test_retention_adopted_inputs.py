"""How ``retention check`` reads each dataset an adopted version's run logged (issue 42, build point 9): by adoption's
own reading of it (``auditor.adopt.rules``), each kind to the reading retention already has for it."""

from __future__ import annotations

import datetime as dt

from auditor.adopt.rules import RULES, Dataset, Metadata
from auditor.steps import retention
from auditor.steps.retention import AT_RISK

HORIZON = dt.datetime(2036, 1, 1, tzinfo=dt.UTC)
REF = "models:/plain/1"


def _item(d: Dataset):
    (row,) = RULES["data"](Metadata(name="plain", version="1", run_found=True, datasets=(d,)))
    return retention._dataset_item(REF, d, row, HORIZON)


def test_a_frame_built_in_code_names_nothing_to_keep():
    assert _item(Dataset(name="features", digest="9c468b67", source_type="code", source={"tags": {}})) is None


def test_a_path_read_as_it_is_today_is_at_risk_and_the_fix_never_says_register_again():
    item = _item(Dataset(name="train", digest="abc", source_type="local", source={"uri": "/data/train.csv"}))
    assert item["status"] == AT_RISK and item["input"] == "data.train" and item["where"] == "/data/train.csv"
    assert f"repro-audit adopt {REF} --data train=STORE@ID" in item["fix"]
    assert "register" not in item["fix"]


def test_an_s3_object_at_a_version_id_is_checked_as_that_object_version(monkeypatch):
    seen = {}

    def objects(kind, manifest, where, horizon):
        seen.update(kind=kind, sources=[e.source for e in manifest.files], where=where)
        return {"input": kind}

    monkeypatch.setattr(retention, "_s3_objects", objects)
    uri = "s3://bucket/train/part-0.csv?versionId=3HL4kqtJ"
    assert _item(Dataset(name="train", source_type="s3", source={"uri": uri})) == {"input": "data.train (s3)"}
    assert seen["sources"] == [{"uri": "s3://bucket/train/part-0.csv", "version_id": "3HL4kqtJ"}] and seen["where"] == uri


def test_a_delta_table_at_a_version_is_read_at_that_version(monkeypatch):
    seen = {}
    monkeypatch.setattr(retention, "delta_table_item", lambda what, table, version, horizon: seen.update(
        what=what, table=table, version=version) or {"input": what})
    _item(Dataset(name="churn", source_type="delta_table", source={"path": "/lake/churn", "delta_table_version": 3}))
    assert seen == {"what": "data.churn (delta)", "table": "/lake/churn", "version": 3}
