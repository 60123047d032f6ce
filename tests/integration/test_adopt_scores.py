"""Issue 42, acceptance 2 and 3: adoption compares scores, its report agrees with its evidence, autolog is adoptable.

A real git repository (cloned from an upstream, so MLflow records its URL) holds three plain-MLflow training scripts,
each reading a real Delta table at version 1 (2,000 rows) and logging it with ``mlflow.log_input`` at that version:

- ``train_scaled.py``: a logistic regression whose coefficients and intercept an environment variable scales by 2.5
  after fitting (not a logged param), logged with ``mlflow.sklearn.log_model``. Every label stays the same (the
  sign of each margin holds); the probabilities do not. ``adopt --rebuild`` runs it in the sandbox, where the variable
  is not set: OUT_OF_TOLERANCE, exit 1, the score difference and the decisions it flips at the cut-offs named
  (the old comparison of ``predict()`` labels said REPRODUCED_WITHIN_TOLERANCE).
- ``train_autolog.py``: ``mlflow.sklearn.autolog()`` with its defaults, so autolog logs the frame ``fit`` was given
  (source ``code``) beside the Delta input; the frame is the table's rows, so it verifies, counts as pinned, and the
  version rebuilds REPRODUCED_BITWISE without ``log_datasets=False``. Its published HTML says what its JSON says, tier
  by tier and input by input, and its evidence pack says why it holds no run record.
- ``train_standardised.py``: the same, but ``fit`` is given standardised columns: the frame does not verify, and the
  rebuild is refused with the fix that names ``log_datasets=False`` and shows the ``log_input`` call.

And no verb creates a registry database: ``adopt --assess-only --tracking-uri sqlite:///<typo>`` is exit 2, nothing made.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.fixtures.gitrepo import init_repo

pytest.importorskip("deltalake")
pytest.importorskip("sklearn")

HEAD = r'''
"""Plain MLflow training, no SDK."""
import os
import subprocess

import mlflow
from deltalake import DeltaTable
from mlflow.data.delta_dataset_source import DeltaDatasetSource

TABLE = {table!r}
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
mlflow.set_experiment("plain-training")


def log_delta(df):
    mlflow.set_tag("repro.dirty", "true" if dirty.strip() else "false")
    mlflow.log_input(mlflow.data.from_pandas(df, source=DeltaDatasetSource(path=TABLE, delta_table_version=1), name="credit"),
                     context="train")
'''
SCALED = r'''
from sklearn.linear_model import LogisticRegression

with mlflow.start_run(run_name="scaled") as run:
    df = DeltaTable(TABLE, version=1).to_pandas()
    log_delta(df)
    model = LogisticRegression(random_state=0).fit(df[list("abcd")], df.y)
    mlflow.log_params(model.get_params())
    scale = float(os.environ.get("PD_SCALE", "1"))  # read after fitting, never logged
    model.coef_, model.intercept_ = model.coef_ * scale, model.intercept_ * scale
    info = mlflow.sklearn.log_model(model, name="model")
print(mlflow.register_model(info.model_uri, "scaled").version)
'''
AUTOLOG = r'''
from sklearn.ensemble import RandomForestRegressor

mlflow.sklearn.autolog()  # the defaults: autolog also logs the frame fit() is given (source: code)
with mlflow.start_run(run_name="{name}") as run:
    df = DeltaTable(TABLE, version=1).to_pandas()
    log_delta(df)
    x = df[list("abcd")]
    if {standardise}:
        x = (x - x.mean()) / x.std()
    RandomForestRegressor(n_estimators=3, random_state=42).fit(x, df.y)
print(mlflow.register_model(f"runs:/{{run.info.run_id}}/model", "{name}").version)
'''


def _env(uri: str, root) -> dict[str, str]:
    return {**os.environ, "MLFLOW_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true",
            "GIT_PYTHON_REFRESH": "quiet", "PYTHONWARNINGS": "ignore", "MLFLOW_REQUIREMENTS_INFERENCE_TIMEOUT": "1",
            "REPRO_HOME": str(root / "home"), "REPRO_REPORTS": str(root / "reports"),
            "REPRO_SIGNING_KEY": str(root / "owner.pem"), "REPRO_RESPONSIBLE": "Dana Risk", "REPRO_RUNNER": "process"}


@pytest.fixture(scope="module")
def world(tmp_path_factory, _mlflow_sqlite_template):
    """Three trained versions; the scaled one rebuilt by the CLI, the autolog ones by the step; the assess-only sweep."""
    import numpy as np
    import pandas as pd
    from deltalake import write_deltalake

    from auditor.report.attest import generate_key
    from auditor.settings import Settings
    from auditor.steps import Session

    root = tmp_path_factory.mktemp("adopt-scores")
    shutil.copyfile(_mlflow_sqlite_template, root / "mlflow.db")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    table = str(root / "lake" / "credit")
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(rng.normal(size=(2000, 4)), columns=list("abcd"))
    frame["y"] = (frame.a + frame.b + rng.normal(size=2000) > 0).astype("int64")
    write_deltalake(table, frame.iloc[:1000])
    write_deltalake(table, frame.iloc[1000:], mode="append")  # version 1: 2,000 rows
    head = HEAD.format(table=table)
    upstream = init_repo(root / "upstream", {
        "train_scaled.py": head + SCALED, ".gitignore": "mlruns/\n",
        "train_autolog.py": head + AUTOLOG.format(name="autolog", standardise=False),
        "train_standardised.py": head + AUTOLOG.format(name="standardised", standardise=True)})
    subprocess.run(["git", "clone", "-q", str(upstream), str(root / "team")], check=True)
    public, _ = generate_key(root / "owner.pem")
    env = _env(uri, root)
    for script, extra in (("train_scaled.py", {"PD_SCALE": "2.5"}), ("train_autolog.py", {}), ("train_standardised.py", {})):
        done = subprocess.run([sys.executable, script], cwd=root / "team", env={**env, **extra}, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    out = {"root": root, "uri": uri, "table": table, "public": public, "env": env}
    scaled = subprocess.run([sys.executable, "-m", "auditor", "adopt", "models:/scaled/1", "--rebuild", "--json",
                             "--date", "2026-12-02"], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    out["scaled"] = scaled
    session = Session(Settings.from_env({k: v for k, v in env.items() if k.startswith(("REPRO_", "MLFLOW_TRACKING"))}))
    out["session"] = session
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        out["sweep"] = {r["ref"]: r for r in session.adopt_all().rows}
        out["autolog"] = session.adopt_rebuild("models:/autolog/1", date="2026-12-02")
        out["standardised"] = session.adopt_rebuild("models:/standardised/1", publish=False)
        yield out


def test_post_fit_coefficient_scaling_is_out_of_tolerance_naming_the_scores_and_the_flips(world):
    done = world["scaled"]
    assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-3000:])
    said = json.loads(done.stdout)
    assert said["verdict"] == "OUT_OF_TOLERANCE", said
    assert said["tiers"]["statistical"] == "fail" and said["tiers"]["artifact_recovery"] == "pass"
    summary = said["summaries"]["statistical"]
    assert "scores differ beyond float resolution" in summary and "2000 row(s) of Delta table" in summary
    found = re.search(r"predict_proba P\(class 1\): max \|difference\| ([0-9.]+), (\d+) of 2000 row\(s\) beyond float "
                      r"resolution, (\d+) by more than 0\.05; (\d+) decision\(s\) flip at cut-off ([0-9.]+)", summary)
    assert found, summary
    max_abs, beyond, over, flips = float(found[1]), int(found[2]), int(found[3]), int(found[4])
    assert 0.05 < max_abs < 0.5 and over > 100 and beyond > over and flips > 10
    assert "0 decision(s) flip at the model's own threshold" in summary  # every label the same: what predict() compared
    pred = said["predictions"]
    assert pred["predictions.flips"] == "0" and float(pred["predictions.max_abs_score"]) == pytest.approx(max_abs, rel=1e-3)
    cutoffs = dict(re.findall(r"([0-9.]+): (\d+)", pred["predictions.cutoffs"].split(":", 1)[1]))
    assert int(cutoffs["0.3"]) > 0 and int(cutoffs["0.5"]) == 0, cutoffs
    # the published report names it too, in the banner and the tier table
    page = (world["root"] / "reports" / os.path.basename(said["report"])).read_text("utf-8")
    assert "the rebuilt model&#39;s scores differ from the registered model&#39;s" in page or \
        "the rebuilt model's scores differ from the registered model's" in page
    assert "decisions flipped at each cut-off of predict_proba P(class 1)" in page


def test_autologs_frame_verified_against_the_delta_input_rebuilds_bitwise(world):
    row = world["sweep"]["models:/autolog/1"]
    assert row["classes"]["data"] == "pinned", row["findings"]
    frame = next(f for f in row["findings"] if f["path"] == "data.dataset")
    assert f"verified: the rows of Delta table {world['table']} @ version 1" in frame["message"]
    result = world["autolog"].result
    assert result.verdict.value == "REPRODUCED_BITWISE", (result.error, result.tiers, result.log_tail[-2000:])
    assert any("the frame autolog logged is taken as the rows of Delta table" in a for a in result.assumptions)


def test_autologs_frame_that_does_not_verify_is_refused_with_the_log_input_fix(world):
    row = world["sweep"]["models:/standardised/1"]
    assert row["classes"]["data"] == "named but mutable"
    result = world["standardised"].result
    assert result.verdict.value == "LINEAGE_INSUFFICIENT"
    why = next(d for d in result.tiers["lineage"].details if d.startswith("not rebuilt: data.dataset is named but mutable"))
    assert "fit() was given other rows, columns or values" in why
    assert "log_datasets=False" in why and "mlflow.log_input(mlflow.data.from_pandas(df, source=DeltaDatasetSource(" \
        f"path={world['table']!r}, delta_table_version=1), name='credit'), context='train')" in why


def _pills(part: str) -> dict[str, str]:
    return dict(re.findall(r'<span class="pill [^"]*">([A-Za-z ]+): ([a-z ]+)</span>', part))


def test_a_bitwise_adoptions_html_says_what_its_json_says(world):
    from auditor.report.pack import build_pack
    from auditor.report.view import TIER_TITLES

    store = world["session"].store
    stem = world["autolog"].report.rsplit("/", 1)[1].removesuffix(".html")
    html = store.read(f"{stem}.html").decode()
    doc = json.loads(store.read(f"{stem}.json"))
    tiers = {TIER_TITLES[k]: t["status"] for k, t in doc["audit"]["tiers"].items()}
    assert set(tiers.values()) == {"pass"} and len(tiers) == 4
    assert _pills(html.split("</header>", 1)[0]) == tiers  # the header
    table = html.split('id="tiers"', 1)[1].split("</table>", 1)[0]
    assert dict(re.findall(r'<tr><td>([A-Za-z ]+)</td><td><span class="pill [^"]*">([a-z ]+)</span>', table)) == tiers
    assert "not run" not in html
    rows = dict(re.findall(r'<tr><td class="nowrap">([^<]+)</td><td class="nowrap"><span class="pill [^"]*">([^<]+)</span>',
                           html.split('id="lineage"', 1)[1].split("</section>", 1)[0]))
    labels = {"pinned": "pinned", "mutable": "named but mutable", "missing": "missing"}
    classes = {f["path"]: labels[f["code"].rsplit(".", 1)[1]] for f in doc["audit"]["findings"]
               if f["code"].rsplit(".", 1)[1] in labels}
    assert rows == classes, (rows, classes)
    assert {p for p, c in classes.items() if c == "pinned"} >= {"code", "data.credit", "data.dataset", "config",
                                                               "environment", "seeds"}
    # the pack says why there is no run record, and that it is not an audit that stopped
    pack = build_pack(store, stem, public_key=world["public"].read_bytes())
    record = next(item["why"] for item in pack.left_out if item["what"] == "the run record")
    assert "stopped before" not in record and "recovered from MLflow metadata" in record


def test_no_verb_creates_a_registry_database_that_does_not_exist(tmp_path):
    typo = tmp_path / "mlfow.db"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "REPRO_HOME": str(tmp_path / "home")}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([sys.executable, "-m", "auditor", "adopt", "--assess-only", "--tracking-uri", f"sqlite:///{typo}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, (done.stdout, done.stderr[-2000:])
    assert "does not exist" in done.stderr and str(typo) in done.stderr and "Traceback" not in done.stderr
    assert not typo.exists()
