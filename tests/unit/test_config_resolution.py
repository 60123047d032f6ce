import pytest

from auditor.errors import BadInput
from auditor.lineage.gather import parse_data_ref, resolve_config


def test_file_then_env_then_cli_each_key_remembering_its_source(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("lr: 0.1\nmodel:\n  hidden: 32\n  depth: 2\nepochs: 5\n")
    info = resolve_config(path, ["epochs=7", "model.depth=3"], env={"REPRO_CFG__MODEL__HIDDEN": "64", "REPRO_CFG__LR": "0.5"})
    assert info.resolved == {"lr": 0.5, "model": {"hidden": 64, "depth": 3}, "epochs": 7}
    assert info.sources == {"lr": "env", "model.hidden": "env", "model.depth": "cli", "epochs": "cli"}
    assert info.file == "c.yaml"


def test_a_malformed_override_is_bad_input():
    with pytest.raises(BadInput, match="key=value"):
        resolve_config({}, ["epochs"])


def test_a_config_file_that_is_not_a_mapping_names_the_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(BadInput, match="c.yaml"):
        resolve_config(path)


def test_data_refs_parse_into_kinds():
    name, ref = parse_data_ref("train=s3://bucket/snaps@blake3:" + "a" * 64)
    assert (name, ref.kind, ref.uri) == ("train", "snapshot", "s3://bucket/snaps")
    assert parse_data_ref("raw=customers@latest")[1].version == "latest"
    with pytest.raises(BadInput):
        parse_data_ref("nonsense")
