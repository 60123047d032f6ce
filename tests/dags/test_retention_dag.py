"""The nightly DAG's retention task (issue 32, acceptance 4): red when an input of a production model is lost.

Real parts: Airflow 3 on SQLite (``dag.test()`` in a child process, see conftest), MLflow on SQLite, a Delta table
vacuumed by deltalake. The registry holds one production version (alias ``champion``) whose training data was a
Delta version since vacuumed. The night is triggered with a ``models`` pattern that matches nothing, so no audit
runs: the retention task alone is red, and publish still writes the coverage page with the lost input on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DATE = "2026-06-23"

NIGHT = r"""
import json, os
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
dag = bag.get_dag("repro_nightly_audit")
run = dag.test(logical_date=pendulum.parse(os.environ["PROBE_DATE"]), run_conf={"models": "no-such-model-*"})
with create_session() as session:
    rows = session.scalars(select(XComModel).where(XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id)).all()
    xcom = {f"{x.task_id}.{x.key}": XComModel.deserialize_value(x) for x in rows}
tasks = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
tries = {ti.task_id: ti.try_number for ti in run.get_task_instances()}
json.dump({"state": str(run.state), "tasks": tasks, "tries": tries, "xcom": xcom}, open(os.environ["PROBE_OUT"], "w"))
"""


def _world(root: Path) -> dict[str, str]:
    pa = pytest.importorskip("pyarrow")
    deltalake = pytest.importorskip("deltalake")
    from auditor.lineage.record import DataRef
    from auditor.snapshots.delta import create_delta_snapshot
    from tests.fixtures.mlflow import seed_version
    from tests.fixtures.records import complete_record

    table, store = root / "table", root / "snapshots"
    deltalake.write_deltalake(table, pa.table({"id": [1, 2]}))
    pinned = create_delta_snapshot(table, store, version=0)
    deltalake.write_deltalake(table, pa.table({"id": [3]}), mode="overwrite")
    deltalake.DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    tracking = f"sqlite:///{root / 'mlflow.db'}"
    record = complete_record(data={"train": DataRef(kind="snapshot", uri=str(store), version=pinned.id)})
    seed_version(tracking, "credit-scorer", record, weights=b"weights", aliases=["champion"])
    return {"MLFLOW_TRACKING_URI": tracking, "REPRO_REPORTS": str(root / "reports"), "REPRO_HOME": str(root / "home"),
            "REPRO_SNAPSHOT_STORE": str(store)}


def test_a_lost_input_of_a_production_model_is_a_red_retention_task_and_is_on_the_coverage_page(airflow_db, run_in_airflow, tmp_path):
    env = {**airflow_db, **_world(tmp_path), "PROBE_DATE": DATE}
    night = run_in_airflow(NIGHT, env, cwd=tmp_path, timeout=900)
    assert night["tasks"]["retention"].endswith("failed"), night["tasks"]
    assert night["tries"]["retention"] == 1  # AirflowFailException: red, no retry
    summary = night["xcom"]["retention.return_value"]
    assert summary["red"] and "models:/credit-scorer/1: data.train (delta)" in summary["red"][0]
    assert summary["items"]["lost"] == 1
    assert night["tasks"]["sample"].endswith("success") and night["tasks"]["publish"].endswith("success"), night["tasks"]
    assert night["state"].endswith("failed")  # a red task fails the night
    page = (tmp_path / "reports" / "coverage.html").read_text(encoding="utf-8")
    assert "data.train (delta)" in page and "vacuumed" in page and ">lost<" in page
