"""``repro-audit compare`` with real reruns (issue 31, acceptance 2): a seed twin, a better feature, a worse model.

Everything is real: a git project holding a small scikit-learn script (a random forest on generated data,
recorded with ``auditor.generated``, saved with ``run.save_model``), trained and registered in MLflow on
SQLite; the command calibrates each version by rerunning that script under seed-varied seeds (the process
runner) and compares their reruns. Three versions of one model:

- ``incumbent``: features x0-x2, seed 7 (the champion alias);
- ``twin``: the same recipe under seed 8: within seed noise;
- ``better``: adds feature x3, which carries signal: an improvement beyond seed noise;

and "worse" is the incumbent proposed against ``better`` (a candidate that lacks the better feature).
Each version is calibrated once, by the first comparison that needs it; later comparisons reuse the stored
reruns (never rerun). Reruns are the slow part (a process each): 3 trainings and 3 x (2 same-seed + 3 seed-varied) reruns. Measured
2026-12-02 on the shared 2-core machine at load 10-23: 18 min for the module (not measured on a quiet machine;
the module is marked slow and given a long timeout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("skops")

from tests.fixtures.gitrepo import init_repo  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TRAIN = '''"""A random forest on generated data; `features` picks the columns it sees."""
import json, sys
from pathlib import Path

import numpy as np

import auditor

FEATURES = {"base": [0, 1, 2], "better": [0, 1, 2, 3], "worse": [0]}


def make_data(rows):
    rng = np.random.default_rng(20261202)  # fixed: the seed varies the model, not the data
    x = rng.normal(size=(rows, 4))
    logit = 1.0 * x[:, 0] - 0.8 * x[:, 1] + 0.6 * x[:, 2] + 1.4 * x[:, 3] + 0.5 * rng.normal(size=rows)
    return x, (logit > 0).astype(np.int64)


def main():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import roc_auc_score

    x, y = make_data(1600)
    with auditor.track(config=Path(__file__).with_name("config.yaml"), overrides=sys.argv[1:],
                       data={"train": auditor.generated(x=x, y=y)}, experiment="compare") as run:
        cols = FEATURES[run.config["features"]]
        cut = 1000
        model = RandomForestClassifier(n_estimators=8, max_depth=4, max_features=1, n_jobs=1, random_state=run.seed)
        model.fit(x[:cut, cols], y[:cut])
        run.log_metrics({"auc": float(roc_auc_score(y[cut:], model.predict_proba(x[cut:, cols])[:, 1]))})
        run.save_model(model)
        print("trained", json.dumps(run.record.outputs.metrics), flush=True)


if __name__ == "__main__":
    main()
'''
CONFIG = "seed: 7\nfeatures: base\n"
VERSIONS = {"incumbent": [], "twin": ["seed=8"], "better": ["features=better"]}
RERUNS = "3"  # the fewest the command takes: each rerun is a process


class World:
    def __init__(self, root: Path) -> None:
        from auditor.demo import base_env

        self.project = init_repo(root / "project", {"train.py": TRAIN, "config.yaml": CONFIG,
                                                    ".gitignore": ".repro/\nmlruns/\n__pycache__/\n"})
        self.base = base_env(root)
        self.env = {**os.environ, **self.base}
        self.calibrated: set[str] = set()
        self.refs = {key: self._train(key, args) for key, args in VERSIONS.items()}

    def _train(self, key: str, args: list[str]) -> str:
        from mlflow import MlflowClient

        import auditor

        done = subprocess.run([sys.executable, "train.py", *args], cwd=self.project, env=self.env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        uri = self.env["MLFLOW_TRACKING_URI"]
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("compare")
        run = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)[0]
        version = auditor.register_model(run.info.run_id, "forest", tracking_uri=uri)
        if key == "incumbent":
            client.set_registered_model_alias("forest", "champion", str(version))
        return f"models:/forest/{version}"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("compare-world"))


@pytest.fixture()
def cli(world, monkeypatch):
    from auditor.settings import get_settings

    for key, value in world.base.items():
        if key not in ("REPRO_SIGNING_KEY", "REPRO_SIGNER"):  # the demo's key is made by the demo: unsigned here
            monkeypatch.setenv(key, value)
    get_settings.cache_clear()  # the command resolves the settings once per process: this world's
    yield world
    get_settings.cache_clear()


def _run(capsys, *args: str) -> tuple[int, str]:
    from auditor.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["compare", *args])
    return stopped.value.code, capsys.readouterr().out


@pytest.mark.parametrize(("candidate", "incumbent", "code", "gate"), [
    ("twin", "models:/forest@champion", 1, "within_noise"),
    ("better", "models:/forest@champion", 0, "beyond_noise"),
    ("incumbent", "better", 1, "worse"),
], ids=["seed twin", "better feature", "worse"])
def test_the_gate_from_real_reruns(cli, capsys, candidate, incumbent, code, gate):
    against = cli.refs.get(incumbent, incumbent)
    got, out = _run(capsys, cli.refs[candidate], against, "--reruns", RERUNS, "--json")
    doc = json.loads(out)
    assert "metrics" in doc, out
    row = doc["metrics"][0]
    assert (got, doc["gate"]) == (code, gate), json.dumps(row, indent=1)
    assert doc["incumbent"] == cli.refs.get(incumbent, cli.refs["incumbent"]) and row["metric"] == "auc"
    assert len(row["candidate"]) == len(row["incumbent"]) == int(RERUNS)  # real reruns, one auc each
    assert len(set(row["candidate"])) > 1 and len(set(row["incumbent"])) > 1  # the seed moved them
    if gate == "beyond_noise":
        assert row["low"] > 0 and row["p_better"] >= 0.75
    elif gate == "worse":
        assert row["high"] < 0 and row["p_better"] < 0.25
    else:
        assert row["low"] <= 0 <= row["high"]
    # a version is calibrated by the first comparison that needs it; its stored reruns are reused after
    sides = {cli.refs[candidate], doc["incumbent"]}
    assert set(doc["calibrated_now"]) == sides - cli.calibrated, doc["calibrated_now"]
    cli.calibrated |= sides


def test_words_and_thresholds_mlflow_builds(cli, capsys):
    from mlflow.models import MetricThreshold

    got, out = _run(capsys, cli.refs["better"], "models:/forest@champion", "--reruns", RERUNS)
    assert got == 0 and f"{cli.refs['better']} vs {cli.refs['incumbent']}: improvement beyond seed noise" in out
    cli.calibrated |= {cli.refs["better"], cli.refs["incumbent"]}
    code, out = _run(capsys, cli.refs["better"], "models:/forest@champion", "--json", "--no-calibrate")
    doc = json.loads(out)
    assert doc["calibrated_now"] == []  # both stored: nothing rerun
    stored = json.loads((Path(cli.env["REPRO_REPORTS"]) / doc["published"]["thresholds"].split("/reports/", 1)[1]).read_text())
    assert stored == doc["thresholds"]
    built = {name: MetricThreshold(**kwargs) for name, kwargs in stored.items()}
    assert built["auc"].greater_is_better is True and built["auc"].min_absolute_change > 0


def test_a_malformed_ref_is_a_usage_error(cli, capsys):
    code, _ = _run(capsys, "m/2", "models:/forest@champion")
    assert code == 2
