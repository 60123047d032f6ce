"""Reports render for every verdict, failures first, from a sealed JSON evidence document."""

from __future__ import annotations

import base64
import hashlib
import re
from html import unescape

import pytest

from auditor.errors import Findings
from auditor.judge.result import AuditResult, ModelInfo, Verdict
from auditor.report.evidence import build_evidence, evidence_bytes, load_evidence, report_stem
from auditor.report.index import render_index
from auditor.report.render import render_report
from auditor.settings import Settings
from tests.fixtures.audits import XSS_SCRIPT, make_audit, xss_audit

SETTINGS = Settings(responsible_person="Dana Risk")


def html_for(audit) -> str:
    return render_report(build_evidence(audit, settings=SETTINGS))


def main_sections(html: str) -> list[str]:
    """The ids of the report's sections, in document order."""
    return re.findall(r'<section[^>]*\sid="([a-z]+)"', html)


@pytest.mark.parametrize("verdict", list(Verdict))
def test_every_verdict_renders_a_complete_report(verdict):
    html = html_for(make_audit(verdict))
    assert html.startswith("<!DOCTYPE html>")
    for section in ("tiers", "lineage", "metrics", "drift", "weights", "timings", "log", "evidence", "supports"):
        assert f'id="{section}"' in html, section
    assert "Dana Risk" in html
    assert "SR 26-2" in html and "Annex IV §2(g)" in html


@pytest.mark.parametrize("verdict", list(Verdict))
def test_a_bare_audit_result_with_no_record_renders(verdict):
    bare = AuditResult(audit_id="bare", model=ModelInfo(name="m", version="1"), verdict=verdict)
    html = html_for(bare)
    assert "No metric was compared." in html and "No weights were compared." in html
    assert html.count('class="pill missing"') == 6  # five inputs and the infrastructure, none recorded


def test_a_not_reproducible_report_opens_with_the_missing_inputs_and_their_fixes():
    audit = make_audit(Verdict.NOT_REPRODUCIBLE)
    html = html_for(audit)
    assert main_sections(html)[0] == "problems"
    banner_end = html.index("</header>")
    assert "Not reproducible: 2 input(s) missing or mutable" in html[:banner_end]
    problems = html[html.index('id="problems"') : html.index('id="tiers"')]
    for finding in audit.findings:
        assert finding.path in problems and finding.message in problems and finding.hint in problems
    lineage = html[html.index('id="lineage"') : html.index('id="metrics"')]
    assert re.search(r"code</td><td[^>]*><span class=\"pill missing\">", lineage)
    assert re.search(r"data</td><td[^>]*><span class=\"pill mutable\">", lineage)


def test_an_error_report_opens_with_the_failure_and_the_end_of_the_log():
    audit = make_audit(Verdict.ERROR, error="RebuildFailed: train.py exited with status 1: CUDA out of memory")
    html = html_for(audit)
    assert main_sections(html)[0] == "problems"
    problems = html[html.index('id="problems"') : html.index('id="tiers"')]
    assert "epoch 3 loss 0.31" in problems
    assert "CUDA out of memory" in html[: html.index("</header>")]
    assert html.count("CUDA out of memory") == 1  # each error text once (issue 16): the banner says it


def test_an_out_of_tolerance_report_opens_with_the_metric_that_left_its_band():
    html = html_for(make_audit(Verdict.OUT_OF_TOLERANCE, metric_name="auc"))
    problems = html[html.index('id="problems"') : html.index('id="tiers"')]
    assert "1 metric outside the band" in problems  # the headline names the tier that failed (issue 29)
    assert "<td>auc</td>" in problems and "loss" not in problems


def test_a_reproduced_report_has_no_problem_box_and_one_plot_per_metric():
    html = html_for(make_audit(Verdict.REPRODUCED_BITWISE))
    assert 'id="problems"' not in html
    metrics = html[html.index('id="metrics"') : html.index('id="drift"')]
    assert metrics.count("<svg") == 2
    # Inline SVGs share one document: their ids must not collide.
    ids = re.findall(r'\sid="([^"]+)"', metrics)
    assert len(ids) == len(set(ids))


def test_the_report_is_self_contained():
    html = html_for(make_audit())
    assert not re.search(r"<(link|script|img|iframe)\b", html)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(http" not in html


def test_planted_markup_is_escaped_everywhere_it_appears():
    html = html_for(xss_audit())
    assert "<script>window" not in html and "<img src=x" not in html and '<a href="javascript' not in html
    assert html.count("&lt;script&gt;window.__xss") >= 5


def test_the_same_evidence_renders_the_same_bytes():
    doc = build_evidence(make_audit(Verdict.OUT_OF_TOLERANCE), settings=SETTINGS)
    assert render_report(doc) == render_report(load_evidence(evidence_bytes(doc)))


def test_the_html_carries_the_digest_of_the_json_it_was_rendered_from():
    doc = build_evidence(make_audit(), settings=SETTINGS)
    html = render_report(doc)
    assert f'<meta name="repro-evidence-digest" content="{doc["evidence_digest"]}">' in html


def test_evidence_edited_after_sealing_is_refused():
    doc = build_evidence(make_audit(), settings=SETTINGS)
    edited = evidence_bytes(doc).replace(b"REPRODUCED_WITHIN_TOLERANCE", b"REPRODUCED_BITWISE", 1)
    with pytest.raises(Findings, match="evidence_digest does not match"):
        load_evidence(edited)


def test_secrets_in_logs_and_errors_are_masked_in_the_evidence():
    audit = make_audit(Verdict.ERROR, error="boto failed for https://user:hunter2@minio.local/bucket")
    audit = audit.model_copy(update={"log_tail": "AWS_SECRET_ACCESS_KEY=abc123 key AKIAABCDEFGHIJKLMNOP\n"})
    text = evidence_bytes(build_evidence(audit, settings=SETTINGS)).decode()
    assert "hunter2" not in text and "abc123" not in text and "AKIAABCDEFGHIJKLMNOP" not in text


def test_nan_metrics_are_kept_as_text():
    audit = make_audit(auc=float("nan"))
    doc = load_evidence(evidence_bytes(build_evidence(audit, settings=SETTINGS)))
    assert doc["audit"]["metrics"][0]["rebuilt"][0] == "nan"
    assert "nan" in render_report(doc)


def test_report_names_are_safe_and_distinct_per_model_version_and_audit():
    assert report_stem("a/b", "1", "x") != report_stem("a-b", "1", "x")
    stem = report_stem(f"churn{XSS_SCRIPT}", "3", "../../etc")
    assert re.fullmatch(r"[A-Za-z0-9_-]+", stem)


def test_the_index_allows_exactly_its_own_script():
    from auditor.report.publish import entry_fields

    entries = []
    for i in range(3):
        doc = build_evidence(make_audit(audit_id=f"a{i}"), settings=SETTINGS)
        fields = entry_fields(doc, f"s{i}", b"{}", b"<html>")
        entries.append({**fields, "seq": i, "hash": f"h{i}"})
    html = render_index(entries)
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    expected = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert f"script-src 'sha256-{expected}';" in unescape(csp)
    assert html.count('<tr data-verdict="') == 3


def test_the_index_links_only_to_report_files_the_publisher_names():
    doc = build_evidence(xss_audit(), settings=SETTINGS)
    from auditor.report.publish import entry_fields

    fields = entry_fields(doc, "stem", b"{}", b"<html>")
    fields["report"]["key"] = "javascript:alert(1)//.html"
    html = render_index([{**fields, "seq": 0, "hash": "h"}])
    assert "<a href=" not in html
    assert "javascript:alert" not in html
