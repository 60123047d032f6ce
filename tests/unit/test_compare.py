"""The promotion gate (issue 31, build point 2): is a candidate's improvement real or within seed noise?

The math is checked by hand on small cases; the step runs through ``Session.compare`` over the in-memory
registry with a fake runner whose metric is a per-version quality plus a deterministic, seed-driven noise
(stand-ins handed to the session, as in test_audit_outcomes.py), so calibration runs for real around it.
"""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest
from safetensors.numpy import save

from auditor.contract import ENV_SEED
from auditor.errors import BadInput
from auditor.judge.compare import compare_reruns, mlflow_threshold, p_better, welch_interval
from auditor.lineage.record import Artifact, Outputs
from auditor.rebuild.runners import RunOutcome
from auditor.rebuild.workspace import Workspace
from auditor.registry.memory import MemoryRegistry
from auditor.settings import Settings
from auditor.steps import Session
from tests.fixtures.records import complete_record


# -- the math ---------------------------------------------------------------------------------------
def test_p_better_counts_every_pair_and_ties_half():
    assert p_better([3, 4], [1, 2], "higher") == 1.0
    assert p_better([1, 2], [3, 4], "higher") == 0.0
    assert p_better([1, 2], [2, 3], "higher") == pytest.approx(0.5 / 4)  # one tie in four pairs
    assert p_better([0.1], [0.2], "lower") == 1.0


def test_the_welch_interval_matches_a_hand_computation():
    diff, low, high, df = welch_interval([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
    # s² = 1 on each side, se = sqrt(2/3), df = 4, t(0.975, 4) = 2.776445
    assert diff == 1.0 and df == pytest.approx(4.0)
    assert high - diff == pytest.approx(2.776445 * (2 / 3) ** 0.5, rel=1e-5)
    assert diff - low == pytest.approx(high - diff)


def test_gates_beyond_within_worse():
    inc = [{"auc": 0.80 + d} for d in (-0.004, -0.002, 0.0, 0.002, 0.004)]
    better = [{"auc": 0.85 + d} for d in (-0.004, -0.002, 0.0, 0.002, 0.004)]
    same = [{"auc": 0.801 + d} for d in (0.003, -0.004, 0.001, -0.002, 0.002)]
    worse = [{"auc": 0.75 + d} for d in (-0.004, -0.002, 0.0, 0.002, 0.004)]
    assert compare_reruns("c", "i", better, inc).gate == "beyond_noise"
    assert compare_reruns("c", "i", same, inc).gate == "within_noise"
    assert compare_reruns("c", "i", worse, inc).gate == "worse"
    loss = compare_reruns("c", "i", [{"loss": 1 - m["auc"]} for m in better], [{"loss": 1 - m["auc"]} for m in inc])
    assert loss.gate == "beyond_noise" and loss.metrics[0].diff < 0  # lower is better


def test_thresholds_are_mlflow_metric_thresholds():
    kwargs = mlflow_threshold([0.85, 0.86, 0.84], [0.80, 0.81, 0.79], "higher")
    assert kwargs["greater_is_better"] is True and kwargs["min_absolute_change"] > 0 and kwargs["threshold"] < 0.80
    zero = mlflow_threshold([0.9, 0.9], [0.9, 0.9], "lower")
    assert zero["min_absolute_change"] > 0  # never zero: MLflow refuses it (MLflow's own class: tests/integration/test_compare_cli.py)


# -- the step, through the session -----------------------------------------------------------------
QUALITY = {"incumbent": 0.80, "twin": 0.80, "better": 0.86, "worse": 0.74}
VARIANTS = list(QUALITY)


def _noise(seed: int) -> float:
    return random.Random(seed).uniform(-0.01, 0.01)


class SeedRunner:
    """Trains ``quality + noise(seed)``: the version's quality comes from its workspace (see ``prepare``)."""

    name = "fake"

    def __init__(self):
        self.runs = 0

    def run(self, spec):
        self.runs += 1
        seed = int(spec.env[ENV_SEED])
        quality = float((spec.cwd / "quality").read_text())
        auc = round(quality + _noise(seed), 6)
        (spec.output_dir / "run_record.json").write_text(complete_record().to_json())
        (spec.output_dir / "metrics.json").write_text(json.dumps({"auc": auc, "log_loss": round(1 - auc, 6)}))
        (spec.output_dir / "model.safetensors").write_bytes(_weights(auc))
        return RunOutcome(exit_code=0, wall_s=0.01, log="trained\n", log_path=spec.output_dir / "log")


def _weights(value: float) -> bytes:
    return save({"w": np.full((2, 2), value, dtype=np.float32)})


def prepare(record, diff, dest, settings):
    project = dest / "code"
    project.mkdir(parents=True)
    (project / "quality").write_text(str(QUALITY[VARIANTS[record.seeds.seed - 100]]))  # the recorded seed names the variant
    return Workspace(root=dest, repo_dir=project, project_dir=project, config_path=dest / "config.json", data_dirs={})


def registration(i: int, variant: str):
    """The record and weights of version ``i + 1`` (``variant``): what the runner trains under its recorded seed
    (100 + i), so that its same-seed reruns reproduce the registered model, as calibration requires."""
    base = complete_record()
    auc = round(QUALITY[variant] + _noise(100 + i), 6)
    weights = _weights(auc)
    record = base.model_copy(update={
        "seeds": base.seeds.model_copy(update={"seed": 100 + i}),
        "outputs": Outputs(metrics={"auc": auc, "log_loss": round(1 - auc, 6)}, artifacts=[Artifact(
            name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(),
            size=len(weights))])})
    return record, weights


@pytest.fixture()
def world(tmp_path):
    registry = MemoryRegistry.named(f"memory://compare-{tmp_path.name}")
    refs = {}
    for i, variant in enumerate(QUALITY):
        record, weights = registration(i, variant)
        refs[variant] = registry.register_record("m", record, weights=weights).ref
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
                                  "MLFLOW_TRACKING_URI": registry.uri})
    runner = SeedRunner()
    yield Session(settings, registry=registry, runner=runner, prepare=prepare), refs, runner, tmp_path
    MemoryRegistry.forget(registry.uri)


@pytest.mark.parametrize(("variant", "gate"), [("twin", "within_noise"), ("better", "beyond_noise"), ("worse", "worse")])
def test_compare_calibrates_both_and_gives_the_gate(world, variant, gate):
    session, refs, runner, tmp = world
    result = session.compare(refs[variant], refs["incumbent"], reruns=5)
    assert result.gate == gate, [m.sentence for m in result.metrics]
    assert {m.metric for m in result.metrics} == {"auc", "log_loss"}
    assert result.calibrated_now == [refs[variant], refs["incumbent"]]
    assert runner.runs == 2 * (2 + 5)  # same-seed and seed-varied reruns of each version
    thresholds = json.loads((tmp / "reports" / result.published["thresholds"].split("/reports/", 1)[1]).read_text())
    assert thresholds["auc"]["greater_is_better"] is True and thresholds["log_loss"]["greater_is_better"] is False
    again = session.compare(refs[variant], refs["incumbent"], reruns=5, publish=False)
    assert runner.runs == 2 * (2 + 5) and again.calibrated_now == []  # stored calibrations are reused, never rerun
    assert again.gate == gate


def test_an_alias_names_the_incumbent_and_the_same_version_twice_is_refused(world):
    session, refs, _, _ = world
    session.registry.set_alias("m", "champion", refs["incumbent"].rsplit("/", 1)[1])
    result = session.compare(refs["better"], "models:/m@champion", reruns=5, publish=False)
    assert result.incumbent == refs["incumbent"] and result.gate == "beyond_noise"
    with pytest.raises(BadInput, match="same version"):
        session.compare(refs["incumbent"], "models:/m@champion", publish=False)


def test_without_calibration_and_calibrate_missing_off_it_says_what_to_run(world):
    session, refs, _, _ = world
    with pytest.raises(BadInput, match="no calibration"):
        session.compare(refs["better"], refs["incumbent"], calibrate_missing=False)


def test_reruns_in_parallel_give_the_same_calibration_in_the_seeds_order(world):
    """REPRO_RERUN_WORKERS: the reruns run that many at a time; the stored reruns, in seed order, and their bands
    are those of one at a time, and the cost says how many ran at once."""
    import threading

    session, refs, runner, tmp = world
    seen: set[str] = set()
    running, most = [0], [0]
    lock = threading.Lock()
    inner = runner.run

    def counted(spec):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            import time

            time.sleep(0.05)  # long enough for the pool to start the others
            seen.add(threading.current_thread().name)
            return inner(spec)
        finally:
            with lock:
                running[0] -= 1

    runner.run = counted
    one = session.calibrate(refs["twin"], reruns=5).calibration
    parallel = Session(Settings.from_env({"REPRO_HOME": str(tmp / "home2"), "REPRO_REPORTS": str(tmp / "reports2"),
                                          "MLFLOW_TRACKING_URI": session.registry.uri, "REPRO_RERUN_WORKERS": "3"}),
                       registry=session.registry, runner=runner, prepare=prepare)
    many = parallel.calibrate(refs["better"], reruns=5).calibration
    assert most[0] == 3 and len(seen) > 1
    from auditor.steps.calibrate import calibration_seeds

    assert [r.seed for r in many.seed_varied] == calibration_seeds(102, 5)  # better's recorded seed: in order
    assert [r.seed for r in one.seed_varied] == calibration_seeds(101, 5)
    assert [r.metrics["auc"] for r in many.seed_varied] == [round(QUALITY["better"] + _noise(s), 6)
                                                           for s in calibration_seeds(102, 5)]
    assert many.cost["workers"] == 3 and many.cost["elapsed_s"] <= many.cost["wall_s"] + 1
    assert one.cost["workers"] == 1


class _SchemeRunner(SeedRunner):
    """Trains as SeedRunner does, fingerprinting what its model consumed by another scheme than the record's, or
    (``other_data``) by the record's scheme over other data."""

    other_data = False

    def run(self, spec):
        from auditor.lineage.record import ConsumedData, ConsumedStream, RunRecord

        done = super().run(spec)
        path = spec.output_dir / "run_record.json"
        record = RunRecord.model_validate_json(path.read_text())
        consumed = (ConsumedData(scheme=1, streams={"fit": ConsumedStream(batches=1, first=["other"])}) if self.other_data
                    else ConsumedData(scheme=99))
        path.write_text(record.model_copy(update={"consumed": consumed}).to_json())
        return done


class _OtherDataRunner(_SchemeRunner):
    other_data = True


@pytest.mark.parametrize("code", ["consumed.unknown", "consumed.differs"])
@pytest.mark.parametrize("same_weights", [True, False], ids=["bit-identical", "differing"])
def test_a_consumed_difference_blocks_only_a_rebuild_whose_weights_differ(tmp_path, same_weights, code):
    """A record fingerprinted by an older SDK's scheme cannot be compared with the rebuild's, and a rebuild may consume
    other data (an execution knob hashed with the data, a cache): bit-identical weights are their own evidence (a
    warning says so, issue 39); differing weights cannot be told from input noise (blocking)."""
    from auditor.lineage.record import ConsumedData, ConsumedStream
    from auditor.outcomes import Verdict
    from auditor.steps import AuditOptions

    registry = MemoryRegistry.named(f"memory://scheme-{tmp_path.name}")
    record, weights = registration(0, "incumbent")
    record = record.model_copy(update={"consumed": ConsumedData(scheme=1, streams={"fit": ConsumedStream(batches=1, first=["mine"])})})
    if not same_weights:
        weights = _weights(0.5)
        record.outputs.artifacts[0].sha256 = hashlib.sha256(weights).hexdigest()
    ref = registry.register_record("m", record, weights=weights).ref
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
                                  "MLFLOW_TRACKING_URI": registry.uri})
    runner = _OtherDataRunner() if code == "consumed.differs" else _SchemeRunner()
    session = Session(settings, registry=registry, runner=runner, prepare=prepare)
    try:
        result = session.audit(ref, AuditOptions(date="2026-12-03", publish=False)).result
    finally:
        MemoryRegistry.forget(registry.uri)
    [unknown] = [f for f in result.findings if f.code == code]
    assert ("scheme 99" if code == "consumed.unknown" else "first differing fit() call 1") in unknown.message
    if same_weights:
        assert result.verdict is Verdict.REPRODUCED_BITWISE and not unknown.blocking, result.verdict
        assert "changed nothing in the model" in unknown.message
    else:
        assert unknown.blocking and "REPRODUCED" not in result.verdict.value, result.verdict


def test_same_seed_reruns_ask_for_fresh_interpreters_and_seed_varied_ones_may_be_forked(world):
    """The same-seed floor measures a fresh process's own noise; forks of one warm worker share its heap layout, so
    those reruns ask for a fresh interpreter (RunSpec.fresh). The seed-varied ones, spread by their seeds, need not."""
    session, refs, runner, _ = world
    specs = []
    inner = runner.run

    def recorded(spec):
        specs.append(spec)
        return inner(spec)

    runner.run = recorded
    session.calibrate(refs["twin"], reruns=5)
    recorded_seed = str(registration(list(QUALITY).index("twin"), "twin")[0].seeds.seed)
    same = [s for s in specs if s.env[ENV_SEED] == recorded_seed]
    varied = [s for s in specs if s.env[ENV_SEED] != recorded_seed]
    assert same and varied
    assert all(s.fresh for s in same) and not any(s.fresh for s in varied)
