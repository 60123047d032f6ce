"""The MLflow registry reader against real MLflow: SQLite, and a tracking server whose artifacts live on S3."""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from auditor.errors import InfrastructureError, MalformedRecord, NotFound
from auditor.registry import RecordMissing
from auditor.registry.base import TAG_AUDIT_AT, TAG_RECORD_DIGEST, TAG_REPORT, TAG_VERDICT, WEIGHTS_ARTIFACT
from auditor.registry.mlflow import RUN_CHUNK, MlflowRegistry
from tests.fixtures.counting import CountingClient
from tests.fixtures.mlflow import bulk_versions, seed_version
from tests.fixtures.records import complete_record

DIFF = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n"


def dirty_record():
    record = complete_record()
    code = record.code.model_copy(
        update={"dirty": True, "diff_file": "diff.patch", "diff_digest": "sha256:" + hashlib.sha256(DIFF.encode()).hexdigest()}
    )
    return record.model_copy(update={"code": code})


@pytest.fixture()
def churn() -> str:
    """A model name no other test uses: the server is shared by the whole session."""
    return f"churn-{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["sqlite", "server"])
def tracking_uri(request) -> str:
    """Each behaviour once on SQLite and once through ``mlflow server`` with S3 artifacts."""
    return request.getfixturevalue("sqlite_tracking_uri" if request.param == "sqlite" else "server_tracking_uri")


def plain_mlflow_version(name: str) -> str:
    """A version registered the way plain MLflow users do it: no SDK, so no run record."""
    import mlflow
    import torch

    mlflow.set_experiment("plain")
    with mlflow.start_run():
        info = mlflow.pytorch.log_model(
            torch.nn.Linear(3, 1),
            name="model",
            registered_model_name=name,
            serialization_format="pickle",  # the pt2 default demands an input example and signature
            pip_requirements=["torch"],  # skips MLflow's slow requirement inference
        )
    return str(info.registered_model_version)


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    import os

    import auditor.cli.lineage_show  # noqa: F401 - registers `lineage show`
    from auditor.cli import main

    os.environ["COLUMNS"] = "250"  # rich folds long cells at the default 80; tests read whole lines

    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def test_versions_are_listed_with_aliases_tags_and_run_tags_and_resolve_by_number_or_alias(tracking_uri, churn):
    fraud = churn.replace("churn", "fraud")
    record = complete_record()
    seed_version(tracking_uri, churn, record, aliases=("champion",), tags={"repro.tier": "1"})
    seed_version(tracking_uri, churn, dirty_record(), diff=DIFF, aliases=("challenger",))
    seed_version(tracking_uri, fraud, record)
    registry = MlflowRegistry(tracking_uri)

    listed = {v.ref: v for v in registry.list_versions() if v.name in (churn, fraud)}
    assert sorted(listed) == [f"models:/{churn}/1", f"models:/{churn}/2", f"models:/{fraud}/1"]
    assert listed[f"models:/{churn}/1"].aliases == ("champion",)
    assert listed[f"models:/{churn}/2"].aliases == ("challenger",)
    assert listed[f"models:/{fraud}/1"].aliases == ()
    assert listed[f"models:/{churn}/1"].tier == "1"
    assert listed[f"models:/{churn}/1"].run_tags[TAG_RECORD_DIGEST] == record.digest()
    assert [v.ref for v in registry.list_versions(fraud)] == [f"models:/{fraud}/1"]

    by_alias = registry.resolve(f"models:/{churn}@challenger")
    assert by_alias.ref == f"models:/{churn}/2" and by_alias.aliases == ("challenger",)
    assert registry.resolve(f"models:/{churn}/1").aliases == ("champion",)


def test_a_record_and_its_diff_read_back_exactly_as_registered(tracking_uri, churn):
    seed_version(tracking_uri, churn, dirty_record(), diff=DIFF)
    registry = MlflowRegistry(tracking_uri)
    record, diff = registry.load_record(registry.resolve(f"models:/{churn}/1"))
    assert record == dirty_record() and diff == DIFF


def test_on_the_server_the_record_lies_in_the_s3_bucket(server_tracking_uri, mlflow_server, churn):
    import boto3

    seed_version(server_tracking_uri, churn, complete_record())
    run_id = MlflowRegistry(server_tracking_uri).resolve(f"models:/{churn}/1").run_id
    s3 = boto3.client("s3", endpoint_url=mlflow_server.endpoint)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=mlflow_server.bucket, Prefix="mlartifacts/").get("Contents", [])]
    assert any(k.endswith(f"{run_id}/artifacts/repro/run_record.json") for k in keys), keys


def test_a_version_registered_by_plain_mlflow_is_listed_and_lineage_show_reports_the_missing_record(tracking_uri, churn, capsys):
    plain = churn.replace("churn", "plain-model")
    version = plain_mlflow_version(plain)
    registry = MlflowRegistry(tracking_uri)
    listed = [v for v in registry.list_versions() if v.name == plain]
    assert [v.version for v in listed] == [version]
    info = listed[0]
    with pytest.raises(RecordMissing) as caught:
        registry.load_record(info)
    assert str(caught.value).startswith(
        f"version {version} of {plain!r} was registered without a run record "
        f"(no artifact repro/run_record.json on run {info.run_id})"
    )

    code, out, err = run_cli(["lineage", "show", f"models:/{plain}/{version}"], capsys)
    assert code == 1
    assert "record.missing" not in out  # the human table shows the field path, not the code
    assert "without a run record" in out and "record" in out
    assert "1 blocking finding" in err

    code, out, _ = run_cli(["lineage", "show", f"models:/{plain}/{version}", "--json"], capsys)
    import json

    shown = json.loads(out)
    assert code == 1 and shown["record"] is None
    assert [f["code"] for f in shown["findings"]] == ["record.missing"]


def test_writing_an_outcome_tags_that_version_only_and_leaves_every_alias_in_place(tracking_uri, churn):
    for alias in ("champion", "challenger", "shadow"):
        seed_version(tracking_uri, churn, complete_record(), aliases=(alias,))
    registry = MlflowRegistry(tracking_uri)
    before = {v.ref: v for v in registry.list_versions()}
    target = registry.resolve(f"models:/{churn}@challenger")
    registry.write_outcome(target, "OUT_OF_TOLERANCE", datetime(2026, 11, 29, 2, tzinfo=UTC), "reports/churn/2.html")
    after = {v.ref: v for v in registry.list_versions()}

    assert {k: after[target.ref].tags.get(k) for k in (TAG_VERDICT, TAG_AUDIT_AT, TAG_REPORT)} == {
        TAG_VERDICT: "OUT_OF_TOLERANCE",
        TAG_AUDIT_AT: "2026-11-29T02:00:00Z",
        TAG_REPORT: "reports/churn/2.html",
    }
    assert {ref: v.aliases for ref, v in after.items()} == {ref: v.aliases for ref, v in before.items()}
    for ref in before:
        if ref != target.ref:
            assert after[ref].tags == before[ref].tags
    assert registry.resolve(f"models:/{churn}@challenger").ref == target.ref


def test_the_registered_weights_download_byte_for_byte(tracking_uri, churn, tmp_path: Path):
    seed_version(tracking_uri, churn, complete_record(), weights=b"\x00weights\xff" * 100)
    registry = MlflowRegistry(tracking_uri)
    info = registry.resolve(f"models:/{churn}/1")
    dest = registry.download_artifact(info, WEIGHTS_ARTIFACT, tmp_path / "got" / "model.safetensors")
    assert dest.read_bytes() == b"\x00weights\xff" * 100
    assert [p.name for p in dest.parent.iterdir()] == ["model.safetensors"]  # no temporary left behind
    with pytest.raises(NotFound, match="has no artifact model/other.bin"):
        registry.download_artifact(info, "model/other.bin", tmp_path / "other.bin")


def test_bands_are_stored_on_the_version_and_read_back(tracking_uri, churn):
    seed_version(tracking_uri, churn, complete_record())
    registry = MlflowRegistry(tracking_uri)
    registry.set_bands(registry.resolve(f"models:/{churn}/1"), '{"auc": [0.9, 0.92]}')
    assert registry.get_bands(registry.resolve(f"models:/{churn}/1")) == '{"auc": [0.9, 0.92]}'


def test_a_record_rewritten_after_registration_is_malformed_and_lineage_show_blocks_on_it(
    sqlite_tracking_uri, tmp_path: Path, capsys
):
    from mlflow import MlflowClient

    seed_version(sqlite_tracking_uri, "churn", complete_record())
    registry = MlflowRegistry(sqlite_tracking_uri)
    info = registry.resolve("models:/churn/1")
    forged = tmp_path / "forged" / "run_record.json"
    forged.parent.mkdir()
    forged.write_text(complete_record(tool_version="6.6.6").to_json())
    MlflowClient(sqlite_tracking_uri).log_artifact(info.run_id, str(forged), "repro")
    with pytest.raises(MalformedRecord, match="changed after registration"):
        registry.load_record(info)
    code, out, _ = run_cli(["lineage", "show", "models:/churn/1"], capsys)
    assert code == 1 and "changed after registration" in out


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("models:/churn/7", "model version models:/churn/7: not found"),
        ("models:/churn@nobody", "model alias models:/churn@nobody: not found"),
        ("models:/ghost/1", "model version models:/ghost/1: not found"),
    ],
)
def test_unknown_versions_aliases_and_models_are_not_found_naming_the_reference(sqlite_tracking_uri, capsys, ref, message):
    seed_version(sqlite_tracking_uri, "churn", complete_record())
    with pytest.raises(NotFound, match=re.escape(message)):
        MlflowRegistry(sqlite_tracking_uri).resolve(ref)
    code, _, err = run_cli(["lineage", "show", ref], capsys)
    assert code == 2 and ref in err


def test_an_unreachable_tracking_server_is_an_infrastructure_error_and_lineage_show_exits_3(monkeypatch, capsys):
    from tests.fixtures.common import free_port

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    port = free_port()
    uri = f"http://auditor:hunter2secret@127.0.0.1:{port}"
    with pytest.raises(InfrastructureError, match=f"127.0.0.1:{port}") as caught:
        MlflowRegistry(uri).resolve("models:/churn/1")
    assert "hunter2secret" not in str(caught.value)  # the URI's password never reaches a log
    code, _, err = run_cli(["lineage", "show", "models:/churn/1", "--tracking-uri", uri], capsys)
    assert code == 3 and f"127.0.0.1:{port}" in err and "hunter2secret" not in err


@pytest.mark.slow
def test_listing_two_thousand_versions_takes_a_few_dozen_registry_calls_not_thousands(sqlite_tracking_uri, tmp_path):
    from mlflow import MlflowClient

    run_ids = bulk_versions(sqlite_tracking_uri, tmp_path / "bulk-artifacts", 2000, models=20)
    counting = CountingClient(MlflowClient(tracking_uri=sqlite_tracking_uri))
    registry = MlflowRegistry(sqlite_tracking_uri, client=counting)

    listed = list(registry.list_versions())

    assert len(listed) == 2000 and len({v.ref for v in listed}) == 2000
    assert {v.run_id for v in listed} == set(run_ids)
    assert all(v.train_seconds == 12.5 for v in listed)  # every run's tags arrived through the batched lookups
    assert sum(1 for v in listed if v.aliases == ("champion",)) == 20
    total = sum(counting.calls.values())
    assert total <= 36, counting.calls
    assert counting.calls["search_runs"] == math.ceil(2000 / RUN_CHUNK), counting.calls
    assert counting.calls["search_model_versions"] == 2, counting.calls
    assert "get_run" not in counting.calls and "get_model_version" not in counting.calls
