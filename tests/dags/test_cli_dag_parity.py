"""`repro-audit audit models:/NAME/N` and the nightly DAG are one step: they leave the same registry tags.

Real parts: the CLI in a subprocess, Airflow's ``dag.test()`` in another (see conftest), MLflow on
SQLite, the reference model rebuilt with torch. The version is audited by the CLI for a logical
date; its audit tags and reports are then removed, and the nightly DAG audits it for the same date.
Every ``repro.*`` tag must come back the same (the audit's wall-clock time aside), the report URI included.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.reference import settings_for

pytestmark = pytest.mark.slow

DATE = "2026-07-04"  # this module's own logical date

NIGHTLY_ONCE = r"""
import json, os
# Airflow's console output (the task logs dag.test() prints) into a file of our own, read back below
task_log = open(os.environ["PROBE_LOG"], "w")
os.dup2(task_log.fileno(), 1)
import pendulum
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
run = bag.get_dag("repro_nightly_audit").test(logical_date=pendulum.parse(os.environ["PROBE_DATE"]),
                                             run_conf={"models": os.environ["PROBE_MODELS"]})
task_log.flush()
trainer = [line for line in open(os.environ["PROBE_LOG"]) if "[repro.trainer]" in line]
json.dump({"state": str(run.state), "tasks": {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()},
           "trainer": trainer}, open(os.environ["PROBE_OUT"], "w"))
"""


def _audit_tags(seeded, ref: str) -> dict[str, str]:
    from auditor.registry import open_registry

    settings = settings_for(seeded)
    info = open_registry(settings.tracking_uri).resolve(ref)
    return {k: v for k, v in info.tags.items() if k.startswith("repro.audit.")}


def _forget_audit(seeded, ref: str, reports: Path) -> None:
    from mlflow import MlflowClient

    name, version = ref.removeprefix("models:/").rsplit("/", 1)
    client = MlflowClient(tracking_uri=seeded.env["MLFLOW_TRACKING_URI"])
    for key in _audit_tags(seeded, ref):
        client.delete_model_version_tag(name, version, key)
    shutil.rmtree(reports, ignore_errors=True)


def test_the_cli_audit_and_the_nightly_dag_leave_the_same_tags(seeded_registry, airflow_db, run_in_airflow, tmp_path):
    seeded = seeded_registry
    ref = seeded.versions["clean"]  # picked alone by the nightly's models param (NAME/VERSION)
    reports = Path(seeded.env["REPRO_REPORTS"])
    env = {**os.environ, **seeded.env}
    _forget_audit(seeded, ref, reports)  # both start from the same state, whatever earlier tests audited
    cli = subprocess.run([sys.executable, "-m", "auditor", "audit", ref, "--date", DATE, "--json"], capture_output=True, text=True, env=env)
    assert cli.returncode == 0, (cli.stdout[-6000:], cli.stderr[-3000:])  # the JSON names the failing findings
    by_cli = _audit_tags(seeded, ref)
    assert by_cli["repro.audit.verdict"] == "REPRODUCED_BITWISE" and by_cli["repro.audit.date"] == DATE

    _forget_audit(seeded, ref, reports)
    assert _audit_tags(seeded, ref) == {}
    # the CLI's audit run still anchors that (version, date) in the audits experiment: a second publication of the
    # same stem to a fresh ledger is a changed anchor (a finding). The DAG anchors in an experiment of its own.
    night = run_in_airflow(NIGHTLY_ONCE, {**airflow_db, **seeded.env, "REPRO_NIGHTLY_MAX_MODELS": "1", "PROBE_DATE": DATE,
                                    "REPRO_AUDIT_EXPERIMENT": "repro-audit-parity-dag",
                                    "PROBE_MODELS": ref.removeprefix("models:/"), "PROBE_LOG": str(tmp_path / "task.log"),
                                    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO"}, cwd=tmp_path)  # Airflow's default level
    assert night["state"].endswith("success"), night["tasks"]
    # the rebuild's trainer output is in the audit task's log, line by line, as the reference trainer printed it
    assert any(re.search(r"epoch \d+: train loss", line) for line in night["trainer"]), night["trainer"][-20:]
    by_dag = _audit_tags(seeded, ref)

    for differs in ("repro.audit.at", "repro.audit.run"):  # when it ran, and the MLflow run that anchors it, by design
        assert by_dag.pop(differs) and by_cli.pop(differs), (differs, night, by_dag, by_cli)
    assert by_dag == by_cli
    assert (reports / by_cli["repro.audit.report"].rsplit("/", 1)[-1]).is_file()
