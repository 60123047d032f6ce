"""Issue 43, build 2: a verified registry event becomes an asset event in Airflow's own database that queues the DAG
scheduled on it: a new version queues ``repro_audit_registered_version``, an alias move queues ``repro_promotion_gate``
(under ``REPRO_REGISTRY_EVENTS=webhook``), through ``auditor.airflow.webhook.airflow_emit``, the emitter the plugin's
receiver calls (Airflow's asset manager, as its REST API's create-asset-event does). The scheduler turns a queued
asset run into a DAG run; the delivery itself is checked with a real ``mlflow server`` in
``tests/integration/test_registry_webhook_delivery.py``. The plugin is checked as Airflow loads it from the repository's
``plugins/`` folder (as the image deploys it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.dags.conftest import AIRFLOW_BIN, DAGS

EMIT = r"""
import json, os
from sqlalchemy import select
from airflow.models.asset import AssetDagRunQueue, AssetEvent
from airflow.utils.session import create_session
from auditor.airflow.webhook import airflow_emit
from auditor.registry.webhook import RegistryEvent

from airflow.models.dag import DagModel
with create_session() as s:  # deployed DAGs are unpaused (the copied database may hold them paused by an earlier test)
    for dag in s.scalars(select(DagModel)):
        dag.is_paused = False
version = RegistryEvent("model_version.created", "credit-scorer", "3", None, "d-1")
alias = RegistryEvent("model_version_alias.created", "credit-scorer", "3", "champion", "d-2")
emitted = [airflow_emit(version), airflow_emit(alias)]
with create_session() as s:
    queued = sorted(r.target_dag_id for r in s.scalars(select(AssetDagRunQueue)))
    events = [(e.asset.uri, e.extra) for e in s.scalars(select(AssetEvent))]
from airflow import plugins_manager
apps = [a.get("url_prefix") for a in plugins_manager.get_fastapi_plugins()[0]]  # what the API server mounts
os.environ["REPRO_ALIAS_ASSET"] = "airflow://reserved"  # a value Airflow refuses: the DAG still parses, on the default
from auditor.airflow.promotion import promotion_schedule
fallback = [a.uri for a in promotion_schedule()]
json.dump({"emitted": emitted, "queued": queued, "events": events, "apps": apps, "fallback": fallback},
          open(os.environ["PROBE_OUT"], "w"))
"""


def test_a_verified_version_and_alias_event_queue_their_dags(airflow_db, run_in_airflow, tmp_path):
    # a copy of the session's migrated database (the DAGs serialised here, unpaused, stay out of the other tests'),
    # and deployed DAGs are unpaused: Airflow queues asset-triggered runs only for those
    home = Path(airflow_db["AIRFLOW_HOME"])
    shutil.copyfile(home / "airflow.db", tmp_path / "airflow.db")
    env = {**airflow_db, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
           "REPRO_REGISTRY_EVENTS": "webhook", "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(Path(DAGS).parent / "plugins")}  # as the image deploys it
    parsed = subprocess.run([str(AIRFLOW_BIN), "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=600)
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    out = run_in_airflow(EMIT, env)
    assert out["emitted"] == ["mlflow://models/", "mlflow://aliases/"]  # as Airflow normalises the asset URIs
    assert out["queued"] == ["repro_audit_registered_version", "repro_promotion_gate"], out
    extras = dict((uri, extra) for uri, extra in out["events"])
    assert extras["mlflow://models/"]["model_uri"] == "models:/credit-scorer/3"  # what the audit DAG's template reads
    assert extras["mlflow://aliases/"]["alias"] == "champion"
    assert "/repro-audit" in out["apps"], out["apps"]  # the receiver is mounted by the plugin Airflow loads
    assert out["fallback"] == ["mlflow://aliases/"]
