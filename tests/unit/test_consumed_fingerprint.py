"""The consumed-data fingerprint (``auditor.sdk.consumed``) and its comparison (``auditor.judge.consumed``,
``auditor.judge.recipe``): pure, with real NumPy, pandas, scikit-learn and torch objects fed through the hooks."""

from __future__ import annotations

import numpy as np
import pytest

from auditor.contract import FLAG_NONDETERMINISTIC
from auditor.judge.consumed import differences, first_difference, rebuild_findings, same_seed_problems
from auditor.judge.floors import FloorRun, SameSeedFloor
from auditor.judge.recipe import RECIPE_MARGIN, recipe_problems
from auditor.judge.result import WeightDiff
from auditor.lineage.record import ConsumedData, RunRecord, SeedInfo
from auditor.sdk import consumed as sdk
from auditor.sdk.consumed import BLOCK, LEAVES, Fingerprint, _Stream
from tests.fixtures.consumed import fingerprint


def _stream(batches: list[bytes]):
    s = _Stream()
    for b in batches:
        s.add(b.ljust(32, b"\0"), "tensor float32 (2, 2)")
    return s.finish()


def _data(**streams) -> ConsumedData:
    return ConsumedData(streams={k: _stream(v) for k, v in streams.items()})


def test_identical_streams_agree_and_the_first_differing_batch_is_named_one_based():
    a = _data(train=[b"a", b"b", b"c"])
    assert differences(a, _data(train=[b"a", b"b", b"c"])) == []
    where = differences(a, _data(train=[b"a", b"x", b"c"]))
    assert len(where) == 1 and where[0].startswith("training batch 2 of 3/3"), where


def test_a_stream_one_run_lacks_or_a_shorter_stream_is_named():
    assert differences(_data(train=[b"a"]), _data(train=[b"a"], eval=[b"e"]))[0].startswith("evaluation batch 1")
    assert "one run consumed 2 training batches, the other 3" in differences(_data(train=[b"a", b"b"]), _data(train=[b"a", b"b", b"c"]))[0]


def test_a_difference_past_the_kept_leaves_is_named_by_its_block():
    base = [bytes([i % 251, i // 251]) for i in range(LEAVES + 3 * BLOCK)]
    changed = list(base)
    changed[LEAVES + BLOCK + 7] = b"zz"
    where = first_difference("train", _stream(base), _stream(changed))
    start = LEAVES + BLOCK + 1
    assert where is not None and where.startswith(f"training batches {start}–{start + BLOCK - 1} (block 2"), where


def test_a_stream_is_bounded_however_long_training_runs():
    s = _Stream()
    for i in range(LEAVES + BLOCK * (sdk.MAX_BLOCKS + 5)):
        s.add(i.to_bytes(32, "little"), "x")
    out = s.finish()
    assert len(out.first) == LEAVES and len(out.blocks) == sdk.MAX_BLOCKS


def test_unfingerprinted_runs_and_runs_of_another_scheme_prove_nothing_either_way():
    record = RunRecord(consumed=_data(train=[b"a"]))
    unrecorded = rebuild_findings(RunRecord(), RunRecord())  # an older record: said, never blocking
    assert [f.code for f in unrecorded] == ["consumed.unrecorded"] and not unrecorded[0].blocking
    assert rebuild_findings(RunRecord(), None) == []
    assert [f.code for f in rebuild_findings(record, RunRecord())] == ["consumed.unknown"]
    newer = RunRecord(consumed=_data(train=[b"a"], eval=[b"e"]).model_copy(update={"scheme": 2}))
    found = rebuild_findings(record, newer)  # a later SDK hooks more calls: never read as other data
    assert [f.code for f in found] == ["consumed.unknown"] and "scheme 2" in found[0].message
    blocking = rebuild_findings(record, RunRecord(consumed=_data(train=[b"b"])))
    assert [f.code for f in blocking] == ["consumed.differs"] and blocking[0].blocking
    assert "training batch 1" in blocking[0].message


def test_same_seed_reruns_are_compared_with_each_other_then_with_the_registered_run():
    registered = RunRecord(consumed=_data(train=[b"a"]))
    same = RunRecord(consumed=_data(train=[b"a"]))
    other = RunRecord(consumed=_data(train=[b"b"]))
    assert same_seed_problems(registered, [same, same]) == []
    assert "reruns 1 and 2 consumed different data" in same_seed_problems(registered, [same, other])[0]
    assert "consumed other data than the registered run" in same_seed_problems(other, [same, same])[0]


def _floor(bit_identical: bool, max_abs: float = 0.0, rel_l2: float = 0.0) -> SameSeedFloor:
    runs = [FloorRun(seed=7, weights_sha256="sha256:" + ("a" if bit_identical else c) * 64) for c in "ab"]
    return SameSeedFloor(runs=runs, bit_identical=bit_identical, max_abs=max_abs, rel_l2=rel_l2)


def _record(deterministic: bool, metrics: dict, *, declared: str | None = None) -> RunRecord:
    """A registered record; ``declared`` a nondeterministic source it records (``run.record_nondeterminism``)."""
    flags = {FLAG_NONDETERMINISTIC: [declared]} if declared else {}
    record = RunRecord(seeds=SeedInfo(seed=7, deterministic=deterministic, flags=flags), consumed=_data(train=[b"a"]))
    record.outputs.metrics = metrics
    return record


def test_reruns_that_agree_with_each_other_but_not_with_the_registered_weights_are_another_recipe():
    registered = _record(True, {"auc": 0.91})
    reruns = [RunRecord(consumed=_data(train=[b"a"]))] * 2
    differ = WeightDiff(identical=False, tensors=4, differing=4, max_abs=0.03, rel_l2=0.02)
    lines = recipe_problems(registered, reruns, [{"auc": 0.88}] * 2, _floor(True), [differ, differ], traced=["read X"])
    assert "agree with one another bit for bit but not with the registered weights" in lines[0]
    assert any(line.startswith("metric auc: registered 0.91") for line in lines) and lines[-1] == "read X"
    same = WeightDiff(identical=True, tensors=4)
    assert recipe_problems(registered, reruns, [{"auc": 0.91}] * 2, _floor(True), [same, same]) == []
    lines = recipe_problems(registered, reruns, [{"auc": 0.80}] * 2, _floor(True), [same, same])
    assert lines and lines[0].startswith("the registered metrics are not reproducible from the registered model: metric auc")


def test_execution_noise_is_accepted_within_the_recipe_margin_and_refused_far_beyond_it():
    registered = _record(False, {"auc": 0.9100}, declared="a simulated kernel")
    reruns = [RunRecord(consumed=_data(train=[b"a"]))] * 2
    floor = _floor(False, max_abs=1e-4, rel_l2=1e-5)
    near = WeightDiff(identical=False, tensors=4, differing=4, max_abs=2e-4, rel_l2=2e-5)
    far = WeightDiff(identical=False, tensors=4, differing=4, max_abs=1e-4 * RECIPE_MARGIN * 2, rel_l2=1e-5 * RECIPE_MARGIN * 2)
    assert recipe_problems(registered, reruns, [{"auc": 0.9101}, {"auc": 0.9099}], floor, [near, far]) == []
    lines = recipe_problems(registered, reruns, [{"auc": 0.9101}, {"auc": 0.9099}], floor, [far, far])
    assert lines and "farther from every same-seed rerun" in lines[0]
    lines = recipe_problems(registered, reruns, [{"auc": 0.80001}, {"auc": 0.80002}], floor, [near, near])
    assert lines and lines[0].startswith("metric auc: registered 0.91 lies outside the same-seed reruns' own spread")


@pytest.mark.parametrize("deterministic", [False, True])
def test_same_seed_spread_the_record_gives_no_reason_for_is_reported_at_calibration(deterministic):
    """A CPU run that declares no nondeterministic source is expected bitwise, whatever its ``deterministic`` flag:
    reruns that differ there are an input no record pins, said by calibration (and failed by every audit)."""
    from auditor.judge.expected import expected_tier
    from auditor.judge.floors import Calibration

    floor = _floor(False, max_abs=1e-4, rel_l2=1e-5)
    undeclared = Calibration(same_seed=floor, deterministic=deterministic,
                             expected=expected_tier(_record(deterministic, {"auc": 0.91})).tier)
    assert undeclared.expected == "bitwise" and not undeclared.explained_spread
    line = undeclared.findings()[0]
    assert "same-seed reruns differ although nothing in the record says this run cannot be bitwise" in line
    assert "run.record_nondeterminism" in line and "OUT_OF_TOLERANCE" in line
    declared = Calibration(same_seed=floor, deterministic=deterministic,
                           expected=expected_tier(_record(deterministic, {"auc": 0.91}, declared="k")).tier)
    assert declared.expected == "statistical" and declared.explained_spread
    assert not any("same-seed reruns differ" in line for line in declared.findings())
    # a calibration stored before the expected tier was kept: the older rule (a CPU run with deterministic on)
    legacy = Calibration(same_seed=floor, deterministic=deterministic)
    assert legacy.explained_spread is (not deterministic)


def test_data_that_differs_wins_over_everything_else_and_timings_are_never_compared():
    registered = _record(False, {"auc": 0.91, "train_seconds": 3.0})
    reruns = [RunRecord(consumed=_data(train=[b"a"])), RunRecord(consumed=_data(train=[b"z"]))]
    lines = recipe_problems(registered, reruns, [{"auc": 0.91}] * 2, _floor(True), [None, None])
    assert len(lines) == 1 and "consumed different data" in lines[0]
    same = WeightDiff(identical=True, tensors=1)
    ok = [RunRecord(consumed=_data(train=[b"a"]))] * 2
    assert recipe_problems(registered, ok, [{"auc": 0.91, "train_seconds": 9.0}] * 2, _floor(True), [same, same]) == []


# -- the hooks, with real libraries ------------------------------------------------------------------------
def test_torch_outermost_calls_are_fingerprinted_by_phase_and_model_values_are_not_data():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    loss_fn = torch.nn.MSELoss()
    x, y = torch.arange(8.0).reshape(2, 4), torch.ones(2, 1)

    def feed(noise: float, x=x):
        def run():
            with torch.no_grad():
                model[0].bias += noise  # execution noise moves the model, never what it consumed
            loss_fn(model(x), y).backward()
            model.eval()
            with torch.no_grad():
                model(x)
            model.train()
        return run

    a, b = fingerprint(feed(0.0)), fingerprint(feed(1e-3))
    assert a.streams["train"].batches == 2 and a.streams["eval"].batches == 1  # forward and the loss's targets
    assert differences(a, b) == []
    c = fingerprint(feed(0.0, x[:, [1, 0, 2, 3]]))  # feature order changed
    assert [line.split(" of ")[0] for line in differences(a, c)] == ["training batch 1", "evaluation batch 1"]
    assert model.forward.__self__ is model  # nothing left patched
    functional = torch.nn.functional
    original = functional.binary_cross_entropy_with_logits

    def labelled(labels):
        return lambda: functional.binary_cross_entropy_with_logits(model(x).squeeze(1), labels).backward()

    d, e = fingerprint(labelled(torch.tensor([0.0, 1.0]))), fingerprint(labelled(torch.tensor([1.0, 0.0])))
    assert d.streams["train"].batches == 2  # the input, and the functional loss's targets
    assert differences(d, e)[0].startswith("training batch 2")  # labels that moved are data that moved
    assert functional.binary_cross_entropy_with_logits is original


def test_estimator_fit_and_predict_are_fingerprinted_outermost_call_only_and_restored():
    pd = pytest.importorskip("pandas")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(40, 3)), columns=["a", "b", "c"])
    target = (frame.a > 0).astype(int)
    original_fit = LogisticRegression.fit

    def feed(columns):
        return lambda: make_pipeline(StandardScaler(), LogisticRegression()).fit(frame[columns], target).predict(frame[columns])

    a, b = fingerprint(feed(["a", "b", "c"])), fingerprint(feed(["a", "b", "c"]))
    assert a.streams["fit"].batches == 1 and a.streams["predict"].batches >= 1
    assert differences(a, b) == []
    c = fingerprint(feed(["b", "a", "c"]))
    assert differences(a, c)[0].startswith("fit() call 1")
    assert LogisticRegression.fit is original_fit


def test_an_object_is_fingerprinted_by_its_type_never_its_address():
    class Callback:
        pass

    fp = Fingerprint()
    fp.record("fit", (np.zeros(3), {"callbacks": [Callback()]}))
    fp.record("fit", (np.zeros(3), {"callbacks": [Callback()]}))
    stream = fp.stop().streams["fit"]
    assert stream.first[0] == stream.first[1]
