"""Issue 44, build 4: every task of every DAG has the configured owner (``REPRO_DAG_OWNER``, a team's name, not
``airflow``) and its own documentation (``doc_md``) in Airflow's UI, TaskFlow tasks and mapped ones included.

Two real ``DagBag`` parses in fresh interpreters (``conftest.run_in_airflow``): one with the owner set in the
environment, one run from a project folder whose ``repro-audit.toml`` sets the owner and the kubernetes route
(a DAG file reads the configuration file while Airflow parses it, as every process of the auditor does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditor.airflow import VERDICT_DOC, task_defaults
from auditor.settings import DAG_OWNER, SETTINGS

DAGS = Path(__file__).resolve().parents[2] / "dags"
IMAGE = "registry.example/ml/repro-trainer@sha256:" + "ab" * 32

PARSE = r"""
import json, os
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
report = {"import_errors": {str(k): v for k, v in bag.import_errors.items()}, "dags": {}}
for dag in bag.dags.values():
    report["dags"][dag.dag_id] = {
        "owner": dag.owner,
        "tasks": {t.task_id: {"owner": t.owner, "doc_md": t.doc_md, "operator": getattr(t, "operator_class", type(t)).__name__}
                  for t in dag.tasks},
    }
json.dump(report, open(os.environ["PROBE_OUT"], "w"))
"""


def _dag_files() -> set[str]:
    return {p.stem for p in DAGS.glob("*.py") if not p.name.startswith("_")}


def _tasks(parsed: dict[str, Any]):
    for dag_id, dag in sorted(parsed["dags"].items()):
        for task_id, task in sorted(dag["tasks"].items()):
            yield dag_id, task_id, task


def _assert_conventions(parsed: dict[str, Any], owner: str) -> None:
    assert parsed["import_errors"] == {}
    assert set(parsed["dags"]) == _dag_files()
    for dag_id, task_id, task in _tasks(parsed):
        where = f"{dag_id}.{task_id} ({task['operator']})"
        assert task["owner"] == owner, f"{where}: owner {task['owner']!r}"
        doc = task["doc_md"] or ""
        assert doc.strip(), (f"{where} has no doc_md: pass doc_md= to an operator, give a @task a docstring and, "
                             "when it is mapped (expand), wrap it in auditor.airflow.documented")
        assert not any(line.startswith("    ") for line in doc.splitlines()), (
            f"{where}: an indented doc_md shows as code (auditor.airflow.documented dedents a docstring)")
    for dag_id, dag in parsed["dags"].items():
        assert dag["owner"] == owner, dag_id  # the DAG list's owner column and filter


def _without_settings(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in {s.name for s in SETTINGS}}


def test_the_owner_defaults_to_a_team_name_and_not_to_airflow(monkeypatch):
    monkeypatch.delenv(DAG_OWNER.name, raising=False)
    assert DAG_OWNER.default == "model-risk"
    assert task_defaults()["owner"] == DAG_OWNER.default != "airflow"
    monkeypatch.setenv(DAG_OWNER.name, "credit-risk")
    assert task_defaults()["owner"] == "credit-risk"


def test_every_task_has_the_owner_from_the_environment_and_a_doc(airflow_env, run_in_airflow):
    parsed = run_in_airflow(PARSE, {**airflow_env, DAG_OWNER.name: "credit-risk-models"})
    _assert_conventions(parsed, "credit-risk-models")
    verdicts = [t for _, task_id, t in _tasks(parsed) if task_id == "verdict"]
    assert len(verdicts) == 3 and all(t["doc_md"] == VERDICT_DOC for t in verdicts)
    nightly = parsed["dags"]["repro_nightly_audit"]["tasks"]
    assert nightly["sample"]["doc_md"].startswith("Choose tonight's models;")  # the TaskFlow task's docstring
    gate = parsed["dags"]["repro_promotion_gate"]["tasks"]
    assert gate["compare"]["doc_md"].startswith("Compare the alias's new version")  # mapped: through documented()


def test_a_configuration_file_sets_the_owner_and_the_route_while_airflow_parses(airflow_env, run_in_airflow, tmp_path):
    project = tmp_path / "platform"
    project.mkdir()
    (project / "repro-audit.toml").write_text(
        f'dag_owner = "ml-platform"\nrebuild_backend = "kubernetes"\nk8s_image = "{IMAGE}"\n', encoding="utf-8")
    parsed = run_in_airflow(PARSE, _without_settings(airflow_env), cwd=project)
    _assert_conventions(parsed, "ml-platform")
    audit = parsed["dags"]["repro_nightly_audit"]["tasks"]["audit"]
    assert audit["operator"] == "KubernetesPodOperator"  # the pod route, from the file, documented too


@pytest.mark.parametrize("dag_id", sorted(_dag_files()))
def test_every_dag_file_is_parsed_here(dag_id):
    """A new DAG file is covered by the parses above (they compare against the folder, not a list)."""
    assert (DAGS / f"{dag_id}.py").is_file()
