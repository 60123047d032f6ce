"""Adoption in the nightly's order, the index, the coverage page and the report (pure: rows and rendered pages)."""

from __future__ import annotations

import datetime as dt

from auditor.adopt.assess import assessment
from auditor.adopt.rules import Dataset, Metadata
from auditor.report.index import coverage, render_index
from auditor.sampling import Budget, Candidate, choose

TONIGHT = "2026-12-02"
NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


def test_unassessed_plain_versions_come_behind_never_audited_ones():
    recorded = Candidate.from_tags("sdk", "1", [], {"repro.record_digest": "sha256:" + "a" * 64})
    plain = Candidate.from_tags("plain", "1", [], {})
    stale = Candidate.from_tags("old", "1", [], {"repro.record_digest": "x", "repro.audit.date": "2026-01-01",
                                                  "repro.audit.verdict": "REPRODUCED_BITWISE"})
    sample = choose([plain, stale, recorded], TONIGHT, Budget(max_models=3))
    assert [p.ref for p in sample.picks] == ["models:/sdk/1", "models:/plain/1", "models:/old/1"]
    assert sample.picks[1].reason.startswith("never assessed: registered without a run record")
    assert sample.picks[0].reason == "never audited"


def test_an_assessed_version_is_rechecked_on_the_slow_cadence_not_every_night():
    assessed = Candidate.from_tags("plain", "1", [], {"repro.audit.date": "2026-11-30",
                                                      "repro.audit.verdict": "LINEAGE_INSUFFICIENT"})
    sample = choose([assessed], TONIGHT, Budget(max_models=5, recheck_unreproducible_days=90))
    assert sample.picks == []
    assert "LINEAGE_INSUFFICIENT" in dict(sample.skipped)["models:/plain/1"]


def _entry(seq, model, version, verdict, audit_id, date="2026-12-01T10:00:00Z"):
    return {"seq": seq, "audit": {"model": model, "version": version, "audit_id": audit_id}, "verdict": verdict,
            "date": date, "report": {"key": f"{model}_{seq}.html"}}


def test_the_coverage_page_counts_an_assessment_as_adoption_never_as_an_audit():
    versions = [{"model": m, "version": "1", "aliases": [], "tag_audit_at": None, "retired": False} for m in ("a", "b", "c")]
    entries = [_entry(0, "a", "1", "LINEAGE_INSUFFICIENT", "adopt-2026-12-01"),
               _entry(1, "b", "1", "LINEAGE_INSUFFICIENT", "adopt-2026-11-01", date="2026-11-01T10:00:00Z"),
               _entry(2, "b", "1", "NOT_REPRODUCIBLE", "2026-11-20", date="2026-11-20T10:00:00Z")]
    rows = {r["model"]: r for r in coverage(versions, entries, now=NOW, overdue_days=30)}
    assert rows["a"]["status"] == "adoption" and rows["a"]["verdict"] == "LINEAGE_INSUFFICIENT"
    assert rows["b"]["status"] == "current" and rows["b"]["verdict"] == "NOT_REPRODUCIBLE"  # the audit, not the assessment
    assert rows["c"]["status"] == "never audited"
    # a registry tag from an assessment published elsewhere does not make the version audited
    tagged = [{"model": "d", "version": "1", "aliases": [], "tag_audit_at": "2026-12-01T00:00:00Z",
               "tag_verdict": "LINEAGE_INSUFFICIENT", "retired": False}]
    assert coverage(tagged, [], now=NOW, overdue_days=30)[0]["status"] == "adoption"


def test_the_index_marks_an_assessment_as_adoption():
    page = render_index([_entry(0, "a", "1", "LINEAGE_INSUFFICIENT", "adopt-2026-12-01"),
                         _entry(1, "b", "1", "REPRODUCED_BITWISE", "2026-12-01")])
    assert page.count("<td>adoption</td>") == 1 and page.count("<td>audit</td>") == 1
    assert "#6a1b9a" in page  # the assessment's colour, not a verdict's


def test_the_report_of_an_assessment_shows_each_class_and_fix_and_no_pass():
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.settings import Settings

    m = Metadata(name="m", version="1", run_id="r", run_found=True,
                 tags={"mlflow.source.git.commit": "a" * 40, "mlflow.source.name": "train.py"},
                 params={"random_state": "None"},
                 datasets=(Dataset(name="t", source_type="local", source={"uri": "/data/t.csv"}, digest="1a2b3c4d"),))
    result = assessment(m, date=TONIGHT, started_at="t", finished_at="t")
    html = render_report(build_evidence(result, settings=Settings()))
    assert "Adoption: lineage insufficient" in html and "lineage recovered from MLflow metadata" in html
    assert "named but mutable" in html and "/data/t.csv" in html and "random_state=42" in html
    assert "Reproduced" not in html
