"""Issue 30, acceptance 1 (and build 3): adopting a registry trained with plain MLflow, no SDK.

A real git repository holds ``train.py``, which trains with real autolog (scikit-learn, XGBoost) and
``mlflow.pytorch.log_model`` in one process, on a clean tree and then on a dirty one; it logs datasets with
``mlflow.log_input`` from a pandas frame, from a real Delta table at a version (deltalake) and from a plain CSV
path, and one estimator has ``random_state=None``. A fifth version is registered with no run at all. Each gets
the assessment its metadata deserves (each input's class and its fix), published, signed and ledgered like an
audit; none is reproduced, because nothing was rebuilt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.fixtures.gitrepo import git, init_repo

pytest.importorskip("deltalake")
pytest.importorskip("xgboost")
pytest.importorskip("torch")

PINNED, MUTABLE, MISSING = "pinned", "named but mutable", "missing"

TRAIN = r'''
"""Plain MLflow training, no SDK: what a team's scheduled job looks like."""
import json
import os
import subprocess
import sys

import mlflow
import numpy as np
import pandas as pd
from mlflow.data.delta_dataset_source import DeltaDatasetSource


def tree_state():  # the one line the assessment asks for: was the tree clean?
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
    return "true" if dirty.strip() else "false"


def register(uri, name):
    return str(mlflow.register_model(uri, name).version)


mlflow.set_experiment("plain-training")
rng = np.random.default_rng(0)
X = pd.DataFrame(rng.normal(size=(80, 4)), columns=list("abcd"))
y = (X.a + X.b > 0).astype(int)
frame = X.assign(y=y)
out = {}

# 1. scikit-learn autolog on a clean tree, from a Delta table at version 1, an integer seed
from deltalake import DeltaTable, write_deltalake
from sklearn.ensemble import RandomForestRegressor  # a regressor: autolog draws no classifier plots

table = os.path.abspath(os.path.join(sys.argv[1], "lake", "churn"))
write_deltalake(table, frame.iloc[:40])
write_deltalake(table, frame.iloc[40:], mode="append")
mlflow.sklearn.autolog(log_datasets=False)
with mlflow.start_run(run_name="sk-pinned") as run:
    mlflow.set_tag("repro.dirty", tree_state())
    df = DeltaTable(table, version=1).to_pandas()
    mlflow.log_input(mlflow.data.from_pandas(df, source=DeltaDatasetSource(path=table, delta_table_version=1), name="churn"),
                     context="train")
    RandomForestRegressor(n_estimators=3, random_state=42).fit(df[list("abcd")], df.y)
out["sk-pinned"] = register(f"runs:/{run.info.run_id}/model", "sk-pinned")

# 2. the tree is now dirty; scikit-learn autolog (its own dataset input), a CSV path, random_state=None
with open("config.yaml", "a") as f:
    f.write("lr: 0.2\n")
csv = os.path.abspath(os.path.join(sys.argv[1], "train.csv"))
frame.to_csv(csv, index=False)
mlflow.sklearn.autolog()
with mlflow.start_run(run_name="sk-unseeded") as run:
    mlflow.set_tag("repro.dirty", tree_state())
    mlflow.log_input(mlflow.data.from_pandas(pd.read_csv(csv), source=csv, name="train-csv"), context="train")
    RandomForestRegressor(n_estimators=3, random_state=None).fit(X, y)
out["sk-unseeded"] = register(f"runs:/{run.info.run_id}/model", "sk-unseeded")
mlflow.sklearn.autolog(disable=True)

# 3. XGBoost autolog with a seed, a dataset from a pandas frame; the tree state is not logged
import xgboost as xgb

mlflow.xgboost.autolog(log_datasets=False)
with mlflow.start_run(run_name="xgb") as run:
    mlflow.log_input(mlflow.data.from_pandas(frame, name="frame"), context="train")
    xgb.train({"max_depth": 2, "seed": 7, "objective": "binary:logistic"}, xgb.DMatrix(X, label=y), num_boost_round=3)
out["xgb"] = register(f"runs:/{run.info.run_id}/model", "xgb")
mlflow.xgboost.autolog(disable=True)

# 4. PyTorch: log_model alone, nothing else
import torch

with mlflow.start_run(run_name="torch") as run:
    info = mlflow.pytorch.log_model(torch.nn.Linear(4, 1), name="model", serialization_format="pickle",
                                    pip_requirements=["torch==2.13.0", "mlflow"])
out["torch"] = register(info.model_uri, "torch")
print(json.dumps(out))
'''


def _classes(row: dict) -> dict[str, str]:
    return row["classes"]


@pytest.fixture(scope="module")
def world(tmp_path_factory, _mlflow_sqlite_template):
    """The plain registry (four trained versions and one with no run), assessed and published once."""
    from mlflow import MlflowClient

    from auditor.report.attest import generate_key
    from auditor.settings import Settings
    from auditor.steps import Session

    root = tmp_path_factory.mktemp("adopt")
    db = root / "mlflow.db"
    shutil.copyfile(_mlflow_sqlite_template, db)
    uri = f"sqlite:///{db}"
    repo = init_repo(root / "team-repo", {"train.py": TRAIN, "config.yaml": "lr: 0.1\n", ".gitignore": "mlruns/\n"})
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
           "GIT_PYTHON_REFRESH": "quiet", "PYTHONWARNINGS": "ignore",
           # MLflow infers requirements in a child process per model (~10 s each on 2 busy cores); cut short, it
           # writes its default requirements instead, pinned exactly the same way: what the assessment reads is alike
           "MLFLOW_REQUIREMENTS_INFERENCE_TIMEOUT": "1"}
    done = subprocess.run([sys.executable, "train.py", str(root)], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    versions = json.loads(done.stdout.strip().splitlines()[-1])
    client = MlflowClient(tracking_uri=uri)
    client.create_registered_model("no-run")
    (root / "by-hand").mkdir()
    client.create_model_version("no-run", source=str(root / "by-hand"))
    public, _ = generate_key(root / "owner.pem")
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": uri, "REPRO_HOME": str(root / "home"),
                                  "REPRO_REPORTS": str(root / "reports"), "REPRO_SIGNING_KEY": str(root / "owner.pem"),
                                  "REPRO_RESPONSIBLE": "Dana Risk"})
    session = Session(settings)
    refs = {name: f"models:/{name}/{v}" for name, v in {**versions, "no-run": "1"}.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # the audits experiment MLflow creates here keeps its artifacts under ./mlruns: this folder's
        assessed = {name: session.adopt(ref, date="2026-12-02") for name, ref in refs.items()}
        yield {"root": root, "uri": uri, "repo": repo, "refs": refs, "assessed": assessed, "session": session,
               "public": public, "env": env, "head": git(repo, "rev-parse", "HEAD").strip()}


def test_each_version_gets_the_classes_its_metadata_deserves(world):
    rows = {name: a.row for name, a in world["assessed"].items()}
    assert _classes(rows["sk-pinned"]) == {"code": PINNED, "data": PINNED, "config": PINNED, "environment": PINNED,
                                           "seeds": PINNED, "infrastructure": MISSING}
    assert _classes(rows["sk-unseeded"]) == {"code": MUTABLE, "data": MUTABLE, "config": PINNED, "environment": PINNED,
                                             "seeds": MISSING, "infrastructure": MISSING}
    assert _classes(rows["xgb"]) == {"code": MUTABLE, "data": MUTABLE, "config": PINNED, "environment": PINNED,
                                     "seeds": PINNED, "infrastructure": MISSING}
    torch_classes = _classes(rows["torch"])
    assert {k: torch_classes[k] for k in ("data", "config", "seeds")} == {"data": MISSING, "config": MISSING, "seeds": MISSING}
    assert torch_classes["code"] == MUTABLE and torch_classes["environment"] != MISSING
    assert set(_classes(rows["no-run"]).values()) == {MISSING}


def test_the_findings_name_the_identifier_and_the_one_line_fix(world):
    by_path = lambda name: {f["path"]: f for f in world["assessed"][name].row["findings"]}  # noqa: E731
    pinned = by_path("sk-pinned")
    assert f"@ {world['head']}" in pinned["code"]["message"] and "recorded as clean" in pinned["code"]["message"]
    assert "delta table" in pinned["data.churn"]["message"] and "@ version 1" in pinned["data.churn"]["message"]
    assert "random_state=42" in pinned["seeds"]["message"]
    unseeded = by_path("sk-unseeded")
    assert "recorded as dirty" in unseeded["code"]["message"] and "git diff --quiet" in unseeded["code"]["hint"]
    assert "random_state is None" in unseeded["seeds"]["message"] and "random_state=42" in unseeded["seeds"]["hint"]
    data = [f for f in world["assessed"]["sk-unseeded"].row["findings"] if f["path"].startswith("data")]
    assert any("train.csv" in f["message"] and "does not pin it" in f["message"] for f in data)
    assert all("versionId" in f["hint"] or "Delta table version" in f["hint"] for f in data)
    xgb = by_path("xgb")
    assert "does not record whether the tree was clean" in xgb["code"]["message"]
    assert "seed=7" in xgb["seeds"]["message"]
    assert "a frame built in code" in xgb["data.frame"]["message"]
    nothing = by_path("no-run")
    assert "mlflow.log_input" in nothing["data"]["hint"] and "there is no run" in nothing["data"]["message"]


def test_no_assessment_is_a_pass_and_each_is_published_signed_and_ledgered(world):
    from auditor.report.attest import load_public_key
    from auditor.report.verify import verify
    from auditor.storage import open_store

    for name, a in world["assessed"].items():
        assert a.result.verdict.value == "LINEAGE_INSUFFICIENT" and not a.result.verdict.reproduced, name
        assert a.result.verdict.exit_code == 1
        assert a.result.record is None  # nothing was captured at training time
        assert a.report and a.report.endswith(".html")
        assert "lineage recovered from MLflow metadata" in a.result.tiers["lineage"].summary
    store = open_store(str(world["root"] / "reports"))
    checked = verify(store, public_key=load_public_key(str(world["public"])))
    assert not checked.problems, checked.problems
    assert checked.entries == 5 and checked.signed == 5
    page = store.read(next(k for k in store.list("") if k.startswith("sk-pinned") and k.endswith(".html"))).decode()
    assert "Adoption: lineage insufficient" in page and "lineage recovered from MLflow metadata" in page
    # the registry shows the outcome like an audit's
    info = world["session"].registry.resolve(world["refs"]["xgb"])
    assert info.tags["repro.audit.verdict"] == "LINEAGE_INSUFFICIENT"


def test_a_repeat_for_the_same_date_publishes_nothing_new(world):
    again = world["session"].adopt(world["refs"]["xgb"], date="2026-12-02")
    assert again.skipped and again.result.verdict.value == "LINEAGE_INSUFFICIENT"
    from auditor.report import ledger
    from auditor.storage import open_store

    assert len(ledger.entries(open_store(str(world["root"] / "reports")))) == 5


def test_the_index_and_the_coverage_page_show_adoption(world):
    session = world["session"]
    rows, uri = session.coverage(write=True)
    assert {r["status"] for r in rows} == {"adoption"}
    store = session.store
    index = store.read("index.html").decode()
    assert "<td>adoption</td>" in index
    assert "adoption (lineage assessed, never audited): 5" in store.read("coverage.html").decode()


def test_the_cli_assesses_every_version_without_writing(world):
    done = subprocess.run([sys.executable, "-m", "auditor", "adopt", "--assess-only", "--json", "--tracking-uri", world["uri"]],
                          env=world["env"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["versions"] == 5 and all(r["verdict"] == "LINEAGE_INSUFFICIENT" for r in out["rows"])
    assert out["counts"]["seeds"] == {PINNED: 2, MISSING: 3}


def test_a_record_supplied_after_training_is_signed_and_marked_in_the_report(world):
    """Build 3: the owner pins what MLflow did not hold; the assessment says who supplied it and that it came later."""
    from auditor.errors import BadInput

    session = world["session"]
    ref = world["refs"]["no-run"]
    snapshot = "blake3:" + "ab" * 32
    with pytest.raises(BadInput, match="not a content id"):
        session.adopt_attach(ref, data=["train=s3://lake/snaps@latest"])
    with pytest.raises(BadInput, match="not pinned by digest"):
        session.adopt_attach(ref, data=[], image="python:3.11")
    attached = session.adopt_attach(ref, data=[f"train=s3://lake/snaps@{snapshot}"],
                                    image="registry.local/train@sha256:" + "c" * 64, seed=11)
    assert attached["responsible_person"] == "Dana Risk"
    after = session.adopt(ref, date="2026-12-03")
    assert after.result.verdict.value == "LINEAGE_INSUFFICIENT"
    findings = {f.path: f for f in after.result.findings}
    assert findings["data.train"].message.startswith("pinned: train: s3://lake/snaps@" + snapshot)
    assert "supplied after training by Dana Risk" in findings["data.train"].message
    assert "supplied after training" in findings["seeds"].message and "seed 11" in findings["seeds"].message
    assert findings["code"].message.startswith("missing")  # what was not supplied stays as MLflow held it
    page = session.store.read(after.report.rsplit("/", 1)[1]).decode()
    assert page.count("supplied after training") >= 3
    (swept,) = session.adopt_all(models="no-run").rows  # the bulk assessment reads it too
    assert swept["classes"]["data"] == PINNED and any("supplied after training" in f["message"] for f in swept["findings"])
    # the record is anchored: a tag pointed at an edited record is refused
    from auditor.adopt import supplied
    from auditor.errors import Findings

    with pytest.raises(Findings, match="changed after it was attached"):
        supplied.load(b'{"kind": "repro-audit/adopt-supplied"}', key="x", expected_sha256=attached["sha256"])


def test_the_cli_assesses_one_version_and_refuses_an_ambiguous_call(world):
    one = subprocess.run([sys.executable, "-m", "auditor", "adopt", world["refs"]["torch"], "--no-publish", "--json",
                          "--tracking-uri", world["uri"]], env=world["env"], capture_output=True, text=True, timeout=300)
    assert one.returncode == 1, one.stderr[-2000:]
    out = json.loads(one.stdout)
    assert out["verdict"] == "LINEAGE_INSUFFICIENT" and out["classes"]["seeds"] == MISSING and out["report"] is None
    # neither a version nor --assess-only (or both): the caller's error, exit 2, said before anything is opened
    from auditor.cli.adopt import adopt_cmd
    from auditor.errors import BadInput, exit_code

    options = dict(models=None, data=None, image=None, seed=None, date=None, no_publish=False, tracking_uri=world["uri"],
                   reports=None, json_out=True)
    for ref, assess_only in ((None, False), (world["refs"]["xgb"], True)):
        with pytest.raises(BadInput, match="--assess-only") as refused:
            adopt_cmd(ref=ref, assess_only=assess_only, **options)
        assert exit_code(refused.value) == 2


class _Planted:
    """Unpickling this runs ``os.system``: what a malicious plain-MLflow model artifact does to whoever loads it."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_malicious_pickle_model_is_never_loaded_by_the_assessment(world):
    """Acceptance 3, the auditor's side: the assessment reads MLmodel and the environment files as text, never the
    model. (The sandboxed rebuild that would load it, build 2, is not built: nothing here loads it at all.)"""
    import pickle

    from mlflow import MlflowClient

    root = world["root"]
    marker = root / "pickle-was-loaded"
    folder = root / "evil-model"
    folder.mkdir()
    (folder / "model.pkl").write_bytes(pickle.dumps(_Planted(str(marker))))
    (folder / "MLmodel").write_text("flavors:\n  sklearn:\n    pickled_model: model.pkl\n    serialization_format: pickle\n"
                                    "  python_function:\n    loader_module: mlflow.sklearn\n    model_path: model.pkl\n")
    (folder / "requirements.txt").write_text("scikit-learn==1.9.1\n")
    client = MlflowClient(tracking_uri=world["uri"])
    client.create_registered_model("evil")
    client.create_model_version("evil", source=str(folder))
    assessed = world["session"].adopt("models:/evil/1", publish=False)
    assert assessed.result.verdict.value == "LINEAGE_INSUFFICIENT"
    assert len(world["session"].adopt_all(models="evil").rows) == 1  # the bulk reader too
    assert not marker.exists()
    pickle.loads((folder / "model.pkl").read_bytes())  # the plant is live: loading it does run the command
    assert marker.exists()
