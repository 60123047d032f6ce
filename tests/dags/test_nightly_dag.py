"""repro_nightly_audit end to end: ``dag.test()`` over a registry seeded with the reference model.

Real parts throughout: Airflow 3 on SQLite (in a child process, see conftest),
MLflow on SQLite, the reference model trained and rebuilt with torch, reports
on the local store. The registry comes from ``seeded_registry`` in
``tests/fixtures/reference.py``: every demo variant of the reference model,
one of them (``flaky``) trained normally but made to fail mid-rebuild
(``rebuild_fail_at_epoch``), and this test's own reports folder and home.
Another (``plain``) has a folder planted where its report goes, so its task
fails outright and the ``all_done`` publish must still list it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

DATE = "2026-06-21"  # this module's own logical date: audit tags land in the session-wide registry
FAILING = "flaky"  # the seeded variant whose rebuild raises at an epoch: a verdict of ERROR, the task retried and failed
BROKEN = "plain"  # its report cannot be published (see _block_publishing): the task itself fails

# Runs the nightly DAG PROBE_TIMES times for one logical date, the way a rerun
# (or a scheduler restart) would, and reports each run's task states and XComs.
NIGHTLY = r"""
import json, os
import pendulum
from airflow.dag_processing.dagbag import DagBag
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
from sqlalchemy import select

bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
if bag.import_errors:
    raise SystemExit(f"DAG import errors: {bag.import_errors}")
dag = bag.get_dag("repro_nightly_audit")
runs = []
for _ in range(int(os.environ["PROBE_TIMES"])):
    run = dag.test(logical_date=pendulum.parse(os.environ["PROBE_DATE"]))
    with create_session() as session:
        rows = session.scalars(
            select(XComModel).where(XComModel.dag_id == dag.dag_id, XComModel.run_id == run.run_id)
        ).all()
        xcom = {f"{x.task_id}[{x.map_index}].{x.key}": XComModel.deserialize_value(x) for x in rows}
    tasks = {f"{ti.task_id}[{ti.map_index}]": str(ti.state) for ti in run.get_task_instances()}
    tries = {f"{ti.task_id}[{ti.map_index}]": ti.try_number for ti in run.get_task_instances()}
    # verdict instances by the model ref they are named by (one per audit that pushed a row)
    tasks.update({f"verdict[{ti.rendered_map_index}]": str(ti.state) for ti in run.get_task_instances() if ti.task_id == "verdict"})
    tries.update({f"verdict[{ti.rendered_map_index}]": ti.try_number for ti in run.get_task_instances() if ti.task_id == "verdict"})
    runs.append({"state": str(run.state), "tasks": tasks, "tries": tries, "xcom": xcom})
json.dump(runs, open(os.environ["PROBE_OUT"], "w"))
"""

# Rewritten on every publish by design; everything else in the reports store is written once.
REFRESHED = {"index.html", "ledger.jsonl"}


def _published_files(reports: Path) -> dict[str, str]:
    """Every write-once file in the reports store, with its sha256."""
    return {
        p.relative_to(reports).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(reports.rglob("*"))
        if p.is_file() and p.name not in REFRESHED and p.relative_to(reports).parts[0] != "summaries"
    }


def _block_publishing(reports: Path, ref: str) -> None:
    """Put a folder where ``ref``'s evidence for DATE goes: publishing it fails (real storage, no mock)."""
    from auditor.report.evidence import report_stem

    name, version = ref.removeprefix("models:/").rsplit("/", 1)
    (reports / f"{report_stem(name, version, DATE)}.json").mkdir(parents=True)


def _name(report: str | None) -> str | None:
    """A report's file name, whether the step returned its key or its full URI."""
    return report.rsplit("/", 1)[-1] if report else None


def _run_nightly(seeded, airflow_db, run_in_airflow, tmp_path: Path, times: int) -> list[dict[str, Any]]:
    env = {**airflow_db, **seeded.env, "PROBE_DATE": DATE, "PROBE_TIMES": str(times)}
    return run_in_airflow(NIGHTLY, env, cwd=tmp_path, timeout=1800)  # the ERROR version is rebuilt on each of its 3 tries


def test_the_nightly_dag_reports_every_sampled_model_once_per_date_and_lists_every_failure_as_an_error(
    seeded_registry, airflow_db, run_in_airflow, tmp_path
):
    seeded = seeded_registry  # auditor.demo.Seeded: .env points at it (budget: every version), .versions by variant
    reports = Path(seeded.env["REPRO_REPORTS"])
    failing, broken = seeded.versions[FAILING], seeded.versions[BROKEN]
    _block_publishing(reports, broken)
    first, second = _run_nightly(seeded, airflow_db, run_in_airflow, tmp_path, times=2)

    # First night: the sample holds every version and the summary lists each, in the sample's order.
    picks = [p["ref"] for p in first["xcom"]["sample[-1].sample"]["picks"]]
    assert sorted(picks) == sorted(seeded.versions.values())
    summary = first["xcom"]["publish[-1].return_value"]
    assert [row["ref"] for row in summary["audits"]] == picks
    rows = {row["ref"]: row for row in summary["audits"]}

    # The grid shows each verdict: every published audit is green and its verdict task is the verdict: green
    # when reproduced, failed on its first try otherwise (no retry changes it); an ERROR audit was retried
    # and published on its last try; the audit that could not publish failed after its retries, its verdict
    # never ran. The run and the others went on.
    broken_task = f"audit[{picks.index(broken)}]"
    assert first["tasks"].pop(broken_task).endswith("failed")
    assert first["tries"][broken_task] == 3
    assert f"verdict[{broken}]" not in first["tasks"]  # it pushed no row to judge
    assert len([t for t in first["tasks"] if t.startswith("verdict[models:/")]) == len(picks) - 1
    for i, ref in enumerate(picks):
        if ref == broken:
            continue
        verdict, task, judged = rows[ref]["verdict"], f"audit[{i}]", f"verdict[{ref}]"
        reproduced = verdict.startswith("REPRODUCED")
        assert first["tasks"][task].endswith("success"), (ref, verdict, first["tasks"][task])
        assert first["tries"][task] == (3 if verdict == "ERROR" else 1), (ref, verdict, first["tries"][task])
        assert first["tasks"][judged].endswith("success" if reproduced else "failed"), (ref, verdict, first["tasks"][judged])
        assert first["tries"][judged] == 1, (ref, verdict, first["tries"][judged])
    # publish wrote the summary, then ended the run failed: a model did not reproduce (DAG-level alerting sees it)
    assert first["tasks"]["sample[-1]"].endswith("success") and first["tasks"]["publish[-1]"].endswith("failed")
    assert first["tries"]["publish[-1]"] == 1  # AirflowFailException: no retry
    assert first["state"].endswith("failed")

    # A rebuild that fails mid-training is an ERROR verdict with the cause; a failed task is an ERROR too.
    assert rows[failing]["verdict"] == "ERROR"
    assert "rebuild_fail_at_epoch" in (rows[failing]["error"] or "")
    assert rows[broken]["verdict"] == "ERROR" and rows[broken]["report"] is None
    assert "task failed" in rows[broken]["error"]
    for key, ref in seeded.versions.items():
        if ref == broken:
            continue
        if ref != failing:
            assert rows[ref]["verdict"] not in (None, "ERROR"), f"{key}: {rows[ref]}"
        assert rows[ref]["report"], f"{key} has no report"
        assert (reports / _name(rows[ref]["report"])).is_file(), f"{key}: {rows[ref]['report']} missing"

    # An index linking every report, the night's summary, one ledger entry per published report.
    index = (reports / "index.html").read_text(encoding="utf-8")
    for ref, row in rows.items():
        if ref != broken:
            assert _name(row["report"]) in index
    assert (reports / "summaries" / f"{DATE}.json").is_file()
    published = _published_files(reports)
    assert len([k for k in published if k.startswith("ledger/entries/")]) == len(picks) - 1

    # The same logical date again: the same sample, every published audit skipped, not one byte rewritten.
    assert second["state"].endswith("failed"), second["tasks"]  # the same red verdicts, from the stored evidence
    again = second["xcom"]["sample[-1].sample"]["picks"]
    assert [p["ref"] for p in again] == picks
    assert all(p["already_audited"] == (p["ref"] != broken) for p in again), again
    rerun = {row["ref"]: row for row in second["xcom"]["publish[-1].return_value"]["audits"]}
    assert all(row["skipped"] for ref, row in rerun.items() if ref != broken), rerun
    assert rerun[broken]["verdict"] == "ERROR"
    assert _published_files(reports) == published
    # The rerun's summary still says what the night found: the same verdict and report per model.
    assert {ref: (row["verdict"], _name(row["report"])) for ref, row in rerun.items()} == {
        ref: (row["verdict"], _name(row["report"])) for ref, row in rows.items()
    }
