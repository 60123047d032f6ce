"""The DAG folder parses cleanly, and every DAG follows the policy: retries, GPU routing, tags, thin files.

One real ``DagBag`` parse in a fresh interpreter (Airflow's global config stays
out of the pytest process) reports each DAG's settings and which heavy modules
the parse pulled in; the tests below judge that report. The thin-file checks
read the DAG sources with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

DAGS = Path(__file__).resolve().parents[2] / "dags"
DAG_IDS = {"repro_nightly_audit", "repro_rebuild_model", "repro_calibrate_tolerance", "repro_audit_registered_version",
           "repro_promotion_gate"}
GPU_TASKS = {
    ("repro_audit_registered_version", "audit"),
    ("repro_nightly_audit", "audit"),
    ("repro_rebuild_model", "rebuild"),
    ("repro_promotion_gate", "compare"),
    ("repro_calibrate_tolerance", "rerun_same_seed"),  # one mapped task per rerun (issue 43)
    ("repro_calibrate_tolerance", "check_same_seed"),  # verifying a claimed noise source reruns
    ("repro_calibrate_tolerance", "rerun_seed_varied"),
    ("repro_promotion_gate", "rerun_same_seed"),  # a moved version with no calibration: the same mapped reruns
    ("repro_promotion_gate", "check_same_seed"),
    ("repro_promotion_gate", "rerun_seed_varied"),
}
HEAVY = ("torch", "mlflow", "boto3", "botocore", "docker", "pandas", "safetensors", "deltalake")
# What a DAG file may import at its top: the Task SDK, dates, and the auditor's Airflow package.
ALLOWED_TOP_LEVEL = {
    "__future__",
    "os",
    "datetime",
    "typing",
    "collections.abc",
    "pendulum",
    "airflow.sdk",
    "auditor.airflow",
    "auditor.airflow.notifications",
    "auditor.airflow.operators",
    "auditor.airflow.promotion",
    "auditor.airflow.calibration",
}
# Of the auditor, a DAG file imports (anywhere in it, a task's body included) only these packages.
AUDITOR_FOR_DAGS = ("auditor.airflow", "auditor.steps")
# What parsing the DAG folder loads of the auditor: the Airflow package's light modules, and settings with
# the floors below it (import-linter's layers contract), nothing that audits.
LOADED_AT_PARSE = {"auditor", "auditor.airflow", "auditor.airflow.calibration", "auditor.airflow.context", "auditor.airflow.hooks", "auditor.airflow.links",
                   "auditor.airflow.notifications", "auditor.airflow.operators", "auditor.airflow.promotion"}
BELOW_SETTINGS = ("auditor.settings", "auditor.catalog", "auditor.tags", "auditor.git", "auditor.contract", "auditor.canonical", "auditor.uris",
                  "auditor.errors", "auditor.digests", "auditor.outcomes")

PARSE = r"""
import json, os, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
report = {"import_errors": {str(k): v for k, v in bag.import_errors.items()}, "heavy": heavy,
          "auditor": sorted(m for m in sys.modules if m.split(".")[0] == "auditor"), "dags": {}}
for dag in bag.dags.values():
    report["dags"][dag.dag_id] = {
        "schedule": dag.schedule if isinstance(dag.schedule, (str, type(None))) else repr(dag.schedule),
        "catchup": dag.catchup, "max_active_runs": dag.max_active_runs, "tags": sorted(dag.tags),
        "params": {k: dag.params.get_param(k).schema for k in dag.params},
        "param_defaults": {k: dag.params.get_param(k).value for k in dag.params if dag.params.get_param(k).has_value},
        "tasks": {t.task_id: {"retries": t.retries, "retry_delay_s": t.retry_delay.total_seconds(), "pool": t.pool,
                              "queue": t.queue, "operator": getattr(t, "operator_class", type(t)).__name__, "trigger_rule": getattr(t.trigger_rule, "value", t.trigger_rule), "mapped": type(t).__name__.endswith("MappedOperator"),
                              "upstream": sorted(t.upstream_task_ids),
                              "backoff": t.retry_exponential_backoff, "max_retry_delay_s": t.max_retry_delay.total_seconds() if t.max_retry_delay else None,
                              "timeout_s": t.execution_timeout.total_seconds() if t.execution_timeout else None,
                              "on_failure": len(t.on_failure_callback or []) if isinstance(t.on_failure_callback, list) else int(bool(t.on_failure_callback)),
                              "outlets": [repr(o) for o in t.outlets],
                              "links": sorted(getattr(t, "operator_extra_link_dict", {}) or [l.name for l in getattr(t, "operator_extra_links", ())])} for t in dag.tasks},
        "on_failure": len(dag.on_failure_callback or []) if isinstance(dag.on_failure_callback, list) else int(bool(dag.on_failure_callback)),
    }
json.dump(report, open(os.environ["PROBE_OUT"], "w"))
""".replace("HEAVY", repr(HEAVY))


@pytest.fixture(scope="module")
def parsed(airflow_env: dict[str, str], run_in_airflow) -> dict[str, Any]:
    """One DagBag parse, with a retry delay and a schedule that differ from the defaults, to see both are read."""
    env = {
        **airflow_env,
        "REPRO_RETRY_DELAY_S": "7",
        "REPRO_NIGHTLY_SCHEDULE": "30 3 * * 1-5",
        "REPRO_RUNNER": "docker",
        "REPRO_REBUILD_TIMEOUT_S": "600",
        "REPRO_NOTIFY_EMAIL": "audit@example.org",
        "REPRO_TRAINING_ASSET": "mlflow://models/credit-scorer",
    }
    return run_in_airflow(PARSE, env)


def test_the_dag_folder_imports_without_errors(parsed):
    assert parsed["import_errors"] == {}
    assert set(parsed["dags"]) == DAG_IDS


# Settings that would raise if read while parsing: a DAG file must not read them (or read them without raising).
MALFORMED = {
    "REPRO_REBUILD_BACKEND": "slurm",
    "REPRO_RETRY_DELAY_S": "five minutes",
    "REPRO_NIGHTLY_SCHEDULE": "every night",
    "REPRO_K8S_GPUS": "zero",
    "REPRO_K8S_NODE_SELECTOR": "no-equals-sign",
    "REPRO_REBUILD_TIMEOUT_S": "an hour",
    "REPRO_NIGHTLY_MAX_MODELS": "many",
    "REPRO_NIGHTLY_BUDGET_HOURS": "all night",
    "REPRO_REQUIRE_OBJECT_LOCK": "maybe",
    "REPRO_LOCK_RETENTION_DAYS": "forever",
}


@pytest.mark.parametrize(
    "bad",
    [MALFORMED, {"REPRO_REBUILD_BACKEND": "kubernetes", "REPRO_K8S_GPUS": "zero"},
     {"REPRO_REBUILD_BACKEND": "kubernetes"}, {"REPRO_REBUILD_BACKEND": "kubernetes", "REPRO_K8S_IMAGE": "trainer:latest"},
     # well-formed numbers a timedelta cannot hold, and an Asset URI Airflow refuses (its own scheme)
     {"REPRO_RETRY_DELAY_S": "99999999999999", "REPRO_REBUILD_TIMEOUT_S": "99999999999999", "REPRO_TRAINING_ASSET": "airflow://reserved"}],
    ids=["every-setting-malformed", "kubernetes-malformed-gpus", "kubernetes-without-image", "kubernetes-image-by-tag",
         "out-of-range-and-refused-asset"],
)
def test_a_malformed_or_missing_setting_is_no_dag_import_error(airflow_env, run_in_airflow, bad):
    """Parse time reads nothing that raises: the DAGs load with the defaults; the tasks fail when they run."""
    parsed = run_in_airflow(PARSE, {**airflow_env, **bad})
    assert parsed["import_errors"] == {}
    assert set(parsed["dags"]) == DAG_IDS
    audit = parsed["dags"]["repro_nightly_audit"]["tasks"]["audit"]
    # a route that cannot be rendered falls back to the celery task (which fails at run time, naming the variable)
    assert audit["mapped"] and audit["operator"] != "KubernetesPodOperator"
    assert (audit["pool"], audit["queue"]) == ("repro_gpu", "gpu")
    if "REPRO_RETRY_DELAY_S" in bad:
        delays = {t["retry_delay_s"] for d in parsed["dags"].values() for t in d["tasks"].values()}
        assert delays == {300}  # the declared default
    if "REPRO_NIGHTLY_SCHEDULE" in bad:
        assert parsed["dags"]["repro_nightly_audit"]["schedule"] == "0 2 * * *"


def test_parsing_the_dag_folder_imports_neither_torch_nor_mlflow_nor_boto3(parsed):
    assert parsed["heavy"] == []
    # Only settings and the Airflow package's light modules are loaded while parsing: the steps wait for the task
    # (auditor.airflow.context, the audit-date rule, imports nothing).
    loaded = {m for m in parsed["auditor"] if not any(m == b or m.startswith(b + ".") for b in BELOW_SETTINGS)}
    assert loaded <= LOADED_AT_PARSE, loaded - LOADED_AT_PARSE


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS))
def test_every_task_retries_at_least_twice_after_the_configured_delay(parsed, dag_id):
    for task_id, task in parsed["dags"][dag_id]["tasks"].items():
        if task_id == "verdict":  # a published verdict is settled: retrying its task changes nothing
            assert task["retries"] == 0 and task["operator"] == "VerdictOperator", f"{dag_id}.{task_id}: {task}"
            continue
        if task_id == "gate":  # a comparison's gate is settled likewise
            assert task["retries"] == 0 and task["operator"] == "PromotionGate", f"{dag_id}.{task_id}: {task}"
            continue
        assert task["retries"] >= 2, f"{dag_id}.{task_id}"
        assert task["retry_delay_s"] == 7, f"{dag_id}.{task_id} ignores REPRO_RETRY_DELAY_S"


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS))
def test_every_dag_is_tagged_repro_audit(parsed, dag_id):
    assert "repro-audit" in parsed["dags"][dag_id]["tags"]


def test_rebuild_tasks_run_in_the_gpu_pool_and_queue_and_nothing_else_does(parsed):
    for dag_id, dag in parsed["dags"].items():
        for task_id, task in dag["tasks"].items():
            on_gpu = (task["pool"], task["queue"]) == ("repro_gpu", "gpu")
            assert on_gpu == ((dag_id, task_id) in GPU_TASKS), f"{dag_id}.{task_id}: {task['pool']}/{task['queue']}"


def test_the_nightly_dag_samples_then_maps_audits_then_always_publishes(parsed):
    nightly = parsed["dags"]["repro_nightly_audit"]
    assert nightly["schedule"] == "30 3 * * 1-5"
    assert nightly["catchup"] is False
    assert nightly["max_active_runs"] == 1
    tasks = nightly["tasks"]
    assert set(tasks) == {"sample", "audit", "verdict", "publish", "retention"}
    assert tasks["retention"]["upstream"] == []  # the retention check (issue 32) depends on no audit of the night
    assert tasks["audit"]["mapped"] and tasks["audit"]["upstream"] == ["sample"]
    assert tasks["verdict"]["mapped"] and tasks["verdict"]["upstream"] == ["audit"]
    # publish is last and is the night's state: it fails (no retry) after publishing when a model did not reproduce
    assert tasks["publish"]["upstream"] == ["audit", "sample", "verdict"]  # its red ending raises AirflowFailException: no retry
    # A failed audit must not stop the summary that lists it as an error.
    assert tasks["publish"]["trigger_rule"] == "all_done"


def test_the_on_demand_dags_are_triggered_by_hand_with_model_uri_and_reruns(parsed):
    rebuild, calibrate = parsed["dags"]["repro_rebuild_model"], parsed["dags"]["repro_calibrate_tolerance"]
    assert rebuild["schedule"] is None and calibrate["schedule"] is None
    assert set(rebuild["params"]) == {"model_uri", "reruns", "runner"}
    assert set(calibrate["params"]) == {"model_uri", "reruns", "same_seed"}
    assert "model_uri" not in rebuild["param_defaults"]  # no silent default model: the trigger must name one
    assert rebuild["param_defaults"]["runner"] == "docker"  # from REPRO_RUNNER
    assert calibrate["params"]["reruns"]["minimum"] >= 2  # a band from one run has no spread


def _dag_sources() -> list[Path]:
    return sorted(DAGS.glob("*.py"))


def _decorated_tasks(tree: ast.Module) -> list[ast.FunctionDef]:
    def is_task(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return isinstance(target, ast.Name) and target.id == "task"

    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(map(is_task, n.decorator_list))]


def _session_calls(fn: ast.FunctionDef) -> list[ast.Call]:
    """Calls of a session's verb: ``session.VERB(...)`` or ``task_session(context).VERB(...)``."""
    def is_session(node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "session"
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "task_session"

    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and is_session(n.func.value)]


def _operators(tree: ast.Module) -> set[str]:
    """The operator classes a DAG file instantiates (``Op(...)``) or maps (``Op.partial(...)``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "partial":
                func = func.value
            if isinstance(func, ast.Name) and func.id.endswith("Operator"):
                names.add(func.id)
    return names


def test_there_is_one_file_per_dag():
    assert {p.stem for p in _dag_sources()} == DAG_IDS


@pytest.mark.parametrize("path", _dag_sources(), ids=lambda p: p.name)
def test_a_dag_file_imports_only_the_task_sdk_dates_and_settings_at_its_top(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            top.add(node.module)
    assert top <= ALLOWED_TOP_LEVEL, top - ALLOWED_TOP_LEVEL


def _session_verbs() -> set[str]:
    """The public verbs of an audit session (``auditor.steps.Session``): what a task may call, once."""
    from auditor.steps import Session

    return {name for name, member in vars(Session).items() if callable(member) and not name.startswith("_")}


@pytest.mark.parametrize("path", _dag_sources(), ids=lambda p: p.name)
def test_every_task_is_one_call_into_an_audit_session_and_every_audit_is_the_audit_operator(path):
    """A ``@task`` opens one session and calls one of its verbs; an audit is an ``AuditOperator`` (one call
    into the door, ``Session.audit``) and its ``VerdictOperator``, nothing hand-rolled."""
    verbs = _session_verbs()
    assert {"audit", "calibrate", "sample", "publish_summary"} <= verbs
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tasks, operators = _decorated_tasks(tree), _operators(tree)
    assert tasks or operators, f"{path.name} defines no task"
    for fn in tasks:
        calls = _session_calls(fn)
        assert len(calls) == 1 and calls[0].func.attr in verbs, f"{path.name}:{fn.name} makes {len(calls)} session calls"
    assert operators <= {"AuditOperator", "VerdictOperator"}, operators
    assert ("AuditOperator" in operators) == ("VerdictOperator" in operators), path.name


@pytest.mark.parametrize("path", _dag_sources(), ids=lambda p: p.name)
def test_a_dag_file_imports_of_the_auditor_only_its_airflow_package_and_the_steps(path):
    """The DAG files' import contract, as pyproject's import-linter contract states it for ``dags/``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = {alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    auditor = {m for m in modules if m.split(".")[0] == "auditor"}
    stray = {m for m in auditor if not any(m == p or m.startswith(p + ".") for p in AUDITOR_FOR_DAGS)}
    assert not stray, f"{path.name} imports {sorted(stray)}: a DAG file goes through auditor.airflow or auditor.steps"


@pytest.mark.parametrize("path", _dag_sources(), ids=lambda p: p.name)
def test_a_dag_file_holds_no_constants_of_its_own(path):
    """Pools, queues, schedules and templates come from ``auditor.airflow``: no module-level assignment here."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assigned = [t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
    assert assigned == [], f"{path.name} defines {assigned}"


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS))
def test_every_task_backs_off_exponentially_up_to_sixteen_times_the_delay(parsed, dag_id):
    for task_id, task in parsed["dags"][dag_id]["tasks"].items():
        assert task["backoff"] in (True, 2.0), f"{dag_id}.{task_id}"  # Airflow 3.3 stores the multiplier: True is 2.0
        assert task["max_retry_delay_s"] == 16 * 7, f"{dag_id}.{task_id}"


def test_every_audit_task_is_bounded_by_three_rebuild_timeouts_links_its_report_and_emits_an_asset(parsed):
    audits = {("repro_nightly_audit", "audit"), ("repro_rebuild_model", "rebuild"), ("repro_audit_registered_version", "audit")}
    for dag_id, task_id in audits:
        task = parsed["dags"][dag_id]["tasks"][task_id]
        assert task["timeout_s"] == 3 * 600, f"{dag_id}.{task_id}"
        assert task["on_failure"] == 1, f"{dag_id}.{task_id} mails no one on a non-reproduced verdict"
        assert any("repro-audit-reports" in o for o in task["outlets"]), task["outlets"]
        assert set(task["links"]) == {"Audit report", "Model version"}, task["links"]
        verdict = parsed["dags"][dag_id]["tasks"]["verdict"]  # the task whose state is the verdict
        assert verdict["upstream"] == [task_id], f"{dag_id}: {verdict}"
        assert verdict["trigger_rule"] == "all_done"  # an audit that failed outright holds back no other verdict
        assert verdict["on_failure"] == 1, f"{dag_id}.verdict mails no one on a non-reproduced verdict"
        assert set(verdict["links"]) == {"Audit report", "Model version"}, verdict["links"]
        assert verdict["pool"] != "repro_gpu" and verdict["queue"] != "gpu"  # no accelerator to judge a row
    for dag_id, dag in parsed["dags"].items():
        assert dag["on_failure"] == 1, f"{dag_id} mails no one when a run fails"


def test_the_nightly_trigger_form_takes_a_date_a_budget_and_a_model_filter(parsed):
    params = parsed["dags"]["repro_nightly_audit"]["params"]
    assert set(params) == {"date", "max_models", "budget_hours", "models"}
    assert params["date"]["type"] == ["null", "string"] and params["date"]["format"] == "date"
    assert params["max_models"]["type"] == ["null", "integer"]
    assert params["budget_hours"]["type"] == ["null", "number"]
    assert params["models"]["type"] == ["null", "string"]
    assert parsed["dags"]["repro_nightly_audit"]["param_defaults"] == {} or all(
        v is None for v in parsed["dags"]["repro_nightly_audit"]["param_defaults"].values())


def test_a_registered_version_is_audited_when_the_training_asset_updates(parsed):
    dag = parsed["dags"]["repro_audit_registered_version"]
    assert "Asset(" in dag["schedule"] and "uri='mlflow://models/credit-scorer'" in dag["schedule"], dag["schedule"]
    assert set(dag["tasks"]) == {"audit", "verdict"}


def test_without_recipients_no_notifier_is_attached(airflow_env, run_in_airflow):
    parsed = run_in_airflow(PARSE, airflow_env)
    assert parsed["import_errors"] == {}
    assert all(t["on_failure"] == 0 for d in parsed["dags"].values() for t in d["tasks"].values())
