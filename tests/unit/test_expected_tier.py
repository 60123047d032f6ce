"""The expected tier before the rebuild (issue 31, build point 4): predicted from the record alone, then judged.

Records are edited by hand (a recorded GPU run needs no GPU); the judge is the real one. Each case checks the
prediction and what the verdict does with it: a GPU run with deterministic algorithms off is never failed on
its bits alone, a CPU run expected bitwise that is not gets the stronger finding, and a DataLoader whose
workers no seed controls is never passed on its bands.
"""

from __future__ import annotations

import pytest

from auditor.judge.expected import RULES, expected_findings, expected_tier, missed_bitwise
from auditor.judge.floors import FloorRun, SameSeedFloor
from auditor.judge.result import Band, TensorDiff, Verdict, WeightDiff
from auditor.judge.tolerance import check_metrics
from auditor.judge.verdict import RecoveryCheck, judge
from auditor.lineage.record import Artifact, ConfigInfo, Infrastructure
from tests.fixtures.records import complete_record

BAND = Band(metric="auc", lower=0.90, upper=0.92, reference=0.91, direction="higher")
DIFFERENT = WeightDiff(identical=False, tensors=3, differing=1, max_abs=1e-4, rel_l2=1e-6,
                       worst=[TensorDiff(name="fc.weight", max_abs=1e-4, rel_l2=1e-6, cosine=0.999999)])
SAME = WeightDiff(identical=True, tensors=3, max_abs=0.0, rel_l2=0.0)
PLATFORM = {"machine": "x86_64", "cpu_model": "test cpu", "torch": "2.13.0", "threads": {"torch_intra_op": 2}}
from tests.fixtures.judged import VERIFIED  # noqa: E402

FLOOR = SameSeedFloor(runs=[FloorRun(seed=7, weights_sha256="a"), FloorRun(seed=7, weights_sha256="b")],
                      bit_identical=False, max_abs=1e-4, rel_l2=1e-6, platform=PLATFORM, noise_verified=VERIFIED)


def gpu_record(**flags):
    """The complete record as a recorded A100 run with these determinism flags (seed_everything's names)."""
    base = complete_record()
    env = base.environment.model_copy(update={"accelerator": "NVIDIA A100-SXM4-80GB", "accelerator_count": 1, "cuda": "12.4"})
    seeds = base.seeds.model_copy(update={"deterministic": flags.get("use_deterministic_algorithms"), "flags": flags})
    return base.model_copy(update={"environment": env, "seeds": seeds})


def with_loader(workers: int, *, worker_init_fn: bool | None = None, torch_seeded: bool = False):
    """The complete record training with a DataLoader of ``workers`` workers (as its config says)."""
    base = complete_record()
    resolved = {**base.config.resolved, "data": {"num_workers": workers}}
    if worker_init_fn is not None:
        resolved["data"]["worker_init_fn"] = worker_init_fn
    generators = {"python": 7, "numpy": 7, **({"torch": 7} if torch_seeded else {})}
    return base.model_copy(update={"config": ConfigInfo(resolved=resolved, digest=base.config.digest),
                                   "seeds": base.seeds.model_copy(update={"generators": generators})})


def _judge(record, *, auc=0.91, weights=DIFFERENT, floor=None, band=True):
    expected = expected_tier(record)
    results = check_metrics([{"auc": auc}], {"auc": BAND} if band else {}, registered={"auc": 0.91})
    recovered = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32)
    verdict, tiers = judge(findings=[], recovery=recovered, metric_results=results, weight_diff=weights, floor=floor,
                           platform=PLATFORM, deterministic=bool(record.seeds.deterministic), expected=expected.tier)
    return expected, verdict, tiers


# -- the three runs the issue names -----------------------------------------------------------------
def test_a_recorded_gpu_run_with_deterministic_algorithms_off_is_expected_statistical_and_not_failed_on_bits():
    record = gpu_record(use_deterministic_algorithms=False, cudnn_deterministic=False, cudnn_benchmark=True)
    expected, verdict, tiers = _judge(record, floor=FLOOR)
    assert expected.tier == "statistical"
    assert {r.code for r in expected.reasons} == {"expected.gpu_nondeterministic", "expected.cudnn_benchmark"}
    assert all(r.source.startswith("https://") for r in expected.reasons)
    # judged accordingly: its bits differ as expected, the bands judge it, and the bitwise tier is not a failure
    assert verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE, tiers["statistical"]
    assert tiers["bitwise"].status == "skipped" and tiers["bitwise"].summary.startswith("not expected")
    assert "1 of 3 tensor(s) differ" in tiers["bitwise"].summary  # the difference is still said
    assert missed_bitwise(expected, tiers["bitwise"].status) == []


def test_without_bands_a_gpu_run_is_not_judged_rather_than_failed_on_its_bits_alone():
    _, verdict, tiers = _judge(gpu_record(use_deterministic_algorithms=False), band=False, floor=FLOOR)
    assert tiers["bitwise"].status != "fail" and tiers["statistical"].status == "skipped"
    assert verdict is Verdict.NOT_REPRODUCIBLE  # nothing to judge by: never a pass, never "bits differ" alone
    assert any("nothing to judge" in d for d in tiers["statistical"].details)


def test_an_expected_tier_never_loosens_the_weights_check_without_a_floor():
    """The expected tier comes from fields the trainer wrote (a record claiming a GPU): with no same-seed floor
    measured, differing weights still fail the statistical tier (the review's case: bands alone must not pass it);
    the bitwise tier is still not the failure named."""
    _, verdict, tiers = _judge(gpu_record(use_deterministic_algorithms=False))
    assert verdict is Verdict.OUT_OF_TOLERANCE
    assert tiers["statistical"].status == "fail" and "no same-seed floor" in tiers["statistical"].summary
    assert tiers["bitwise"].status == "skipped"


def test_a_gpu_run_outside_its_band_still_fails():
    _, verdict, tiers = _judge(gpu_record(use_deterministic_algorithms=False), auc=0.5)
    assert verdict is Verdict.OUT_OF_TOLERANCE and tiers["statistical"].status == "fail"


def test_a_cpu_run_is_expected_bitwise_and_a_differing_rebuild_gets_the_stronger_finding():
    record = complete_record()
    expected, verdict, tiers = _judge(record, floor=FLOOR)
    assert expected.tier == "bitwise" and expected.reasons == []
    assert tiers["bitwise"].status == "fail" and "expected bitwise" in tiers["bitwise"].summary
    stronger = missed_bitwise(expected, tiers["bitwise"].status)
    assert [f.code for f in stronger] == ["expected.bitwise_missed"] and "stronger finding" in stronger[0].message
    # without a floor the statistical tier holds it as before: not relaxed for a run expected bitwise
    _, verdict, tiers = _judge(record)
    assert verdict is Verdict.OUT_OF_TOLERANCE
    # and a bit-identical rebuild is what was expected: no finding
    _, verdict, tiers = _judge(record, weights=SAME)
    assert verdict is Verdict.REPRODUCED_BITWISE and missed_bitwise(expected, tiers["bitwise"].status) == []


def test_dataloader_workers_without_worker_seeding_are_expected_not_reproducible_and_never_passed_on_bands():
    record = with_loader(2)
    expected, verdict, tiers = _judge(record, floor=FLOOR)
    assert expected.tier == "not_reproducible"
    assert [r.code for r in expected.reasons] == ["expected.dataloader_workers_unseeded"]
    assert "2 worker(s)" in expected.reasons[0].message
    # inside its band and within the floor, yet its noise is an input's: not reproduced
    assert verdict is Verdict.OUT_OF_TOLERANCE, tiers["statistical"]
    assert "no recorded seed controls" in tiers["statistical"].summary
    # a bit-identical rebuild is still bitwise: the bits are the evidence
    assert _judge(record, weights=SAME)[1] is Verdict.REPRODUCED_BITWISE


@pytest.mark.parametrize(("record", "tier"), [
    (with_loader(2, worker_init_fn=True, torch_seeded=True), "bitwise"),  # its worker_init_fn derives from a seeded base
    (with_loader(2, torch_seeded=True), "bitwise"),  # base seed from a seeded torch generator (FACTS.md: measured)
    (with_loader(0), "bitwise"),  # no workers: the main process draws
], ids=["worker_init_fn", "torch seeded", "no workers"])
def test_seeded_workers_are_expected_bitwise(record, tier):
    assert expected_tier(record).tier == tier


def test_a_worker_init_fn_over_an_unseeded_torch_is_not_trusted():
    """A worker_init_fn can only seed from torch.initial_seed() in the worker, which the main process's (here
    unseeded) torch generator decides: its presence alone says nothing."""
    expected = expected_tier(with_loader(2, worker_init_fn=True))
    assert expected.tier == "not_reproducible" and "worker_init_fn that can only derive" in expected.reasons[0].message


# -- adversarial: how the lint could be fooled ----------------------------------------------------
def test_a_gpu_run_whose_flags_were_not_recorded_counts_as_off():
    record = gpu_record()
    record = record.model_copy(update={"seeds": record.seeds.model_copy(update={"deterministic": None, "flags": {}})})
    assert expected_tier(record).tier == "statistical"
    assert "not recorded" in expected_tier(record).reasons[0].message


def test_a_cpu_training_on_a_machine_with_a_gpu_is_judged_as_the_cpu_run_it_was():
    record = gpu_record(use_deterministic_algorithms=False)
    assert expected_tier(record).tier == "statistical"
    on_cpu = record.model_copy(update={"config": ConfigInfo(resolved={"device": "cpu"}, digest="x")})
    assert expected_tier(on_cpu).tier == "bitwise" and expected_tier(on_cpu).facts["gpu"] is False


def test_a_fully_deterministic_gpu_run_is_expected_bitwise_but_a_wrong_cublas_workspace_caps_it():
    good = gpu_record(use_deterministic_algorithms=True, cudnn_deterministic=True, cudnn_benchmark=False,
                      CUBLAS_WORKSPACE_CONFIG=":4096:8")
    assert expected_tier(good).tier == "bitwise"
    bad = gpu_record(use_deterministic_algorithms=True, cudnn_deterministic=True, cudnn_benchmark=False)
    assert [r.code for r in expected_tier(bad).reasons] == ["expected.cublas_workspace"]


def test_mixed_precision_world_size_and_an_accelerator_named_cpu():
    amp = gpu_record(use_deterministic_algorithms=False)
    amp = amp.model_copy(update={"config": ConfigInfo(resolved={"trainer": {"precision": "16-mixed"}}, digest="x")})
    assert "expected.mixed_precision" in {r.code for r in expected_tier(amp).reasons}
    ddp = complete_record(infrastructure=Infrastructure(world_size=4))
    assert expected_tier(ddp).tier == "statistical" and "world size 4" in expected_tier(ddp).reasons[0].message
    cpu = complete_record()
    cpu = cpu.model_copy(update={"environment": cpu.environment.model_copy(update={"accelerator": "cpu"})})
    assert expected_tier(cpu).tier == "bitwise"
    # a numeric config value named precision (a metric threshold, say) is not mixed precision
    metric = complete_record(config=ConfigInfo(resolved={"precision": 0.16}, digest="x"))
    assert not expected_tier(metric).facts["mixed_precision"]


def test_the_tree_libraries_knobs_come_from_their_own_table():
    base = complete_record()
    artifact = Artifact(name="model.skops", uri="runs:/abc/model/model.skops", sha256="ef" * 32, size=10, flavor="sklearn",
                        knobs={"forest__random_state": None, "forest__n_estimators": 5})
    record = base.model_copy(update={"outputs": base.outputs.model_copy(update={"artifacts": [artifact]})})
    expected = expected_tier(record)
    assert expected.tier == "not_reproducible" and expected.reasons[0].code == "knobs.unpinned_seed"
    assert expected.reasons[0].source.startswith("https://scikit-learn.org")
    assert expected_findings(expected) == []  # the knob findings are the table's own: not said twice


def test_every_rule_names_its_source_and_a_fix_and_the_findings_say_them():
    assert len({r.code for r in RULES}) == len(RULES)
    assert all(r.source and r.hint for r in RULES)
    found = expected_findings(expected_tier(gpu_record(use_deterministic_algorithms=False)))
    assert found and all("source: https://" in f.message and f.hint and f.severity == "warning" for f in found)


# -- the report: expected beside observed ---------------------------------------------------------
def test_the_report_shows_expected_beside_observed_and_names_the_stronger_finding():
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.report.view import expected as expected_view
    from auditor.settings import Settings
    from tests.fixtures.audits import make_audit

    audit = make_audit()  # within tolerance: its bitwise tier failed
    missed = make_audit(Verdict.OUT_OF_TOLERANCE).model_copy(update={"expected": expected_tier(complete_record())})
    view = expected_view(missed)
    assert (view["expected"], view["observed"], view["stronger"]) == ("bitwise", "not reproduced", True)
    html = render_report(build_evidence(missed, settings=Settings()))
    table = html.split('<table id="expected">', 1)[1].split("</table>", 1)[0]
    assert "Expected before the rebuild" in table and "the stronger finding" in table
    assert expected_view(audit.model_copy(update={"expected": expected_tier(complete_record())}))["stronger"] is True
    assert expected_view(audit) is None  # no record read: nothing expected
    gpu = audit.model_copy(update={"expected": expected_tier(gpu_record(use_deterministic_algorithms=False))})
    table = render_report(build_evidence(gpu, settings=Settings())).split('<table id="expected">', 1)[1].split("</table>", 1)[0]
    assert "statistical" in table and "As expected" in table and "pytorch.org/docs/stable/notes/randomness" in table


# -- through the audit step (the fakes of test_audit_outcomes.py: a runner that writes what a rebuild leaves) --
from tests.unit import test_audit_outcomes as outcomes  # noqa: E402


@pytest.fixture()
def audited(tmp_path):
    """test_audit_outcomes.py's world: one registered version, its record complete, in the in-memory registry."""
    yield from outcomes.world.__wrapped__(tmp_path)


def test_every_audit_carries_the_expectation_and_a_differing_cpu_rebuild_opens_with_the_stronger_finding(audited):
    result, _ = outcomes.run_audit(audited, outcomes.faithful)
    assert result.expected is not None and result.expected.tier == "bitwise"
    assert result.verdict is Verdict.REPRODUCED_BITWISE
    assert not [f for f in result.findings if f.code.startswith("expected.")]
    assert result.to_dict()["expected"]["tier"] == "bitwise"  # in the evidence, so in every report
    result, _ = outcomes.run_audit(audited, lambda spec, ev: outcomes.write(spec, weights=None if ev else outcomes._weights(1.5),
                                                                             evaluated=ev))
    assert result.tiers["bitwise"].status == "fail" and not result.verdict.reproduced
    assert result.findings[0].code == "expected.bitwise_missed", [f.code for f in result.findings]


# -- issue 26: same-seed spread is execution noise only where the record says why ---------------------------
def cpu_record(*, deterministic: bool, declared: list[str] | None = None):
    """The complete record (a CPU run) with its deterministic flag and, if any, declared nondeterministic sources."""
    from auditor.contract import FLAG_NONDETERMINISTIC

    base = complete_record()
    flags = {"use_deterministic_algorithms": deterministic, **({FLAG_NONDETERMINISTIC: declared} if declared else {})}
    return base.model_copy(update={"seeds": base.seeds.model_copy(update={"deterministic": deterministic, "flags": flags})})


@pytest.mark.parametrize("deterministic", [False, True])
def test_a_cpu_run_that_declares_nothing_is_expected_bitwise_and_its_same_seed_spread_excuses_nothing(deterministic):
    # the review's E2/E3: deterministic false on CPU used to let the same-seed spread pass as execution noise
    expected, verdict, tiers = _judge(cpu_record(deterministic=deterministic), floor=FLOOR)
    assert expected.tier == "bitwise"
    assert verdict is Verdict.OUT_OF_TOLERANCE, tiers["statistical"]
    assert "nothing in the record says this run cannot be bitwise" in tiers["statistical"].summary
    assert missed_bitwise(expected, tiers["bitwise"].status)  # and the stronger finding


def test_a_declared_nondeterministic_source_caps_the_tier_and_lets_the_floor_judge():
    record = cpu_record(deterministic=False, declared=["scatter_add_ on CUDA: atomic adds"])
    expected, verdict, tiers = _judge(record, floor=FLOOR)
    assert expected.tier == "statistical" and [r.code for r in expected.reasons] == ["expected.declared_nondeterministic"]
    assert verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE, tiers
    assert tiers["bitwise"].status == "skipped" and "not expected" in tiers["bitwise"].summary
    warning = expected_findings(expected)[0]
    assert warning.severity == "warning" and "scatter_add_ on CUDA" in warning.message and "cannot verify" in warning.message
    # declared noise is still held to its floor: weights far beyond it are another model
    far = DIFFERENT.model_copy(update={"max_abs": 1.0, "rel_l2": 0.5})
    assert _judge(record, floor=FLOOR, weights=far)[1] is Verdict.OUT_OF_TOLERANCE
    # and never without one
    assert _judge(record, floor=None)[1] is Verdict.OUT_OF_TOLERANCE


@pytest.mark.parametrize(("expected", "deterministic", "accelerator", "noise"), [
    ("statistical", True, False, True),       # the record says why (a GPU rule, a declaration)
    ("bitwise", False, False, False),         # a CPU run, flag off: nothing says why
    ("bitwise", True, False, False),
    ("bitwise", True, True, False),           # a GPU run with every determinism flag: bitwise by PyTorch's notes
    ("bitwise", False, True, False),          # a CPU run (device=cpu) on a host with a GPU: the host's GPU explains nothing
    ("not_reproducible", False, True, False),  # an unseeded generator is an input, never noise
    (None, False, False, True), (None, True, False, False), (None, True, True, True),  # stored before: the older rule
])
def test_spread_is_execution_noise_only_where_the_record_says_why(expected, deterministic, accelerator, noise):
    from auditor.judge.expected import spread_is_execution_noise

    assert spread_is_execution_noise(expected, deterministic=deterministic, accelerator=accelerator) is noise


def test_a_cpu_run_on_a_gpu_host_with_deterministic_off_is_still_expected_bitwise_and_its_spread_excuses_nothing():
    # the diff review's case: the host records its GPU, the run trained on device=cpu with deterministic off
    record = gpu_record(use_deterministic_algorithms=False, device="cpu")
    floor = FLOOR.model_copy(update={"platform": {**PLATFORM, "accelerator": "NVIDIA A100-SXM4-80GB"}})
    expected = expected_tier(record)
    assert expected.tier == "bitwise", expected.reasons
    results = check_metrics([{"auc": 0.91}], {"auc": BAND}, registered={"auc": 0.91})
    recovered = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32)
    verdict, tiers = judge(findings=[], recovery=recovered, metric_results=results, weight_diff=DIFFERENT, floor=floor,
                           platform=floor.platform, deterministic=False, expected=expected.tier)
    assert verdict is Verdict.OUT_OF_TOLERANCE and "nothing in the record says" in tiers["statistical"].summary, tiers


def test_a_not_reproducible_run_is_told_a_declaration_does_not_lift_it():
    from auditor.judge.floors import Calibration

    calibration = Calibration(same_seed=FLOOR, deterministic=True, expected="not_reproducible")
    line = calibration.findings()[0]
    assert "expected not reproducible" in line and "does not lift" in line and "declared with run.record_nondeterminism" not in line


def test_unexplained_spread_is_not_excused_by_a_rebuild_on_another_platform():
    # the adversarial review's B: a rebuild on another host used to be judged by the bands alone
    expected = expected_tier(cpu_record(deterministic=False)).tier
    elsewhere = {**PLATFORM, "cpu_model": "another cpu"}
    results = check_metrics([{"auc": 0.91}], {"auc": BAND}, registered={"auc": 0.91})
    recovered = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32)
    verdict, tiers = judge(findings=[], recovery=recovered, metric_results=results, weight_diff=DIFFERENT, floor=FLOOR,
                           platform=elsewhere, deterministic=False, expected=expected)
    assert verdict is Verdict.OUT_OF_TOLERANCE and "on this platform or another" in tiers["statistical"].summary, tiers
    # a bit-identical recipe rebuilt elsewhere is still judged by its bands (a platform changes numerics)
    exact = FLOOR.model_copy(update={"bit_identical": True, "max_abs": 0.0, "rel_l2": 0.0})
    verdict, _ = judge(findings=[], recovery=recovered, metric_results=results, weight_diff=DIFFERENT, floor=exact,
                       platform=elsewhere, deterministic=False, expected=expected)
    assert verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE


def test_a_reason_for_noise_must_hold_in_the_reruns_that_measured_it():
    # the adversarial review's C: WORLD_SIZE=2 at training caps the tier, but the reruns ran as one process
    record = complete_record(infrastructure=Infrastructure(world_size=2, hostname="trainer-1"))
    expected = expected_tier(record)
    assert expected.tier == "statistical" and expected.reasons[0].code == "expected.distributed"
    single = FLOOR.model_copy(update={"expected": "bitwise"})  # what the reruns' own records expect
    results = check_metrics([{"auc": 0.91}], {"auc": BAND}, registered={"auc": 0.91})
    recovered = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32)
    verdict, tiers = judge(findings=[], recovery=recovered, metric_results=results, weight_diff=DIFFERENT, floor=single,
                           platform=PLATFORM, deterministic=True, expected=expected.tier)
    assert verdict is Verdict.OUT_OF_TOLERANCE and "did not hold in the reruns" in tiers["statistical"].summary, tiers
    # reruns whose own records give the reason (at the same world size): their floor judges
    same = FLOOR.model_copy(update={"expected": "statistical"})
    verdict, _ = judge(findings=[], recovery=recovered, metric_results=results, weight_diff=DIFFERENT, floor=same,
                       platform=PLATFORM, deterministic=True, expected=expected.tier)
    assert verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE


def test_a_gpu_host_whose_gpu_torch_never_used_is_a_cpu_run():
    # the adversarial review's H: a CPU-only script on a GPU host, no `device` key: the host's GPU used to cap the tier
    from auditor.contract import FLAG_TORCH_CUDA_USED

    assert expected_tier(gpu_record(use_deterministic_algorithms=False)).tier == "statistical"
    unused = gpu_record(use_deterministic_algorithms=False, **{FLAG_TORCH_CUDA_USED: False})
    assert expected_tier(unused).tier == "bitwise"
    used = gpu_record(use_deterministic_algorithms=False, **{FLAG_TORCH_CUDA_USED: True})
    assert expected_tier(used).tier == "statistical"


def test_within_tolerance_needs_the_registered_metrics_recomputed_from_the_registered_model():
    # the adversarial review's G: a declared kernel, the hook ignored, metrics on a subset the clock picks: the floor and
    # the bands passed, and nothing ever evaluated the registered model
    record = cpu_record(deterministic=False, declared=["a kernel"])
    expected = expected_tier(record).tier
    results = check_metrics([{"auc": 0.91}], {"auc": BAND}, registered={"auc": 0.91})
    ignored = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32,
                            registered={"auc": 0.91, "train_seconds": 3.0})
    verdict, tiers = judge(findings=[], recovery=ignored, metric_results=results, weight_diff=DIFFERENT, floor=FLOOR,
                           platform=PLATFORM, deterministic=False, expected=expected)
    assert verdict is Verdict.NOT_REPRODUCIBLE, tiers
    summary = tiers["artifact_recovery"].summary
    assert summary.startswith("the registered metrics were never recomputed from the registered model (auc)"), summary
    assert "restore_weights" in summary and tiers["statistical"].status == "pass"
    # the hook honoured: the registered model's own evaluation gives them, and the floor and bands judge the rebuild
    honoured = ignored.model_copy(update={"evaluated": {"auc": 0.91}})
    verdict, tiers = judge(findings=[], recovery=honoured, metric_results=results, weight_diff=DIFFERENT, floor=FLOOR,
                           platform=PLATFORM, deterministic=False, expected=expected)
    assert verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE, tiers
    # a bit-identical rebuild is its own evaluation of the registered model: reproduced bitwise without the hook
    verdict, _ = judge(findings=[], recovery=ignored.model_copy(update={"rebuilt_identical": [{"auc": 0.91}]}),
                       metric_results=results, weight_diff=SAME, floor=FLOOR, platform=PLATFORM, deterministic=False,
                       expected=expected)
    assert verdict is Verdict.REPRODUCED_BITWISE


def test_warn_only_deterministic_algorithms_on_a_gpu_are_expected_statistical():
    record = gpu_record(use_deterministic_algorithms=True, cudnn_deterministic=True, CUBLAS_WORKSPACE_CONFIG=":4096:8",
                        deterministic_warn_only=True)
    expected = expected_tier(record)
    assert expected.tier == "statistical" and "warn-only" in expected.reasons[0].message, expected.reasons


def test_the_flags_at_the_blocks_end_say_what_ran():
    from auditor.contract import FLAG_TORCH_CUDA_USED
    from auditor.seeds import flags_at_end

    torch = pytest.importorskip("torch")
    flags = flags_at_end()
    assert flags[FLAG_TORCH_CUDA_USED] is False  # this machine's torch never allocated CUDA memory
    assert flags["use_deterministic_algorithms"] is torch.are_deterministic_algorithms_enabled()
    assert flags["deterministic_warn_only"] is False


def test_an_evaluation_that_recomputed_none_of_the_registered_metrics_is_no_evaluation():
    record = cpu_record(deterministic=False, declared=["a kernel"])
    results = check_metrics([{"auc": 0.91}], {"auc": BAND}, registered={"auc": 0.91})
    for evaluated in ({}, {"eval_loss": 0.3}):
        check = RecoveryCheck(expected_sha256="sha256:" + "ab" * 32, actual_sha256="sha256:" + "ab" * 32,
                              registered={"auc": 0.91}, evaluated=evaluated)
        verdict, tiers = judge(findings=[], recovery=check, metric_results=results, weight_diff=DIFFERENT, floor=FLOOR,
                               platform=PLATFORM, deterministic=False, expected=expected_tier(record).tier)
        assert verdict is Verdict.NOT_REPRODUCIBLE and "logged none of them" in tiers["artifact_recovery"].summary, tiers


def test_a_bit_identical_rebuild_of_a_recipe_whose_reruns_differed_unexplained_is_not_reproduced():
    # the third review's case: rows chosen by the weekday; an audit on the same day rebuilds the same bits
    expected, verdict, tiers = _judge(cpu_record(deterministic=False), floor=FLOOR, weights=SAME)
    assert expected.tier == "bitwise" and verdict is Verdict.OUT_OF_TOLERANCE, tiers
    assert "this match is that input's coincidence" in tiers["statistical"].summary
