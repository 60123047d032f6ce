"""Report wording says what the page shows (issue 16, build point 5).

The tier results come from the real judge (``auditor.judge.verdict.judge``) over the evidence an audit
gathers in each case, so the wording is checked against the statuses an audit (``auditor.steps``) would publish.
"""

from __future__ import annotations

import re
from html import unescape

from auditor.judge.result import Verdict
from auditor.judge.verdict import RecoveryCheck, judge
from auditor.report.evidence import build_evidence
from auditor.report.render import css_string, render_report, short_uri
from auditor.report.view import DISTANCE_LEGEND
from auditor.settings import Settings
from tests.fixtures.audits import make_audit

SETTINGS = Settings(responsible_person="Dana Risk")
SNAPSHOT_GONE = "snapshot blake3:" + "b" * 64 + " of data.train failed verification: train_y.npy changed"


def _judged(*, unrecoverable=None, error=None, recovery=True):
    check = RecoveryCheck(expected_sha256="ab" * 32, actual_sha256="ab" * 32, registered={"auc": 0.91}) if recovery else None
    verdict, tiers = judge(findings=[], recovery=check, metric_results=[], weight_diff=None, unrecoverable=unrecoverable, error=error)
    base = make_audit(Verdict.REPRODUCED_BITWISE)
    return base.model_copy(update={"verdict": verdict, "tiers": tiers, "metrics": [], "weight_diff": None, "drift": None,
                                   "error": unrecoverable or error, "findings": []})


def _html(audit, **extra) -> str:
    return render_report({**build_evidence(audit, settings=SETTINGS), **extra})


def _section(html: str, name: str) -> str:
    start = html.index(f'id="{name}"')
    return html[start : html.index("</section>", start)]


def _tier_status(html: str, title: str) -> str:
    row = re.search(rf"<tr><td>{title}</td><td><span class=\"pill [^\"]+\">([^<]+)</span>", _section(html, "tiers"))
    return row.group(1)


def test_a_snapshot_that_no_longer_verifies_reads_not_run_and_claims_no_rebuild():
    audit = _judged(unrecoverable=SNAPSHOT_GONE)
    assert audit.verdict is Verdict.NOT_REPRODUCIBLE
    assert audit.tiers["statistical"].status == "fail"  # what the judge says ...
    html = _html(audit)
    assert _tier_status(html, "Statistical") == "not run"  # ... and what the page shows
    assert _tier_status(html, "Bitwise") == "not run"
    assert _tier_status(html, "Artifact recovery") == "pass"
    text = unescape(html)
    assert "can still be retrieved and rebuilt today" not in text
    supports = unescape(_section(html, "supports"))
    assert "rebuilt today" not in supports.split("A pass would support")[0]
    assert supports.count("Supports nothing here: this tier did not run (the model could not be rebuilt") == 2
    assert text.count(SNAPSHOT_GONE) == 1  # each error text once
    assert "re-evaluated" not in supports.lower().split("a pass would support")[0]  # it was not (evaluated=None)


def test_artifact_recovery_claims_the_re_evaluation_only_when_it_ran():
    check = RecoveryCheck(expected_sha256="ab" * 32, actual_sha256="ab" * 32, registered={"auc": 0.91}, evaluated={"auc": 0.91})
    verdict, tiers = judge(findings=[], recovery=check, metric_results=[], weight_diff=None, unrecoverable=SNAPSHOT_GONE)
    audit = make_audit().model_copy(update={"verdict": verdict, "tiers": tiers, "metrics": [], "weight_diff": None,
                                            "error": SNAPSHOT_GONE})
    supports = unescape(_section(_html(audit), "supports"))
    assert "Re-evaluated by the recorded recipe, it gives the registered metrics." in supports


def test_an_error_reads_not_run_for_the_tiers_it_stopped_and_says_its_text_once():
    error = "InfrastructureError: the Docker engine at unix:///var/run/docker.sock is not reachable"
    audit = _judged(error=error)
    assert audit.verdict is Verdict.ERROR
    html = _html(audit)
    assert _tier_status(html, "Statistical") == "not run" and _tier_status(html, "Bitwise") == "not run"
    assert "not judged" not in html
    assert unescape(html).count(error) == 1
    assert error in unescape(html[: html.index("</header>")])


def test_a_tier_that_failed_is_said_once_in_the_problem_box_not_again_in_the_table():
    audit = make_audit(Verdict.OUT_OF_TOLERANCE)
    html = _html(audit)
    assert _tier_status(html, "Statistical") == "fail"
    assert html.count("auc outside its band") == 1
    assert "see What went wrong above" in _section(html, "tiers")


def test_distance_to_band_is_explained_with_its_sign():
    html = _html(make_audit(Verdict.OUT_OF_TOLERANCE))
    assert DISTANCE_LEGEND in unescape(_section(html, "metrics")) and DISTANCE_LEGEND in unescape(_section(html, "problems"))
    assert "Negative: inside the band by that margin" in DISTANCE_LEGEND and "positive: outside" in DISTANCE_LEGEND
    loss = next(m for m in make_audit().metrics if m.name == "loss")
    assert loss.inside is True and loss.distance < 0  # the sign the legend states


def test_store_paths_show_relative_with_the_full_path_on_hover():
    audit = make_audit()
    record = dict(audit.record)
    record["data"] = {"train": {"kind": "snapshot", "uri": "/srv/repro/.repro/snapshots", "version": "blake3:" + "b" * 64}}
    record["code"] = {**record["code"], "repo_url": "file:///srv/repro/projects/churn"}
    html = _html(audit.model_copy(update={"record": record}))
    lineage = _section(html, "lineage")
    assert '<span class="path" title="/srv/repro/.repro/snapshots">…/snapshots</span>' in lineage
    assert '<span class="path" title="file:///srv/repro/projects/churn">…/churn</span>' in lineage
    assert re.findall(r">[^<]*/srv/repro", lineage) == []  # never as visible text
    assert str(short_uri("models:/churn/3 and s3://data/snapshots and https://git.example/a/b")) == (
        "models:/churn/3 and s3://data/snapshots and https://git.example/a/b")


def test_links_to_mlflow_are_shown_when_the_evidence_has_them_and_only_http():
    url = "http://127.0.0.1:5000/#/experiments/2/runs/0123abcd"
    html = _html(make_audit(), audit_run_url=url, mlflow_version_url="javascript:alert(1)")
    banner = html[: html.index("</header>")]
    assert f'<a class="link" href="{url}">MLflow audit run</a>' in banner
    assert 'href="javascript' not in html and "MLflow model version: <code>javascript:alert(1)</code>" in banner
    assert "MLflow audit run" not in _html(make_audit())


def test_the_running_page_header_is_a_css_string_that_cannot_end_the_style():
    assert str(css_string('a"b</style>')) == '"a\\000022b\\00003c\\00002fstyle\\00003e"'
    html = _html(make_audit(name='churn"</style><script>'))
    style = re.search(r"<style>@media print \{ @page \{ @top-left \{ content: (\"[^\"]*\"); \}", html)
    assert style and "<" not in style.group(1)
