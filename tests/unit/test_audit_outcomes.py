"""Every outcome branch of ``Session.audit``, with a fake runner, in milliseconds.

What is stubbed, and why: the *runner* is a fake that writes what a training script would (or fails
the way one can), and the *workspace* step is replaced by empty folders, because these tests are
about how the audit turns each outcome into a verdict, not about git or snapshots (those are
exercised for real in tests/integration/test_steps.py and test_snapshots*.py). Both stand-ins are
handed to the session (``Session(settings, runner=..., prepare=...)``), never patched into a step.
The registry is the real in-memory twin; the weights are real safetensors files; the judge is the real one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save

from auditor.contract import FLAG_NONDETERMINISTIC
from auditor.errors import BadInput, InfrastructureError, InputUnrecoverable, NotFound, SnapshotCorrupt, exit_code
from auditor.judge.result import Band, Verdict
from auditor.judge.tolerance import bands_to_json
from auditor.lineage.record import Artifact, Outputs
from auditor.rebuild.runners import RunOutcome
from auditor.rebuild.workspace import Workspace
from auditor.registry.memory import MemoryRegistry
from auditor.settings import Settings
from auditor.steps import AuditOptions, Session
from auditor.steps.calibrate import log_calibration_run
from auditor.tags import TAG_AUDIT_DATE, TAG_BANDS, TAG_CALIBRATION, TAG_REPORT, TAG_VERDICT
from tests.fixtures.judged import VERIFIED
from tests.fixtures.records import complete_record

METRICS = {"auc": 0.91, "accuracy": 0.85}


def _weights(value: float = 1.0) -> bytes:
    return save({"w": np.full((4, 3), value, dtype=np.float32), "b": np.arange(3, dtype=np.float32)})


class FakeRunner:
    """Plays the recorded entrypoint: ``behave(spec)`` writes outputs or returns a failing outcome."""

    name = "fake"

    def __init__(self, behave):
        self.behave = behave
        self.specs = []

    def run(self, spec):
        self.specs.append(spec)
        evaluating = "REPRO_EVALUATE_WEIGHTS" in spec.env
        outcome = self.behave(spec, evaluating)
        if outcome is not None:
            return outcome
        return RunOutcome(exit_code=0, wall_s=0.01, log="trained\n", log_path=spec.output_dir / "log")


def _on_gpu():
    record = complete_record()
    return record.model_copy(update={"environment": record.environment.model_copy(update={"accelerator": "NVIDIA H200", "accelerator_count": 1})})


#: the rebuilds here record a GPU platform (where same-seed noise is legitimate), unless a test says CPU
REBUILD_RECORD = {"record": _on_gpu()}


def write(spec, *, metrics=METRICS, weights: bytes | None = None, evaluated: bool = False):
    (spec.output_dir / "run_record.json").write_text(REBUILD_RECORD["record"].to_json())  # the rebuild's own record
    if metrics is not None:
        (spec.output_dir / "metrics.json").write_text(metrics if isinstance(metrics, str) else json.dumps(metrics))
    if weights is not None:
        (spec.output_dir / "model.safetensors").write_bytes(weights)
    if evaluated:
        (spec.output_dir / "evaluation.json").write_text("{}")


def faithful(spec, evaluating):
    """An intact, deterministic recipe: the same weights and metrics as registered."""
    write(spec, weights=None if evaluating else _weights(), evaluated=evaluating)


def fake_prepare(record, diff, dest, settings):
    """The workspace step's stand-in: empty folders (these tests are not about git or snapshots)."""
    project = dest / "code"
    project.mkdir(parents=True)
    return Workspace(root=dest, repo_dir=project, project_dir=project, config_path=dest / "config.json", data_dirs={})


def _world(tmp_path, **seed_changes):
    registry = MemoryRegistry.named(f"memory://outcomes-{tmp_path.name}")
    weights = _weights()
    record = complete_record(outputs=Outputs(metrics=dict(METRICS), artifacts=[
        Artifact(name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))
    ]))
    if seed_changes:
        record = record.model_copy(update={"seeds": record.seeds.model_copy(update=seed_changes)})
    info = registry.register_record("m", record, weights=weights)
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"), "MLFLOW_TRACKING_URI": registry.uri})
    return registry, info, settings


@pytest.fixture()
def noisy_world(tmp_path):
    """A registered record that declares a nondeterministic source (``run.record_nondeterminism``): the record's own
    reason its same-seed reruns may differ, so the same-seed floor judges its weights."""
    world = _world(tmp_path, flags={"use_deterministic_algorithms": True, FLAG_NONDETERMINISTIC: ["a simulated kernel"]})
    yield world
    MemoryRegistry.forget(world[0].uri)


@pytest.fixture()
def world(tmp_path):
    registry = MemoryRegistry.named(f"memory://outcomes-{tmp_path.name}")
    weights = _weights()
    record = complete_record(outputs=Outputs(metrics=dict(METRICS), artifacts=[
        Artifact(name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))
    ]))
    info = registry.register_record("m", record, weights=weights)
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"), "MLFLOW_TRACKING_URI": registry.uri})
    yield registry, info, settings
    MemoryRegistry.forget(registry.uri)


def session(world, runner=None, *, prepare=fake_prepare) -> Session:
    """A session over the world's settings with the stand-ins handed in (the registry opened from the settings)."""
    return Session(world[2], runner=runner, prepare=prepare)


def run_audit(world, behave, *, prepare_error: Exception | None = None):
    _, info, _ = world
    runner = FakeRunner(behave)
    prepare = fake_prepare
    if prepare_error is not None:
        def prepare(*_a, **_k):
            raise prepare_error
    result = session(world, runner, prepare=prepare).audit(info.ref, AuditOptions(date="2026-02-01", publish=False)).result
    return result, runner


def test_an_intact_deterministic_recipe_is_reproduced_bitwise(world):
    result, runner = run_audit(world, faithful)
    assert result.verdict is Verdict.REPRODUCED_BITWISE
    assert result.tiers["artifact_recovery"].status == "pass"
    assert len(runner.specs) == 2  # the registered weights re-evaluated, then one rebuild
    assert runner.specs[1].env["REPRO_SEED"] == "7"


def test_no_metrics_file_is_not_reproducible_naming_the_file(world):
    result, _ = run_audit(world, lambda spec, ev: write(spec, metrics=None, weights=_weights()))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert "metrics.json" in result.error and exit_code(result.verdict.value) == 1


def test_metrics_that_are_not_an_object_are_not_reproducible(world):
    result, _ = run_audit(world, lambda spec, ev: write(spec, metrics="[1, 2]", weights=_weights()))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and "not a JSON object" in result.error


def test_no_rebuilt_weights_is_not_reproducible(world):
    result, _ = run_audit(world, lambda spec, ev: write(spec, evaluated=ev))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.error == "the rebuild left no model.safetensors"
    assert result.tiers["bitwise"].status == "fail"


def test_different_weights_without_a_measured_floor_are_out_of_tolerance(world):
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.5), evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    assert result.tiers["bitwise"].status == "fail" and result.tiers["statistical"].status == "fail"
    assert "no same-seed floor" in result.tiers["statistical"].summary


def _set_bands(world, **bands):
    registry, info, _ = world
    registry.set_bands(info, bands_to_json({m: Band(metric=m, lower=lo, upper=hi) for m, (lo, hi) in bands.items()}))


def _set_floor(world, *, bit_identical: bool, max_abs: float, platform=None):
    """A calibration document as `calibrate` stores it (the rebuilds here record no platform: {} matches {})."""
    from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor

    registry, info, _ = world
    from auditor.judge.floors import platform_fingerprint

    runs = [FloorRun(seed=7, weights_sha256="a"), FloorRun(seed=7, weights_sha256="a" if bit_identical else "b")]
    platform = platform if platform is not None else platform_fingerprint(REBUILD_RECORD["record"].environment)
    floor = SameSeedFloor(runs=runs, bit_identical=bit_identical, max_abs=max_abs, rel_l2=max_abs, platform=platform,
                          noise_verified=None if bit_identical else VERIFIED)
    calibration = Calibration(same_seed=floor, seed_varied=[FloorRun(seed=s) for s in range(5)])
    # as `calibrate` stores it: the evidence as a calibration run (what the judge reads), the tag a copy
    log_calibration_run(Session(world[2], registry=registry), info, calibration)
    registry.set_tags(info, {TAG_CALIBRATION: calibration.to_json()})


def test_different_weights_inside_every_band_and_the_floor_are_within_tolerance(noisy_world):
    world = noisy_world
    _set_bands(world, auc=(0.9, 0.92), accuracy=(0.84, 0.86))
    _set_floor(world, bit_identical=False, max_abs=1.0)
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.01), evaluated=ev))
    assert result.verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE, result.tiers["statistical"]
    assert "within the same-seed floor" in result.tiers["statistical"].summary
    declared = [f for f in result.findings if f.code == "expected.declared_nondeterministic"]
    assert declared and "a simulated kernel" in declared[0].message and "cannot verify" in declared[0].message


@pytest.mark.parametrize("deterministic", [False, True])
def test_same_seed_noise_the_record_gives_no_reason_for_is_never_within_tolerance(tmp_path, monkeypatch, deterministic):
    """Issue 26 (the review's E2 and E3): a CPU run, whatever its ``deterministic`` flag, is expected bitwise; reruns
    that differ there are an input no record pins (the clock), so no floor excuses them, however wide the bands."""
    world = _world(tmp_path, deterministic=deterministic, flags={"use_deterministic_algorithms": deterministic})
    try:
        monkeypatch.setitem(REBUILD_RECORD, "record", complete_record())  # the rebuild on CPU too
        _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))
        _set_floor(world, bit_identical=False, max_abs=1.0)
        result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.01), evaluated=ev))
        assert result.verdict is Verdict.OUT_OF_TOLERANCE, result.tiers["statistical"]
        summary = result.tiers["statistical"].summary
        assert "nothing in the record says this run cannot be bitwise" in summary and "run.record_nondeterminism" in summary
        assert "no floor excuses" in summary
    finally:
        MemoryRegistry.forget(world[0].uri)


def test_same_seed_noise_on_a_deterministic_cpu_run_is_an_unseeded_generator(world, monkeypatch):
    monkeypatch.setitem(REBUILD_RECORD, "record", complete_record())  # CPU, deterministic algorithms on
    _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))
    _set_floor(world, bit_identical=False, max_abs=1.0)
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.01), evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    assert "unseeded generator" in result.tiers["statistical"].summary


def test_a_recipe_bit_identical_here_that_rebuilds_differently_is_out_of_tolerance_whatever_the_bands(world):
    _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))  # wide bands must not overrule the evidence
    _set_floor(world, bit_identical=True, max_abs=0.0)
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.0000001), evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    assert "bit-identical on this platform" in result.tiers["statistical"].summary
    assert "does not pin" in result.tiers["statistical"].summary


def test_weights_farther_than_the_same_seed_floor_are_out_of_tolerance(noisy_world):
    world = noisy_world
    _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))
    _set_floor(world, bit_identical=False, max_abs=1e-3)
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.5), evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    assert "farther from the registered ones" in result.tiers["statistical"].summary


def test_another_platform_falls_back_to_the_bands_and_says_so(world):
    _set_bands(world, auc=(0.9, 0.92), accuracy=(0.84, 0.86))
    _set_floor(world, bit_identical=True, max_abs=0.0, platform={"machine": "aarch64", "cpu_model": "another cpu"})
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.01), evaluated=ev))
    assert result.verdict is Verdict.REPRODUCED_WITHIN_TOLERANCE
    warning = next(d for d in result.tiers["statistical"].details if d.startswith("warning:"))
    assert "another platform" in warning and "aarch64" in warning


def test_an_unrecorded_platform_does_not_relax_the_floor(world):
    _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))
    _set_floor(world, bit_identical=True, max_abs=0.0, platform={})  # a script without the SDK records none
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(1.01), evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    assert any("not recorded" in d for d in result.tiers["statistical"].details)


def test_a_rebuild_of_another_architecture_is_never_reproduced(world):
    _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))
    _set_floor(world, bit_identical=False, max_abs=1e9)
    other = save({"w": np.ones((4, 5), dtype=np.float32), "b": np.arange(3, dtype=np.float32), "extra": np.zeros(2, dtype=np.float32)})
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else other, evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    assert "another model" in result.tiers["statistical"].summary
    assert any("only in the rebuild: extra" in d for d in result.tiers["statistical"].details)


def test_a_metric_outside_its_band_is_never_reproduced_even_with_identical_weights(world):
    _set_bands(world, auc=(0.9, 0.92))
    result, _ = run_audit(world, lambda spec, ev: write(spec, metrics=METRICS if ev else {"auc": 0.5, "accuracy": 0.85}, weights=None if ev else _weights(), evaluated=ev))
    # bit-identical weights that evaluate to other metrics: the registered metrics are not reproducible from the
    # registered model (issue 26, artifact recovery), and the band still says the metric lies outside it
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.tiers["artifact_recovery"].summary.startswith("the registered metrics are not reproducible from the registered model")
    assert result.tiers["bitwise"].status == "pass" and result.tiers["statistical"].status == "fail"


def test_a_malformed_band_is_refused_before_any_rebuild_naming_the_tag(world):
    """Issue 16: the pre-flight refuses it (the caller's to fix, exit 2), instead of an ERROR after the rebuild."""
    from auditor.errors import MalformedRecord

    registry, info, _ = world
    registry.set_tags(info, {TAG_BANDS: '{"schema": "repro.bands/1", "bands": {"auc": {"lower": "x"}}}'})
    runner = FakeRunner(faithful)
    with pytest.raises(MalformedRecord, match=TAG_BANDS):
        session(world, runner).audit(info.ref, AuditOptions(date="2026-02-01", publish=False))
    assert runner.specs == []  # nothing ran
    # a nightly task (no pre-flight there: one bad band must not stop the night) still names it as ERROR
    row = session(world, runner).audit(info.ref, AuditOptions(date="2026-02-01", audit_run="t", task=True)).row
    assert row["verdict"] == Verdict.ERROR.value and TAG_BANDS in row["error"]


def _crashing(messages):
    """Evaluates fine; the n-th rebuild crashes with messages[n] (None: trains faithfully)."""
    calls = []

    def behave(spec, ev):
        if ev:
            return faithful(spec, ev)
        calls.append(spec)
        message = messages[len(calls) - 1] if len(calls) <= len(messages) else None
        if message is None:
            return faithful(spec, ev)
        return RunOutcome(exit_code=1, wall_s=0.01, log=f"epoch 0\nTraceback (most recent call last):\n{message}\n", log_path=spec.output_dir / "log")

    return behave


def test_a_crash_that_repeats_identically_is_a_persistent_recipe_failure(world):
    result, runner = run_audit(world, _crashing(["RuntimeError: boom at 0x7f01", "RuntimeError: boom at 0x7f99"]))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert "persistent recipe failure" in result.error and "RuntimeError: boom" in result.error
    assert "boom" in result.log_tail and len(runner.specs) == 3  # evaluation, rebuild, rebuild again


def test_a_crash_that_does_not_repeat_is_an_error_to_retry(world):
    result, _ = run_audit(world, _crashing(["MemoryError", "OSError: [Errno 28] No space left on device"]))
    assert result.verdict is Verdict.ERROR
    assert "exited with code 1" in result.error and "No space left" in result.log_tail
    assert exit_code(result.verdict.value) == 3


def test_a_crash_once_then_a_clean_rebuild_is_judged_on_the_clean_one(world):
    result, runner = run_audit(world, _crashing(["MemoryError"]))
    assert result.verdict is Verdict.REPRODUCED_BITWISE and len(runner.specs) == 3


def test_a_crash_re_evaluating_the_registered_weights_fails_artifact_recovery(world):
    def shape_mismatch(spec, ev):
        if ev:
            return RunOutcome(exit_code=1, wall_s=0.01, log="RuntimeError: size mismatch for w: copying a param with shape torch.Size([4, 3])\n", log_path=spec.output_dir / "log")
        return faithful(spec, ev)

    result, runner = run_audit(world, shape_mismatch)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    recovery = result.tiers["artifact_recovery"]
    assert recovery.status == "fail" and "size mismatch" in recovery.summary
    assert len(runner.specs) == 1  # no rebuild is judged against weights the recipe cannot load


def test_a_timeout_is_an_error_saying_so(world):
    def hang(spec, ev):
        return RunOutcome(exit_code=-9, wall_s=5.0, log="epoch 1\n", log_path=spec.output_dir / "log", timed_out=True)

    result, _ = run_audit(world, hang)
    assert result.verdict is Verdict.ERROR and "timed out" in result.error


def test_an_engine_outage_is_an_error_not_a_verdict_on_the_model(world):
    def outage(spec, ev):
        raise InfrastructureError("docker engine at unix:///var/run/docker.sock did not answer")

    result, _ = run_audit(world, outage)
    assert result.verdict is Verdict.ERROR and "docker engine" in result.error


def test_an_unexpected_exception_is_an_error_naming_its_type(world):
    def bug(spec, ev):
        raise RuntimeError("surprise")

    result, _ = run_audit(world, bug)
    assert result.verdict is Verdict.ERROR and result.error == "unexpected RuntimeError: surprise"


def test_an_input_that_cannot_be_recovered_is_not_reproducible(world):
    result, runner = run_audit(world, faithful, prepare_error=InputUnrecoverable("commit 0123 no longer exists"))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and "commit 0123" in result.error
    assert runner.specs == []


def test_a_corrupt_snapshot_is_not_reproducible(world):
    result, _ = run_audit(world, faithful, prepare_error=SnapshotCorrupt("blake3:ab", ["train_y.npy: changed"]))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and "train_y.npy" in result.error


def test_registered_weights_altered_after_registration_fail_artifact_recovery(world):
    registry, info, _ = world
    registry.put_artifact(info.run_id, "model/model.safetensors", _weights(2.0))
    result, _ = run_audit(world, faithful)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.tiers["artifact_recovery"].status == "fail" and "altered" in result.tiers["artifact_recovery"].summary


def test_a_version_without_a_record_is_not_reproducible_and_nothing_runs(world):
    registry, _, _ = world
    plain = registry.register_record("m", None)
    runner = FakeRunner(faithful)
    result = session(world, runner).audit(plain.ref, AuditOptions(date="2026-02-01", publish=False)).result
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.findings[0].code == "record.missing" and runner.specs == []


def test_a_record_rewritten_after_registration_is_not_reproducible(world):
    registry, info, _ = world
    forged = complete_record(seeds=None)
    registry.put_artifact(info.run_id, "repro/run_record.json", forged.to_json().encode())
    result, runner = run_audit(world, faithful)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and runner.specs == []
    assert "changed after registration" in result.findings[0].message


def test_a_blocking_lineage_finding_is_not_reproducible_and_nothing_runs(world):
    registry, _, _ = world
    record = complete_record()
    record = record.model_copy(update={"environment": record.environment.model_copy(update={"image_digest": None, "image_ref": "trainer:latest"})})
    bad = registry.register_record("m", record, weights=_weights())
    runner = FakeRunner(faithful)
    result = session(world, runner).audit(bad.ref, AuditOptions(date="2026-02-01", publish=False)).result
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.tiers["lineage"].status == "fail" and runner.specs == []


def test_an_unknown_runner_and_a_bad_ref_are_the_callers_errors(world):
    _, info, settings = world
    with pytest.raises(BadInput, match="runner 'podman'"):
        Session(settings).audit(info.ref, AuditOptions(runner="podman", publish=False))
    with pytest.raises(NotFound):
        Session(settings).audit("models:/m/99", AuditOptions(publish=False))
    row = Session(settings).audit("models:/m/99", AuditOptions(date="2026-02-01", audit_run="t", task=True)).row
    assert row["verdict"] == "ERROR" and row["report"] is None and "99" in row["error"]


def test_publishing_writes_the_outcome_tags_once_per_date(world):
    registry, info, _ = world
    runner = FakeRunner(faithful)
    first = session(world, runner).audit(info.ref, AuditOptions(date="2026-02-01", audit_run="cli"))
    assert first.publish_failure is None and not first.skipped
    tags = dict(registry.resolve(info.ref).tags)
    assert tags[TAG_VERDICT] == "REPRODUCED_BITWISE" and tags[TAG_AUDIT_DATE] == "2026-02-01"
    assert tags[TAG_REPORT] == first.row["report"] and Path(first.row["report"]).exists()
    again = session(world, runner).audit(info.ref, AuditOptions(date="2026-02-01", audit_run="dag", task=True)).row
    assert again["skipped"] and again["report"] == first.row["report"]
    assert len(runner.specs) == 2  # the second call re-used the published evidence: no rebuild
    assert dict(registry.resolve(info.ref).tags) == tags


def test_exit_codes_come_from_one_table():
    assert [exit_code(v.value) for v in Verdict] == [0, 0, 1, 1, 1, 3]  # LINEAGE_INSUFFICIENT exits 1
    assert exit_code(BadInput("x")) == 2 and exit_code(InfrastructureError("x")) == 3
    assert exit_code(InputUnrecoverable("x")) == 1 and exit_code(RuntimeError("x")) == 3



# -- MLflow lifecycle ---------------------------------------------------------------------------------
def test_a_deleted_run_is_a_warning_naming_mlflow_gc(world):
    registry, info, _ = world
    registry.delete_run(info.run_id)
    result, _ = run_audit(world, faithful)
    assert result.verdict is Verdict.REPRODUCED_BITWISE  # still there today, so still rebuilt and judged
    warning = next(f for f in result.findings if f.code == "run.deleted")
    assert not warning.blocking and "mlflow gc" in warning.message and info.run_id in warning.hint


def test_a_record_lost_after_registration_is_worded_as_lost(world):
    registry, info, _ = world
    del registry._runs[info.run_id].artifacts["repro/run_record.json"]  # the artifact store lost it
    result, runner = run_audit(world, faithful)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and runner.specs == []
    finding = result.findings[0]
    assert finding.code == "record.lost" and "is lost" in finding.message and "registered without" not in finding.message


def test_missing_registered_weights_are_compared_by_the_recorded_hash(world):
    registry, info, _ = world
    del registry._runs[info.run_id].artifacts["model/model.safetensors"]
    result, _ = run_audit(world, faithful)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE  # the registered artifact is not recovered
    assert result.tiers["artifact_recovery"].status == "fail"
    bitwise = result.tiers["bitwise"]
    assert bitwise.status == "pass" and "hash to the recorded sha256" in bitwise.summary
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else _weights(3.0), evaluated=ev))
    assert result.tiers["bitwise"].status == "fail" and "the record says" in result.tiers["bitwise"].summary


def test_the_audits_own_reruns_that_differ_under_an_expected_bitwise_record_are_blocking(tmp_path, monkeypatch):
    """``--reruns 2`` of a CPU run that declares no nondeterminism: the first rebuild is the registered model, the second
    is not. Only the first is compared with the registered model, so their disagreement is its own blocking finding."""
    world = _world(tmp_path)
    try:
        monkeypatch.setitem(REBUILD_RECORD, "record", complete_record())  # the rebuilds on CPU
        rebuilds = iter([_weights(), _weights(1.01)])

        def behave(spec, evaluating):
            write(spec, weights=None if evaluating else next(rebuilds), evaluated=evaluating)

        runner = FakeRunner(behave)
        result = session(world, runner).audit(world[1].ref, AuditOptions(date="2026-02-01", publish=False, reruns=2)).result
        found = [f for f in result.findings if f.code == "rebuild.reruns_differ"]
        assert found and found[0].blocking and "2 different models" in found[0].message, result.findings
        assert result.verdict is Verdict.NOT_REPRODUCIBLE
    finally:
        MemoryRegistry.forget(world[0].uri)


def test_the_first_progress_step_is_said_before_the_registry_opens(world):
    """Issue 41, build 2: the registry's client opens lazily, inside the first step, so the first progress line
    comes before MLflow's import and store (seconds), not after them."""
    _, info, _ = world
    steps: list[str] = []
    audited = session(world, FakeRunner(faithful))
    assert audited._registry is None  # nothing opened the registry yet (the session opens it once, lazily)
    audited.audit(info.ref, AuditOptions(date="2026-02-01", publish=False), progress=steps.append)
    assert steps[0] == f"resolving {info.ref} in the registry", steps


def test_a_rebuild_that_writes_over_the_registered_model_it_was_handed_is_never_reproduced(world):
    """The rebuild is handed the registered model's path (to score it), and a process of the auditor's own user can
    write that file: a recipe that puts its own model there, and the same model in its output, must not read as a
    reproduction of the registered one. The registered file is hashed again before it is compared."""
    def hostile(spec, evaluating):
        registered = spec.env.get("REPRO_EVALUATE_WEIGHTS")
        if registered:
            Path(registered).write_bytes(_weights(1.5))
        write(spec, weights=None if evaluating else _weights(1.5), evaluated=evaluating)

    result, _ = run_audit(world, hostile)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert "changed while" in result.error
