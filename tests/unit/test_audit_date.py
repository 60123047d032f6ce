"""One rule for a run's audit date and one for its last try: the Celery tasks' functions and the pod's templates agree.

The template is rendered as Airflow renders a templated field (a sandboxed Jinja environment with
``StrictUndefined``, Airflow's default ``template_undefined``), for each case the function handles.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import jinja2
import jinja2.sandbox
import pytest

from auditor.airflow import DATE_TEMPLATE, audit_date
from auditor.airflow.context import (
    AUDIT_RUN_TEMPLATE,
    LAST_TRY_TEMPLATE,
    REGISTERED_VERSION_TEMPLATE,
    audit_run,
    is_last_try,
    registered_version,
)
from auditor.airflow.kubernetes import pod_command

RUN = SimpleNamespace(run_after=dt.datetime(2026, 3, 4, 23, 59, tzinfo=dt.UTC))
CASES = {
    "the date param wins": ({"params": {"date": "2026-01-02"}, "ds": "2026-03-01", "dag_run": RUN}, "2026-01-02"),
    "an empty param gives the logical date": ({"params": {"date": None}, "ds": "2026-03-01", "dag_run": RUN}, "2026-03-01"),
    "no such param (the rebuild DAG)": ({"params": {}, "ds": "2026-03-01", "dag_run": RUN}, "2026-03-01"),
    "no logical date: the stored run_after": ({"params": {"date": None}, "dag_run": RUN}, "2026-03-04"),
}


def _render(template: str, context: dict) -> str:
    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined)
    return env.from_string(template).render(**context)


@pytest.mark.parametrize(("context", "expected"), CASES.values(), ids=CASES.keys())
def test_the_function_and_the_pods_template_give_the_same_date(context, expected):
    assert audit_date(context) == expected
    assert _render(DATE_TEMPLATE, context) == expected


def test_the_pod_is_given_that_template():
    command = pod_command()
    assert command[command.index("--date") + 1] == DATE_TEMPLATE


@pytest.mark.parametrize(("try_number", "retries", "last"), [(1, 2, False), (2, 2, False), (3, 2, True), (1, 0, True), (1, None, True)])
def test_the_last_try_rule_and_its_template_agree(try_number, retries, last):
    assert is_last_try(try_number, retries) is last
    context = {"ti": SimpleNamespace(try_number=try_number), "task": SimpleNamespace(retries=retries)}
    assert _render(LAST_TRY_TEMPLATE, context) == ("true" if last else "false")


def test_the_pod_is_told_whether_its_try_is_the_last():
    command = pod_command()
    assert command[command.index("--last-try") + 1] == LAST_TRY_TEMPLATE


def test_the_audit_run_rule_and_its_template_agree():
    context = {"dag": SimpleNamespace(dag_id="repro_nightly_audit"), "run_id": "scheduled__2026-03-01"}
    assert audit_run(context) == _render(AUDIT_RUN_TEMPLATE, context) == "repro_nightly_audit/scheduled__2026-03-01"


def _event(minute: int, extra: dict | None) -> SimpleNamespace:
    return SimpleNamespace(timestamp=dt.datetime(2026, 3, 4, 12, minute, tzinfo=dt.UTC), extra=extra)


EVENTS = {
    "one event": ({"training": [_event(0, {"model_uri": "models:/m/1"})]}, "models:/m/1"),
    "the newest that names a version": ({"training": [_event(1, {"model_uri": "models:/m/2"}), _event(0, {"model_uri": "models:/m/1"})],
                                         "other": [_event(5, {"note": "no model"}), _event(3, None)]}, "models:/m/2"),
    "none names one": ({"training": [_event(0, {})]}, None),
    "no events": ({}, None),
}


@pytest.mark.parametrize(("events", "expected"), EVENTS.values(), ids=EVENTS.keys())
def test_the_registered_version_rule_and_its_template_agree(events, expected):
    """The asset-scheduled audit's ``model_ref``: the newest triggering event's ``model_uri`` (empty: none)."""
    context = {"triggering_asset_events": events}
    assert registered_version(context) == expected
    assert _render(REGISTERED_VERSION_TEMPLATE, context) == (expected or "")
    assert _render(REGISTERED_VERSION_TEMPLATE, {}) == ""  # a run that no asset event triggered
