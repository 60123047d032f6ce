"""``repro-audit lineage check`` exit codes: 0 complete, 1 blocking findings (naming the field), 2 unreadable."""

import json
import subprocess
import sys

import pytest

from tests.fixtures.records import complete_record


def _check(path):
    return subprocess.run([sys.executable, "-m", "auditor", "lineage", "check", str(path)], capture_output=True, text=True)


def _write(tmp_path, record):
    path = tmp_path / "run_record.json"
    path.write_text(record.to_json())
    return path


def test_a_complete_record_exits_0(tmp_path):
    assert _check(_write(tmp_path, complete_record())).returncode == 0


def _strip(fn):
    record = complete_record().model_copy(deep=True)
    fn(record)
    return record


@pytest.mark.parametrize(
    "record,field",
    [
        (_strip(lambda r: setattr(r.data["train"], "version", None)), "data.train.version"),
        (_strip(lambda r: setattr(r.data["train"], "version", "latest")), "data.train.version"),
        (_strip(lambda r: setattr(r.environment, "image_digest", None)), "environment.image_digest"),
        (_strip(lambda r: (setattr(r.environment, "image_digest", None), setattr(r.environment, "image_ref", "trainer:v2"))), "environment.image_digest"),
        (_strip(lambda r: setattr(r.code, "commit", None)), "code.commit"),
        (complete_record(seeds=None), "seeds"),
        (_strip(lambda r: setattr(r.config, "digest", None)), "config.digest"),
    ],
    ids=["no-data-version", "latest-data", "no-image-digest", "tag-only-image", "no-commit", "no-seeds", "no-config-digest"],
)
def test_a_record_missing_one_input_exits_1_and_names_the_field(tmp_path, record, field):
    result = _check(_write(tmp_path, record))
    assert result.returncode == 1, result.stderr
    assert field in result.stdout + result.stderr


def test_malformed_json_exits_2_naming_file_and_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "schema_version": "1",\n  "code": {,\n}')
    result = _check(path)
    assert result.returncode == 2
    assert "broken.json" in result.stderr and "line 3" in result.stderr


def test_lineage_schema_prints_a_json_schema():
    result = subprocess.run([sys.executable, "-m", "auditor", "lineage", "schema"], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout)["title"] == "RunRecord"
