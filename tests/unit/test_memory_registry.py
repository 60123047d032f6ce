"""The in-memory registry behaves like the MLflow one wherever the audit can tell the difference."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from auditor.errors import BadInput, MalformedRecord, NotFound
from auditor.registry import RecordMissing, open_registry
from auditor.registry.base import (
    DIFF_ARTIFACT,
    RECORD_ARTIFACT,
    TAG_AUDIT_AT,
    TAG_REPORT,
    TAG_VERDICT,
    WEIGHTS_ARTIFACT,
)
from auditor.registry.memory import MemoryRegistry
from tests.fixtures.records import complete_record

DIFF = "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-a\n+b\n"


def dirty_record():
    import hashlib

    record = complete_record()
    code = record.code.model_copy(
        update={"dirty": True, "diff_file": "diff.patch", "diff_digest": "sha256:" + hashlib.sha256(DIFF.encode()).hexdigest()}
    )
    return record.model_copy(update={"code": code})


@pytest.fixture()
def registry() -> MemoryRegistry:
    reg = MemoryRegistry("memory://unit")
    reg.register_record("churn", complete_record(), weights=b"weights-1", aliases=("champion",))
    reg.register_record("churn", dirty_record(), diff=DIFF, aliases=("challenger",), tags={"repro.tier": "1"})
    run_id = reg.create_run()  # a run logged by plain MLflow: no record
    reg.create_version("churn", run_id=run_id)
    reg.create_version("fraud", source="s3://models/fraud")  # registered from a path, no run at all
    return reg


def test_listing_gives_every_version_with_its_aliases_tags_and_record_digest(registry):
    listed = list(registry.list_versions())
    assert [(v.name, v.version) for v in listed] == [("churn", "1"), ("churn", "2"), ("churn", "3"), ("fraud", "1")]
    first, second, plain, fraud = listed
    assert first.aliases == ("champion",) and second.aliases == ("challenger",)
    assert first.record_digest == complete_record().digest()
    assert second.tier == "1"
    assert plain.record_digest is None and plain.run_id
    assert fraud.run_id is None and fraud.source == "s3://models/fraud"
    assert [v.version for v in registry.list_versions("fraud")] == ["1"]


def test_resolving_a_version_and_an_alias_gives_the_same_version(registry):
    by_number = registry.resolve("models:/churn/1")
    by_alias = registry.resolve("models:/churn@champion")
    assert by_number == by_alias
    assert by_alias.ref == "models:/churn/1"


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("models:/churn/9", "versions of 'churn': 1, 2, 3"),
        ("models:/churn@gone", "aliases: challenger, champion"),
        ("models:/nothing/1", "no registered model named 'nothing'"),
    ],
)
def test_resolving_something_that_is_not_registered_is_not_found_naming_it(registry, ref, expected):
    with pytest.raises(NotFound) as caught:
        registry.resolve(ref)
    assert ref in str(caught.value) and expected in str(caught.value)


def test_a_bad_reference_is_bad_input_before_the_registry_is_asked(registry):
    with pytest.raises(BadInput, match="'models:/churn/latest'"):
        registry.resolve("models:/churn/latest")


def test_loading_a_record_gives_the_record_and_no_diff_for_a_clean_tree(registry):
    record, diff = registry.load_record(registry.resolve("models:/churn/1"))
    assert record == complete_record() and diff is None


def test_loading_a_dirty_record_gives_the_diff_stored_beside_it(registry):
    record, diff = registry.load_record(registry.resolve("models:/churn/2"))
    assert record.code.dirty and diff == DIFF


def test_a_version_whose_run_has_no_record_says_so_precisely(registry):
    info = registry.resolve("models:/churn/3")
    with pytest.raises(RecordMissing) as caught:
        registry.load_record(info)
    assert str(caught.value).startswith(
        f"version 3 of 'churn' was registered without a run record (no artifact {RECORD_ARTIFACT} on run {info.run_id})"
    )
    assert caught.value.finding.blocking and caught.value.finding.code == "record.missing"
    assert isinstance(caught.value, NotFound)


def test_a_version_with_no_run_says_it_names_no_run(registry):
    with pytest.raises(RecordMissing, match="it names no run; its source is s3://models/fraud"):
        registry.load_record(registry.resolve("models:/fraud/1"))


def test_a_record_rewritten_after_registration_is_refused_as_malformed(registry):
    info = registry.resolve("models:/churn/1")
    tampered = complete_record(tool_version="9.9.9")
    registry.put_artifact(info.run_id, RECORD_ARTIFACT, tampered.to_json().encode())
    with pytest.raises(MalformedRecord, match="changed after registration"):
        registry.load_record(info)


def test_a_record_that_is_not_json_is_malformed_naming_the_version_run_and_artifact(registry):
    info = registry.resolve("models:/churn/1")
    registry.put_artifact(info.run_id, RECORD_ARTIFACT, b"{not json")
    with pytest.raises(MalformedRecord) as caught:
        registry.load_record(info)
    assert f"models:/churn/1 (run {info.run_id}, artifact {RECORD_ARTIFACT})" in str(caught.value)
    assert "line 1" in str(caught.value)


def test_a_diff_that_is_missing_or_altered_is_malformed(registry):
    info = registry.resolve("models:/churn/2")
    registry.put_artifact(info.run_id, DIFF_ARTIFACT, (DIFF + "+evil\n").encode())
    with pytest.raises(MalformedRecord, match="does not match code.diff_digest"):
        registry.load_record(info)
    del registry._runs[info.run_id].artifacts[DIFF_ARTIFACT]
    with pytest.raises(MalformedRecord, match="has no artifact repro/diff.patch"):
        registry.load_record(info)


def test_writing_an_outcome_sets_three_tags_on_that_version_only_and_moves_no_alias(registry):
    before = {v.ref: v for v in registry.list_versions()}
    info = registry.resolve("models:/churn@challenger")
    at = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    returned = registry.write_outcome(info, "REPRODUCED_BITWISE", at, "s3://reports/churn/2/audit.html")
    after = {v.ref: v for v in registry.list_versions()}
    changed = after["models:/churn/2"]
    assert {k: changed.tags[k] for k in (TAG_VERDICT, TAG_AUDIT_AT, TAG_REPORT)} == {
        TAG_VERDICT: "REPRODUCED_BITWISE",
        TAG_AUDIT_AT: "2026-11-29T02:00:00Z",
        TAG_REPORT: "s3://reports/churn/2/audit.html",
    }
    assert returned.tags == changed.tags
    assert changed.last_verdict == "REPRODUCED_BITWISE" and changed.last_audit_at == "2026-11-29T02:00:00Z"
    for ref, version in before.items():
        assert after[ref].aliases == version.aliases
        if ref != "models:/churn/2":
            assert after[ref].tags == version.tags


@pytest.mark.parametrize(
    ("verdict", "at", "report", "match"),
    [
        ("PASSED", "2026-11-29T02:00:00Z", "r.html", "not one of REPRODUCED_BITWISE"),
        ("ERROR", datetime(2026, 11, 29), "r.html", "no time zone"),
        ("ERROR", "yesterday", "r.html", "not ISO 8601"),
        ("ERROR", "2026-11-29T02:00:00Z", "", "report URI"),
    ],
)
def test_an_outcome_with_a_bad_verdict_time_or_report_is_refused_and_nothing_is_written(registry, verdict, at, report, match):
    info = registry.resolve("models:/churn/1")
    with pytest.raises(BadInput, match=match):
        registry.write_outcome(info, verdict, at, report)
    assert TAG_VERDICT not in registry.resolve("models:/churn/1").tags


def test_bands_round_trip_through_a_version_tag(registry):
    info = registry.resolve("models:/churn/1")
    assert registry.get_bands(info) is None
    registry.set_bands(info, '{"auc": {"lower": 0.9, "upper": 0.92}}')
    assert registry.get_bands(registry.resolve("models:/churn/1")) == '{"auc": {"lower": 0.9, "upper": 0.92}}'
    assert registry.get_bands(registry.resolve("models:/churn/2")) is None
    with pytest.raises(BadInput, match="at most 100000"):
        registry.set_bands(info, "x" * 100_001)


def test_downloading_the_registered_weights_writes_exactly_their_bytes(registry, tmp_path: Path):
    info = registry.resolve("models:/churn/1")
    dest = registry.download_artifact(info, WEIGHTS_ARTIFACT, tmp_path / "w" / "model.safetensors")
    assert dest.read_bytes() == b"weights-1"
    with pytest.raises(BadInput, match="already exists"):
        registry.download_artifact(info, WEIGHTS_ARTIFACT, dest)
    with pytest.raises(NotFound, match="has no artifact model/model.safetensors"):
        registry.download_artifact(registry.resolve("models:/churn/2"), WEIGHTS_ARTIFACT, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_open_registry_returns_one_shared_memory_registry_per_name():
    try:
        first = open_registry("memory://shared-test")
        first.create_version("m")
        assert open_registry("memory://shared-test") is first
        assert [v.ref for v in open_registry("memory://shared-test").list_versions()] == ["models:/m/1"]
        assert open_registry("memory://other-test") is not first
    finally:
        MemoryRegistry.forget("memory://shared-test")
        MemoryRegistry.forget("memory://other-test")


def test_open_registry_without_a_uri_follows_mlflow_tracking_uri(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "memory://from-env")
    try:
        assert open_registry().uri == "memory://from-env"
    finally:
        MemoryRegistry.forget("memory://from-env")


def test_set_tags_touches_that_version_only_and_refuses_what_mlflow_would(registry):
    before = {v.ref: v for v in registry.list_versions()}
    updated = registry.set_tags(registry.resolve("models:/churn/1"), {"repro.audit.date": "2026-11-29"})
    assert updated.tags["repro.audit.date"] == "2026-11-29"
    after = {v.ref: v for v in registry.list_versions()}
    assert after["models:/churn/1"].tags == updated.tags
    assert all(after[ref].tags == before[ref].tags for ref in before if ref != "models:/churn/1")
    assert {ref: v.aliases for ref, v in after.items()} == {ref: v.aliases for ref, v in before.items()}
    with pytest.raises(BadInput, match="tag key ''"):
        registry.set_tags(updated, {"": "x"})
    with pytest.raises(BadInput, match="must be text"):
        registry.set_tags(updated, {"k": 3})  # type: ignore[dict-item]


def test_a_version_whose_run_was_deleted_says_the_run_no_longer_exists(registry):
    info = registry.resolve("models:/churn/1")
    del registry._runs[info.run_id]
    with pytest.raises(RecordMissing, match=f"its run {info.run_id} no longer exists"):
        registry.load_record(info)
