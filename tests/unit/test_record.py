import json
import subprocess
import sys

import pytest

from auditor.errors import MalformedRecord
from auditor.lineage.record import RunRecord, json_schema
from tests.fixtures.records import complete_record


def _reordered(value):
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


_DIGEST_SCRIPT = """
import json, sys
from auditor.lineage.record import RunRecord
print(RunRecord.from_dict(json.loads(sys.stdin.read())).digest())
"""


def test_the_digest_is_identical_across_processes_and_dict_insertion_orders():
    data = complete_record().to_dict()
    texts = [json.dumps(data), json.dumps(_reordered(data))]
    assert list(json.loads(texts[0])) != list(json.loads(texts[1]))  # really built in another order
    digests = {
        subprocess.run([sys.executable, "-c", _DIGEST_SCRIPT], input=text, capture_output=True, text=True, check=True).stdout.strip()
        for text in texts
    }
    assert digests == {complete_record().digest()}


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
