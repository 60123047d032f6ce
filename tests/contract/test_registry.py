"""The Registry contract: one suite, run over the in-memory twin, MLflow on SQLite and an ``mlflow server``.

Everything the audit relies on is asserted once here, for every backend (``backend`` is
parametrised); what only one backend has (MLflow's call counts, the server's S3 bucket,
a version logged by plain ``mlflow.pytorch``, the twin's process-wide instances) is asserted
beside it, for that backend only. The ``mlflow server`` is session-scoped (it starts once),
so every test names its models uniquely, and the read-only world below is built once per
server and shared by the tests that only read it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from auditor.errors import BadInput, InfrastructureError, MalformedRecord, NotFound
from auditor.registry import RecordMissing, Registry, open_registry, registry_scheme
from auditor.registry.base import (
    DIFF_ARTIFACT,
    RECORD_ARTIFACT,
    TAG_AUDIT_AT,
    TAG_RECORD_DIGEST,
    TAG_REPORT,
    TAG_VERDICT,
    WEIGHTS_ARTIFACT,
)
from auditor.registry.memory import MemoryRegistry
from tests.fixtures.records import complete_record

DIFF = "diff --git a/train.py b/train.py\n--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-a\n+b\n"
WEIGHTS = b"\x00weights\xff" * 100
BACKENDS = ["memory", "sqlite", "server"]


def dirty_record():
    record = complete_record()
    code = record.code.model_copy(
        update={"dirty": True, "diff_file": "diff.patch", "diff_digest": "sha256:" + hashlib.sha256(DIFF.encode()).hexdigest()}
    )
    return record.model_copy(update={"code": code})


def unique(stem: str) -> str:
    """A model name no other test uses (the server is shared by the whole session)."""
    return f"{stem}-{uuid.uuid4().hex[:8]}"


# -- the backends ------------------------------------------------------------------------------
class Backend:
    """One registry backend and the writing side a test needs to set it up (what MLflow and the SDK do)."""

    kind: str
    uri: str

    def registry(self) -> Registry:
        """A registry reading this backend, with no state carried over from earlier calls."""
        return open_registry(self.uri)

    def register(self, name: str, record: Any | None, *, diff=None, weights=None, aliases=(), tags=None) -> str:
        """A version laid out as ``auditor.track`` + ``auditor.register_model`` lay it out; its number."""
        raise NotImplementedError

    def register_without_run(self, name: str, source: str) -> str:
        """A version registered from a path: no run at all."""
        raise NotImplementedError

    def put_artifact(self, run_id: str, path: str, data: bytes) -> None:
        raise NotImplementedError

    def delete_artifact(self, run_id: str, path: str) -> None:
        raise NotImplementedError

    def purge_run(self, run_id: str) -> None:
        """Make the run gone for good (MLflow's ``gc``), so that reading it is "does not exist"."""
        raise NotImplementedError


class MemoryBackend(Backend):
    kind = "memory"

    def __init__(self) -> None:
        self.uri = f"memory://{unique('contract')}"
        self.twin = MemoryRegistry.named(self.uri)  # named: the CLI's open_registry(uri) finds the same one

    def register(self, name, record, *, diff=None, weights=None, aliases=(), tags=None) -> str:
        info = self.twin.register_record(name, record, diff=diff, weights=weights, aliases=tuple(aliases), tags=tags)
        return info.version

    def register_without_run(self, name, source) -> str:
        return self.twin.create_version(name, source=source).version

    def put_artifact(self, run_id, path, data) -> None:
        self.twin.put_artifact(run_id, path, data)

    def delete_artifact(self, run_id, path) -> None:
        del self.twin._runs[run_id].artifacts[path]

    def purge_run(self, run_id) -> None:
        del self.twin._runs[run_id]


class MlflowBackend(Backend):
    def __init__(self, kind: str, uri: str, backend_uri: str) -> None:
        from mlflow import MlflowClient

        self.kind, self.uri, self.backend_uri = kind, uri, backend_uri
        self.client = MlflowClient(tracking_uri=uri)

    def register(self, name, record, *, diff=None, weights=None, aliases=(), tags=None) -> str:
        from tests.fixtures.mlflow import seed_version

        return seed_version(self.uri, name, record, diff=diff, weights=weights, aliases=aliases, tags=tags)

    def register_without_run(self, name, source) -> str:
        from tests.fixtures.mlflow import _ensure_model

        _ensure_model(self.client, name)
        return str(self.client.create_model_version(name, source=source).version)

    def put_artifact(self, run_id, path, data) -> None:
        folder, _, filename = path.rpartition("/")
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / filename
            local.write_bytes(data)
            self.client.log_artifact(run_id, str(local), folder or None)

    def _repo(self, run_id: str):
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        return get_artifact_repository(self.client.get_run(run_id).info.artifact_uri, tracking_uri=self.uri)

    def delete_artifact(self, run_id, path) -> None:
        self._repo(run_id).delete_artifacts(path)

    def purge_run(self, run_id) -> None:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        with tempfile.TemporaryDirectory() as unused:
            SqlAlchemyStore(self.backend_uri, unused)._hard_delete_run(run_id)


@pytest.fixture(params=BACKENDS)
def backend(request) -> Iterator[Backend]:
    if request.param == "memory":
        made = MemoryBackend()
        try:
            yield made
        finally:
            MemoryRegistry.forget(made.uri)
    elif request.param == "sqlite":
        uri = request.getfixturevalue("sqlite_tracking_uri")
        yield MlflowBackend("sqlite", uri, uri)
    else:
        uri = request.getfixturevalue("server_tracking_uri")
        yield MlflowBackend("server", uri, request.getfixturevalue("mlflow_server").backend_uri)


# -- the shared, read-only world -----------------------------------------------------------------
@dataclass(frozen=True)
class World:
    """churn/1 (clean, weights, @champion), churn/2 (dirty with a diff, @challenger, tier 1),
    churn/3 (a run with no record, as plain MLflow leaves one), fraud/1 (registered from a path, no run)."""

    churn: str
    fraud: str

    def ref(self, model: str, version: int | str) -> str:
        return f"models:/{getattr(self, model)}/{version}"


def build_world(backend: Backend) -> World:
    world = World(churn=unique("churn"), fraud=unique("fraud"))
    backend.register(world.churn, complete_record(), weights=WEIGHTS, aliases=("champion",))
    backend.register(world.churn, dirty_record(), diff=DIFF, aliases=("challenger",), tags={"repro.tier": "1"})
    backend.register(world.churn, None)
    backend.register_without_run(world.fraud, "s3://models/fraud")
    return world


@pytest.fixture(scope="session")
def _server_worlds() -> dict[str, World]:
    return {}


@pytest.fixture()
def world(backend: Backend, _server_worlds: dict[str, World]) -> World:
    """Tests that only read share it: built once per server, per test elsewhere (where it costs little)."""
    if backend.kind != "server":
        return build_world(backend)
    if backend.uri not in _server_worlds:
        _server_worlds[backend.uri] = build_world(backend)
    return _server_worlds[backend.uri]


def listed(registry: Registry, *names: str) -> dict[str, Any]:
    """This test's versions by ref (a shared server also lists other tests' models)."""
    return {v.ref: v for v in registry.list_versions() if v.name in names}


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    import auditor.cli.lineage_show  # noqa: F401 - registers `lineage show`
    from auditor.cli import main

    os.environ["COLUMNS"] = "250"  # rich folds long cells at the default 80; tests read whole lines

    with pytest.raises(SystemExit) as exited:
        main(args)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


# -- reading -------------------------------------------------------------------------------------
def test_listing_gives_every_version_with_its_aliases_tags_run_tags_and_record_digest(backend, world):
    registry = backend.registry()
    versions = list(v for v in registry.list_versions() if v.name in (world.churn, world.fraud))
    assert [(v.name, v.version) for v in versions] == [
        (world.churn, "1"),
        (world.churn, "2"),
        (world.churn, "3"),
        (world.fraud, "1"),
    ]
    first, second, plain, fraud = versions
    assert first.aliases == ("champion",) and second.aliases == ("challenger",) and fraud.aliases == ()
    assert first.record_digest == complete_record().digest()
    assert first.run_tags[TAG_RECORD_DIGEST] == complete_record().digest()
    assert second.tier == "1"
    assert plain.record_digest is None and plain.run_id
    assert fraud.run_id is None and fraud.source == "s3://models/fraud"
    assert [v.version for v in registry.list_versions(world.fraud)] == ["1"]


def test_resolving_a_version_and_an_alias_gives_the_same_version(backend, world):
    registry = backend.registry()
    by_number = registry.resolve(world.ref("churn", 1))
    by_alias = registry.resolve(f"models:/{world.churn}@champion")
    assert by_number == by_alias
    assert by_alias.ref == world.ref("churn", 1)
    challenger = registry.resolve(f"models:/{world.churn}@challenger")
    assert challenger.ref == world.ref("churn", 2) and challenger.aliases == ("challenger",)
    assert registry.resolve(world.ref("churn", 1)).aliases == ("champion",)


@pytest.mark.parametrize("missing", ["version", "alias", "model"])
def test_resolving_something_that_is_not_registered_is_not_found_naming_it_and_lineage_show_exits_2(
    backend, world, missing, capsys
):
    ghost = unique("ghost")
    ref = {
        "version": f"models:/{world.churn}/9",
        "alias": f"models:/{world.churn}@gone",
        "model": f"models:/{ghost}/1",
    }[missing]
    expected = {  # how each backend words it, beyond naming the ref
        "memory": {
            "version": f"versions of {world.churn!r}: 1, 2, 3",
            "alias": "aliases: challenger, champion",
            "model": f"no registered model named {ghost!r}",
        },
        "mlflow": {
            "version": f"model version {ref}: not found",
            "alias": f"model alias {ref}: not found",
            "model": f"model version {ref}: not found",
        },
    }["memory" if backend.kind == "memory" else "mlflow"][missing]
    with pytest.raises(NotFound) as caught:
        backend.registry().resolve(ref)
    assert ref in str(caught.value) and expected in str(caught.value)
    code, _, err = run_cli(["lineage", "show", ref, "--tracking-uri", backend.uri], capsys)
    assert code == 2 and ref in err


def test_a_bad_reference_is_bad_input_before_the_registry_is_asked(backend, world):
    with pytest.raises(BadInput, match=f"'models:/{world.churn}/latest'"):
        backend.registry().resolve(f"models:/{world.churn}/latest")


def test_loading_a_record_gives_the_record_and_no_diff_for_a_clean_tree(backend, world):
    registry = backend.registry()
    record, diff = registry.load_record(registry.resolve(world.ref("churn", 1)))
    assert record == complete_record() and diff is None


def test_loading_a_dirty_record_gives_the_record_and_the_diff_exactly_as_registered(backend, world):
    registry = backend.registry()
    record, diff = registry.load_record(registry.resolve(world.ref("churn", 2)))
    assert record == dirty_record() and record.code.dirty and diff == DIFF


def test_a_version_whose_run_has_no_record_says_so_precisely(backend, world):
    registry = backend.registry()
    info = registry.resolve(world.ref("churn", 3))
    with pytest.raises(RecordMissing) as caught:
        registry.load_record(info)
    assert str(caught.value).startswith(
        f"version 3 of {world.churn!r} was registered without a run record "
        f"(no artifact {RECORD_ARTIFACT} on run {info.run_id})"
    )
    assert RECORD_ARTIFACT == "repro/run_record.json"
    assert caught.value.finding.blocking and caught.value.finding.code == "record.missing"
    assert isinstance(caught.value, NotFound)


def test_a_version_with_no_run_says_it_names_no_run(backend, world):
    registry = backend.registry()
    with pytest.raises(RecordMissing, match="it names no run; its source is s3://models/fraud"):
        registry.load_record(registry.resolve(world.ref("fraud", 1)))


def test_downloading_the_registered_weights_writes_exactly_their_bytes(backend, world, tmp_path: Path):
    registry = backend.registry()
    info = registry.resolve(world.ref("churn", 1))
    dest = registry.download_artifact(info, WEIGHTS_ARTIFACT, tmp_path / "w" / "model.safetensors")
    assert dest.read_bytes() == WEIGHTS
    assert [p.name for p in dest.parent.iterdir()] == ["model.safetensors"]  # no temporary left behind
    with pytest.raises(BadInput, match="already exists"):
        registry.download_artifact(info, WEIGHTS_ARTIFACT, dest)
    with pytest.raises(NotFound, match="has no artifact model/other.bin"):
        registry.download_artifact(info, "model/other.bin", tmp_path / "other.bin")
    with pytest.raises(NotFound, match="has no artifact model/model.safetensors"):
        registry.download_artifact(registry.resolve(world.ref("churn", 2)), WEIGHTS_ARTIFACT, tmp_path / "x")
    assert not (tmp_path / "x").exists()


# -- records altered after registration (each test alters its own version) ---------------------------
def test_a_record_rewritten_after_registration_is_malformed_and_lineage_show_blocks_on_it(backend, capsys):
    churn = unique("churn")
    backend.register(churn, complete_record())
    registry = backend.registry()
    info = registry.resolve(f"models:/{churn}/1")
    backend.put_artifact(info.run_id, RECORD_ARTIFACT, complete_record(tool_version="9.9.9").to_json().encode())
    with pytest.raises(MalformedRecord, match="changed after registration"):
        registry.load_record(info)
    code, out, _ = run_cli(["lineage", "show", f"models:/{churn}/1", "--tracking-uri", backend.uri], capsys)
    assert code == 1 and "changed after registration" in out


def test_a_record_that_is_not_json_is_malformed_naming_the_version_run_and_artifact(backend):
    churn = unique("churn")
    backend.register(churn, complete_record())
    registry = backend.registry()
    info = registry.resolve(f"models:/{churn}/1")
    backend.put_artifact(info.run_id, RECORD_ARTIFACT, b"{not json")
    with pytest.raises(MalformedRecord) as caught:
        registry.load_record(info)
    assert f"models:/{churn}/1 (run {info.run_id}, artifact {RECORD_ARTIFACT})" in str(caught.value)
    assert "line 1" in str(caught.value)


def test_a_diff_that_is_missing_or_altered_is_malformed(backend):
    churn = unique("churn")
    backend.register(churn, dirty_record(), diff=DIFF)
    registry = backend.registry()
    info = registry.resolve(f"models:/{churn}/1")
    backend.put_artifact(info.run_id, DIFF_ARTIFACT, (DIFF + "+evil\n").encode())
    with pytest.raises(MalformedRecord, match="does not match code.diff_digest"):
        registry.load_record(info)
    backend.delete_artifact(info.run_id, DIFF_ARTIFACT)
    with pytest.raises(MalformedRecord, match="has no artifact repro/diff.patch"):
        registry.load_record(info)


def test_a_version_whose_run_was_deleted_says_the_run_no_longer_exists(backend):
    churn = unique("churn")
    backend.register(churn, complete_record())
    info = backend.registry().resolve(f"models:/{churn}/1")
    backend.purge_run(info.run_id)
    with pytest.raises(RecordMissing, match=f"its run {info.run_id} no longer exists"):
        backend.registry().load_record(info)


# -- writing ------------------------------------------------------------------------------------------
def test_writing_an_outcome_sets_three_tags_on_that_version_only_and_moves_no_alias(backend):
    churn = unique("churn")
    for alias in ("champion", "challenger", "shadow"):
        backend.register(churn, complete_record(), aliases=(alias,))
    registry = backend.registry()
    before = listed(registry, churn)
    target = registry.resolve(f"models:/{churn}@challenger")
    at = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    returned = registry.write_outcome(target, "REPRODUCED_BITWISE", at, "s3://reports/churn/2/audit.html")
    after = listed(registry, churn)
    changed = after[target.ref]
    assert {k: changed.tags.get(k) for k in (TAG_VERDICT, TAG_AUDIT_AT, TAG_REPORT)} == {
        TAG_VERDICT: "REPRODUCED_BITWISE",
        TAG_AUDIT_AT: "2026-11-29T02:00:00Z",
        TAG_REPORT: "s3://reports/churn/2/audit.html",
    }
    assert returned.tags == changed.tags
    assert changed.last_verdict == "REPRODUCED_BITWISE" and changed.last_audit_at == "2026-11-29T02:00:00Z"
    assert {ref: v.aliases for ref, v in after.items()} == {ref: v.aliases for ref, v in before.items()}
    for ref, version in before.items():
        if ref != target.ref:
            assert after[ref].tags == version.tags
    assert registry.resolve(f"models:/{churn}@challenger").ref == target.ref

    registry.write_outcome(changed, "OUT_OF_TOLERANCE", "2026-11-30T02:00:00Z", "reports/churn/2.html")
    again = registry.resolve(target.ref)
    assert (again.last_verdict, again.last_audit_at, again.tags[TAG_REPORT]) == (
        "OUT_OF_TOLERANCE",
        "2026-11-30T02:00:00Z",
        "reports/churn/2.html",
    )


@pytest.mark.parametrize(
    ("verdict", "at", "report", "match"),
    [
        ("PASSED", "2026-11-29T02:00:00Z", "r.html", "not one of REPRODUCED_BITWISE"),
        ("ERROR", datetime(2026, 11, 29), "r.html", "no time zone"),
        ("ERROR", "yesterday", "r.html", "not ISO 8601"),
        ("ERROR", "2026-11-29T02:00:00Z", "", "report URI"),
    ],
)
def test_an_outcome_with_a_bad_verdict_time_or_report_is_refused_and_nothing_is_written(backend, verdict, at, report, match):
    churn = unique("churn")
    backend.register(churn, complete_record())
    registry = backend.registry()
    info = registry.resolve(f"models:/{churn}/1")
    with pytest.raises(BadInput, match=match):
        registry.write_outcome(info, verdict, at, report)
    assert TAG_VERDICT not in registry.resolve(f"models:/{churn}/1").tags


def test_bands_round_trip_through_a_version_tag(backend):
    churn = unique("churn")
    backend.register(churn, complete_record())
    backend.register(churn, complete_record())
    registry = backend.registry()
    info = registry.resolve(f"models:/{churn}/1")
    assert registry.get_bands(info) is None
    registry.set_bands(info, '{"auc": {"lower": 0.9, "upper": 0.92}}')
    assert registry.get_bands(registry.resolve(f"models:/{churn}/1")) == '{"auc": {"lower": 0.9, "upper": 0.92}}'
    assert registry.get_bands(registry.resolve(f"models:/{churn}/2")) is None
    registry.set_bands(info, '{"auc": [0.9, 0.92]}')
    assert registry.get_bands(registry.resolve(f"models:/{churn}/1")) == '{"auc": [0.9, 0.92]}'
    with pytest.raises(BadInput, match="at most 100000"):
        registry.set_bands(info, "x" * 100_001)


def test_set_tags_touches_that_version_only_and_refuses_what_mlflow_would(backend):
    churn = unique("churn")
    backend.register(churn, complete_record(), aliases=("champion",))
    backend.register(churn, complete_record(), aliases=("challenger",))
    registry = backend.registry()
    before = listed(registry, churn)
    first = f"models:/{churn}/1"
    updated = registry.set_tags(registry.resolve(first), {"repro.audit.date": "2026-11-29"})
    assert updated.tags["repro.audit.date"] == "2026-11-29"
    after = listed(registry, churn)
    assert after[first].tags == updated.tags
    assert all(after[ref].tags == before[ref].tags for ref in before if ref != first)
    assert {ref: v.aliases for ref, v in after.items()} == {ref: v.aliases for ref, v in before.items()}
    with pytest.raises(BadInput, match="tag key ''"):
        registry.set_tags(updated, {"": "x"})
    with pytest.raises(BadInput, match="must be text"):
        registry.set_tags(updated, {"k": 3})  # type: ignore[dict-item]


# -- opening a registry ----------------------------------------------------------------------------------
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


def test_any_uri_but_memory_opens_through_mlflow_without_contacting_it(tmp_path):
    from auditor.registry.mlflow import MlflowRegistry

    assert registry_scheme("memory://x") == "memory"
    assert registry_scheme("sqlite:///x.db") == registry_scheme("http://127.0.0.1:5000") == "mlflow"
    (tmp_path / "r.db").touch()  # a SQLite registry must exist to be opened (issue 16)
    registry_uri = f"sqlite:///{tmp_path / 'r.db'}"
    opened = open_registry("http://127.0.0.1:1", registry_uri=registry_uri)
    assert isinstance(opened, MlflowRegistry) and (opened.uri, opened.registry_uri) == ("http://127.0.0.1:1", registry_uri)


# -- MLflow only ----------------------------------------------------------------------------------------
@pytest.fixture(params=["sqlite", "server"])
def tracking_uri(request) -> str:
    """Each MLflow-only behaviour once on SQLite and once through ``mlflow server`` with S3 artifacts."""
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


def test_a_version_registered_by_plain_mlflow_is_listed_and_lineage_show_reports_the_missing_record(tracking_uri, capsys):
    from auditor.registry.mlflow import MlflowRegistry

    plain = unique("plain-model")
    version = plain_mlflow_version(plain)
    registry = MlflowRegistry(tracking_uri)
    found = [v for v in registry.list_versions() if v.name == plain]
    assert [v.version for v in found] == [version]
    info = found[0]
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
    shown = json.loads(out)
    assert code == 1 and shown["record"] is None
    assert [f["code"] for f in shown["findings"]] == ["record.missing"]


def test_on_the_server_the_record_lies_in_the_s3_bucket(server_tracking_uri, mlflow_server):
    import boto3

    from auditor.registry.mlflow import MlflowRegistry
    from tests.fixtures.mlflow import seed_version

    churn = unique("churn")
    seed_version(server_tracking_uri, churn, complete_record())
    run_id = MlflowRegistry(server_tracking_uri).resolve(f"models:/{churn}/1").run_id
    s3 = boto3.client("s3", endpoint_url=mlflow_server.endpoint)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=mlflow_server.bucket, Prefix="mlartifacts/").get("Contents", [])]
    assert any(k.endswith(f"{run_id}/artifacts/repro/run_record.json") for k in keys), keys


def test_an_unreachable_tracking_server_is_an_infrastructure_error_and_lineage_show_exits_3(monkeypatch, capsys):
    from auditor.registry.mlflow import MlflowRegistry
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

    from auditor.registry.mlflow import RUN_CHUNK, MlflowRegistry
    from tests.fixtures.counting import CountingClient
    from tests.fixtures.mlflow import bulk_versions

    run_ids = bulk_versions(sqlite_tracking_uri, tmp_path / "bulk-artifacts", 2000, models=20)
    counting = CountingClient(MlflowClient(tracking_uri=sqlite_tracking_uri))
    registry = MlflowRegistry(sqlite_tracking_uri, client=counting)

    versions = list(registry.list_versions())

    assert len(versions) == 2000 and len({v.ref for v in versions}) == 2000
    assert {v.run_id for v in versions} == set(run_ids)
    assert all(v.train_seconds == 12.5 for v in versions)  # every run's tags arrived through the batched lookups
    assert sum(1 for v in versions if v.aliases == ("champion",)) == 20
    total = sum(counting.calls.values())
    assert total <= 36, counting.calls
    assert counting.calls["search_runs"] == math.ceil(2000 / RUN_CHUNK), counting.calls
    assert counting.calls["search_model_versions"] == 2, counting.calls
    assert "get_run" not in counting.calls and "get_model_version" not in counting.calls

