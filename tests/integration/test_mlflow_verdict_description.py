"""The verdict where MLflow users look (issue 40, build 7 and acceptance 3).

Real MLflow as users run it: ``mlflow server`` on loopback (SQLite behind it, artifacts proxied to S3 on a moto
server; the ``server_tracking_uri`` fixture). A seeded version is audited through the product's own step
(``auditor.steps.publish.publish_version``: the evidence judged by the real judge stands in for the rebuild, which
``tests.fixtures.judged`` builds), then read back through MLflow's client and HTTP:

- the version's description starts with the verdict, its date and a link to the report, and that link opens the
  report: MLflow's UI route to the audit run's artifact (fetched as the UI's artifact viewer fetches it), or the
  report's web address under ``REPRO_REPORTS_URL`` (a loopback web server over the reports folder);
- what the user had in the description is kept below ours; a later audit replaces our block only; publishing the
  same audit again writes nothing twice;
- the audit run's description names the version it audited, with a link to that version's page;
- the verdict's tag sorts first among the version's tags.
"""

from __future__ import annotations

import functools
import re
import threading
import urllib.parse
import urllib.request
import uuid
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from auditor.registry.mlflow import MlflowRegistry
from auditor.settings import Settings
from auditor.steps.common import quiet
from auditor.steps.options import AuditOptions
from auditor.steps.publish import publish_version
from auditor.storage import open_store
from auditor.tags import DESCRIPTION_END, DESCRIPTION_START, MLFLOW_NOTE, TAG_AUDIT_RUN, TAG_SUMMARY, TAG_VERDICT
from tests.fixtures.judged import floor, judged_audit, weight_diff
from tests.fixtures.mlflow import seed_version
from tests.fixtures.records import complete_record

USER_TEXT = "Champion candidate for the Q3 credit book.\n\nModel card: see the risk wiki; owner **risk-team**.\n"
#: the verdict's line as the page renders it: the markdown link's target is group 1
VERDICT_LINE = re.compile(r"^\*\*(?P<verdict>[A-Z_]+)\*\* · (?P<date>\d{4}-\d{2}-\d{2}) · \[report\]\((?P<link>[^)]+)\)")


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - loopback only
        return resp.status, resp.read()


def _rendered(description: str) -> str:
    """What MLflow's page shows of the description's source: HTML comments render as nothing."""
    return re.sub(r"<!--.*?-->\s*", "", description, flags=re.S)


@pytest.fixture()
def world(server_tracking_uri, tmp_path, monkeypatch):
    """A version with tags and a description of its user's, and ``audit(date, reports_url=None, **judged)``: one audit
    of it, published as ``repro-audit audit`` publishes (the judged evidence in place of the rebuild)."""
    name = f"credit-scorer-{uuid.uuid4().hex[:8]}"  # the server is the session's: a name of this test's own
    version = seed_version(server_tracking_uri, name, complete_record(), tags={"accuracy": "0.91", "owner": "risk-team"})
    registry = MlflowRegistry(server_tracking_uri)
    registry.client.update_model_version(name, version, description=USER_TEXT)
    reports = tmp_path / "reports"

    def audit(date: str, reports_url: str | None = None, **judged):
        result = judged_audit(name=name, audit_id=date, **judged)
        result = result.model_copy(update={"model": result.model.model_copy(update={"version": version,
                                                                                   "uri": f"models:/{name}/{version}"})})
        monkeypatch.setattr("auditor.steps.audit.audit_version", lambda *_args, **_kwargs: result)
        settings = Settings(tracking_uri=server_tracking_uri, reports=str(reports), reports_url=reports_url,
                            audit_experiment=f"audits-{name}")
        session = SimpleNamespace(registry=registry, settings=settings, store=open_store(settings.reports), signer=None)
        info = registry.resolve(f"models:/{name}/{version}")
        outcome = publish_version(session, info, AuditOptions(date=date), quiet)
        assert outcome.publish_failure is None, outcome.publish_failure
        return registry.client.get_model_version(name, version)

    return SimpleNamespace(name=name, version=version, registry=registry, client=registry.client,
                           server=server_tracking_uri, reports=reports, audit=audit)


def test_the_version_page_opens_with_the_verdict_and_a_link_that_opens_the_report_in_mlflows_ui(world):
    mv = world.audit("2026-03-02", diff=weight_diff(0.05), same_seed=floor())
    shown = _rendered(mv.description)
    line = VERDICT_LINE.match(shown)
    assert line, shown[:300]
    assert (line["verdict"], line["date"]) == ("OUT_OF_TOLERANCE", "2026-03-02") == (mv.tags[TAG_VERDICT], "2026-03-02")
    # the link: MLflow's UI route to the report among the audit run's artifacts, relative to where the UI is served
    route = re.fullmatch(r"#/experiments/(?P<experiment>[^/]+)/runs/(?P<run>[0-9a-f]+)/artifacts/(?P<path>.+)", line["link"])
    assert route, line["link"]
    run = world.client.get_run(route["run"])
    assert run.info.run_id == mv.tags[TAG_AUDIT_RUN] and run.info.experiment_id == route["experiment"]
    # it opens: the page at that address is MLflow's UI, and the file that route shows is the report of this audit
    status, page = _get(f"{world.server}/{line['link']}")
    assert status == 200 and b"<html" in page.lower()
    query = urllib.parse.urlencode({"path": urllib.parse.unquote(route["path"]), "run_uuid": route["run"]})
    status, report = _get(f"{world.server}/get-artifact?{query}")
    assert status == 200 and report == (world.reports / urllib.parse.unquote(route["path"])).read_bytes()
    assert b"OUT_OF_TOLERANCE" in report
    # what the user wrote is kept, below ours
    assert mv.description.endswith(USER_TEXT) and mv.description.count(DESCRIPTION_START) == 1
    assert "[audit run](#/experiments/" in shown.splitlines()[0]


def test_with_a_reports_url_the_link_is_the_reports_web_address_and_it_opens(world):
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(world.reports))
    world.reports.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/audits"
        mv = world.audit("2026-03-02", reports_url=base)
        line = VERDICT_LINE.match(_rendered(mv.description))
        assert line and line["verdict"] == "REPRODUCED_WITHIN_TOLERANCE" and line["link"].startswith(f"{base}/")
        key = line["link"].removeprefix(f"{base}/")
        status, body = _get(f"http://127.0.0.1:{server.server_address[1]}/{key}")  # the folder, served where the URL says
        assert status == 200 and body == (world.reports / key).read_bytes()
    finally:
        server.shutdown()
        server.server_close()


def test_a_later_audit_replaces_our_block_only_and_a_repeat_writes_nothing_twice(world):
    first = world.audit("2026-03-02", diff=weight_diff(0.05), same_seed=floor())
    edited = first.description + "\nRetrained data cut-off: 2026-02-28.\n"  # a person edits below our block
    world.client.update_model_version(world.name, world.version, description=edited)
    later = world.audit("2026-03-09")
    assert _rendered(later.description).startswith("**REPRODUCED_WITHIN_TOLERANCE** · 2026-03-09 · [report](")
    assert later.description.count(DESCRIPTION_START) == later.description.count(DESCRIPTION_END) == 1
    assert "OUT_OF_TOLERANCE" not in later.description
    assert later.description.endswith(USER_TEXT + "\nRetrained data cut-off: 2026-02-28.\n")
    again = world.audit("2026-03-09")  # the same audit published again: exactly once
    assert again.description == later.description
    assert again.last_updated_timestamp == later.last_updated_timestamp  # not even rewritten with the same text


def test_the_audit_run_names_the_version_it_audited_with_a_link_to_its_page(world):
    mv = world.audit("2026-03-02", diff=weight_diff(0.05), same_seed=floor())
    run = world.client.get_run(mv.tags[TAG_AUDIT_RUN])
    note = run.data.tags[MLFLOW_NOTE]  # what MLflow's UI shows as the run's description
    found = re.match(r"^Audit of \[models:/[^\]]+\]\((?P<route>#/models/(?P<name>[^/]+)/versions/(?P<version>\d+))\): "
                     r"\*\*OUT_OF_TOLERANCE\*\* · 2026-03-02 · ", note)
    assert found, note
    name = urllib.parse.unquote(found["name"])
    assert (name, found["version"]) == (world.name, world.version)
    assert world.client.get_model_version(name, found["version"]).run_id != run.info.run_id  # another run's version
    status, page = _get(f"{world.server}/{found['route']}")
    assert status == 200 and b"<html" in page.lower()


def test_the_verdicts_tag_sorts_first_among_the_versions_tags_and_the_machine_tags_keep_their_names(world):
    mv = world.audit("2026-03-02", diff=weight_diff(0.05), same_seed=floor())
    keys = sorted(mv.tags)  # MLflow's UI sorts tag keys by character code
    assert keys[0] == TAG_SUMMARY and mv.tags[TAG_SUMMARY] == mv.tags[TAG_VERDICT] == "OUT_OF_TOLERANCE"
    assert {"accuracy", "owner", "repro.audit.verdict", "repro.audit.run", "repro.audit.report"} <= set(keys)
