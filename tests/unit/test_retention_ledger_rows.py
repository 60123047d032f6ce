"""Retention lists registered and audited versions only: a calibration's ledger entry is no audited version (issue 39,
point 6; seen on the demo as a phantom ``models:/None/None … lost`` row that turned a clean registry red)."""

from __future__ import annotations

from auditor.report import ledger
from auditor.report.calibrations import KIND
from auditor.settings import Settings
from auditor.steps import Session
from auditor.storage import open_store


def test_a_calibration_entry_in_the_ledger_makes_no_row(tmp_path):
    reports = tmp_path / "reports"
    store = open_store(str(reports))
    ledger.append(store, {"kind": KIND, "calibration": {"model": "m", "version": "1", "sha256": "sha256:" + "0" * 64,
                                                         "calibrated_at": "2026-12-04T00:00:00Z"},
                          "date": "2026-12-04T00:00:00Z"}, identity="m_v1_calibration")
    settings = Settings.from_env({"MLFLOW_TRACKING_URI": "memory://empty", "REPRO_HOME": str(tmp_path / "home"),
                                  "REPRO_REPORTS": str(reports)})
    checked = Session(settings).retention()
    assert [r["ref"] for r in checked["versions"]] == [], checked["versions"]
