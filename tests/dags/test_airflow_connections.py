"""The MLflow and S3 Connections, with the environment as fallback, and the links they give a task.

Real Airflow (in a child process, see conftest): Connections defined the way a deployment defines
them in the environment (``AIRFLOW_CONN_*``), read by ``auditor.airflow.hooks.AuditHook``.
"""

from __future__ import annotations

import json

PROBE = r"""
import json, os
from auditor.airflow.hooks import AuditHook
from auditor.airflow.links import model_version_url

settings = AuditHook().get_conn()
json.dump({"tracking_uri": settings.tracking_uri, "aws": {k: os.environ.get(k) for k in (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION")},
    "link": model_version_url(settings.tracking_uri, "models:/credit scorer/3")}, open(os.environ["PROBE_OUT"], "w"))
"""


def test_the_connections_give_the_tracking_uri_and_s3_credentials(airflow_env, run_in_airflow):
    env = {
        **airflow_env,
        "MLFLOW_TRACKING_URI": "http://from-the-environment:5000",
        "AIRFLOW_CONN_REPRO_MLFLOW": json.dumps({"conn_type": "http", "host": "mlflow.internal", "port": 5000, "schema": "https"}),
        "AIRFLOW_CONN_REPRO_S3": json.dumps({"conn_type": "aws", "login": "AKIAEXAMPLE", "password": "s3cr3t",
                                             "extra": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"}}),
    }
    out = run_in_airflow(PROBE, env)
    assert out["tracking_uri"] == "https://mlflow.internal:5000"  # the Connection wins over the environment
    assert out["aws"] == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t",
                          "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-west-1"}
    assert out["link"] == "https://mlflow.internal:5000/#/models/credit%20scorer/versions/3"


def test_without_connections_the_environment_applies(airflow_env, run_in_airflow):
    base = {k: v for k, v in airflow_env.items() if not k.startswith("AWS_")}
    env = {**base, "MLFLOW_TRACKING_URI": "http://from-the-environment:5000", "AWS_ENDPOINT_URL": "http://127.0.0.1:9999"}
    out = run_in_airflow(PROBE, env)
    assert out["tracking_uri"] == "http://from-the-environment:5000"
    assert out["aws"]["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9999" and out["aws"]["AWS_ACCESS_KEY_ID"] is None
