"""Issue 43, build 2 and acceptance 2: MLflow's registry tells the receiver of a new version and an alias move through
its signed webhook, within a minute and without polling; an unsigned, forged or replayed request starts nothing.

Real parts: ``mlflow server`` (SQL backend) on loopback, which signs and delivers the webhooks itself
(``MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS=true`` and ``MLFLOW_WEBHOOK_ALLOWED_SCHEMES=http,https`` let it deliver to
127.0.0.1 over plain http; nothing leaves the machine), and the
receiver app the Airflow plugin serves (``auditor.airflow.webhook.make_app``) under uvicorn on loopback. The emitter is
a recorder standing in for Airflow's asset manager (the API server's database is not part of this test); what the
recorder receives is exactly what ``airflow_emit`` hands Airflow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from auditor.airflow.webhook import ROUTE, make_app
from auditor.registry.mlflow_webhook import register_webhook
from auditor.registry.webhook import sign
from tests.fixtures.common import free_port, wait_for

SECRET = "whsec-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-webhooks")
    port = free_port()
    # loopback over plain http for the test; MLflow's defaults (https only, public addresses only) stand in production
    env = {**os.environ, "MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS": "true", "MLFLOW_WEBHOOK_ALLOWED_SCHEMES": "http,https",
           "MLFLOW_WEBHOOK_CACHE_TTL": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
               "--default-artifact-root", (root / "artifacts").as_uri(), "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    with open(root / "server.log", "wb") as out:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{uri}/health", timeout=1).ok, timeout=120, interval=0.25, what="mlflow server")
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


@pytest.fixture(scope="module")
def receiver():
    import uvicorn

    events: list[dict] = []
    app = make_app(emit=lambda event: events.append(event.extra()) or "recorded", secret=lambda: SECRET)
    port = free_port()
    served = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    wait_for(lambda: served.started, timeout=30, what="the receiver")
    yield f"http://127.0.0.1:{port}{ROUTE}", events
    served.should_exit = True
    thread.join(timeout=10)


def _arrived(events: list[dict], **expected: str) -> dict:
    started = time.monotonic()
    wait_for(lambda: any(all(e.get(k) == v for k, v in expected.items()) for e in events), timeout=60, interval=0.2,
             what=f"a delivery with {expected}")
    print(f"delivered in {time.monotonic() - started:.1f} s: {expected}")
    return next(e for e in events if all(e.get(k) == v for k, v in expected.items()))


def test_a_new_version_and_an_alias_move_arrive_signed_and_start_one_event_each(server, receiver):
    from mlflow import MlflowClient

    url, events = receiver
    first = register_webhook(server, url, SECRET)
    again = register_webhook(server, url, SECRET)  # registering twice keeps one webhook, so each event arrives once
    assert first.created and not again.created and again.webhook_id == first.webhook_id
    client = MlflowClient(tracking_uri=server)
    run = client.create_run(client.create_experiment("webhooks"))
    client.create_registered_model("credit-scorer")
    version = client.create_model_version("credit-scorer", f"runs:/{run.info.run_id}/model", run_id=run.info.run_id)
    created = _arrived(events, model_uri=f"models:/credit-scorer/{version.version}", event="model_version.created")
    client.set_registered_model_alias("credit-scorer", "champion", version.version)
    moved = _arrived(events, event="model_version_alias.created", alias="champion")
    assert moved["model_uri"] == created["model_uri"]
    time.sleep(2)  # nothing else arrives: one delivery per event, each counted once
    assert len(events) == 2, events


def test_unsigned_forged_or_replayed_requests_are_refused_and_start_nothing(receiver):
    url, events = receiver
    before = len(events)
    body = json.dumps({"entity": "model_version", "action": "created", "timestamp": "now",
                       "data": {"name": "credit-scorer", "version": "9"}})
    stamp, delivery = str(int(time.time())), uuid.uuid4().hex
    good = {"X-MLflow-Delivery-Id": delivery, "X-MLflow-Timestamp": stamp, "X-MLflow-Signature": sign(SECRET, delivery, stamp, body)}
    unsigned = {k: v for k, v in good.items() if k != "X-MLflow-Signature"}
    forged = {**good, "X-MLflow-Signature": sign("another-secret", delivery, stamp, body)}
    old = str(int(time.time()) - 3600)
    stale = {**good, "X-MLflow-Delivery-Id": "d-old", "X-MLflow-Timestamp": old, "X-MLflow-Signature": sign(SECRET, "d-old", old, body)}
    for headers, status in ((unsigned, 401), (forged, 401), (stale, 409)):
        answer = requests.post(url, data=body, headers=headers, timeout=10)
        assert answer.status_code == status and "refused" in answer.json(), answer.text
    assert len(events) == before
    assert requests.post(url, data=body, headers=good, timeout=10).status_code == 202  # the genuine one, once
    replay = requests.post(url, data=body, headers=good, timeout=10)
    assert replay.status_code == 409 and "already received" in replay.json()["refused"]
    assert len(events) == before + 1 and events[-1]["model_uri"] == "models:/credit-scorer/9"

NOW = 1_800_000_000


def test_a_delivery_whose_event_could_not_be_recorded_is_accepted_when_mlflow_retries_it():
    """MLflow retries a 5xx with the same delivery id, timestamp and signature: that retry is not a replay."""
    from fastapi.testclient import TestClient

    recorded, failures = [], [RuntimeError("database is locked")]

    def emit(event):
        if failures:
            raise failures.pop()
        recorded.append(event.model_uri)
        return "recorded"

    client = TestClient(make_app(emit=emit, secret=lambda: SECRET, clock=lambda: NOW))
    body = json.dumps({"entity": "model_version", "action": "created", "timestamp": "now",
                       "data": {"name": "credit-scorer", "version": "7"}})
    stamp, delivery = str(NOW), "d-retry"
    headers = {"X-MLflow-Delivery-Id": delivery, "X-MLflow-Timestamp": stamp, "X-MLflow-Signature": sign(SECRET, delivery, stamp, body)}
    first = client.post(ROUTE, content=body, headers=headers)
    retry = client.post(ROUTE, content=body, headers=headers)
    again = client.post(ROUTE, content=body, headers=headers)
    assert (first.status_code, retry.status_code, again.status_code) == (503, 202, 409), (first.text, retry.text, again.text)
    assert recorded == ["models:/credit-scorer/7"]  # recorded once: the retry, never the replay after it
