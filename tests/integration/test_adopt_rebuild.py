"""Issue 30, acceptance 2 and 3 (build 2): a plain-MLflow version rebuilt where its lineage allows it.

A real git repository (cloned from an upstream, so MLflow records its URL) holds ``train.py``: plain MLflow,
``mlflow.sklearn.autolog``, a scikit-learn regressor with ``random_state=42`` trained on a real Delta table read at
version 1 and logged with ``mlflow.log_input`` of a ``DeltaDatasetSource`` at that version, the tree state tagged
clean. Its version is rebuilt by ``repro-audit adopt --rebuild``'s step in the subprocess runner and compared in
that subprocess with ``mlflow.sklearn.load_model``: REPRODUCED_BITWISE, with every assumption listed in the
result and the signed attestation. After the table is vacuumed past version 1 the same rebuild is
NOT_REPRODUCIBLE, naming the table and the version.

Acceptance 3: a malicious pickle registered as a plain-MLflow model (its ``__reduce__`` writes a marker holding
the pid of the process that unpickles it) is never loaded by the auditor's process: assessing it and publishing
the assessment leave no marker, and after the rebuild the marker holds another process's pid (the sandbox's).
What the subprocess runner isolates, honestly: a separate process (its own process group, killed on timeout) with
a clean environment (an allowlist: none of the auditor's credentials, tracking URIs or tokens reach it), its own
MLflow store and no network (a network namespace of its own: the payload cannot reach a loopback port the test
listens on, which the test itself reaches); it does NOT isolate the filesystem: it runs as the same user and could
write anywhere that user can, as the marker shows. The Docker runner adds a read-only root, but needs an image
pinned by digest, which this plain-MLflow version does not name; this test runs the subprocess runner.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys

import pytest

from tests.fixtures.gitrepo import init_repo

pytest.importorskip("deltalake")
pytest.importorskip("sklearn")

TRAIN = r'''
"""Plain MLflow training, no SDK."""
import subprocess

import mlflow
from deltalake import DeltaTable
from mlflow.data.delta_dataset_source import DeltaDatasetSource
from sklearn.ensemble import RandomForestRegressor

TABLE = {table!r}
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
mlflow.set_experiment("plain-training")
mlflow.sklearn.autolog(log_datasets=False)
with mlflow.start_run(run_name="pinned") as run:
    mlflow.set_tag("repro.dirty", "true" if dirty.strip() else "false")
    df = DeltaTable(TABLE, version=1).to_pandas()
    mlflow.log_input(mlflow.data.from_pandas(df, source=DeltaDatasetSource(path=TABLE, delta_table_version=1), name="churn"),
                     context="train")
    RandomForestRegressor(n_estimators=3, random_state=42).fit(df[list("abcd")], df.y)
print(mlflow.register_model(f"runs:/{{run.info.run_id}}/model", "pinned").version)
'''


class _Planted:
    """Unpickling this writes ``marker``: the pid of the process that unpickled it, and whether that process could
    reach ``port`` on loopback, where the test listens (0: connected; an errno: no network)."""

    def __init__(self, marker: str, port: int) -> None:
        self.marker, self.port = marker, port

    def __reduce__(self):
        reach = f"__import__('socket').socket().connect_ex(('127.0.0.1', {self.port}))"
        return (eval, (f"__import__('pathlib').Path({self.marker!r}).write_text("
                       f"str(__import__('os').getpid()) + ' ' + str({reach}))",))


@pytest.fixture(scope="module")
def world(tmp_path_factory, _mlflow_sqlite_template):
    """One trained version; rebuilt (published), the planted one assessed then rebuilt, the table vacuumed, rebuilt again."""
    import numpy as np
    import pandas as pd
    from deltalake import DeltaTable, write_deltalake
    from mlflow import MlflowClient

    from auditor.report.attest import generate_key
    from auditor.settings import Settings
    from auditor.steps import Session

    root = tmp_path_factory.mktemp("adopt-rebuild")
    db = root / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, db)
    uri = f"sqlite:///{db}"
    table = str(root / "lake" / "churn")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(80, 4)), columns=list("abcd"))
    frame["y"] = frame.a + frame.b
    write_deltalake(table, frame.iloc[:40])
    write_deltalake(table, frame.iloc[40:], mode="append")  # version 1
    upstream = init_repo(root / "upstream", {"train.py": TRAIN.format(table=table), "noop.py": "print('nothing')\n",
                                             ".gitignore": "mlruns/\n"})
    subprocess.run(["git", "clone", "-q", str(upstream), str(root / "team")], check=True)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
           "GIT_PYTHON_REFRESH": "quiet", "PYTHONWARNINGS": "ignore", "MLFLOW_REQUIREMENTS_INFERENCE_TIMEOUT": "1"}
    done = subprocess.run([sys.executable, "train.py"], cwd=root / "team", env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    (mv,) = client.search_model_versions("name = 'pinned'")
    # the planted version: the same run's lineage, a malicious pickle as its model file
    marker = root / "pickle-was-loaded"
    real = root / "real-model"
    import mlflow

    real = mlflow.artifacts.download_artifacts(artifact_uri=client.get_model_version_download_uri("pinned", "1"),
                                               dst_path=str(real), tracking_uri=uri)
    evil = root / "evil-model"
    shutil.copytree(real, evil)
    assert (evil / "model.pkl").is_file() and (evil / "requirements.txt").is_file()
    listener = socket.socket()  # what the payload tries to reach: a connection would succeed from the auditor
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    (evil / "model.pkl").write_bytes(pickle.dumps(_Planted(str(marker), listener.getsockname()[1])))
    # its run: the trained run's pinned lineage, but entry point noop.py (the rebuild need not train again to reach
    # the sandbox's comparison, which loads the registered model first)
    from mlflow.entities import Param

    src = client.get_run(mv.run_id)
    planted = client.create_run(src.info.experiment_id, tags={**src.data.tags, "mlflow.source.name": "noop.py",
                                                               "mlflow.runName": "planted"})
    client.log_batch(planted.info.run_id, params=[Param(k, v) for k, v in src.data.params.items()])
    client.log_inputs(planted.info.run_id, datasets=list(src.inputs.dataset_inputs))
    client.set_terminated(planted.info.run_id)
    client.create_registered_model("evil")
    client.create_model_version("evil", source=str(evil), run_id=planted.info.run_id)
    public, _ = generate_key(root / "owner.pem")
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": uri, "REPRO_HOME": str(root / "home"),
                                  "REPRO_REPORTS": str(root / "reports"), "REPRO_SIGNING_KEY": str(root / "owner.pem"),
                                  "REPRO_RESPONSIBLE": "Dana Risk", "REPRO_RUNNER": "process"})
    session = Session(settings)
    out = {"root": root, "table": table, "marker": marker, "session": session, "run_id": mv.run_id, "public": public,
           "uri": uri, "real": real}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        out["rebuilt"] = session.adopt_rebuild("models:/pinned/1", date="2026-12-02")
        out["evil_assessed"] = session.adopt("models:/evil/1", date="2026-12-02")  # assessed and published in-process
        out["marker_after_assessment"] = marker.exists()
        out["evil_rebuilt"] = session.adopt_rebuild("models:/evil/1", publish=False)
        write_deltalake(table, frame.iloc[:10], mode="overwrite")  # version 2; vacuum drops version 1's files
        DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        out["vacuumed"] = session.adopt_rebuild("models:/pinned/1", date="2026-12-03", publish=False)
        out["reachable_from_here"] = socket.socket().connect_ex(listener.getsockname())
        listener.close()
        yield out


def test_a_fully_pinned_plain_version_is_rebuilt_bitwise_with_its_assumptions(world):
    result = world["rebuilt"].result
    assert result.verdict.value == "REPRODUCED_BITWISE", (result.error, result.log_tail[-2000:], result.findings)
    assert result.audit_id == "adopt-rebuild-2026-12-02" and result.record is None
    assert "lineage recovered from MLflow metadata" in result.tiers["lineage"].summary
    assert result.tiers["bitwise"].status == "pass" and result.tiers["statistical"].status == "pass"
    assert "identical" in result.tiers["statistical"].summary and "version 1" in result.tiers["statistical"].summary
    assumptions = "\n".join(result.assumptions)
    for said in ("not a record captured at training time", "entry point is train.py", "random_state=42",
                 f"Delta table {world['table']} at version 1", "auditor's Python environment"):
        assert said in assumptions, said
    assert sum(d.startswith("assumption: ") for d in result.tiers["lineage"].details) == len(result.assumptions)
    # published: the report and the signed attestation carry the assumptions
    store = world["session"].store
    key = next(k for k in store.list("") if "adopt-rebuild" in k and k.endswith(".intoto.json"))
    import base64

    envelope = json.loads(store.read(key))
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert predicate["verdict"] == "REPRODUCED_BITWISE" and predicate["assumptions"] == result.assumptions
    page = store.read(world["rebuilt"].report.rsplit("/", 1)[1]).decode()
    assert "lineage recovered from MLflow metadata" in page and "assumption: " in page
    from auditor.report.attest import load_public_key
    from auditor.report.verify import verify

    checked = verify(store, public_key=load_public_key(str(world["public"])))
    assert not checked.problems, checked.problems


def test_a_version_whose_lineage_does_not_allow_a_rebuild_gets_its_assessment_with_the_reason(world):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=world["uri"])
    client.create_registered_model("no-run")
    client.create_model_version("no-run", source=str(world["real"]))
    got = world["session"].adopt_rebuild("models:/no-run/1", publish=False)
    assert got.result.verdict.value == "LINEAGE_INSUFFICIENT"
    assert got.result.tiers["lineage"].details[0].startswith("not rebuilt: code is missing")
    env = {**os.environ, "MLFLOW_TRACKING_URI": world["uri"], "REPRO_HOME": str(world["root"] / "home")}
    done = subprocess.run([sys.executable, "-m", "auditor", "adopt", "models:/no-run/1", "--rebuild", "--no-publish",
                           "--json"], env=env, cwd=world["root"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    assert json.loads(done.stdout)["verdict"] == "LINEAGE_INSUFFICIENT"


def test_the_vacuumed_delta_version_is_not_reproducible_naming_table_and_version(world):
    result = world["vacuumed"].result
    assert result.verdict.value == "NOT_REPRODUCIBLE"
    assert f"Delta table {world['table']} @ version 1" in result.error and "vacuumed" in result.error
    assert any(f.code == "adopt.rebuild.failed" and "version 1" in f.message for f in result.findings)
    assert "bitwise" not in result.tiers  # nothing was rebuilt: the check comes before the entry point runs


def test_a_planted_pickle_is_only_ever_loaded_in_the_sandbox_subprocess(world):
    assert world["evil_assessed"].result.verdict.value == "LINEAGE_INSUFFICIENT" and world["evil_assessed"].report
    assert world["marker_after_assessment"] is False  # assessing and publishing never unpickled it
    result = world["evil_rebuilt"].result
    assert not result.verdict.reproduced, result.verdict
    assert result.verdict.value == "NOT_REPRODUCIBLE", result.tiers["lineage"].details
    assert world["marker"].exists(), (result.error, result.log_tail[-2000:])
    loader_pid, reached = map(int, world["marker"].read_text().split())
    assert loader_pid != os.getpid()  # the sandbox's comparison subprocess loaded it, not the auditor
    assert world["reachable_from_here"] == 0  # the listener took connections from outside the sandbox...
    assert reached != 0, "the sandbox reached a loopback port: it had a network"  # ...and none from inside it


def test_the_cli_refuses_rebuild_with_a_supplied_record_or_assess_only():
    """``--rebuild`` rebuilds from what MLflow recorded: combined with --data or --assess-only it is the caller's error."""
    from auditor.cli.adopt import adopt_cmd
    from auditor.errors import BadInput, exit_code

    options = dict(models=None, image=None, seed=None, date=None, no_publish=True, tracking_uri="sqlite:///unused.db",
                   reports=None, json_out=True, rebuild=True)
    with pytest.raises(BadInput, match="--rebuild") as refused:
        adopt_cmd(ref="models:/churn/3", assess_only=False, data=["train=s3://b/s@blake3:" + "a" * 64], **options)
    assert exit_code(refused.value) == 2
