"""What an orchestrator does with each verdict (``auditor.errors.task_outcome``), and the retry that audits afresh.

The retry tests reuse ``tests/unit/test_audit_outcomes.py``'s world: the real in-memory registry,
a fake runner and workspace handed to the session (see there why), real safetensors weights and the real judge.
"""

from __future__ import annotations

import pytest

from auditor.errors import EXIT_CODES, InfrastructureError, task_outcome
from auditor.judge.result import Verdict
from auditor.steps import AuditOptions, Session
from tests.unit.test_audit_outcomes import FakeRunner, faithful, world  # noqa: F401 - world is a fixture


@pytest.mark.parametrize(("verdict", "outcome"), [
    ("REPRODUCED_BITWISE", "success"), ("REPRODUCED_WITHIN_TOLERANCE", "success"),
    ("NOT_REPRODUCIBLE", "fail"), ("OUT_OF_TOLERANCE", "fail"), ("ERROR", "retry"),
])
def test_each_verdict_has_one_task_outcome(verdict, outcome):
    assert task_outcome(verdict) == outcome


def test_every_verdict_in_the_exit_code_table_has_a_task_outcome():
    for verdict in Verdict:
        assert task_outcome(verdict.value) in {"success", "fail", "retry"}
        assert verdict.value in EXIT_CODES


def test_an_error_with_retries_left_is_raised_unpublished_and_the_retry_audits_afresh(world):  # noqa: F811
    _, info, settings = world
    calls = []

    def prepare(record, diff, dest, settings):
        calls.append(dest)
        if len(calls) == 1:
            raise InfrastructureError("the rebuild runner is unavailable")
        from auditor.rebuild.workspace import Workspace

        project = dest / "code"
        project.mkdir(parents=True)
        return Workspace(root=dest, repo_dir=project, project_dir=project, config_path=dest / "config.json", data_dirs={})

    options = AuditOptions(date="2026-03-01", audit_run="test", task=True, last_try=False)
    with pytest.raises(InfrastructureError, match="verdict ERROR, not published yet: .*runner is unavailable"):
        Session(settings, runner=FakeRunner(faithful), prepare=prepare).audit(info.ref, options)
    assert not list((settings.home.parent / "reports").glob("*.json"))  # nothing published
    row = Session(settings, runner=FakeRunner(faithful), prepare=prepare).audit(info.ref, options).row  # the retry: a new task
    assert row["verdict"] == "REPRODUCED_BITWISE" and not row["skipped"] and len(calls) == 2


def test_the_last_try_publishes_the_error(world):  # noqa: F811
    _, info, settings = world

    def prepare(*_a, **_k):
        raise InfrastructureError("the rebuild runner is unavailable")

    session = Session(settings, runner=FakeRunner(faithful), prepare=prepare)
    row = session.audit(info.ref, AuditOptions(date="2026-03-02", audit_run="test", task=True, last_try=True)).row
    assert row["verdict"] == "ERROR" and row["report"]
