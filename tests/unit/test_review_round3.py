"""Cases from this round's adversarial review of the judge (issue 26): each was a way to a false pass.

- a rebuild that records no fingerprint of what its model consumed, or one of another scheme, is blocking
  (fail closed), never a warning beside REPRODUCED;
- same-seed reruns that differ are never accepted as execution noise when training's fingerprint is missing,
  empty or has blind spots (a model called with keyword arguments only);
- a calibration on another platform still holds the registered metrics to the reruns' own spread;
- a registered metric is compared unless its name says it is a duration (``auc_out_of_time`` is a metric), and a
  whole rebuild that no longer logs a registered metric fails artifact recovery.
"""

from __future__ import annotations

import pytest

from auditor.judge.consumed import rebuild_findings, unattributed
from auditor.judge.floors import FloorRun, SameSeedFloor
from auditor.judge.recipe import recipe_problems
from auditor.judge.result import WeightDiff
from auditor.judge.verdict import NOT_REPRODUCIBLE_METRICS, RecoveryCheck, _recovery, is_duration
from auditor.lineage.record import ConsumedData, ConsumedStream, EnvironmentInfo, RunRecord, SeedInfo
from auditor.sdk.consumed import Fingerprint


def _data(batches: int = 1, notes: tuple[str, ...] = ()) -> ConsumedData:
    return ConsumedData(streams={"train": ConsumedStream(batches=batches, digest="sha256:" + "a" * 64, first=["a"] * batches)},
                        notes=list(notes))


def _noisy_floor() -> SameSeedFloor:
    runs = [FloorRun(seed=7, weights_sha256="sha256:" + c * 64) for c in "ab"]
    return SameSeedFloor(runs=runs, bit_identical=False, max_abs=1e-4, rel_l2=1e-5)


def test_a_rebuild_without_a_fingerprint_or_of_another_scheme_is_blocking():
    trained = RunRecord(consumed=_data())
    for rebuilt in (RunRecord(), RunRecord(consumed=_data().model_copy(update={"scheme": 9}))):
        found = rebuild_findings(trained, rebuilt)
        assert [f.code for f in found] == ["consumed.unknown"] and found[0].blocking


@pytest.mark.parametrize("consumed, words", [
    (None, "recorded no fingerprint"),
    (ConsumedData(), "is empty"),
    (_data(notes=("Linear was called with keyword arguments only",)), "blind spots"),
])
def test_noise_is_never_accepted_when_what_was_consumed_cannot_be_told(consumed, words):
    registered = RunRecord(seeds=SeedInfo(seed=7, deterministic=False), consumed=consumed)
    registered.outputs.metrics = {"auc": 0.91}
    assert words in (unattributed(registered) or "")
    near = WeightDiff(identical=False, tensors=2, differing=2, max_abs=1e-4, rel_l2=1e-5)
    lines = recipe_problems(registered, [RunRecord(consumed=consumed)] * 2, [{"auc": 0.91}] * 2, _noisy_floor(), [near, near])
    assert lines and "input noise cannot be told from execution noise" in lines[0]
    # the same with a complete fingerprint: execution noise, accepted
    registered.consumed = _data()
    assert unattributed(registered) is None
    assert recipe_problems(registered, [RunRecord(consumed=_data())] * 2, [{"auc": 0.9101}, {"auc": 0.9099}], _noisy_floor(), [near, near]) == []


def test_another_platform_still_holds_the_registered_metrics_to_the_reruns_spread():
    registered = RunRecord(seeds=SeedInfo(seed=7, deterministic=False), consumed=_data(),
                           environment=EnvironmentInfo(python="3.11", cpu_model="training cpu"))
    registered.outputs.metrics = {"auc": 0.91}
    rerun = RunRecord(consumed=_data(), environment=EnvironmentInfo(python="3.11", cpu_model="another cpu"))
    near = WeightDiff(identical=False, tensors=2, differing=2, max_abs=1e-4, rel_l2=1e-5)
    lines = recipe_problems(registered, [rerun, rerun], [{"auc": 0.80001}, {"auc": 0.80002}], _noisy_floor(), [near, near])
    assert lines and "metric auc" in lines[0]


@pytest.mark.parametrize("name, duration", [
    ("train_seconds", True), ("epoch_time", True), ("latency_ms", True), ("samples_per_sec", True), ("wall_s", True),
    ("auc_out_of_time", False), ("gini_out_of_time", False), ("second_stage_auc", False), ("lifetime_value_mae", False),
    ("time_to_default_auc", False), ("accuracy", False),
])
def test_only_durations_are_set_aside(name, duration):
    assert is_duration(name) is duration


def test_a_whole_rebuild_that_no_longer_logs_a_registered_metric_fails_artifact_recovery():
    check = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32,
                          registered={"auc": 0.91, "auc_out_of_time": 0.88, "train_seconds": 3.0},
                          rebuilt_identical=[{"auc": 0.91, "train_seconds": 4.0}])
    tier = _recovery(check)
    assert tier.status == "fail" and NOT_REPRODUCIBLE_METRICS in tier.summary and "auc_out_of_time" in tier.summary
    # an evaluation alone reports only the evaluation's metrics: training-time ones are not asked of it
    alone = RecoveryCheck(expected_sha256=check.expected_sha256, actual_sha256=check.actual_sha256,
                          registered={"auc": 0.91, "final_train_loss": 0.2}, evaluated={"auc": 0.91})
    assert _recovery(alone).status == "pass"


def test_a_model_called_with_keyword_arguments_only_is_a_blind_spot_in_the_record():
    torch = pytest.importorskip("torch")

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 1)

        def forward(self, x=None):
            return self.linear(x)

    model = Model()
    fp = Fingerprint()
    fp.install()
    try:
        model(x=torch.ones(2, 3))
    finally:
        data = fp.stop()
    assert any("keyword arguments only" in note for note in data.notes)
    assert unattributed(RunRecord(consumed=data)) is not None
