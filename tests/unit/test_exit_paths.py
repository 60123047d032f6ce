"""Every way the CLI and the pod entry point can end goes through ``auditor.errors``' one exit-code table.

A crash of ours (an exception that is not a ``ReproError``) is exit 3, "the machinery failed", never
exit 1, which a scheduler reads as "not reproduced", with its traceback on stderr for the bug report;
a malformed setting read by the pod is exit 2, and so is a date that is not YYYY-MM-DD.
These run in process, with the failing step replaced (the point is the mapping, not the failure): the
public door ``auditor.steps.Session.audit`` is swapped for one that crashes, never a step's private function.
"""

from __future__ import annotations

import json

import pytest

from auditor import errors
from auditor.cli import main


def _exit(argv, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr()
    return done.value.code, out.out, out.err


def _crash(*_args, **_kwargs):
    raise KeyError("boom")


def test_an_unexpected_exception_in_a_command_is_exit_3_named_by_its_type(monkeypatch, capsys):
    from auditor.steps import Session

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "memory://exit-paths")
    monkeypatch.setattr(Session, "audit", _crash)
    code, out, err = _exit(["audit", "models:/any/1"], capsys)
    assert code == errors.exit_code(KeyError("boom")) == 3
    # the traceback a bug report needs, then the one line that names it (stdout stays clean)
    assert "Traceback" in err and err.strip().splitlines()[-1] == "error: unexpected KeyError: 'boom'" and out == ""


def test_under_json_an_unexpected_exception_is_a_json_error_with_the_same_code(monkeypatch, capsys):
    from auditor.steps import Session

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "memory://exit-paths")
    monkeypatch.setattr(Session, "audit", _crash)
    code, out, _ = _exit(["audit", "models:/any/1", "--json"], capsys)
    doc = json.loads(out)
    assert code == 3 and doc["exit_code"] == 3 and "KeyError" in doc["error"]


def test_a_usage_error_is_exit_2_from_the_table(capsys):
    code, _, err = _exit(["audit", "--no-such-option"], capsys)
    assert code == errors.EXIT_USAGE == 2 and "Traceback" not in err


def test_a_malformed_setting_is_exit_2_naming_the_variable(monkeypatch, capsys):
    from auditor.settings import get_settings

    monkeypatch.setenv("REPRO_RUNNER", "bogus")
    get_settings.cache_clear()
    try:
        code, _, err = _exit(["audit", "models:/any/1"], capsys)
    finally:
        get_settings.cache_clear()
    assert code == 2 and "REPRO_RUNNER" in err and "process, docker" in err


def test_the_pod_exits_2_for_a_malformed_setting_and_3_for_a_crash(monkeypatch, capsys, tmp_path):
    from auditor.airflow import pod_main
    from auditor.settings import get_settings
    from auditor.steps import Session

    argv = ["--ref", "models:/any/1", "--date", "2026-03-02", "--audit-run", "r/1"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "memory://exit-paths")
    monkeypatch.setenv("REPRO_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setenv("REPRO_RETRY_DELAY_S", "soon")
    get_settings.cache_clear()
    try:
        assert pod_main.main(argv) == 2
        assert "REPRO_RETRY_DELAY_S" in capsys.readouterr().err
        monkeypatch.delenv("REPRO_RETRY_DELAY_S")
        get_settings.cache_clear()
        monkeypatch.setattr(Session, "audit", _crash)
        assert pod_main.main(argv) == 3
        assert "unexpected KeyError" in capsys.readouterr().err
        with pytest.raises(SystemExit) as bad_date:  # an unrendered template never becomes an audit id
            pod_main.main(["--ref", "models:/any/1", "--date", "{{ ds }}", "--audit-run", "r/1"])
        assert bad_date.value.code == 2 and "not a date" in capsys.readouterr().err
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(("name", "value"), [("REPRO_RETRY_DELAY_S", "99999999999999"), ("REPRO_REBUILD_TIMEOUT_S", "0"),
                                             ("REPRO_REBUILD_TIMEOUT_S", "99999999999999")])
def test_durations_out_of_range_are_refused_naming_the_variable(name, value):
    from auditor.errors import BadInput
    from auditor.settings import Settings

    with pytest.raises(BadInput, match=name):
        Settings.from_env({name: value})


def test_the_pod_publishes_an_error_on_its_last_try_only(monkeypatch):
    """``--last-try false`` (retries left) asks the audit door not to publish an ERROR, as the Celery task does."""
    from auditor.airflow import pod_main
    from auditor.judge.result import Verdict
    from auditor.steps import AuditOptions, AuditOutcome, Session
    from tests.fixtures.audits import make_audit

    seen = []

    def audit(self, ref, options=None, **_kwargs):
        assert isinstance(options, AuditOptions) and options.task  # an orchestrator's call: rows, retries
        seen.append(options.last_try)
        return AuditOutcome(ref=ref, result=make_audit(Verdict.REPRODUCED_BITWISE))

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "memory://exit-paths")
    monkeypatch.setattr(Session, "audit", audit)
    argv = ["--ref", "models:/any/1", "--date", "2026-03-02", "--audit-run", "r/1"]
    codes = [pod_main.main(argv), pod_main.main([*argv, "--last-try", "false"]), pod_main.main([*argv, "--last-try", "true"])]
    assert codes == [0, 0, 0] and seen == [True, False, True]
    with pytest.raises(SystemExit) as bad:
        pod_main.main([*argv, "--last-try", "{{ unrendered }}"])
    assert bad.value.code == 2
