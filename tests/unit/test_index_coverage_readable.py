"""The index's sparklines are readable and the coverage page never shows green "current" beside a red verdict
(issue 29, build 4). Pure: the pages rendered from hand-made ledger entries."""

from __future__ import annotations

import datetime as dt
import re

from auditor.report.index import coverage, render_coverage, render_index

NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


def _entry(seq, model, verdict, distance, date):
    return {"seq": seq, "audit": {"model": model, "version": "1", "audit_id": f"a-{seq}"}, "verdict": verdict, "date": date,
            "report": {"key": f"{model}_{seq}.html"}, "metrics": {"auc": {"distance": distance}}}


def test_each_audit_is_a_dot_with_its_distance_on_hover_and_the_inside_of_the_band_is_shaded():
    days = [f"2026-11-{d:02d}T02:00:00Z" for d in range(1, 6)]
    page = render_index([_entry(i, "churn", "REPRODUCED_WITHIN_TOLERANCE" if d < 0 else "OUT_OF_TOLERANCE", d, days[i])
                         for i, d in enumerate([-0.004, -0.002, -0.001, 0.003, -0.0005])])
    spark = page[page.index('aria-label="distance to band"'):]
    spark = spark[: spark.index("</svg>")]
    assert re.findall(r"<title>distance to band ([^<]+)</title>", spark) == ["-0.004", "-0.002", "-0.001", "+0.003", "-0.0005"]
    height = int(re.search(r'height="(\d+)"', page[page.index('aria-label="distance to band"') - 120:]).group(1))
    assert height >= 40  # tall enough to tell a dot inside the band from one outside
    assert spark.count('fill="#c62828"') == 1  # the one audit outside its band, in red


def test_the_coverage_count_of_current_versions_is_not_green_when_one_of_them_was_not_reproduced():
    versions = [{"model": m, "version": "1", "aliases": [], "tag_audit_at": None, "retired": False} for m in ("ok", "bad")]
    entries = [_entry(0, "ok", "REPRODUCED_BITWISE", -0.1, "2026-12-01T02:00:00Z"),
               _entry(1, "bad", "NOT_REPRODUCIBLE", 0.1, "2026-12-01T02:00:00Z")]
    rows = coverage(versions, entries, now=NOW, overdue_days=30)
    page = render_coverage(rows, overdue_days=30, as_of="now", registry="sqlite:///x")
    assert '<span class="pill current-not-reproduced">current: 2, of them not reproduced: 1</span>' in page
    bad_row = page[page.index('<td>bad</td>'):]
    bad_row = bad_row[: bad_row.index("</tr>")]
    assert 'class="pill current"' not in bad_row and "current-not-reproduced" in bad_row
    only_green = render_coverage([r for r in rows if r["model"] == "ok"], overdue_days=30, as_of="now", registry="r")
    assert '<span class="pill current">current: 1</span>' in only_green
