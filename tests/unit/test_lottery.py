"""The seed lottery (issue 31, build point 1): the registered run placed among its seed-varied reruns."""

from __future__ import annotations

import pytest

from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor
from auditor.judge.lottery import lottery_findings, min_reruns, place, seed_lottery
from auditor.judge.result import AuditResult, Band, ModelInfo, Verdict

RERUNS = [0.880 + 0.001 * i for i in range(19)]  # 0.880 … 0.898


def test_a_registered_value_that_beats_all_19_reruns_is_flagged():
    entry = place("auc", 0.91, RERUNS, "higher")
    assert entry.rank == 1 and entry.better_reruns == 0
    assert entry.p_value == pytest.approx(1 / 20)
    assert entry.status == "lottery"
    assert "picked for its result" in entry.sentence


def test_one_in_the_middle_is_not():
    entry = place("auc", 0.8895, RERUNS, "higher")
    assert entry.rank == 10 and entry.p_value == pytest.approx(10 / 20)
    assert entry.status == "consistent"


def test_four_reruns_are_too_few_to_test_at_005_said_plainly():
    entry = place("auc", 0.99, RERUNS[:4], "higher")
    assert entry.status == "too_few"
    assert "too few to test at 0.05" in entry.sentence
    assert entry.min_reruns == 19


def test_lower_is_better_and_ties_count_against_the_registered_run():
    losses = [0.30 + 0.01 * i for i in range(19)]
    assert place("loss", 0.29, losses, "lower").status == "lottery"
    assert place("loss", 0.49, losses, "lower").rank == 20
    tied = place("loss", 0.30, losses, "lower")  # equal to the best rerun: not below all of them
    assert tied.ties == 1 and tied.p_value == pytest.approx(2 / 20) and tied.status == "consistent"


def test_no_direction_is_placed_but_not_tested():
    entry = place("calibration_slope", 5.0, RERUNS, "none")
    assert entry.status == "no_direction" and entry.rank == 1


def test_the_levels_rerun_counts():
    assert min_reruns(0.05) == 19
    assert min_reruns(0.1) == 9
    assert min_reruns(0.01) == 99


def _calibration(values):
    floor = SameSeedFloor(runs=[FloorRun(seed=1), FloorRun(seed=1)], bit_identical=True)
    return Calibration(calibrated_at="2026-12-01T00:00:00Z", same_seed=floor,
                       seed_varied=[FloorRun(seed=i, metrics={"auc": v, "loss": 1 - v}) for i, v in enumerate(values)])


def test_a_calibration_gives_one_entry_per_metric_and_findings():
    band = Band(metric="loss", lower=0.0, upper=1.0, direction="lower")
    lottery = seed_lottery(_calibration(RERUNS), {"auc": 0.95, "loss": 0.05}, {"loss": band})
    assert [m.metric for m in lottery.metrics] == ["auc", "loss"]
    assert [m.status for m in lottery.metrics] == ["lottery", "lottery"]
    codes = [f.code for f in lottery_findings(lottery)]
    assert codes == ["seeds.lottery_winner", "seeds.lottery_winner"]
    few = seed_lottery(_calibration(RERUNS[:4]), {"auc": 0.95})
    assert [f.code for f in lottery_findings(few)] == ["seeds.lottery_untested"]
    assert "too few to test at 0.05" in lottery_findings(few)[0].message
    assert seed_lottery(None, {"auc": 0.9}) is None


def test_the_evidence_keeps_its_old_shape_without_a_lottery_and_round_trips_with_one():
    base = AuditResult(audit_id="a", model=ModelInfo(name="m", version="1"), verdict=Verdict.REPRODUCED_BITWISE)
    assert "lottery" not in base.to_dict()
    withit = base.model_copy(update={"lottery": seed_lottery(_calibration(RERUNS), {"auc": 0.95})})
    again = AuditResult.model_validate(withit.to_dict())
    assert again.lottery.metrics[0].status == "lottery"


def test_the_report_shows_the_registered_value_on_the_rerun_distribution_and_says_what_it_means():
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.settings import Settings
    from tests.fixtures.audits import make_audit

    audit = make_audit().model_copy(update={"lottery": seed_lottery(_calibration(RERUNS), {"auc": 0.95, "loss": 0.5})})
    html = render_report(build_evidence(audit, settings=Settings()))
    section = html.split('<section id="lottery">', 1)[1].split("</section>", 1)[0]
    assert section.count('class="lottery-strip"') == 2 and section.count("<circle") == 2 * 19
    assert "seed likely picked" in section and "an ordinary seed" in section
    assert "a retrain with another seed should be expected to give about" in section
    assert '<section id="lottery">' not in render_report(build_evidence(make_audit(), settings=Settings()))
