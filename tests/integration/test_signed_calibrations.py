"""Issue 27, build 3: a calibration is evidence, signed and recorded in the ledger like an audit.

An insider who writes to MLflow (and, in the harder cases, to the reports folder too) tries to have the
judge use a calibration of their own: wider bands, a widened same-seed floor. Each is refused by the
judge, naming the calibration, and the honest calibration the ledger records is the one judged.

What is real: the ledger, the reports folder, Ed25519 signatures (securesystemslib), the registry's
in-memory twin (the same runs, params and tags as MLflow), the judge and the segment judge's floor
lookup. The training is the fake runner of tests/unit/test_audit_outcomes.py (what is tested is
which calibration is judged, not training); the segment floor is checked through the lookup the
segment audit calls, because a real segment audit trains for minutes (tests/integration/test_segment_replay.py).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from auditor.digests import sha256_digest
from auditor.judge.binding import expected_bands
from auditor.judge.floors import calibration_from_json
from auditor.judge.tolerance import bands_to_json
from auditor.report import attest, ledger
from auditor.report.calibrations import ledgered_calibrations, publish_calibration
from auditor.report.verify import verify
from auditor.settings import Settings
from auditor.steps import AuditOptions, Session
from auditor.storage import open_store
from auditor.tags import (
    CALIBRATION_ARTIFACT,
    PARAM_CALIBRATION_RERUNS,
    PARAM_CALIBRATION_SHA256,
    TAG_BANDS,
    TAG_CALIBRATION,
    TAG_RUN_KIND,
    TAG_RUN_MODEL,
    TAG_RUN_MODEL_VERSION,
)
from tests.integration.test_insider_tamper import _registry_of_three, _varying, session

pytestmark = pytest.mark.slow


@pytest.fixture()
def calibrated(tmp_path):
    """Version 2 of model m calibrated once, honestly, by an auditor with a signing key."""
    from auditor.registry.memory import MemoryRegistry

    registry, infos = _registry_of_three(f"calib-{tmp_path.name}")
    key_path = tmp_path / "keys" / "signing.pem"
    public, keyid = attest.generate_key(key_path)
    settings = Settings.from_env({"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
                                  "MLFLOW_TRACKING_URI": registry.uri, "REPRO_SIGNING_KEY": str(key_path)})
    info = infos[1]
    session(settings, _varying).calibrate(info.ref, reruns=3, same_seed=2)
    found, _ = ledgered_calibrations(open_store(settings.reports), "m", "2", attest.load_public_key(str(public)))
    assert [c.problem for c in found] == [None]
    yield SimpleNamespace(registry=registry, info=registry.resolve(info.ref), settings=settings, public=public, keyid=keyid,
                          tmp=tmp_path, honest={"sha256": found[0].sha256, "data": found[0].data, "seq": found[0].seq})
    MemoryRegistry.forget(registry.uri)


def _honest(w) -> dict:
    """The first, honest calibration's evidence, as its ledger entry and file held it."""
    return w.honest


def _forge(w, *, floor_scale: float = 1.0) -> tuple[str, str, bytes]:
    """The insider's calibration: the honest one with every rerun's metrics spread 50x (wider bands) and the
    same-seed floor scaled, logged as a new calibration run whose sha256 param matches its artifact, with the
    version's tags pointing at it. Returns (run id, sha256, bytes)."""
    doc = json.loads(_honest(w)["data"])
    for run in doc["seed_varied"]:
        run["metrics"] = {k: (v - 0.9) * 50 + 0.9 if isinstance(v, float) else v for k, v in run["metrics"].items()}
    for key in ("max_abs", "rel_l2"):
        if isinstance(doc["same_seed"].get(key), (int, float)):
            doc["same_seed"][key] = doc["same_seed"][key] * floor_scale + (floor_scale if floor_scale != 1.0 else 0.0)
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    sha = sha256_digest(data)
    forged = calibration_from_json(data, source="forgery")
    run_id = w.registry.log_run(
        experiment=w.settings.audit_experiment, identity=f"calibration {w.info.ref} {sha}", name="calibration m v2",
        params={PARAM_CALIBRATION_SHA256: sha, PARAM_CALIBRATION_RERUNS: "3", TAG_RUN_MODEL: "m", TAG_RUN_MODEL_VERSION: "2"},
        tags={TAG_RUN_KIND: "calibration"}, metrics={}, artifacts={CALIBRATION_ARTIFACT: data})
    _point_tags_at(w, forged, {"run_id": run_id, "sha256": sha, "artifact": CALIBRATION_ARTIFACT})
    return run_id, sha, data


def _point_tags_at(w, calibration, evidence) -> None:
    bands = {name: band.model_copy(update={"evidence": evidence})
             for name, band in expected_bands(calibration, _registered(w)).items()}
    w.registry.set_tags(w.registry.resolve(w.info.ref), {TAG_BANDS: bands_to_json(bands), TAG_CALIBRATION: calibration.to_json()})


def _registered(w) -> dict:
    record, _ = w.registry.load_record(w.registry.resolve(w.info.ref))
    return dict(record.outputs.metrics)


def _audit(w, date: str, settings: Settings | None = None):
    return session(settings or w.settings, _varying).audit(w.info.ref, AuditOptions(date=date, publish=False)).result


def _text(result) -> str:
    return "\n".join(f"{f.code}: {f.message}" for f in result.findings)


def _judged(result) -> list[dict]:
    return [c for c in result.calibrations if c.get("judged")]


def test_the_honest_calibration_is_ledgered_signed_anchored_and_judged(calibrated):
    w = calibrated
    store = open_store(w.settings.reports)
    entry = next(e for e in ledger.entries(store) if e.get("kind") == "calibration")
    assert entry["calibration"]["model"] == "m" and entry["attestation"]["keyids"] == [w.keyid]
    checked = verify(store, public_key=attest.load_public_key(str(w.public)), anchors=Session(w.settings).ledger_anchors(w.settings.reports))
    assert checked.ok, [p.message for p in checked.problems]
    assert (checked.entries, checked.signed, checked.anchored) == (1, 1, 1)
    result = _audit(w, "2026-08-01")
    judged = _judged(result)
    assert len(judged) == 1 and judged[0]["sha256"] == _honest(w)["sha256"]
    assert "signature verified" in judged[0]["ledger"] and w.keyid in judged[0]["ledger"]
    assert not [f for f in result.findings if f.code.startswith(("calibration.", "band."))], _text(result)


def test_a_forged_calibration_run_with_consistent_digests_is_refused_naming_it(calibrated):
    w = calibrated
    run_id, sha, _ = _forge(w)
    result = _audit(w, "2026-08-02")
    text = _text(result)
    assert f"calibration.unledgered: calibration run {run_id} (evidence {sha}) is not recorded in the ledger" in text
    assert "band.unbound" in text and "'auc'" in text  # the forged bands name the forgery, not the judged calibration
    assert [c["sha256"] for c in _judged(result)] == [_honest(w)["sha256"]]
    assert next(m for m in result.metrics if m.name == "auc").band is None


def test_a_forgery_the_insider_also_ledgers_unsigned_or_with_their_own_key_is_refused(calibrated):
    """The insider writes to the reports folder too: a ledger entry for the forgery, unsigned, then signed by a fresh key."""
    w = calibrated
    run_id, sha, data = _forge(w)
    store = open_store(w.settings.reports)
    publish_calibration(store, data, model="m", version="2", sha256=sha, calibrated_at="2026-08-03T00:00:00Z", key=None)
    text = _text(_audit(w, "2026-08-03"))
    assert f"calibration {sha} (ledger entry 1" in text and "is not signed" in text and w.keyid in text
    mallory = w.tmp / "mallory.pem"
    attest.generate_key(mallory)
    run_id2, sha2, data2 = _forge(w, floor_scale=2.0)
    publish_calibration(store, data2, model="m", version="2", sha256=sha2, calibrated_at="2026-08-04T00:00:00Z",
                        key=attest.load_signing_key(str(mallory)))
    result = _audit(w, "2026-08-04")
    text = _text(result)
    assert f"calibration {sha2} (ledger entry 2" in text and f"no valid signature by key {w.keyid}" in text
    assert [c["sha256"] for c in _judged(result)] == [_honest(w)["sha256"]]
    # and the ledger entries made by hand have no anchor: evidence verify names them
    checked = verify(store, public_key=attest.load_public_key(str(w.public)), anchors=Session(w.settings).ledger_anchors(w.settings.reports))
    assert "entry 1" in "\n".join(p.message for p in checked.problems) and not checked.ok


def test_a_purged_honest_recalibration_with_the_forged_tags_restored_is_refused(calibrated):
    w = calibrated
    forged_run, forged_sha, _ = _forge(w)
    forged_tags = {k: w.registry.resolve(w.info.ref).tags[k] for k in (TAG_BANDS, TAG_CALIBRATION)}
    bands = session(w.settings, _varying).calibrate(w.info.ref, reruns=4, same_seed=2, replace=True)
    second = next(iter(bands.values())).evidence
    assert second["sha256"] != _honest(w)["sha256"]
    with w.registry._lock:  # the MLflow admin's `mlflow gc`: the honest re-calibration's run is gone for good
        del w.registry._runs[second["run_id"]]
    w.registry.set_tags(w.registry.resolve(w.info.ref), forged_tags)
    result = _audit(w, "2026-08-05")
    text = _text(result)
    assert f"calibration run {forged_run} (evidence {forged_sha}) is not recorded in the ledger" in text
    assert f"calibration {second['sha256']} (ledger entry" in text and "gone (purged or never logged)" in text
    assert [c["sha256"] for c in _judged(result)] == [second["sha256"]]  # the ledger's signed copy, not the forgery
    assert "band.unbound" in text


def test_segment_replay_takes_its_floor_from_the_ledgered_calibration_never_the_tag(calibrated):
    """The segment judge's floor (``auditor.steps.segments._segment_floor``, what a segment audit calls before
    replaying): a repro.calibration tag edited to a floor of 1e9, and a forged run behind it, are both refused."""
    from auditor.steps.segments import _segment_floor

    w = calibrated
    honest = calibration_from_json(_honest(w)["data"], source="honest")
    run_id, sha, _ = _forge(w, floor_scale=1e9)
    edited = json.loads(w.registry.resolve(w.info.ref).tags[TAG_CALIBRATION])
    assert edited["same_seed"]["max_abs"] >= 1e9
    a = SimpleNamespace(session=Session(w.settings), info=w.registry.resolve(w.info.ref), calibration_lookup=None)
    floor = _segment_floor(a)
    assert floor == honest.same_seed and floor.max_abs < 1e9
    calibration, evidence, history, findings = a.calibration_lookup
    assert evidence["sha256"] == _honest(w)["sha256"]
    assert any(f.code == "calibration.unledgered" and run_id in f.message for f in findings)


def test_without_a_signing_key_the_ledger_still_decides_and_says_signatures_were_not_checked(calibrated):
    w = calibrated
    unsigned = Settings.from_env({"REPRO_HOME": str(w.tmp / "home"), "REPRO_REPORTS": w.settings.reports,
                                  "MLFLOW_TRACKING_URI": w.registry.uri})
    run_id, _, _ = _forge(w)
    result = _audit(w, "2026-08-06", unsigned)
    judged = _judged(result)
    assert [c["sha256"] for c in judged] == [_honest(w)["sha256"]]
    assert "not checked (no signing key configured)" in judged[0]["ledger"]
    assert run_id in _text(result)


def test_deleting_a_calibration_from_the_ledger_is_a_detected_rollback(calibrated):
    from tests.integration.test_insider_tamper import _rechain, settings_root

    w = calibrated
    store = open_store(w.settings.reports)
    entries = ledger.entries(store)
    for part in ("evidence", "attestation"):
        (settings_root(store) / entries[-1][part]["key"]).unlink()
    (settings_root(store) / ledger.entry_key(len(entries) - 1)).unlink()
    _rechain(store, entries[:-1])
    checked = verify(store, public_key=attest.load_public_key(str(w.public)), anchors=Session(w.settings).ledger_anchors(w.settings.reports))
    assert not checked.ok and "rolled back" in "\n".join(p.message for p in checked.problems)
    result = _audit(w, "2026-08-07")
    assert not _judged(result) and "not recorded in the ledger" in _text(result)
