"""Data a script downloads records its URL, and a rebuild whose download differs says "the source changed since
training" (issue 29, build 9). The SDK's own functions on real files in a temporary folder; the audit's comparison
and the report's headline on the records they leave."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from auditor.judge.result import AuditResult, ModelInfo, TierResult, Verdict
from auditor.lineage.record import RunRecord
from auditor.report.headline import cause
from auditor.sdk.generated import generated, generated_ref
from auditor.steps.audit import _compare_downloads

URL = "https://reader:s3cret@data.example.org/iris.csv"


def test_a_download_records_its_url_redacted_and_a_changed_download_is_named_as_the_source_changing(tmp_path, caplog):
    download = tmp_path / "iris.csv"
    download.write_text("5.1,3.5,setosa\n")
    trained = generated_ref("train", generated(download, source=URL), {"REPRO_SNAPSHOT_STORE": str(tmp_path / "store")}, False)
    assert trained.kind == "snapshot" and trained.content_hash.startswith("sha256:")
    assert "data.example.org/iris.csv" in trained.source and "s3cret" not in trained.source

    recorded = tmp_path / "materialised"  # what the audit materialised from the recorded snapshot
    recorded.mkdir()
    (recorded / "iris.csv").write_text("5.1,3.5,setosa\n")
    download.write_text("5.1,3.5,setosa\n4.9,3.0,setosa\n")  # the source has grown since training
    with caplog.at_level(logging.WARNING):
        rebuilt = generated_ref("train", generated(download, source=URL), {"REPRO_DATA_TRAIN": str(recorded)}, True)
    assert "the source changed since training" in caplog.text and "iris.csv" in caplog.text and "s3cret" not in caplog.text
    assert rebuilt.content_hash != trained.content_hash

    a = SimpleNamespace(record=RunRecord(data={"train": trained}), findings=[])
    _compare_downloads(a, [SimpleNamespace(record=RunRecord(data={"train": rebuilt}))])
    [finding] = a.findings
    assert finding.code == "data.source_changed" and finding.blocking and finding.path == "data.train"
    assert finding.message.startswith("the source changed since training") and "run.data_path('train')" in finding.hint
    audit = AuditResult(audit_id="a", model=ModelInfo(name="m", version="1"), verdict=Verdict.NOT_REPRODUCIBLE, findings=[finding],
                        tiers={"lineage": TierResult(name="lineage", status="fail", summary="1 blocking finding(s)")})
    assert cause(audit).title == "the source changed since training"

    same = generated_ref("train", generated(recorded / "iris.csv", source=URL), {"REPRO_DATA_TRAIN": str(recorded)}, True)
    a = SimpleNamespace(record=RunRecord(data={"train": trained}), findings=[])
    _compare_downloads(a, [SimpleNamespace(record=RunRecord(data={"train": same}))])
    assert a.findings == []  # the same bytes downloaded again: nothing to say
