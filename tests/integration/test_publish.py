"""Publishing is exactly once per (model version, audit id), in a local folder and on the loopback S3 server."""

from __future__ import annotations

import multiprocessing
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from auditor.errors import BadInput
from auditor.judge.result import Verdict
from auditor.report import ledger
from auditor.report.evidence import build_evidence, evidence_bytes, report_stem
from auditor.report.publish import publish
from auditor.report.verify import verify
from auditor.settings import Settings
from auditor.storage import open_store
from tests.fixtures.audits import make_audit

SETTINGS = Settings(responsible_person="Dana Risk")
PUBLISHERS = 4


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "reports")
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/reports"


def published(location: str) -> dict[str, int]:
    """How many reports, evidence files, entry objects and ledger lines the location holds."""
    store = open_store(location)
    keys = list(store.list(""))
    top = [k for k in keys if "/" not in k]
    return {
        "reports": sum(1 for k in top if k.endswith(".html") and k != "index.html"),
        "evidence": sum(1 for k in top if k.endswith(".json")),
        "entries": sum(1 for k in keys if k.startswith(ledger.ENTRIES)),
        "lines": len(store.read(ledger.LEDGER_FILE).splitlines()),
    }


def _publish_after(barrier, location: str, audit_id: str, results) -> None:
    """One publisher process: wait until all are ready, then publish the same audit."""
    barrier.wait(timeout=60)
    try:
        results.put(publish(make_audit(audit_id=audit_id), location, settings=SETTINGS).created)
    except BaseException as exc:  # reported to the parent, which fails the test with it
        results.put(repr(exc))


def test_publishing_the_same_audit_twice_leaves_one_report_and_one_entry(location):
    first = publish(make_audit(audit_id="twice"), location, settings=SETTINGS)
    again = publish(make_audit(audit_id="twice"), location, settings=SETTINGS)
    assert (first.created, again.created) == (True, False)
    assert (again.seq, again.entry_hash, again.report_key) == (first.seq, first.entry_hash, first.report_key)
    assert published(location) == {"reports": 1, "evidence": 1, "entries": 1, "lines": 1}
    assert verify(open_store(location)).ok


def test_concurrent_threads_publishing_one_audit_leave_one_report_and_one_entry(location):
    barrier = threading.Barrier(PUBLISHERS)

    def one(_: int) -> bool:
        audit = make_audit(audit_id="raced")
        barrier.wait(timeout=60)
        return publish(audit, location, settings=SETTINGS).created

    with ThreadPoolExecutor(PUBLISHERS) as pool:
        created = list(pool.map(one, range(PUBLISHERS)))
    assert sorted(created) == [False] * (PUBLISHERS - 1) + [True]
    assert published(location) == {"reports": 1, "evidence": 1, "entries": 1, "lines": 1}
    assert verify(open_store(location)).ok


def test_concurrent_processes_publishing_one_audit_leave_one_report_and_one_entry(location):
    # fork, after warming matplotlib and pandas here: spawned children spend ~10 s importing them on 2 cores,
    # and none of that is what this test is about.
    publish(make_audit(audit_id="warm-up"), "memory://warm-up", settings=SETTINGS)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(PUBLISHERS), ctx.Queue()
    procs = [ctx.Process(target=_publish_after, args=(barrier, location, "raced", results)) for _ in range(PUBLISHERS)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert sorted(outcomes, key=str) == [False] * (PUBLISHERS - 1) + [True], outcomes
    assert published(location) == {"reports": 1, "evidence": 1, "entries": 1, "lines": 1}
    assert verify(open_store(location)).ok


def test_concurrent_publishers_of_different_audits_share_one_unbroken_chain(location):
    audit_ids = [f"audit-{i}" for i in range(3)] * 2
    barrier = threading.Barrier(len(audit_ids))

    def one(audit_id: str) -> int:
        audit = make_audit(audit_id=audit_id)
        barrier.wait(timeout=60)
        return publish(audit, location, settings=SETTINGS).seq

    with ThreadPoolExecutor(len(audit_ids)) as pool:
        seqs = list(pool.map(one, audit_ids))
    assert seqs[:3] == seqs[3:]  # both publishers of an audit were told the same entry
    assert sorted(seqs[:3]) == [0, 1, 2]
    assert published(location) == {"reports": 3, "evidence": 3, "entries": 3, "lines": 3}
    result = verify(open_store(location))
    assert result.ok, result.problems


def test_a_retry_after_a_crash_finishes_the_first_attempts_publication(location):
    audit = make_audit(audit_id="crashed")
    store = open_store(location)
    stem = report_stem(audit.model.name, audit.model.version, audit.audit_id)
    first_attempt = evidence_bytes(build_evidence(audit, settings=SETTINGS))
    assert store.write(f"{stem}.json", first_attempt)  # the first attempt died right after claiming the audit
    retry = make_audit(audit_id="crashed").model_copy(update={"log_tail": "the retry's own log\n"})
    result = publish(retry, location, settings=SETTINGS)
    assert (result.created, result.same_evidence) == (False, False)
    assert store.read(f"{stem}.json") == first_attempt
    assert b"the retry&#39;s own log" not in store.read(f"{stem}.html")
    assert published(location) == {"reports": 1, "evidence": 1, "entries": 1, "lines": 1}
    assert verify(store).ok


def test_the_index_lists_every_published_audit(location):
    for i, verdict in enumerate([Verdict.REPRODUCED_BITWISE, Verdict.ERROR]):
        publish(make_audit(verdict, audit_id=f"idx-{i}"), location, settings=SETTINGS)
    index = open_store(location).read("index.html").decode()
    assert index.count('<tr data-verdict="') == 2
    assert 'data-verdict="ERROR"' in index


# -- Object Lock -------------------------------------------------------------

LOCKED = Settings(responsible_person="Dana Risk", require_object_lock=True, lock_retention_days=365 * 7)


def locked_bucket(s3_endpoint: str, retention: dict | None) -> str:
    import boto3

    client = boto3.client("s3", endpoint_url=s3_endpoint)
    name = f"lock-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True)
    if retention is not None:
        client.put_object_lock_configuration(
            Bucket=name,
            ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": retention}},
        )
    return name


def test_a_bucket_without_object_lock_is_refused_and_nothing_is_written(s3_bucket):
    with pytest.raises(BadInput, match="no Object Lock configuration"):
        publish(make_audit(), f"s3://{s3_bucket}/reports", settings=LOCKED)
    assert list(open_store(f"s3://{s3_bucket}").list("")) == []


@pytest.mark.parametrize(
    ("retention", "reason"),
    [
        ({"Mode": "GOVERNANCE", "Days": 3650}, "not COMPLIANCE"),
        ({"Mode": "COMPLIANCE", "Days": 30}, "30 days, less than the required 2555"),
        ({"Mode": "COMPLIANCE", "Years": 1}, "365 days, less than the required 2555"),
    ],
)
def test_a_bucket_with_weak_object_lock_is_refused(s3_endpoint, retention, reason):
    bucket = locked_bucket(s3_endpoint, retention)
    with pytest.raises(BadInput, match=reason):
        publish(make_audit(), f"s3://{bucket}/reports", settings=LOCKED)
    assert list(open_store(f"s3://{bucket}").list("")) == []


def test_a_bucket_with_long_enough_compliance_retention_is_published_to(s3_endpoint):
    bucket = locked_bucket(s3_endpoint, {"Mode": "COMPLIANCE", "Years": 7})
    result = publish(make_audit(), f"s3://{bucket}/reports", settings=LOCKED)
    assert result.created and verify(open_store(f"s3://{bucket}/reports")).ok


def test_requiring_object_lock_refuses_a_local_folder(tmp_path):
    with pytest.raises(BadInput, match="not an S3 bucket"):
        publish(make_audit(), str(tmp_path / "reports"), settings=LOCKED)
    assert not (tmp_path / "reports").exists()
