"""An insider with write access to MLflow, to the reports store, or to both, tries to make a failed model look reproduced.

Each case below is an edit such an insider can make with the tools they hold (the MLflow API, a
text editor on the reports folder, a plain S3 PUT) and, where it helps them, the recomputation that
hides it (hash chain, digest tags, seals). Every one must be caught by ``evidence verify`` or by the
audit, naming what changed; the untouched set verifies with signatures and anchors.

What is real and what is not: the ledger, reports, attestations (securesystemslib Ed25519, DSSE),
the registry (the in-memory twin: same tags, params and runs as MLflow; MLflow's refusal to change a
param is shown for real in ``test_mlflow_refuses_to_overwrite_an_anchor_param``), the judge and the
S3 store (moto server with Object Lock) are real. The training process is the fake runner (and the
workspace the empty folders) of tests/unit/test_audit_outcomes.py, handed to the audit session
(``Session(settings, runner=..., prepare=...)``), since what is tested is the evidence, not training.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from auditor.canonical import digest
from auditor.errors import BadInput
from auditor.judge.result import Verdict
from auditor.report import attest, ledger
from auditor.report.evidence import evidence_bytes
from auditor.report.index import write_index
from auditor.report.publish import entry_fields
from auditor.report.render import render_report_bytes
from auditor.report.verify import verify
from auditor.settings import Settings
from auditor.steps import AuditOptions, Session
from auditor.storage import open_store
from auditor.tags import RECORD_ARTIFACT, TAG_BANDS, TAG_RECORD_DIGEST
from tests.unit.test_audit_outcomes import METRICS, FakeRunner, _weights, fake_prepare, write

DATES = ["2026-05-01", "2026-05-02", "2026-05-03"]


def faithful(spec, evaluating):
    write(spec, weights=None if evaluating else _weights(), evaluated=evaluating)


def session(settings: Settings, behave=None) -> Session:
    """An audit session whose rebuilds are the fake runner playing ``behave`` in an empty workspace."""
    return Session(settings, runner=FakeRunner(behave or faithful), prepare=fake_prepare)


def audit(settings: Settings, ref: str, date: str, behave=None):
    """``ref`` audited for ``date``, nothing published."""
    return session(settings, behave).audit(ref, AuditOptions(date=date, publish=False)).result


def crashing(spec, evaluating):
    from auditor.rebuild.runners import RunOutcome

    if evaluating:
        write(spec, evaluated=True)
        return None
    return RunOutcome(exit_code=1, wall_s=0.01, log="Traceback: boom\n", log_path=spec.output_dir / "log")


def _registry_of_three(name: str):
    """An in-memory registry holding three versions of model m, each with the same complete record and weights."""
    from auditor.lineage.record import Artifact, Outputs
    from auditor.registry.memory import MemoryRegistry
    from tests.fixtures.records import complete_record

    registry = MemoryRegistry.named(f"memory://{name}")
    weights = _weights()
    record = complete_record(outputs=Outputs(metrics=dict(METRICS), artifacts=[
        Artifact(name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))
    ]))
    return registry, [registry.register_record("m", record, weights=weights) for _ in range(3)]


@pytest.fixture()
def signed(tmp_path):
    """Three audits of model m published with a signing key: v1 NOT_REPRODUCIBLE, v2 and v3 reproduced."""
    from auditor.registry.memory import MemoryRegistry

    registry, infos = _registry_of_three(f"tamper-{tmp_path.name}")
    key_path = tmp_path / "keys" / "signing.pem"
    public_path, keyid = attest.generate_key(key_path)
    settings = Settings.from_env({
        "REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"),
        "MLFLOW_TRACKING_URI": registry.uri, "REPRO_SIGNING_KEY": str(key_path), "REPRO_SIGNER": "audit-bot@bank",
    })
    behaviours = [crashing, faithful, faithful]
    for info, date, behave in zip(infos, DATES, behaviours, strict=True):
        outcome = session(settings, behave).audit(info.ref, AuditOptions(date=date, audit_run="cli", runner="process"))
        assert outcome.publish_failure is None, outcome.publish_failure
    yield registry, infos, settings, public_path, keyid
    MemoryRegistry.forget(registry.uri)


def check(settings: Settings, public_path: Path, location: str | None = None):
    where = location or settings.reports
    return verify(open_store(where), public_key=attest.load_public_key(str(public_path)),
                  anchors=Session(settings).ledger_anchors(where))


def messages(result) -> str:
    return "\n".join(p.message for p in result.problems)


def settings_root(store) -> Path:
    return Path(store.local_path(ledger.LEDGER_FILE)).parent


def _rechain(store, entries):
    """What an insider with the reports folder does to hide an edit: recompute every hash, rewrite everything."""
    prev = ledger.GENESIS
    for path in (Path(settings_root(store)) / ledger.ENTRIES).glob("*.json"):
        path.unlink()
    fixed = []
    for seq, entry in enumerate(entries):
        entry = {**entry, "seq": seq, "prev": prev}
        entry["hash"] = ledger.entry_hash(entry)
        prev = entry["hash"]
        store.write(ledger.entry_key(seq), ledger.entry_bytes(entry), overwrite=True)
        fixed.append(entry)
    store.write(ledger.LEDGER_FILE, b"".join(ledger.entry_bytes(e) for e in fixed), overwrite=True)
    write_index(store, fixed)
    return fixed


def test_the_untouched_set_verifies_with_signatures_and_anchors(signed):
    registry, infos, settings, public, keyid = signed
    result = check(settings, public)
    assert result.ok, messages(result)
    assert (result.entries, result.signed, result.anchor_sources) == (3, 3, {
        f"MLflow experiment {settings.audit_experiment!r}": 3,
        f"the second anchor {settings.home / 'anchors'} (the default under {settings.home}, REPRO_LEDGER_ANCHOR unset)": 3})
    evidence = json.loads(open_store(settings.reports).read(ledger.entries(open_store(settings.reports))[0]["evidence"]["key"]))
    assert evidence["signing"] == {"keyid": keyid, "signer": "audit-bot@bank"}
    assert evidence["audit"]["verdict"] == Verdict.NOT_REPRODUCIBLE.value
    page = open_store(settings.reports).read(ledger.entries(open_store(settings.reports))[0]["report"]["key"]).decode()
    assert keyid in page and "audit-bot@bank" in page and "Reviewed by" in page


def test_rewriting_an_old_verdict_and_recomputing_the_whole_chain_is_caught(signed):
    _, _, settings, public, _ = signed
    store = open_store(settings.reports)
    entries = ledger.entries(store)
    first = entries[0]
    doc = json.loads(store.read(first["evidence"]["key"]))
    doc["audit"]["verdict"] = Verdict.REPRODUCED_BITWISE.value
    doc["evidence_digest"] = digest({k: v for k, v in doc.items() if k != "evidence_digest"})
    evidence, report = evidence_bytes(doc), render_report_bytes(doc)
    store.write(first["evidence"]["key"], evidence, overwrite=True)
    store.write(first["report"]["key"], report, overwrite=True)
    stem = first["report"]["key"].removesuffix(".html")
    attestation = store.read(attest.attestation_key(stem))
    entries[0] = {**entry_fields(doc, stem, evidence, report, attestation), "id": first["id"], "published_at": first["published_at"]}
    _rechain(store, entries)
    result = check(settings, public)
    text = messages(result)
    assert not result.ok
    assert "re-chained" in text and "entry 0" in text
    assert "attestation does not name its report" in text


def test_deleting_the_newest_audit_is_a_rollback(signed):
    _, _, settings, public, _ = signed
    store = open_store(settings.reports)
    entries = ledger.entries(store)
    last = entries[-1]
    root = settings_root(store)
    for part in ("report", "evidence", "attestation"):
        (root / last[part]["key"]).unlink()
    (root / ledger.entry_key(2)).unlink()
    _rechain(store, entries[:-1])
    result = check(settings, public)
    assert not result.ok
    assert "rolled back" in messages(result) and "entry 2" in messages(result)


@pytest.mark.parametrize("edit", ["index", "summary", "added file", "attestation byte"])
def test_edits_to_files_the_publisher_wrote_or_files_it_did_not_are_caught(signed, edit):
    _, _, settings, public, _ = signed
    store = open_store(settings.reports)
    root = settings_root(store)
    entries = ledger.entries(store)
    if edit == "index":
        (root / "index.html").write_text((root / "index.html").read_text().replace("NOT_REPRODUCIBLE", "REPRODUCED_BITWISE"))
        expected = "index.html differs"
    elif edit == "summary":
        rows = [{"ref": "models:/m/1", "verdict": "REPRODUCED_BITWISE", "report": f"{store.uri}/{entries[0]['report']['key']}"}]
        (root / "summaries").mkdir(exist_ok=True)
        (root / "summaries" / "2026-05-01.json").write_text(json.dumps({"date": "2026-05-01", "audits": rows}))
        expected = "the summary was edited"
    elif edit == "added file":
        (root / "m_v1_extra-audit.html").write_text("<html>REPRODUCED_BITWISE</html>")
        expected = "m_v1_extra-audit.html has no ledger entry"
    else:
        path = root / entries[1]["attestation"]["key"]
        data = bytearray(path.read_bytes())
        data[40] ^= 1
        path.write_bytes(bytes(data))
        expected = "attestation"
    result = check(settings, public)
    assert not result.ok
    assert expected in messages(result)


def test_a_forged_signature_and_a_swapped_public_key_are_caught(signed, tmp_path):
    _, _, settings, public, _ = signed
    store = open_store(settings.reports)
    entries = ledger.entries(store)
    # the insider's own key: re-sign entry 1's statement and hide the new file's hash in a re-chained ledger
    mallory, _ = attest.generate_key(tmp_path / "mallory.pem")
    forged_key = attest.load_signing_key(str(tmp_path / "mallory.pem"))
    key = entries[1]["attestation"]["key"]
    statement = attest.payload(store.read(key), where=key)
    forged = attest.sign(statement, forged_key)
    store.write(key, forged, overwrite=True)
    entries[1] = {**entries[1], "attestation": {**entries[1]["attestation"], "sha256": ledger.sha256_of(forged)}}
    _rechain(store, entries)
    text = messages(check(settings, public))
    assert f"no valid signature by key {attest.load_public_key(str(public)).keyid}" in text
    # the regulator handed the insider's public key instead: every untouched entry fails, and the anchors still disagree
    swapped = check(settings, mallory)
    assert not swapped.ok and "no valid signature by key" in messages(swapped)


def test_an_attestation_verifies_with_securesystemslib_itself_and_fails_after_one_byte(signed):
    """Acceptance 3: the signing library's own verifier, not ours."""
    import base64

    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    _, infos, settings, public, keyid = signed
    store = open_store(settings.reports)
    entry = ledger.entries(store)[1]
    data = json.loads(store.read(entry["attestation"]["key"]))
    key = attest.load_public_key(str(public))
    assert keyid in Envelope.from_dict(copy.deepcopy(data)).verify([key], 1)  # from_dict consumes its argument
    statement = json.loads(base64.b64decode(data["payload"]))
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    names = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert names[entry["report"]["key"]] == entry["report"]["sha256"].split(":")[1]
    assert "models:/m/2/model.safetensors" in names
    assert statement["predicate"]["verdict"] == entry["verdict"]
    for field in ("subject", "predicate"):
        changed = json.loads(json.dumps(statement))
        if field == "subject":
            digest_hex = changed["subject"][0]["digest"]["sha256"]
            changed["subject"][0]["digest"]["sha256"] = ("0" if digest_hex[0] != "0" else "1") + digest_hex[1:]
        else:
            changed["predicate"]["verdict"] = "REPRODUCED_BITWISE" if entry["verdict"] != "REPRODUCED_BITWISE" else "ERROR"
        tampered = {**data, "payload": base64.b64encode(json.dumps(changed, sort_keys=True, separators=(",", ":")).encode()).decode()}
        with pytest.raises(VerificationError):
            Envelope.from_dict(copy.deepcopy(tampered)).verify([key], 1)


def _rewrite_seed(registry, info, seed: int) -> None:
    """The insider's edit: another seed in the stored record, and every digest tag recomputed to match."""
    from auditor.lineage.record import RunRecord

    record = json.loads(registry.read_run_file(info.run_id, RECORD_ARTIFACT))
    record["seeds"]["seed"] = seed
    forged = RunRecord.model_validate(record)
    registry.put_artifact(info.run_id, RECORD_ARTIFACT, forged.to_json().encode())
    registry.set_tags(registry.resolve(info.ref), {TAG_RECORD_DIGEST: forged.digest()})
    registry.set_run_tags(info.run_id, {TAG_RECORD_DIGEST: forged.digest()})


def test_a_record_rewritten_with_its_digest_tags_recomputed_fails_lineage(signed):
    """MLflow's immutable params (record digest, seed) still hold the training-time values."""
    registry, infos, settings, _, _ = signed
    info = infos[1]
    _rewrite_seed(registry, info, 12345)
    result = audit(settings, info.ref, "2026-06-01")
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert "the run record changed after registration" in " ".join(f.message for f in result.findings)


def test_a_record_rewritten_where_no_param_anchors_it_disagrees_with_earlier_published_evidence(signed):
    registry, infos, settings, _, _ = signed
    info = infos[2]
    registry._runs[info.run_id].params.clear()  # registered by an SDK that logged no params
    _rewrite_seed(registry, info, 999)
    result = audit(settings, info.ref, "2026-06-02")
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert "recorded" in " ".join(f.message for f in result.findings if f.code == "record.changed")


def _varying(spec, evaluating):
    seed = int(spec.env.get("REPRO_SEED", "7"))
    metrics = {"auc": 0.91 + (seed % 97) * 1e-4, "accuracy": 0.85 + (seed % 89) * 1e-4}
    write(spec, metrics=metrics, weights=None if evaluating else _weights(1.0 + (seed % 5) * 0.01), evaluated=evaluating)


@pytest.mark.parametrize("edit", ["narrowed", "widened", "declared instead"])
def test_a_band_edited_after_calibration_is_refused_naming_the_metric(signed, edit):
    registry, infos, settings, _, _ = signed
    info = infos[1]
    bands = session(settings, _varying).calibrate(info.ref, reruns=3, same_seed=2)
    assert bands["auc"].evidence and bands["auc"].evidence["sha256"].startswith("sha256:")
    doc = json.loads(registry.resolve(info.ref).tags[TAG_BANDS])
    auc = doc["bands"]["auc"]
    if edit == "narrowed":
        auc["lower"] = auc["upper"] - 1e-6
    elif edit == "widened":
        auc["lower"], auc["upper"] = 0.0, 1.0
    else:
        doc["bands"]["auc"] = {"lower": 0.0, "upper": 1.0, "direction": "higher", "provenance": "declared", "declared_by": "mallory"}
    registry.set_tags(registry.resolve(info.ref), {TAG_BANDS: json.dumps(doc)})
    result = audit(settings, info.ref, "2026-06-03", _varying)
    refused = [f for f in result.findings if f.code == "band.unbound"]
    assert refused and "'auc'" in refused[0].message
    auc_result = next(m for m in result.metrics if m.name == "auc")
    assert auc_result.band is None
    assert result.calibrations and result.calibrations[-1]["judged"]


def test_recalibrating_with_fewer_reruns_never_silently_replaces_a_band(signed):
    _, infos, settings, _, _ = signed
    varying = session(settings, _varying)
    varying.calibrate(infos[1].ref, reruns=4, same_seed=2)
    with pytest.raises(BadInput, match="at least 3"):
        varying.calibrate(infos[1].ref, reruns=2, same_seed=2)
    with pytest.raises(BadInput, match="weaker"):
        varying.calibrate(infos[1].ref, reruns=3, same_seed=2)
    # a second calibration adds a run: the history keeps both
    varying.calibrate(infos[1].ref, reruns=5, same_seed=2)
    result = varying.audit(infos[1].ref, AuditOptions(date="2026-06-04", publish=False)).result
    assert len(result.calibrations) == 2 and [c["judged"] for c in result.calibrations] == [False, True]


def test_forged_weights_and_record_whose_reevaluation_crashes_are_not_reproducible(signed):
    registry, infos, settings, _, _ = signed
    info = infos[1]
    forged_weights = _weights(3.0)
    record = json.loads(registry.read_run_file(info.run_id, RECORD_ARTIFACT))
    record["outputs"]["artifacts"][0]["sha256"] = hashlib.sha256(forged_weights).hexdigest()
    from auditor.lineage.record import RunRecord

    forged = RunRecord.model_validate(record)
    registry.put_artifact(info.run_id, RECORD_ARTIFACT, forged.to_json().encode())
    registry.put_artifact(info.run_id, "model/model.safetensors", forged_weights)
    registry.set_tags(registry.resolve(info.ref), {TAG_RECORD_DIGEST: forged.digest()})

    def crash_on_evaluate(spec, evaluating):
        from auditor.rebuild.runners import RunOutcome

        if evaluating:
            return RunOutcome(exit_code=1, wall_s=0.01, log="RuntimeError: size mismatch\n", log_path=spec.output_dir / "log")
        return faithful(spec, evaluating)

    result = audit(settings, info.ref, "2026-06-05", crash_on_evaluate)
    assert result.verdict is Verdict.NOT_REPRODUCIBLE
    assert result.tiers["artifact_recovery"].status != "pass"


def test_an_entry_added_by_hand_has_no_anchor_and_no_signature(signed):
    _, _, settings, public, _ = signed
    store = open_store(settings.reports)
    entries = ledger.entries(store)
    fake = {**entries[-1], "id": "m_v9_forged", "audit": {"model": "m", "version": "9", "audit_id": "2026-05-09"}}
    fake.pop("attestation")
    _rechain(store, [*entries, fake])
    text = messages(check(settings, public))
    assert "entry 3" in text and "no anchor outside the reports folder names it" in text


def test_mlflow_refuses_to_overwrite_an_anchor_param(tmp_path):
    """The anchors are params because MLflow itself refuses to change a logged param (real MLflow, SQLite)."""
    from mlflow.exceptions import MlflowException

    from auditor.registry.mlflow import MlflowRegistry
    from auditor.tags import PARAM_LEDGER_HEAD, PARAM_LEDGER_LOCATION, PARAM_LEDGER_SEQ

    registry = MlflowRegistry(f"sqlite:///{tmp_path / 'mlflow.db'}")
    params = {PARAM_LEDGER_LOCATION: "file:///r", PARAM_LEDGER_SEQ: "0", PARAM_LEDGER_HEAD: "sha256:" + "a" * 64}
    run_id = registry.log_run(experiment="audits", identity="x", name="x", params=params, tags={}, metrics={}, artifacts={"r.html": b"<html>"})
    assert registry.log_run(experiment="audits", identity="x", name="x", params=params, tags={}, metrics={}, artifacts={}) == run_id
    with pytest.raises(MlflowException):
        registry.client.log_param(run_id, PARAM_LEDGER_HEAD, "sha256:" + "b" * 64)
    registry.client.delete_run(run_id)
    found = registry.find_runs(experiment="audits", params={PARAM_LEDGER_LOCATION: "file:///r"})
    assert [(r.run_id, r.deleted, r.params[PARAM_LEDGER_HEAD]) for r in found] == [(run_id, True, params[PARAM_LEDGER_HEAD])]


def test_a_report_replaced_on_an_object_lock_bucket_by_a_newer_version_is_caught(signed, s3_endpoint):
    import boto3

    registry, infos, settings, public, _ = signed
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    bucket = f"locked-{infos[0].run_id[:8]}"
    client.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    client.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}}})
    from dataclasses import replace

    s3 = replace(settings, reports=f"s3://{bucket}/reports", require_object_lock=True, lock_retention_days=1)
    outcome = session(s3).audit(infos[1].ref, AuditOptions(date="2026-07-01", audit_run="cli", runner="process"))
    assert outcome.publish_failure is None, outcome.publish_failure
    assert check(s3, public).ok, messages(check(s3, public))
    store = open_store(s3.reports)
    entry = ledger.entries(store)[0]
    assert entry["report"].get("version_id")
    assert Session(s3).ledger_anchors(s3.reports)[0].entry_version  # the retained entry object's version, anchored
    # a plain PUT adds a newer version on top of the locked one
    client.put_object(Bucket=bucket, Key=f"reports/{entry['report']['key']}", Body=b"<html>REPRODUCED_BITWISE</html>")
    result = check(s3, public)
    assert not result.ok
    assert f"{entry['report']['key']} was replaced by a newer version" in messages(result)


def test_the_cli_verifies_with_the_public_key_and_keygen_prints_readable_paths(signed, tmp_path, capsys, monkeypatch):
    """What a newcomer types: keygen, then evidence verify --public-key (paths and key ids survive the redactor)."""
    from auditor.cli import main
    from auditor.settings import get_settings

    _, _, settings, public, keyid = signed
    for key, value in {"MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_REPORTS": settings.reports}.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    with pytest.raises(SystemExit) as done:
        main(["evidence", "keygen", str(tmp_path / "new.pem")])
    out = capsys.readouterr().out
    assert done.value.code == 0 and str(tmp_path / "new.pem") in out and f"{tmp_path / 'new.pem'}.pub" in out
    monkeypatch.chdir(Path(settings.reports).parent)  # the same folder spelt relatively: the same anchors
    (Path(settings.reports) / ".gitkeep").write_bytes(b"")  # a checked-in folder's empty placeholder is not evidence
    with pytest.raises(SystemExit) as done:
        main(["evidence", "verify", Path(settings.reports).name, "--public-key", str(public), "--tracking-uri", settings.tracking_uri])
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    assert f"3 signatures verified with key {keyid}" in out and "3 MLflow anchors match" in out
    with pytest.raises(SystemExit) as done:
        main(["evidence", "verify", settings.reports, "--public-key", f"{tmp_path / 'new.pem'}.pub", "--tracking-uri", settings.tracking_uri])
    assert done.value.code == 1 and "no valid signature by key" in capsys.readouterr().err
    get_settings.cache_clear()


@pytest.mark.parametrize("copies_keyid", [False, True], ids=["own-keyid", "copied-keyid"])
def test_a_new_audit_signed_by_a_fresh_key_and_anchored_fails_verify_the_default_way(signed, tmp_path, capsys, monkeypatch,
                                                                                    copies_keyid):
    """Issue 27, acceptance 6: verify checks signatures by default (the configured key; else the public key the
    ledger's first signed entry records, pinned: trust on first use of the key, so a forged envelope that copies the
    genuine key id into its signature fails too)."""
    from securesystemslib.signer import CryptoSigner, SSlibKey

    from auditor.cli import main
    from auditor.settings import get_settings

    _, infos, settings, public, keyid = signed
    mallory_key = tmp_path / "mallory.pem"
    _, mallory = attest.generate_key(mallory_key)
    forger = Settings.from_env({"REPRO_HOME": str(tmp_path / "forger-home"), "REPRO_REPORTS": settings.reports,
                                "MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_SIGNING_KEY": str(mallory_key)})
    own = attest.load_signing_key(str(mallory_key))
    signer = own
    if copies_keyid:  # the envelope's signature names the genuine key id; the key is the forger's
        real = own.signer.public_key
        dressed = SSlibKey(keyid, real.keytype, real.scheme, dict(real.keyval))
        signer = attest.SigningKey(signer=CryptoSigner(own.signer._private_key, dressed), keyid=keyid, signer_name="")
    forged = Session(forger, runner=FakeRunner(faithful), prepare=fake_prepare, signer=signer)
    outcome = forged.audit(infos[2].ref, AuditOptions(date="2026-05-04", audit_run="cli"))
    assert outcome.publish_failure is None  # published and anchored in MLflow (and the forger's own home) like any audit
    entry = ledger.entries(open_store(settings.reports))[3]
    assert entry["attestation"]["keyids"] == [keyid if copies_keyid else mallory]
    env = {"MLFLOW_TRACKING_URI": settings.tracking_uri, "REPRO_REPORTS": settings.reports}
    for configured in ({"REPRO_SIGNING_KEY": settings.signing_key}, {"REPRO_SIGNING_PUBLIC_KEY": str(public)}, {}):
        for name in ("REPRO_SIGNING_KEY", "REPRO_SIGNING_PUBLIC_KEY"):
            monkeypatch.delenv(name, raising=False)
        for name, value in {**env, **configured}.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        with pytest.raises(SystemExit) as done:
            main(["evidence", "verify", "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert done.value.code == 1, (configured, doc)
        problem = next(p["message"] for p in doc["problems"] if p["entry"] == 3)
        assert f"no valid signature by key {keyid}" in problem and doc["signed"] == 3, problem
        assert doc["signatures_checked_with"] == keyid
        if not configured:  # no key anywhere: the public key entry 0 records is pinned, and the forger's key is named
            assert doc["key_source"] == "pinned from entry 0" and doc["pinned_keyid"] == keyid
            assert mallory in problem and "the signing key changed" in problem, problem
    get_settings.cache_clear()


def test_a_configured_key_accepts_entries_published_before_signing_but_never_an_unsigned_one_after(tmp_path):
    """A store whose first audits were published unsigned, then signing switched on: the default verify (the
    configured key) passes, saying so; an unsigned entry published after a signed one still fails."""
    from auditor.registry.memory import MemoryRegistry

    registry, infos = _registry_of_three(f"late-signing-{tmp_path.name}")
    key = tmp_path / "keys" / "signing.pem"
    attest.generate_key(key)
    base_env = {"REPRO_HOME": str(tmp_path / "home"), "REPRO_REPORTS": str(tmp_path / "reports"), "MLFLOW_TRACKING_URI": registry.uri}
    unsigned, signed = Settings.from_env(base_env), Settings.from_env({**base_env, "REPRO_SIGNING_KEY": str(key)})
    for info, date, settings in zip(infos[:2], DATES[:2], (unsigned, signed), strict=True):
        assert session(settings).audit(info.ref, AuditOptions(date=date)).publish_failure is None
    configured = attest.configured_public_key(signed)
    store = open_store(signed.reports)
    late = verify(store, public_key=configured, anchors=Session(signed).ledger_anchors(signed.reports), since_signing=True)
    assert late.ok, messages(late)
    assert (late.unsigned_before_signing, late.signed) == (1, 1)
    assert not verify(store, public_key=configured, since_signing=False).ok  # an explicit --public-key holds every entry
    assert session(unsigned).audit(infos[2].ref, AuditOptions(date=DATES[2])).publish_failure is None
    after = verify(store, public_key=configured, since_signing=True)
    assert "entry 2" in messages(after) and "is not signed" in messages(after)
    MemoryRegistry.forget(registry.uri)
