"""Which failures of a night are its own and which are the red verdicts it publishes by design (issue 38)."""

from __future__ import annotations

from auditor.steps.nightly import night_failures


def test_a_red_night_is_not_a_failure_of_the_night():
    states = {"sample": "success", "audit[m/1]": "success", "verdict[m/1]": "failed", "publish": "failed", "retention": "success"}
    summary = {"date": "2026-12-04", "audits": [{"ref": "models:/m/1", "verdict": "OUT_OF_TOLERANCE"}]}
    assert night_failures(states, {}, summary) == []


def test_a_sample_that_raised_is_named_with_its_error():
    states = {"sample": "failed", "audit": "upstream_failed", "publish": "failed", "retention": "success"}
    summary = {"date": "2026-12-04", "failed": "sample: registry down", "audits": []}
    lines = night_failures(states, {"sample": "registry down"}, summary)
    assert lines == ["sample: registry down"]


def test_a_publish_that_failed_without_a_summary_is_a_failure():
    assert night_failures({"sample": "success", "publish": "failed"}, {}, None) == ["publish: failed (its error is in the task's log)"]


def test_a_retention_crash_is_named_but_its_red_outcome_is_not():
    assert night_failures({"retention": "failed"}, {"retention": "unexpected OSError: disk"}, {"audits": []}) == \
        ["retention: unexpected OSError: disk"]
    assert night_failures({"retention": "failed"}, {}, {"audits": []}) == []


def test_an_unexplained_failed_task_is_named():
    assert night_failures({"sample": "failed"}, {}, None) == ["sample: failed (its error is in the task's log)"]
