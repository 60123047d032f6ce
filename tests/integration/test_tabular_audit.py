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
    # measured: AUC 0.9523 -> 0.9530 (inside a +-0.005 band) while 1.2 % of the 500 decisions flip
    "xgboost-flip": ["model=xgboost", "rebuild_override=learning_rate=0.12"],
}


class World:
    """The project and its registry; each variant is trained and registered on first use."""

    def __init__(self, root: Path) -> None:
        from auditor.demo import base_env

        files = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
        self.project = init_repo(root / "project", {**files, ".gitignore": ".repro/\nmlruns/\n__pycache__/\n"})
        self.env = {**os.environ, **base_env(root)}
        self.env.pop("REPRO_TORCH_THREADS", None)  # base_env made the world's signing key, as the demo's
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


# The scorecard was once measured 8.6e-16 off in 2 arrays; 5 audits on 2026-12-02 (and fits under OpenBLAS at 1 and 2
# threads, OMP_NUM_THREADS=1, LOKY_MAX_CPU_COUNT=1, MLflow/torch imported first, another heap layout) were bit-identical:
# it is held to bitwise, so a recurrence fails here, as any unexplained divergence must.
@pytest.mark.parametrize("key", ["xgboost", "lightgbm", "catboost", "scorecard"])
def test_a_clean_run_is_reproduced_bitwise_on_its_normalised_model(world, key):
    result = _audit(world, key)
    assert result.verdict.value == "REPRODUCED_BITWISE", "\n".join([*_summaries(result).values(), *map(str, result.findings)])
    assert result.evidence["model.flavor"] == ("sklearn" if key == "scorecard" else key)
    assert result.evidence["model.set_aside"]  # the report says what normalising set aside
    flips = {m.name: m for m in result.metrics}["decision_flip_rate"]  # predictions as evidence, judged at 0
    assert flips.inside is True and flips.rebuilt == [0.0] and flips.band.upper == 0.0, flips
    assert result.evidence["predictions.decision_flip_rate"] == "0.0" and result.evidence["predictions.threshold"] == "0.5"
    assert result.evidence["predictions"].startswith("500 rows"), result.evidence["predictions"]
    # issue 40, build 5: the split is recorded; SCIPY_ARRAY_API read while unset (scikit-learn's import) is no warning
    # ("no image" stays: this world rebuilds at another thread count, a drift it may explain)
    codes = {f.code for f in result.findings}
    assert not codes & {"data.split_missing", "traced.env"}, result.findings
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


def test_a_divergence_inside_the_auc_band_that_flips_decisions_is_not_reproduced(world):
    import json

    from auditor.demo import with_env
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.steps import Session

    session = Session(with_env(world.env))
    info = session.registry.resolve(world.version("xgboost-flip"))
    registered = float(info_auc := _registered_auc(session, info))
    session.registry.set_bands(info, json.dumps({"schema": "repro.bands/1", "bands": {
        "auc": {"reference": registered, "abs_tol": 0.005, "direction": "higher"}}}))
    result = _audit(world, "xgboost-flip")
    metrics = {m.name: m for m in result.metrics}
    assert metrics["auc"].inside is True, (info_auc, metrics["auc"])  # the AUC alone would pass
    flips = metrics["decision_flip_rate"]
    assert flips.inside is False and flips.rebuilt[0] >= 0.01, flips
    assert "decisions flip at threshold 0.5" in flips.reason, flips.reason
    assert not result.verdict.value.startswith("REPRODUCED"), _summaries(result)
    assert "decision_flip_rate" in result.tiers["statistical"].summary + " ".join(result.tiers["statistical"].details)
    assert float(result.evidence["predictions.max_abs_raw_score"]) > 0
    # in the evidence JSON and the report
    doc = build_evidence(result, settings=session.settings)
    assert doc["digests"]["predictions.decision_flip_rate"] == repr(flips.rebuilt[0])
    assert any(m["name"] == "decision_flip_rate" and m["inside"] is False for m in doc["audit"]["metrics"])
    html = render_report(doc)
    assert "Predictions on the recorded evaluation data" in html and "decision_flip_rate" in html
    assert result.evidence["model.first_divergence"] in html.replace("&#39;", "'")


def _registered_auc(session, info) -> float:
    record, _ = session.registry.load_record(info)
    return float(record.outputs.metrics["auc"])


def test_the_demo_registers_variants_this_module_audits():
    """``make demo``'s tabular versions are the ones audited above, so the verdicts its index shows are tested here."""
    from auditor.demo import TABULAR_VARIANTS

    audited = {tuple(v): k for k, v in VARIANTS.items()}
    shown = [audited.get(v.overrides) for v in TABULAR_VARIANTS]
    assert shown == ["xgboost", "scorecard", "xgboost-flip"], shown


def test_a_calibrated_tabular_model_gets_its_predictive_multiplicity_from_the_stored_reruns(world):
    """Issue 31, build 3 end to end: each seed-varied calibration rerun leaves its own scores (the rebuild scores
    the rebuilt model alone when no registered model is handed to it), the calibration keeps their decisions, and
    the audit's report works the figure out from them, never "not measured" for a scored tabular model."""
    from auditor.settings import Settings
    from auditor.steps import AuditOptions, Session

    ref = world.version("xgboost")
    session = Session(Settings.from_env(world.env))
    session.calibrate(ref, reruns=3, same_seed=2)
    result = session.audit(ref, AuditOptions(date="2026-12-20", publish=False)).result
    figure = result.multiplicity
    assert figure is not None and figure.status == "measured", figure
    assert figure.reruns == 3 and figure.rows == 500 and 0.0 <= figure.flip_share <= 1.0
    assert figure.flip_share > 0  # XGBoost's seed moves its column/row sampling: some of 500 decisions differ
