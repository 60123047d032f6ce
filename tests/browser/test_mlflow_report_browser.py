"""An audit run's report opens inside MLflow's own artifact viewer (issue 29, acceptance 4).

A real ``mlflow server`` on loopback over SQLite, the audit published and logged as its run by the product's own
code (``auditor.report.publish.publish``, ``auditor.steps.publish.log_audit_run``), and headless Chromium on the
run's artifact page. MLflow shows an HTML artifact in a sandboxed iframe (``sandbox="allow-scripts"``, a blob URL,
its own process), so the test attaches to that frame's target and reads the text it rendered: the verdict's
headline, from the tier that failed. With ``REPRO_SCREENSHOTS=<folder>`` the two pages are also saved there
(``docs/screenshots/`` holds the committed ones).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures.common import free_port, wait_for
from tests.fixtures.judged import DATA_CHANGED, floor, judged_audit, weight_diff

pytestmark = pytest.mark.browser

#: what each report must show inside MLflow's viewer: its file name in docs/screenshots, the audit, the headline
REPORTS = {
    "out-of-tolerance": ("report-out-of-tolerance-in-mlflow.png",
                         dict(diff=weight_diff(0.05), same_seed=floor(), name="credit-scorer", audit_id="oot-floor"),
                         "Out of tolerance: the weights lie outside the same-seed floor"),
    "data-changed": ("report-data-changed-in-mlflow.png",
                     dict(findings=[DATA_CHANGED], auc=None, diff=None, name="churn", audit_id="nr-data"),  # no rebuild ran
                     "Not reproducible: the data of 'train' changed since training"),
}


@pytest.fixture(scope="module")
def mlflow_ui(tmp_path_factory):
    """``mlflow server`` on loopback over a SQLite database whose audit runs keep their artifacts in a local folder."""
    from mlflow import MlflowClient

    from auditor.settings import Settings

    root = tmp_path_factory.mktemp("mlflow-ui")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    settings = Settings(tracking_uri=uri, reports=str(root / "reports"))
    MlflowClient(tracking_uri=uri).create_experiment(settings.audit_experiment, artifact_location=str(root / "artifacts"))
    port = free_port()
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(root / "server.log", "wb") as log:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", uri,
                                 "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                                cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as resp:  # noqa: S310 - loopback only
                return resp.status == 200
        except OSError:
            return False

    try:
        wait_for(up, timeout=300, interval=0.5, what=f"mlflow server on {base}")
        yield SimpleNamespace(base=base, uri=uri, settings=settings, root=root)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _publish_as_run(ui, audit) -> tuple[str, str, str]:
    """Publish ``audit`` and log its audit run as an audit does: (experiment id, run id, the report's artifact path)."""
    from auditor.registry.mlflow import MlflowRegistry
    from auditor.report.publish import publish
    from auditor.steps.publish import log_audit_run
    from auditor.storage import open_store

    store = open_store(ui.settings.reports)
    registry = MlflowRegistry(ui.uri)
    publication = publish(audit, store, settings=ui.settings, key=None)
    session = SimpleNamespace(store=store, settings=ui.settings, registry=registry)
    info = SimpleNamespace(name=audit.model.name, version=audit.model.version)
    run_id = log_audit_run(session, info, audit, publication)
    experiment = registry.client.get_experiment_by_name(ui.settings.audit_experiment).experiment_id
    return experiment, run_id, publication.report_key


def _frame_text(chromium, page, timeout: float = 300.0) -> str:
    """The text MLflow's sandboxed HTML viewer rendered (its iframe is a target of its own)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for target in chromium.call("Target.getTargets")["targetInfos"]:
            if target["type"] == "iframe" and target["url"].startswith("blob:"):
                session = chromium.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
                try:
                    answer = chromium.call("Runtime.evaluate", {"expression": "document.body ? document.body.innerText : ''",
                                                               "returnByValue": True}, session=session)
                finally:
                    chromium.call("Target.detachFromTarget", {"sessionId": session})
                text = answer["result"].get("value") or ""
                if text.strip():
                    return text
        time.sleep(1)
    raise AssertionError(f"MLflow's artifact viewer showed no report text within {timeout:.0f}s ({page.report.url})")


@pytest.mark.parametrize("kind", sorted(REPORTS))
def test_the_audit_runs_report_renders_in_mlflows_artifact_viewer_with_its_failing_tiers_headline(chromium, mlflow_ui, kind, tmp_path):
    shot_name, kwargs, headline = REPORTS[kind]
    audit = judged_audit(**kwargs)
    experiment, run_id, report = _publish_as_run(mlflow_ui, audit)
    url = f"{mlflow_ui.base}/#/experiments/{experiment}/runs/{run_id}/artifacts/{report}"
    page = chromium.open("about:blank", settle_ms=0)
    page.report.url = url
    page.call("Page.navigate", {"url": url})  # MLflow's app may take minutes to load on a busy machine: the frame is polled
    try:
        text = _frame_text(chromium, page)
        assert text.splitlines()[0].strip() == headline, text[:300]
        assert audit.verdict.value in text and "What went wrong" in text
        page.evaluate("new Promise(r => setTimeout(r, 1500))")
        data = page.call("Page.captureScreenshot", {"format": "png"})["data"]  # the viewport: MLflow's page as people see it
        import base64

        shot = tmp_path / shot_name
        shot.write_bytes(base64.b64decode(data))
        assert shot.stat().st_size > 20_000
        folder = os.environ.get("REPRO_SCREENSHOTS")
        if folder:
            (Path(folder) / shot_name).write_bytes(shot.read_bytes())
    finally:
        page.close()
