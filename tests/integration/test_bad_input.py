"""Bad input stopped at the door, with the fix named (issue 29, build point 10; acceptance 7, first half).

- a model name holding a bidi or other format/control character (U+202E…) is refused wherever a ref is
  parsed (exit 2 on the CLI, before any registry is opened), and a registry-provided name holding one is
  shown with the character written out (``<U+202E>``), never raw;
- a data ref naming a snapshot id of the wrong shape is refused at training, naming ``blake3:<64 hex digits>``;
- a config whose mapping key is a URL with a password does not crash: its MLflow params are valid MLflow
  keys (checked by MLflow itself, logged to a real SQLite store) and the password is in none of them.
"""

from __future__ import annotations

import pytest

from auditor.errors import BadInput

HIDDEN = ["\u202e", "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f",
          "\u061c", "\u200b", "\ufeff", "\x1b", "\u2028"]


@pytest.fixture()
def cli(capsys, monkeypatch, tmp_path):
    import logging

    from auditor.cli import main

    monkeypatch.chdir(tmp_path)
    loggers = [logging.getLogger(n) for n in ("auditor", "urllib3.connectionpool")]
    saved = [(lg.handlers[:], lg.level) for lg in loggers]

    def run(*argv: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as exited:
            main(list(argv))
        out = capsys.readouterr()
        return exited.value.code, out.out + out.err

    yield run
    for lg, (handlers, level) in zip(loggers, saved, strict=True):
        lg.handlers, lg.level = handlers, level


@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_a_model_name_with_a_hidden_character_is_refused_wherever_a_ref_is_parsed(char):
    from auditor.uris import parse_ref

    for ref in (f"models:/ev{char}il/1", f"models:/ev{char}il@champion"):
        with pytest.raises(BadInput) as refused:
            parse_ref(ref)
        message = str(refused.value)
        assert f"<U+{ord(char):04X}>" in message and char not in message, message


@pytest.mark.parametrize("argv", [["audit", "models:/ev\u202elive/1"], ["lineage", "show", "models:/ev\u202elive@champion"],
                                  ["calibrate", "models:/ev\u202elive/1", "--json"]])
def test_the_cli_refuses_it_with_exit_2_before_opening_a_registry(cli, argv, tmp_path):
    code, out = cli(*argv, "--tracking-uri", f"sqlite:///{tmp_path}/none.db")
    assert code == 2, out
    assert "<U+202E>" in out and "RIGHT-TO-LEFT OVERRIDE" in out and "\u202e" not in out and "Traceback" not in out
    assert not (tmp_path / "none.db").exists()


def test_a_registry_provided_name_is_shown_with_the_character_written_out(cli, tmp_path):
    from auditor.registry.memory import MemoryRegistry
    from tests.fixtures.records import complete_record

    registry = MemoryRegistry.named(f"memory://bidi-{tmp_path.name}")
    try:
        registry.register_record("ev\u202elive", complete_record(), weights=b"w")
        for argv in (["report", "coverage"], ["report", "coverage", "--json"]):
            code, out = cli(*argv, "--tracking-uri", registry.uri, "--reports", str(tmp_path / "reports"))
            assert code == 0, out
            assert "\u202e" not in out and ("ev<U+202E>live" in out or "ev\\u202elive" in out), out
    finally:
        MemoryRegistry.forget(registry.uri)


def test_the_output_stream_writes_out_every_hidden_character():
    import io

    from auditor.cli.output import RedactingStream

    buffer = io.StringIO()
    stream = RedactingStream(buffer)
    stream.write("".join(f"a{c}b" for c in HIDDEN) + "\n")
    stream.flush()
    assert not any(c in buffer.getvalue() for c in HIDDEN), repr(buffer.getvalue())


BAD_IDS = {"sha256:": "sha256:" + "a" * 64, "upper-case BLAKE3:": "BLAKE3:" + "a" * 64,
           "63 hex digits": "blake3:" + "a" * 63, "md5:": "md5:" + "a" * 32, "upper-case hex": "blake3:" + "A" * 64,
           "an empty sha256:": "sha256:"}


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_a_snapshot_id_of_the_wrong_shape_is_refused_at_training_naming_the_shape(bad, tmp_path):
    import auditor

    with pytest.raises(BadInput) as refused:
        with auditor.track(config={"lr": 0.1}, seed=1, data={"train": f"{tmp_path}/store@{bad}"}, repo_dir=tmp_path,
                           tracking_uri=f"sqlite:///{tmp_path}/mlflow.db"):
            pytest.fail("training started on a malformed snapshot id")
    message = str(refused.value)
    assert "blake3:<64 hex digits>" in message and "'train'" in message, message
    assert not (tmp_path / "mlflow.db").exists(), "a run was started before the data ref was checked"


def test_a_well_formed_snapshot_id_passes_the_check():
    from auditor.lineage.gather import parse_data_ref
    from auditor.sdk.capture import _check_snapshot_id

    for spec in ("/store@blake3:" + "0" * 64, "s3://bucket/key@3HL4kqtJlcpXroDTDmJ", "customers@v3", "delta+s3://b/t@12"):
        _check_snapshot_id("train", spec, parse_data_ref(f"train={spec}")[1])


def test_a_config_key_that_is_a_url_with_a_password_is_made_mlflow_safe_and_redacted(sqlite_tracking_uri):
    from mlflow import MlflowClient
    from mlflow.entities import Param

    from auditor.lineage.gather import resolve_config
    from auditor.lineage.record import RunRecord
    from auditor.registry.layout import training_params
    from tests.fixtures.records import complete_record

    config = resolve_config({"mirrors": {"https://user:hunter2pw@host/simple": 1}, "lr": 0.1}, [], {})
    assert "hunter2pw" not in repr(config.resolved) and "hunter2pw" not in repr(config.sources)
    record = RunRecord.model_validate({**complete_record().model_dump(), "config": config.model_dump()})
    params = training_params(record)
    assert not any("hunter2pw" in k or "hunter2pw" in v for k, v in params.items()), params
    client = MlflowClient(sqlite_tracking_uri)
    run = client.create_run(client.create_experiment("bad-input"))
    client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()])  # MLflow's own validation
    logged = client.get_run(run.info.run_id).data.params
    assert any(k.startswith("mirrors.https_") for k in logged) and logged["lr"] == "0.1"
