"""The nightly DAG's grid tells the verdicts apart, mails the non-reproduced one and emits OpenLineage.

Real parts: Airflow 3 ``dag.test()`` on SQLite (in a child process, see conftest) running the real
DAG file, the SMTP provider's notifier sending to a real SMTP server (``aiosmtpd``) on loopback,
the OpenLineage provider's listener posting to a real HTTP receiver on loopback, the MLflow
tracking URI taken from an Airflow Connection, reports on the local store. Stubbed, and why: the
registry is the in-memory twin and the rebuild's workspace and runner are fakes inside the Airflow
process (as in tests/unit/test_audit_outcomes.py), because this test is about how Airflow shows
each outcome, not about git, snapshots or training. The tasks open their own audit session, so the
fakes reach it through a stand-in for the public ``auditor.steps.Session`` class (see NIGHTLY). Two versions are sampled (the ``models`` param
filters a third out): ``af-lost``, whose recorded commit is gone (NOT_REPRODUCIBLE), and
``af-flaky``, whose runner is unavailable on the first try (ERROR) and which reproduces on the retry.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DATE = "2026-08-02"  # this module's own logical date
REGISTRY = "memory://airflow-outcomes"

NIGHTLY = r"""
import hashlib, json, os
import numpy as np
import pendulum
from safetensors.numpy import save

import auditor.steps
import auditor.steps.session
from auditor.errors import InfrastructureError, InputUnrecoverable
from auditor.lineage.record import Artifact, Outputs
from auditor.rebuild.runners import RunOutcome
from auditor.rebuild.workspace import Workspace
from auditor.registry.memory import MemoryRegistry
from tests.fixtures.records import complete_record

weights = save({"w": np.ones((4, 3), dtype=np.float32)})
metrics = {"auc": 0.91, "accuracy": 0.85}
base = complete_record(outputs=Outputs(metrics=metrics, artifacts=[Artifact(
    name="model.safetensors", uri="runs:/x/model/model.safetensors", sha256=hashlib.sha256(weights).hexdigest(), size=len(weights))]))
LOST = "deadbeef" * 5
lost = base.model_copy(update={"code": base.code.model_copy(update={"commit": LOST})})
registry = MemoryRegistry.named(os.environ["PROBE_REGISTRY"])
refs = {"lost": registry.register_record("af-lost", lost, weights=weights).ref,
        "flaky": registry.register_record("af-flaky", base, weights=weights).ref}
registry.register_record("other-model", base, weights=weights)  # not matched by the models param
prepared = []

def fake_prepare(record, diff, dest, settings):
    if record.code.commit == LOST:
        raise InputUnrecoverable(f"commit {LOST} is gone from {record.code.repo_url}")
    prepared.append(dest)
    if len(prepared) == 1:
        raise InfrastructureError("the rebuild runner is unavailable (engine not reachable)")
    project = dest / "code"
    project.mkdir(parents=True)
    return Workspace(root=dest, repo_dir=project, project_dir=project, config_path=dest / "config.json", data_dirs={})

class Faithful:
    name = "fake"
    def run(self, spec):
        out = spec.output_dir
        (out / "run_record.json").write_text(base.to_json())
        (out / "metrics.json").write_text(json.dumps(metrics))
        if "REPRO_EVALUATE_WEIGHTS" in spec.env:
            (out / "evaluation.json").write_text("{}")
        else:
            (out / "model.safetensors").write_bytes(weights)
        return RunOutcome(exit_code=0, wall_s=0.01, log="trained\n", log_path=out / "log")

class StandInSession(auditor.steps.session.Session):
    # A stand-in, in this child process only. Each DAG task opens its own session
    # (auditor.airflow.hooks.AuditHook.session), so the fakes cannot be handed to a constructor from here;
    # replacing the public Session class with one that hands them in is the seam, rather than patching
    # a step's private function. Everything else the session does (registry, store, judge, publish) is real.
    def __init__(self, settings, **kwargs):
        kwargs.setdefault("prepare", fake_prepare)
        kwargs.setdefault("runner", Faithful())
        super().__init__(settings, **kwargs)

auditor.steps.Session = auditor.steps.session.Session = StandInSession

from airflow.dag_processing.dagbag import DagBag
from airflow.models.asset import AssetEvent
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
dag = bag.get_dag("repro_nightly_audit")
run = dag.test(logical_date=pendulum.parse(os.environ["PROBE_DATE"]), run_conf={"models": "af-*"})
with create_session() as session:
    rows = session.scalars(select(XComModel).where(XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id)).all()
    xcom = {f"{x.task_id}[{x.map_index}].{x.key}": XComModel.deserialize_value(x) for x in rows}
    events = [{"uri": e.uri, "extra": e.extra} for e in session.scalars(select(AssetEvent)).all()]
tis = [{"task": ti.task_id, "map_index": ti.map_index, "state": str(ti.state), "try_number": ti.try_number, "rendered": ti.rendered_map_index}
       for ti in run.get_task_instances()]
json.dump({"state": str(run.state), "tis": tis, "xcom": xcom, "events": events, "refs": refs,
           "prepared": len(prepared)}, open(os.environ["PROBE_OUT"], "w"))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def smtp_server():
    """A real SMTP server on loopback (aiosmtpd); yields the list of messages it received."""
    from aiosmtpd.controller import Controller

    received: list = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            from email import message_from_bytes, policy

            received.append(message_from_bytes(envelope.content, policy=policy.default))
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=_free_port())
    controller.start()
    try:
        yield controller.port, received
    finally:
        controller.stop()


@pytest.fixture()
def lineage_receiver():
    """An HTTP server on loopback standing in for an OpenLineage backend; yields (url, events received)."""
    events: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's hook name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                events.append(json.loads(body))
            except json.JSONDecodeError:
                events.append({"unparsable": body.decode(errors="replace")})
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", events
    finally:
        server.shutdown()
        server.server_close()


def _body(message) -> str:
    part = message.get_body(preferencelist=("html", "plain"))
    return part.get_content() if part is not None else ""


def _names(datasets: list[dict]) -> set[str]:
    return {d["name"] for d in datasets}


def test_the_grid_mail_and_lineage_tell_a_not_reproducible_audit_from_a_retried_error(
    airflow_db, run_in_airflow, smtp_server, lineage_receiver, tmp_path
):
    smtp_port, mails = smtp_server
    ol_url, ol_events = lineage_receiver
    reports = tmp_path / "reports"
    env = {
        **airflow_db,
        "PROBE_DATE": DATE,
        "PROBE_REGISTRY": REGISTRY,
        "REPRO_HOME": str(tmp_path / "home"),
        "REPRO_REPORTS": str(reports),
        "REPRO_REPORTS_URL": "https://reports.example.org/audits/",  # where the reports folder is served
        # the registry comes from the Airflow Connection, not from MLFLOW_TRACKING_URI (unset by conftest)
        "AIRFLOW_CONN_REPRO_MLFLOW": json.dumps({"conn_type": "generic", "extra": {"tracking_uri": REGISTRY}}),
        "REPRO_NOTIFY_EMAIL": "model-risk@repro.test",
        "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps({
            "conn_type": "smtp", "host": "127.0.0.1", "port": smtp_port,
            "extra": {"disable_tls": True, "disable_ssl": True, "from_email": "airflow@repro.test", "retry_limit": 1}}),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "http", "url": ol_url}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "repro-audit-test",
    }
    out = run_in_airflow(NIGHTLY, env, cwd=tmp_path)
    lost, flaky = out["refs"]["lost"], out["refs"]["flaky"]
    xcom = out["xcom"]
    audits, verdicts = {}, {}
    for ti in out["tis"]:
        if ti["task"] in ("audit", "verdict"):
            key = f"{ti['task']}[{ti['map_index']}]"
            assert ti["rendered"], ti  # each mapped instance is named by its model ref in the UI
            (audits if ti["task"] == "audit" else verdicts)[ti["rendered"]] = {**ti, "report_link": xcom.get(f"{key}._link_ReportLink")}
    for ref, ti in audits.items():
        ti["row"] = xcom[f"audit[{ti['map_index']}].return_value"]
        assert ti["row"]["ref"] == ref
    assert set(audits) == set(verdicts) == {lost, flaky}, out["tis"]  # the models param kept other-model out

    # The grid: NOT_REPRODUCIBLE is a failed verdict on its first try, never retried, after an audit that
    # completed (its report is published); the ERROR audit was retried and then reproduced, a green verdict.
    assert verdicts[lost]["state"].endswith("failed") and verdicts[lost]["try_number"] == 1, verdicts[lost]
    assert audits[lost]["state"].endswith("success") and audits[lost]["try_number"] == 1, audits[lost]
    assert audits[lost]["row"]["verdict"] == "NOT_REPRODUCIBLE"
    assert audits[flaky]["try_number"] == 2 and audits[flaky]["state"].endswith("success"), audits[flaky]
    assert verdicts[flaky]["state"].endswith("success") and verdicts[flaky]["try_number"] == 1, verdicts[flaky]
    assert audits[flaky]["row"]["verdict"] == "REPRODUCED_BITWISE"
    assert out["prepared"] == 2  # the retry audited afresh: the first try's ERROR was not published

    # publish ran all the same, and its summary has each verdict (the failed one's too)
    summary = xcom["publish[-1].return_value"]
    assert {r["ref"]: r["verdict"] for r in summary["audits"]} == {lost: "NOT_REPRODUCIBLE", flaky: "REPRODUCED_BITWISE"}
    assert out["state"].endswith("failed")  # the red verdict fails the DAG run: DAG-level alerting sees it
    for ref in (lost, flaky):
        report = Path(audits[ref]["row"]["report"])
        assert report.is_file()
        web = f"https://reports.example.org/audits/{report.name}"  # opened through REPRO_REPORTS_URL
        assert audits[ref]["report_link"] == web  # the task's "Audit report" link
        assert verdicts[ref]["report_link"] == web  # the red instance opens the report too
    # every published report is an asset event (its stored location, its web address), the not-reproducible one's too
    for ref in (lost, flaky):
        events = [e for e in out["events"] if e["extra"].get("model") == ref and e["uri"].endswith(".html")]
        assert events and all(e["extra"]["url"].startswith("https://reports.example.org/audits/") for e in events), out["events"]

    # One mail, through the SMTP Connection, naming the version and its verdict.
    assert len(mails) == 1, [m["Subject"] for m in mails]
    mail = mails[0]
    assert mail["To"] == "model-risk@repro.test" and mail["From"] == "airflow@repro.test"
    assert lost in mail["Subject"] and "NOT_REPRODUCIBLE" in mail["Subject"], mail["Subject"]
    assert lost in _body(mail) and "NOT_REPRODUCIBLE" in _body(mail)

    # OpenLineage: a START and a terminal event per audit try, naming inputs and (at the end) outputs;
    # the try that published ends COMPLETE, whatever the verdict (the verdict task carries the red).
    runs: dict[str, list[dict]] = {}
    for event in ol_events:
        if event.get("job", {}).get("name", "").endswith(".audit"):
            runs.setdefault(event["run"]["runId"], []).append(event)
    by_ref: dict[str, list[list[dict]]] = {}
    for events in runs.values():
        refs = {d["name"] for e in events for d in e.get("inputs", []) if d["name"].startswith("models:/")}
        assert len(refs) == 1, events
        by_ref.setdefault(refs.pop(), []).append(events)
    assert set(by_ref) == {lost, flaky}, ol_events
    assert len(by_ref[lost]) == 1 and len(by_ref[flaky]) == 2  # one OpenLineage run per try
    for ref, tries in by_ref.items():
        final = tries[-1]  # the try that published
        kinds = [e["eventType"] for e in final]
        assert "START" in kinds, kinds
        end = next(e for e in final if e["eventType"] in ("COMPLETE", "FAIL"))
        assert end["eventType"] == "COMPLETE", (ref, kinds)
        if ref == flaky:  # the first try raised the unpublished ERROR so Airflow retried it
            assert "FAIL" in [e["eventType"] for e in tries[0]], tries[0]
        start = next(e for e in final if e["eventType"] == "START")
        assert ref in _names(start["inputs"])
        inputs, outputs = _names(end["inputs"]), _names(end["outputs"])
        assert ref in inputs
        assert any(n.startswith("train@blake3:") for n in inputs), inputs  # the snapshot
        assert "sha256:" + "cd" * 32 in inputs  # the image
        stem = Path(audits[ref]["row"]["report"]).stem
        assert {f"{stem}.html", f"{stem}.json"} <= outputs, outputs  # report and evidence
