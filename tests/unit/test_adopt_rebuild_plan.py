"""The pure half of adopt's rebuild (``auditor.adopt.rebuild``): which versions may be rebuilt, and the judgement."""

from __future__ import annotations

from auditor.adopt.rebuild import drift, judge, plan, requirements
from auditor.adopt.rules import Dataset, Metadata, classify

COMMIT = "a" * 40
PINNED_META = Metadata(
    name="churn", version="3", run_id="r1", run_found=True, source="/models/m",
    tags={"mlflow.source.git.commit": COMMIT, "mlflow.source.git.repoURL": "https://git.example/team.git",
          "mlflow.source.name": "train.py", "repro.dirty": "false"},
    params={"n_estimators": "3", "random_state": "42"},
    datasets=(Dataset(name="churn", source_type="delta_table", source={"path": "/lake/churn", "delta_table_version": 1}),),
    env_files={"requirements.txt": "mlflow==3.17.2\nscikit-learn==1.9.1\n", "python_env.yaml": "python: 3.11.9\n"},
    mlmodel={"flavors": {"sklearn": {"pickled_model": "model.pkl"}, "python_function": {}}},
)


def _plan(meta: Metadata):
    return plan(meta, classify(meta), ref="models:/churn/3")


def test_a_fully_pinned_version_is_runnable_and_lists_its_assumptions():
    p = _plan(PINNED_META)
    assert p.runnable, p.blockers
    assert (p.entry, p.flavour, p.model_file) == ("train.py", "sklearn", "model.pkl")
    assert [(d.table, d.version) for d in p.delta] == [("/lake/churn", 1)]
    said = "\n".join(p.assumptions)
    assert "random_state=42" in said and "Delta table /lake/churn at version 1" in said and "no command-line" in said
    assert requirements("mlflow==3.17.2\nnumpy>=2\n# x\n") == {"mlflow": "3.17.2"}
    assert drift({"mlflow": "3.17.2", "scikit-learn": "1.9.1"}, {"mlflow": "3.17.2", "scikit-learn": None}) == [
        "scikit-learn==1.9.1 recorded, not installed in the rebuild"]


def test_an_unpinned_input_or_an_unknown_flavour_blocks_the_rebuild_naming_it():
    from dataclasses import replace

    unseeded = _plan(replace(PINNED_META, params={"n_estimators": "3", "random_state": "None"}))
    assert not unseeded.runnable and any(b.startswith("seeds is missing") for b in unseeded.blockers)
    no_remote = _plan(replace(PINNED_META, tags={k: v for k, v in PINNED_META.tags.items() if "repoURL" not in k}))
    assert any("no repository URL" in b for b in no_remote.blockers)
    onnx = _plan(replace(PINNED_META, mlmodel={"flavors": {"onnx": {}}}))
    assert any("no flavour the sandbox can load (found: onnx" in b for b in onnx.blockers)


def test_the_judgement_needs_identical_predictions_and_bytes_for_bitwise():
    p = _plan(PINNED_META)
    found = {"registered_loaded": True, "rebuilt_params": dict(PINNED_META.params),
             "predictions": {"rows": 80, "data": "Delta table /lake/churn @ version 1", "identical": True}}
    verdict, tiers, problems = judge(p, found, registered_sha256="sha256:1", rebuilt_sha256="sha256:1")
    assert verdict.value == "REPRODUCED_BITWISE" and tiers["bitwise"].status == "pass" and not problems
    verdict, tiers, _ = judge(p, found, registered_sha256="sha256:1", rebuilt_sha256="sha256:2")
    assert verdict.value == "REPRODUCED_WITHIN_TOLERANCE" and tiers["bitwise"].status == "fail"
    other = {**found, "predictions": {**found["predictions"], "identical": False, "max_abs": 0.5, "differing": 3}}
    assert judge(p, other, registered_sha256="sha256:1", rebuilt_sha256="sha256:2")[0].value == "OUT_OF_TOLERANCE"
    changed = {**found, "rebuilt_params": {"n_estimators": "4", "random_state": "42"}}
    verdict, _, problems = judge(p, changed, registered_sha256="sha256:1", rebuilt_sha256="sha256:1")
    assert verdict.value == "OUT_OF_TOLERANCE" and "n_estimators=4 (registered 3)" in problems[0]


def test_a_model_that_predicts_the_same_but_gives_other_registered_metrics_is_not_reproducible():
    # issue 26, point 2, on the adopt path (the third review): metrics on rows the clock picked, the model the same
    from dataclasses import replace

    p = _plan(replace(PINNED_META, metrics={"accuracy": 0.875, "train_seconds": 4.0}))
    found = {"registered_loaded": True, "rebuilt_params": dict(PINNED_META.params),
             "predictions": {"rows": 80, "data": "Delta table /lake/churn @ version 1", "identical": True}}
    other = {**found, "rebuilt_metrics": {"accuracy": 0.8125, "train_seconds": 9.0}}
    verdict, tiers, _ = judge(p, other, registered_sha256="sha256:1", rebuilt_sha256="sha256:1")
    assert verdict.value == "NOT_REPRODUCIBLE", tiers
    assert tiers["artifact_recovery"].summary.startswith("the registered metrics are not reproducible from the registered model")
    assert "accuracy" in tiers["artifact_recovery"].summary
    same = {**found, "rebuilt_metrics": {"accuracy": 0.875, "train_seconds": 9.0}}
    verdict, tiers, _ = judge(p, same, registered_sha256="sha256:1", rebuilt_sha256="sha256:1")
    assert verdict.value == "REPRODUCED_BITWISE" and "gives the registered metrics" in tiers["artifact_recovery"].summary
    none = {**found, "rebuilt_metrics": {}}
    verdict, tiers, _ = judge(p, none, registered_sha256="sha256:1", rebuilt_sha256="sha256:1")
    assert verdict.value == "REPRODUCED_BITWISE" and any("not recomputed" in d for d in tiers["artifact_recovery"].details)
