"""Issue 26, build point 4: forgery named as forgery, a tier not reached says why, another shape in words, data that
changed on the data row (and build point 5's last clause: traced inputs compared although the re-evaluation crashed).

The same stand-ins as tests/unit/test_audit_outcomes.py (a fake runner writing what a script would, empty workspace
folders); the registry is the real in-memory twin, the judge, the report view and the HTML report the real ones.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from safetensors.numpy import save

from auditor.errors import SnapshotCorrupt
from auditor.judge.result import Verdict
from auditor.lineage.record import Artifact, Outputs, RunRecord, TracedFile, TracedInputs
from auditor.rebuild.runners import RunOutcome
from auditor.report import view
from auditor.report.evidence import build_evidence
from auditor.report.render import render_report
from auditor.steps import AuditOptions
from auditor.tags import RECORD_ARTIFACT, TAG_RECORD_DIGEST
from tests.fixtures.records import complete_record
from tests.unit import test_audit_outcomes as outcomes
from tests.unit.test_audit_outcomes import (
    METRICS,
    REBUILD_RECORD,
    FakeRunner,
    _set_bands,
    _set_floor,
    _weights,
    faithful,
    run_audit,
    session,
    write,
)

world = outcomes.world  # the fixture: one version of model m, its record complete, its weights real


def _page(world, result) -> str:
    return render_report(build_evidence(result, settings=world[2]))


def _forge(registry, info, *, retag: bool) -> RunRecord:
    """The insider's edit of the stored record (seed 7 -> 8: the same size); ``retag``: the digest tags recomputed too."""
    record = json.loads(registry.read_run_file(info.run_id, RECORD_ARTIFACT))
    record["seeds"]["seed"] = 8
    forged = RunRecord.model_validate(record)
    assert len(forged.to_json()) == len(RunRecord.model_validate(json.loads(registry.read_run_file(info.run_id, RECORD_ARTIFACT))).to_json())
    registry.put_artifact(info.run_id, RECORD_ARTIFACT, forged.to_json().encode())
    if retag:
        registry.set_tags(registry.resolve(info.ref), {TAG_RECORD_DIGEST: forged.digest()})
        registry.set_run_tags(info.run_id, {TAG_RECORD_DIGEST: forged.digest()})
    return forged


def test_a_record_edited_after_registration_is_forgery_with_both_digests_and_no_re_register_hint(world):
    registry, info, _ = world
    _set_bands(world, auc=(0.9, 0.92), accuracy=(0.84, 0.86))
    _set_floor(world, bit_identical=True, max_abs=0.0)  # a calibrated version: "run calibrate" would be wrong
    for retag in (False, True):  # the tag check, then the immutable param anchor
        registered = registry.resolve(info.ref).record_digest if not retag else None
        forged = _forge(registry, info, retag=retag)
        result, runner = run_audit(world, faithful)
        assert result.verdict is Verdict.NOT_REPRODUCIBLE and runner.specs == []
        finding = result.findings[0]
        assert finding.code == "record.changed" and "record.unreadable" not in {f.code for f in result.findings}
        assert "changed after registration (it was edited, not damaged)" in finding.message
        assert "investigate" in finding.hint and "do not re-register" in finding.hint and "launder" in finding.hint
        assert result.evidence["record.found"] == forged.digest() and forged.digest() in finding.message
        assert result.evidence["record.registered"] not in (None, "unknown", forged.digest())
        if registered:
            assert result.evidence["record.registered"] == registered
        assert result.evidence["record.registered"] in finding.message
        for name in ("statistical", "bitwise"):
            summary = result.tiers[name].summary
            assert summary.startswith("not reached: no run record could be used (record.changed)"), summary
            assert "calibrate" not in summary
        page = _page(world, result)
        assert result.evidence["record.registered"] in page and forged.digest() in page
        assert "do not re-register" in page and "re-register the version with a valid run record" not in page


def test_an_audit_blocked_by_lineage_says_why_the_rebuild_tiers_were_not_reached(world):
    registry, _, _ = world
    record = complete_record()
    record = record.model_copy(update={"environment": record.environment.model_copy(update={"image_digest": None, "image_ref": "trainer:latest"})})
    bad = registry.register_record("m", record, weights=_weights())
    runner = FakeRunner(faithful)
    result = session(world, runner).audit(bad.ref, AuditOptions(date="2026-02-01", publish=False)).result
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and runner.specs == []
    summary = result.tiers["statistical"].summary
    assert summary.startswith("not reached: the lineage gate blocked the rebuild (") and "calibrate" not in summary


def test_a_rebuild_of_another_shape_says_so_in_words_and_its_statistical_tier_never_passes(world):
    registry, info, _ = world
    _set_bands(world, auc=(0.0, 1.0), accuracy=(0.0, 1.0))  # every metric inside: the shape alone must fail the tier
    _set_floor(world, bit_identical=False, max_abs=1e9)
    other = save({"w": np.ones((4, 5), dtype=np.float32), "b": np.arange(3, dtype=np.float64)})
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else other, evaluated=ev))
    assert result.verdict is Verdict.OUT_OF_TOLERANCE
    statistical = result.tiers["statistical"]
    assert statistical.status == "fail" and statistical.summary.startswith("the rebuild is another model")
    assert "w has another shape: F32 of shape [4, 3] in the registered weights, F32 of shape [4, 5] in the rebuild" in statistical.summary
    assert "b has another dtype: F32 of shape [3] in the registered weights, F64 of shape [3] in the rebuild" in " ".join(statistical.details)
    # the registered file altered too (artifact recovery fails first): the other-shape statistical tier still fails
    registry.put_artifact(info.run_id, "model/model.safetensors", save({"w": np.ones((4, 3), dtype=np.float32), "b": np.zeros(3, dtype=np.float32)}))
    result, _ = run_audit(world, lambda spec, ev: write(spec, weights=None if ev else other, evaluated=ev))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.tiers["statistical"].status == "fail" and "another model" in result.tiers["statistical"].summary
    shown = {t["key"]: t for t in view.tiers(result)}
    assert shown["statistical"]["status"] == "fail"


def test_a_snapshot_that_changed_is_a_red_data_row_naming_the_files(world):
    registry, info, _ = world
    snapshot = registry.load_record(info)[0].data["train"].version
    problems = ["train_y.npy: sha256 differs from the manifest", "extra.csv: not in the manifest"]
    result, _ = run_audit(world, faithful, prepare_error=SnapshotCorrupt(snapshot, problems))
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.tiers["lineage"].status == "fail"  # never "lineage: pass" with the blame elsewhere
    [finding] = [f for f in result.findings if f.code == "data.changed"]
    assert finding.path == "data.train" and "the data changed" in finding.message
    assert "train_y.npy" in finding.message and "extra.csv" in finding.message
    row = next(r for r in view.lineage(result) if r["section"] == "data")
    assert row["status"] == "changed" and any("train_y.npy" in f["message"] for f in row["findings"])
    page = _page(world, result)
    assert '<span class="pill changed">changed</span>' in page


def _traced_world(world, path: str, digest: str):
    """A version whose training read ``path`` (content ``digest``) outside the snapshots."""
    registry, _, _ = world
    weights = _weights()
    record = complete_record(
        outputs=Outputs(metrics=dict(METRICS), artifacts=[Artifact(name="model.safetensors", uri="runs:/x/model/model.safetensors",
                                                                   sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))]),
        traced=TracedInputs(files=[TracedFile(path=path, size=3, sha256=digest)], notes=["n"]))
    return registry.register_record("traced", record, weights=weights)


def test_traced_inputs_are_compared_although_the_re_evaluation_crashed(world, monkeypatch):
    """The script read a file in the temp folder that changed since training; loading the registered weights then
    crashed (another hidden size, say). The crashed run's record still names the file, on the data row."""
    path = "/tmp/hidden.json"
    info = _traced_world(world, path, "sha256:" + "a" * 64)
    rebuilt = REBUILD_RECORD["record"].model_copy(update={"traced": TracedInputs(files=[TracedFile(path=path, size=3, sha256="sha256:" + "b" * 64)])})
    monkeypatch.setitem(REBUILD_RECORD, "record", rebuilt)

    def crashes_evaluating(spec, ev):
        if ev:
            write(spec, metrics=None)  # the record is written even when the script fails
            return RunOutcome(exit_code=1, wall_s=0.01, log="RuntimeError: size mismatch for w\n", log_path=spec.output_dir / "log")
        return faithful(spec, ev)

    result = session(world, FakeRunner(crashes_evaluating)).audit(info.ref, AuditOptions(date="2026-02-01", publish=False)).result
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    [finding] = [f for f in result.findings if f.code == "traced.file_changed"]
    assert finding.blocking and path in finding.message
    row = next(r for r in view.lineage(result) if r["section"] == "data")
    assert row["status"] == "changed"
    assert result.tiers["statistical"].summary.startswith("not reached: no rebuild was judged: re-evaluating the registered weights")



def test_lineage_show_names_an_edited_record_as_changed_never_unreadable(world, capsys, monkeypatch):
    import auditor.cli.lineage_show  # noqa: F401 - registers `lineage show`
    from auditor.cli import main

    registry, info, _ = world
    forged = _forge(registry, info, retag=True)
    monkeypatch.setenv("COLUMNS", "250")
    with pytest.raises(SystemExit) as exited:
        main(["lineage", "show", info.ref, "--json", "--tracking-uri", registry.uri])
    shown = json.loads(capsys.readouterr().out)
    assert exited.value.code == 1
    [finding] = shown["findings"]
    assert finding["code"] == "record.changed" and forged.digest() in finding["message"]
    assert "do not re-register" in finding["hint"]


def test_a_record_that_no_longer_parses_is_never_answered_with_re_register(world):
    """Bytes that do not parse cannot say whether they were edited or damaged; the version was registered with a
    digest all the same, so the fix is to investigate and restore, never to adopt them by re-registering."""
    registry, info, _ = world
    registry.put_artifact(info.run_id, RECORD_ARTIFACT, b'{"schema_version": "1", "seeds": ')
    result, runner = run_audit(world, faithful)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE and runner.specs == []
    [finding] = result.findings
    assert finding.code == "record.unreadable" and info.record_digest in finding.message
    assert "do not re-register" in finding.hint and "investigate" in finding.hint
    assert result.evidence["record.registered"] == info.record_digest and result.evidence["record.found"] == "unreadable"
    assert result.tiers["statistical"].summary.startswith("not reached: no run record could be used (record.unreadable)")
