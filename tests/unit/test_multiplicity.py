"""Predictive multiplicity (issue 31, build point 3) checked against a hand count on a small case."""

from __future__ import annotations

import numpy as np
import pytest

from auditor.judge.multiplicity import measure, not_measured, pack, unpack

# 4 reruns (rows: columns) x 6 evaluation rows, decisions at the recorded threshold
DECISIONS = [
    [1, 0, 1, 1, 0, 0],
    [1, 0, 0, 1, 0, 1],
    [1, 1, 0, 1, 0, 0],
    [1, 0, 1, 1, 0, 0],
]
SEGMENTS = ["young", "young", "old", "old", "old", "young"]


def test_the_figure_matches_a_hand_count():
    m = measure(DECISIONS, threshold=0.5, segments=SEGMENTS)
    # by hand: row 0 all 1, row 1 one dissenter, row 2 split 2/2, row 3 all 1, row 4 all 0, row 5 one dissenter
    assert (m.rows, m.reruns, m.flipped) == (6, 4, 3)
    assert m.flip_share == pytest.approx(3 / 6)
    # pairs (6 of them): (0,1) rows 2,5 -> 2; (0,2) rows 1,2 -> 2; (0,3) 0; (1,2) rows 1,5 -> 2; (1,3) rows 2,5 -> 2; (2,3) rows 1,2 -> 2
    assert m.mean_pairwise == pytest.approx((2 + 2 + 0 + 2 + 2 + 2) / 6 / 6)
    assert m.discrepancy == pytest.approx(2 / 6)
    # most affected first: row 2 is a coin toss (2 of 4 dissent), then rows 1 and 5 (1 of 4)
    assert [(r.row, r.minority, r.majority) for r in m.most_affected] == [(2, 0.5, 2), (1, 0.25, 3), (5, 0.25, 3)]
    assert m.most_affected[0].segment == "old"
    # segments: young rows 0,1,5 -> 2 flipped of 3; old rows 2,3,4 -> 1 of 3; worst first
    assert [(s.segment, s.rows, s.flipped) for s in m.segments] == [("young", 3, 2), ("old", 3, 1)]
    assert "3 of 6 evaluation rows (50.0%)" in m.sentence and "4 equally good models" in m.sentence


def test_identical_reruns_flip_nothing_and_bad_input_is_refused():
    m = measure([[1, 0, 1]] * 3, threshold=0.5)
    assert (m.flipped, m.flip_share, m.discrepancy, m.most_affected) == (0, 0.0, 0.0, [])
    with pytest.raises(ValueError, match="at least 2 reruns"):
        measure([[1, 0, 1]])
    with pytest.raises(ValueError, match="different numbers of rows"):
        measure([[1, 0, 1], [1, 0]])
    with pytest.raises(ValueError, match="segment labels"):
        measure(DECISIONS, segments=["a"])


def test_multi_class_decisions_count_a_change_of_class():
    m = measure([[0, 2, 1], [0, 2, 2], [0, 1, 2]])
    assert m.flipped == 2 and [r.row for r in m.most_affected] == [1, 2]


def test_packed_decisions_round_trip_and_a_short_pack_is_refused():
    bits = np.random.default_rng(0).random(1001) < 0.3
    assert (unpack(pack(bits), 1001) == bits).all()
    assert len(pack(bits)) < 1001 / 4  # a bit a row, base64
    with pytest.raises(ValueError, match="not the 2000 rows"):
        unpack(pack(bits), 2000)


def test_not_measured_says_why():
    assert not_measured("the reruns left no scores", 5).sentence.startswith("Predictive multiplicity not measured: the reruns")


# -- from a stored calibration, and on the report --------------------------------------------------
def _calibration(decided, *, rows=6, threshold=0.5, sha="sha256:" + "ab" * 32, cost=None):
    from auditor.judge.floors import Calibration, FloorRun, SameSeedFloor

    runs = [FloorRun(seed=i, metrics={"auc": 0.9 + i / 100},
                     decisions=None if d is None else {"packed": pack(d), "rows": rows, "threshold": threshold, "data_sha256": sha})
            for i, d in enumerate(decided)]
    floor = SameSeedFloor(runs=[FloorRun(seed=7), FloorRun(seed=7)], bit_identical=True)
    return Calibration(calibrated_at="2026-12-02T00:00:00Z", same_seed=floor, seed_varied=runs, cost=cost or {})


def test_the_stored_calibration_gives_the_same_figure_and_survives_its_document():
    from auditor.judge.floors import calibration_from_json
    from auditor.judge.multiplicity import from_calibration

    calibration = calibration_from_json(_calibration(DECISIONS).to_json(), source="test")
    m = from_calibration(calibration)
    assert (m.status, m.flipped, m.rows, m.threshold) == ("measured", 3, 6, 0.5)
    assert from_calibration(None) is None


def test_reruns_without_scores_or_on_other_rows_are_not_measured_and_say_why():
    from auditor.judge.floors import FloorRun
    from auditor.judge.multiplicity import from_calibration

    none = from_calibration(_calibration([None] * 4))
    assert none.status == "not_measured" and "4 of 4 seed-varied reruns left no scores" in none.reason
    assert "eval_data=" in none.reason
    mixed = _calibration(DECISIONS)
    other = mixed.seed_varied[0].decisions | {"threshold": 0.7}
    mixed = mixed.model_copy(update={"seed_varied": [FloorRun(seed=9, decisions=other), *mixed.seed_varied[1:]]})
    assert from_calibration(mixed).status == "not_measured"
    # an old document (no decisions, no cost) serialises as it did: its stored tag still matches
    old = _calibration([None] * 2)
    assert '"decisions"' not in old.to_json() and '"cost"' not in old.to_json()


def test_every_calibrated_report_shows_the_figure_or_why_not_and_the_rerun_cost():
    from auditor.judge.multiplicity import from_calibration
    from auditor.report.view import noise
    from tests.fixtures.audits import make_audit

    cost = {"same_seed": 2, "seed_varied": 4, "reruns": 6, "wall_s": 12.5, "cpu_s": 9.25, "runner": "process",
            "calibrated_at": "2026-12-02T00:00:00Z", "reused_by": ["the lottery check"]}
    audit = make_audit().model_copy(update={"multiplicity": from_calibration(_calibration(DECISIONS)), "rerun_cost": cost})
    view = noise(audit)
    assert view["multiplicity"].flipped == 3
    assert "6 reruns (2 same-seed, 4 seed-varied)" in view["cost"] and "9.2 CPU s" in view["cost"]
    assert "never rerun" in view["cost"]
    assert noise(make_audit()) is None  # not calibrated: no section
    missing = audit.model_copy(update={"multiplicity": from_calibration(_calibration([None] * 4))})
    assert noise(missing)["multiplicity"].sentence.startswith("Predictive multiplicity not measured")
    again = type(audit).model_validate(audit.to_dict())
    assert again.multiplicity.flipped == 3 and again.rerun_cost["cpu_s"] == 9.25


def test_the_report_renders_the_multiplicity_section():
    from auditor.judge.multiplicity import from_calibration
    from auditor.report.evidence import build_evidence
    from auditor.report.render import render_report
    from auditor.settings import Settings
    from tests.fixtures.audits import make_audit

    audit = make_audit().model_copy(update={"multiplicity": from_calibration(_calibration(DECISIONS)), "rerun_cost": {
        "same_seed": 2, "seed_varied": 4, "reruns": 6, "wall_s": 12.5, "cpu_s": None, "runner": "docker"}})
    html = render_report(build_evidence(audit, settings=Settings()))
    section = html.split('<section id="multiplicity">', 1)[1].split("</section>", 1)[0]
    assert "3 of 6 evaluation rows (50.0%)" in section and "row 2" in section and "arXiv 1909.06677" in section
    assert "Rerun cost:" in section and "CPU seconds not measured" in section
    assert '<section id="multiplicity">' not in render_report(build_evidence(make_audit(), settings=Settings()))
