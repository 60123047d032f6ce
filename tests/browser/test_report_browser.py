"""Reports and the index open in headless Chromium from file://, cleanly, and show planted markup as text."""

from __future__ import annotations

import pytest

from auditor.judge.result import Verdict
from auditor.report.publish import publish
from auditor.settings import Settings
from tests.fixtures.audits import XSS_ALL, XSS_SCRIPT, make_audit, xss_audit

pytestmark = pytest.mark.browser

# Anything a planted string could have become if it were parsed as markup.
PLANTED = """(() => ({
  ran: window.__xss === undefined ? null : window.__xss,
  scripts: Array.from(document.scripts).filter(s => s.textContent.includes('__xss')).length,
  handlers: Array.from(document.querySelectorAll('*')).filter(el =>
      Array.from(el.attributes).some(a => a.name.startsWith('on'))).length,
  jsUrls: Array.from(document.querySelectorAll('[href],[src]')).filter(el =>
      /^\\s*javascript:/i.test(el.getAttribute('href') || el.getAttribute('src') || '')).length,
  planted: Array.from(document.querySelectorAll('img,a')).filter(el =>
      (el.getAttribute('src') === 'x') || (el.textContent === 'click')).length,
}))()"""


@pytest.fixture()
def published(tmp_path):
    """A reports folder with a passing audit, a failing one and one carrying XSS vectors everywhere."""
    settings = Settings(responsible_person="Dana Risk <dana@example.com>")
    reports = tmp_path / "reports"
    ok = publish(make_audit(audit_id="ok-1"), str(reports), settings=settings)
    bad = publish(make_audit(Verdict.NOT_REPRODUCIBLE, audit_id="nr-1"), str(reports), settings=settings)
    xss = publish(xss_audit(), str(reports), settings=settings)
    return reports, ok, bad, xss


def test_a_report_and_the_index_open_from_file_urls_without_console_errors(chromium, published, tmp_path):
    reports, ok, bad, _ = published
    for name, key in (("report", ok.report_key), ("not-reproducible", bad.report_key), ("index", "index.html")):
        page = chromium.open((reports / key).as_uri())
        try:
            assert page.report.errors == [], f"{name}: {page.report.errors}"
            assert page.evaluate("document.readyState") == "complete"
            shot = page.screenshot(tmp_path / f"{name}.png")
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        finally:
            page.close()


def test_the_index_script_filters_and_sorts_the_audit_table(chromium, published):
    reports, *_ = published
    page = chromium.open((reports / "index.html").as_uri())
    try:
        assert page.evaluate("document.querySelectorAll('#audits tbody tr').length") == 3
        page.evaluate("(() => { const f = document.getElementById('verdict-filter');"
                      " f.value = 'NOT_REPRODUCIBLE'; f.dispatchEvent(new Event('change')); })()")
        visible = page.evaluate("Array.from(document.querySelectorAll('#audits tbody tr')).filter(r => !r.hidden)"
                                ".map(r => r.dataset.verdict)")
        assert visible == ["NOT_REPRODUCIBLE"]
        page.evaluate("document.querySelector('#audits th:nth-child(5)').click()")
        order = page.evaluate("Array.from(document.querySelectorAll('#audits tbody tr td:nth-child(5)'))"
                              ".map(td => td.textContent)")
        assert order == sorted(order)
        assert chromium.collect(page).errors == []
    finally:
        page.close()


def test_markup_planted_in_every_field_is_shown_as_text_and_never_runs(chromium, published):
    reports, _, _, xss = published
    for key in (xss.report_key, "index.html"):
        page = chromium.open((reports / key).as_uri())
        try:
            assert page.report.errors == [], f"{key}: {page.report.errors}"
            # No element, handler or javascript: link came out of the data (so there is nothing left to click).
            assert page.evaluate(PLANTED) == {"ran": None, "scripts": 0, "handlers": 0, "jsUrls": 0, "planted": 0}
            text = page.evaluate("document.body.innerText")
            assert XSS_SCRIPT in text, f"{key}: the planted <script> is not shown as text"
            if key != "index.html":
                # model name, tag, metric name, config value and exception text each show the whole vector
                assert text.count(XSS_ALL) >= 4, f"{key}: planted markup was altered or dropped"
        finally:
            page.close()
