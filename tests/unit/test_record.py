
import pytest

from auditor.errors import MalformedRecord
from auditor.lineage.record import RunRecord, json_schema
from tests.fixtures.records import complete_record


def test_the_digest_changes_when_any_input_changes():
    base = complete_record()
    changed = base.model_copy(deep=True)
    changed.seeds.generators["torch"] = 8
    assert changed.digest() != base.digest()


def test_a_record_round_trips_through_json_unchanged():
    record = complete_record()
    assert RunRecord.from_json(record.to_json()).digest() == record.digest()


def test_nan_metrics_are_kept_as_text_never_as_a_number():
    record = complete_record()
    record.outputs.metrics = {"auc": float("nan"), "loss": float("inf")}
    assert record.to_dict()["outputs"]["metrics"] == {"auc": "nan", "loss": "inf"}
    record.digest()  # canonical JSON has no NaN: it must still serialise


def test_malformed_json_names_the_file_and_line():
    with pytest.raises(MalformedRecord, match=r"rec.json: not valid JSON at line 2"):
        RunRecord.from_json('{"schema_version": "1",\n oops}', source="rec.json")


def test_an_unknown_field_is_refused_with_its_path():
    data = complete_record().to_dict()
    data["code"]["comit"] = "abc"
    with pytest.raises(MalformedRecord, match=r"code.comit"):
        RunRecord.from_dict(data)


def test_a_wrong_schema_version_is_refused():
    data = complete_record().to_dict() | {"schema_version": "9"}
    with pytest.raises(MalformedRecord, match="schema_version"):
        RunRecord.from_dict(data)


def test_the_json_schema_describes_every_section():
    schema = json_schema()
    assert {"code", "data", "config", "environment", "seeds", "infrastructure", "outputs"} <= set(schema["properties"])
