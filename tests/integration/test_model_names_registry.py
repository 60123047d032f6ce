"""Names are checked once, where they enter (issue 42, build point 9), through ``auditor.register_model`` on real MLflow.

Real parts: MLflow on SQLite, a git repository, a snapshot in a local store, a tracked run with real weights. Seen
before: the SDK registered a model name holding U+202E that the CLI then refused to audit (listed "never audited"
for ever), and the composed and decomposed spellings of one name were two models with no warning.
"""

from __future__ import annotations

import logging
import unicodedata
from pathlib import Path

import pytest

from auditor.errors import BadInput
from tests.fixtures.gitrepo import init_repo

NFC = "caf\u00e9-scorer"
NFD = unicodedata.normalize("NFD", NFC)


@pytest.fixture()
def tracked(sqlite_tracking_uri, tmp_path: Path):
    """A function that trains one tiny run with the SDK and returns it (ended, its record complete)."""
    import numpy as np

    import auditor
    from auditor.snapshots import create_snapshot

    project = init_repo(tmp_path / "project", {"train.py": "print('train')\n", "config.yaml": "lr: 0.1\n",
                                                ".gitignore": "mlruns/\n"})
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "x.npy", np.arange(8, dtype="float32"))
    snapshot = create_snapshot(data, tmp_path / "store")

    def train():
        import torch

        with auditor.track(config=project / "config.yaml", data={"train": f"{tmp_path / 'store'}@{snapshot.id}"}, seed=7,
                           repo_dir=project, entrypoint=["python", "train.py"]) as run:
            run.log_metrics({"loss": 0.5})
            run.save_weights(torch.nn.Linear(2, 1).state_dict())
        return run

    return train


def _names(uri: str) -> list[str]:
    from mlflow import MlflowClient

    return sorted(m.name for m in MlflowClient(tracking_uri=uri).search_registered_models())


def test_a_name_holding_a_right_to_left_override_is_refused_and_nothing_is_registered(tracked, sqlite_tracking_uri):
    import auditor

    run = tracked()
    for target in (run, run.run_id):  # the handle and the run id alike
        with pytest.raises(BadInput) as refused:
            auditor.register_model(target, "ev\u202elive")
        message = str(refused.value)
        assert "U+202E (RIGHT-TO-LEFT OVERRIDE)" in message and "\u202e" not in message
        assert "nothing was registered" in message and "register it as 'evlive'" in message
    assert _names(sqlite_tracking_uri) == []


def test_what_registration_accepts_the_cli_audits_by_name(tracked, sqlite_tracking_uri, capsys):
    """The registered name is one the audit's parser accepts: ``lineage show`` on it reads the version."""
    import auditor
    from auditor.cli import main

    version = auditor.register_model(tracked(), NFD)
    assert _names(sqlite_tracking_uri) == [NFC]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["lineage", "show", f"models:/{NFC}/{version}", "--json", "--tracking-uri", sqlite_tracking_uri])
    out = capsys.readouterr()
    assert exited.value.code == 0, out.out + out.err


def test_the_decomposed_spelling_is_registered_as_the_composed_one_and_said(tracked, sqlite_tracking_uri, capsys):
    import auditor

    first = auditor.register_model(tracked(), NFD)
    said = capsys.readouterr().err
    second = auditor.register_model(tracked(), NFC)
    assert (first, second) == ("1", "2")  # one model: the second spelling is its next version
    assert _names(sqlite_tracking_uri) == [NFC]
    assert ascii(NFD) in said and ascii(NFC) in said and "(NFC)" in said
    assert "looks like" not in said + capsys.readouterr().err


def test_a_look_alike_of_a_registered_name_is_warned_about_in_the_log_and_on_stderr(tracked, sqlite_tracking_uri, capsys,
                                                                                       caplog):
    """A model registered before names were normalised (plain MLflow keeps the decomposed spelling), then the
    composed spelling; and another case of an ASCII name."""
    from mlflow import MlflowClient

    import auditor

    MlflowClient(tracking_uri=sqlite_tracking_uri).create_registered_model(NFD)
    MlflowClient(tracking_uri=sqlite_tracking_uri).create_registered_model("Churn")
    with caplog.at_level(logging.WARNING, logger="auditor.sdk.register"):
        auditor.register_model(tracked(), NFC)
        auditor.register_model(tracked(), "churn")
    err = capsys.readouterr().err
    assert _names(sqlite_tracking_uri) == sorted(["Churn", "churn", NFC, NFD])
    assert f"looks like registered model(s) {NFD!r} ({ascii(NFD)})" in err and ascii(NFC) in err
    assert "looks like registered model(s) 'Churn'" in err and "fix: if they are one model" in err
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(ascii(NFD) in w for w in warned) and any("'Churn'" in w for w in warned), warned
