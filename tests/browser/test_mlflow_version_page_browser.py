"""The verdict where MLflow users look, as they see it (issue 40, acceptance 3): headless Chromium on MLflow's own UI.

``mlflow server`` on loopback (the session's, artifacts proxied to S3 on moto), a version audited through the
product's publish step (``world`` of tests/integration/test_mlflow_verdict_description.py). On the version's page the
description's first line is the verdict, its date and a "report" link (our markers render as nothing); following that
link shows the report in MLflow's artifact viewer; the audit run's page names the version in its description, with a
link to the version's page. With ``REPRO_SCREENSHOTS=<folder>`` the version page is saved there.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from pathlib import Path

import pytest

from auditor.tags import TAG_AUDIT_RUN
from tests.browser.test_mlflow_report_browser import _frame_text
from tests.fixtures.judged import floor, weight_diff
from tests.integration.test_mlflow_verdict_description import world  # noqa: F401 - the fixture, shared

# extended: tests/integration/test_mlflow_verdict_description.py checks the description, the link and the run in CI
pytestmark = [pytest.mark.browser, pytest.mark.extended]

DESCRIPTION = """(() => {
  const section = document.querySelector('[data-testid="note-editor-preview-content"]');  // the rendered description
  const report = section && [...section.querySelectorAll('a')].find(a => a.textContent.trim() === 'report');
  return report ? {text: section.innerText, href: report.href} : null;
})()"""


def _poll(page, expression: str, timeout: float = 300.0):
    """The first truthy value of ``expression`` in ``page`` (MLflow's app may take minutes to load on a busy host)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = page.evaluate(expression)
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{expression[:80]!r} stayed empty for {timeout:.0f}s on {page.report.url}")


def test_the_version_page_shows_the_verdict_first_and_its_report_link_opens_the_report(chromium, world):  # noqa: F811
    mv = world.audit("2026-03-02", diff=weight_diff(0.05), same_seed=floor())
    page = chromium.open("about:blank", settle_ms=0)
    try:
        url = f"{world.server}/#/models/{urllib.parse.quote(world.name, safe='')}/versions/{world.version}"
        page.report.url = url
        page.call("Page.navigate", {"url": url})
        found = _poll(page, DESCRIPTION)
        lines = [line.strip() for line in found["text"].splitlines() if line.strip()]
        assert lines[0].startswith("OUT_OF_TOLERANCE · 2026-03-02 · report · audit run"), found["text"][:300]
        assert "repro-audit" not in found["text"] and "<!--" not in found["text"]  # the markers show nothing
        assert "Champion candidate for the Q3 credit book." in found["text"]  # the user's text, below
        assert found["href"].startswith(f"{world.server}/#/experiments/") and "/artifacts/" in found["href"]
        folder = os.environ.get("REPRO_SCREENSHOTS")
        if folder:
            page.screenshot(Path(folder) / "version-page-verdict-in-mlflow.png")
        page.report.url = found["href"]
        page.call("Page.navigate", {"url": found["href"]})  # the link, as a click on it opens it
        report = _frame_text(chromium, page)
        assert report.splitlines()[0].strip().startswith("Out of tolerance") and "What went wrong" in report

        run_url = found["href"].split("/artifacts/", 1)[0]
        page.report.url = run_url
        page.call("Page.navigate", {"url": run_url})
        version_link = f"#/models/{urllib.parse.quote(world.name, safe='')}/versions/{world.version}"
        names = _poll(page, f"""[...document.querySelectorAll('a')].some(a => a.getAttribute('href') === '{version_link}')
                               && document.body.innerText.includes('Audit of models:/{world.name}/{world.version}')""")
        assert names and mv.tags[TAG_AUDIT_RUN] in run_url
    finally:
        page.close()
