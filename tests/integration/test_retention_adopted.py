"""``retention check`` covers an adopted version's inputs and never tells anyone to re-register an audited version
(issue 42, build point 9).

Real parts: MLflow on SQLite, Delta tables written and vacuumed with deltalake. A version trained with plain MLflow
logged two Delta inputs at a version (``mlflow.log_input`` of a ``DeltaDatasetSource``) and a frame built in code;
one table was then overwritten and vacuumed with zero retention, so the files of the logged version are really gone.
The version is adopted (its assessment published, so it is audited). Seen before: the check said nothing of its
Delta inputs. Beside it, a version recorded by the SDK and audited whose run record was deleted since: its fix said
"re-register the version".
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

from auditor.cli import main
from auditor.steps.retention import AT_RISK, LOST
from auditor.tags import TAG_AUDIT_AT
from tests.fixtures.mlflow import seed_version
from tests.fixtures.records import complete_record

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")
pytest.importorskip("pandas")


def _log_inputs(client, run_id: str, frames: list[tuple[str, object, object]]) -> None:
    import mlflow.data
    from mlflow.entities import DatasetInput, InputTag

    from auditor.tags import MLFLOW_DATASET_CONTEXT

    inputs = [DatasetInput(mlflow.data.from_pandas(df, source=source, name=name)._to_mlflow_entity(),
                           tags=[InputTag(MLFLOW_DATASET_CONTEXT, "train")]) for name, df, source in frames]
    client.log_inputs(run_id, datasets=inputs)


@pytest.fixture(scope="module")
def world(tmp_path_factory, _mlflow_sqlite_template):
    from mlflow import MlflowClient
    from mlflow.data.delta_dataset_source import DeltaDatasetSource

    from auditor.settings import Settings, get_settings
    from auditor.steps import Session

    root = tmp_path_factory.mktemp("retention-adopted")
    db = root / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, db)
    uri = f"sqlite:///{db}"
    vacuumed, kept = str(root / "lake" / "churn"), str(root / "lake" / "labels")
    deltalake.write_deltalake(vacuumed, pa.table({"a": [1, 2], "y": [0, 1]}))
    deltalake.write_deltalake(vacuumed, pa.table({"a": [3], "y": [1]}), mode="append")  # version 1: logged
    deltalake.write_deltalake(kept, pa.table({"id": [1, 2]}))
    deltalake.write_deltalake(kept, pa.table({"id": [3]}), mode="append")  # version 1: logged (MLflow drops a version 0)

    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("plain-training", artifact_location=str(root / "mlruns"))
    run_id = client.create_run(experiment).info.run_id
    _log_inputs(client, run_id, [
        ("churn", deltalake.DeltaTable(vacuumed, version=1).to_pandas(), DeltaDatasetSource(path=vacuumed, delta_table_version=1)),
        ("labels", deltalake.DeltaTable(kept, version=1).to_pandas(), DeltaDatasetSource(path=kept, delta_table_version=1)),
        ("features", deltalake.DeltaTable(kept, version=1).to_pandas(), None),  # a frame built in code: no source
    ])
    client.log_param(run_id, "random_state", "42")
    client.set_terminated(run_id)
    client.create_registered_model("plain")
    client.create_model_version("plain", source=f"runs:/{run_id}/model", run_id=run_id)

    deltalake.write_deltalake(vacuumed, pa.table({"a": [9], "y": [0]}), mode="overwrite")  # version 2 drops version 1's files
    deltalake.DeltaTable(vacuumed).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    deltalake.write_deltalake(kept, pa.table({"id": [4]}), mode="overwrite")  # version 2: version 1's files stay, unvacuumed

    # an SDK-recorded version, audited, whose run record was deleted from the artifact store since
    recorded = seed_version(uri, "recorded", complete_record(), weights=b"w", tags={TAG_AUDIT_AT: "2026-12-01T00:00:00Z"})
    recorded_run = client.get_model_version("recorded", recorded).run_id
    artifacts = client.get_run(recorded_run).info.artifact_uri.removeprefix("file://")
    (next(p for p in __import__("pathlib").Path(artifacts).rglob("run_record.json"))).unlink()

    env = {"MLFLOW_TRACKING_URI": uri, "REPRO_HOME": str(root / "home"), "REPRO_REPORTS": str(root / "reports"),
           "REPRO_RESPONSIBLE": "Dana Risk", "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("REPRO_REQUIRE_OBJECT_LOCK", raising=False)
        get_settings.cache_clear()
        Session(Settings.from_env(env)).adopt("models:/plain/1", date="2026-12-02")  # published: audited
        checked = {}
        for flag in ("--json", None):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
                main(["retention", "check", *([flag] if flag else []), "--tracking-uri", uri, "--reports", str(root / "reports")])
            checked[flag or "plain"] = (exited.value.code, out.getvalue())
        get_settings.cache_clear()
    yield {"root": root, "vacuumed": vacuumed, "kept": kept, "checked": checked}


def _row(world, model: str) -> dict:
    report = json.loads(world["checked"]["--json"][1])
    return next(r for r in report["versions"] if r["model"] == model)


def test_the_adopted_versions_vacuumed_delta_input_is_lost_naming_table_and_version(world):
    code, _ = world["checked"]["--json"]
    assert code == 1
    row = _row(world, "plain")
    assert row["audited"] and row["status"] == LOST
    items = {i["input"]: i for i in row["items"]}
    churn = items["data.churn (delta)"]
    assert churn["status"] == LOST and churn["where"] == f"{world['vacuumed']} @ version 1", churn
    assert "vacuumed" in churn["detail"] and "version 1" in churn["detail"] and "backup" in churn["fix"]


def test_its_delta_input_still_on_disk_is_at_risk_with_the_date_vacuum_may_take_it(world):
    items = {i["input"]: i for i in _row(world, "plain")["items"]}
    labels = items["data.labels (delta)"]
    assert labels["status"] == AT_RISK and labels["until"], labels
    assert "deletedFileRetentionDuration = 7 days" in labels["detail"]
    assert not any("features" in name for name in items)  # a frame built in code names nothing to keep
    note = _row(world, "plain")["note"]
    assert "read as adoption reads them" in note and "1 frame(s) built in code" in note


def test_an_audited_versions_lost_record_is_never_fixed_by_re_registering(world):
    row = _row(world, "recorded")
    record = next(i for i in row["items"] if i["input"] == "run record")
    assert record["status"] == LOST and "backup" in record["fix"]
    for flag, (_, out) in world["checked"].items():
        assert "re-register" not in out and "register again" not in out, flag
