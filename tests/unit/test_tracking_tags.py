"""What the SDK writes to MLflow: flattened params and the tags MLflow users (and our reader) rely on."""

from __future__ import annotations

from auditor.lineage.record import Artifact
from auditor.registry.tracking import flatten_params, run_tags
from tests.fixtures.records import COMMIT, IMAGE_DIGEST, SNAPSHOT_ID, complete_record


def test_a_nested_config_is_flattened_into_dotted_mlflow_safe_params():
    params = flatten_params(
        {"lr": 0.1, "model": {"hidden": 64, "act": "relu", "layers": [1, 2]}, "flag": True, "odd:key": 1, "empty": {}}
    )
    assert params == {
        "lr": "0.1",
        "model.hidden": "64",
        "model.act": "relu",
        "model.layers": "[1, 2]",
        "flag": "true",
        "odd_key": "1",
        "empty": "{}",
    }


def test_a_param_value_longer_than_mlflow_allows_is_cut_to_its_limit():
    assert len(flatten_params({"notes": "x" * 10_000})["notes"]) == 6000


def test_run_tags_carry_mlflows_git_tags_and_ours():
    record = complete_record()
    record.outputs.artifacts = [Artifact(name="model.safetensors", uri="runs:/r/model/model.safetensors", sha256="ab" * 32)]
    tags = run_tags(record, train_seconds=12.3456)
    assert tags["mlflow.source.git.commit"] == COMMIT
    assert tags["mlflow.source.git.repoURL"] == "file:///srv/git/model.git"
    assert tags["repro.record_digest"] == record.digest()
    assert tags["repro.dirty"] == "false"
    assert tags["repro.image_digest"] == IMAGE_DIGEST
    assert tags["repro.data.train"] == f"s3://data/snapshots@{SNAPSHOT_ID}"
    assert tags["repro.weights_sha256"] == "ab" * 32
    assert tags["repro.train_seconds"] == "12.346"


def test_a_record_without_image_or_git_still_gets_explicit_tags():
    record = complete_record(code=None, environment=None)
    tags = run_tags(record, train_seconds=None)
    assert tags["repro.image_digest"] == "none"
    assert "mlflow.source.git.commit" not in tags and "repro.train_seconds" not in tags
