"""The nightly sampler: budget, priorities, and a draw seeded by the logical date."""

import pytest

from auditor.errors import BadInput
from auditor.sampling import Budget, Candidate, choose


def _fleet(n=40):
    return [Candidate(name=f"m{i:02d}", version="1", last_audit_date="2026-11-20", cost_hours=0.5) for i in range(n)]


def test_the_budget_is_never_exceeded_in_count_or_hours():
    fleet = _fleet() + [Candidate(name="big", version="1", aliases=("champion",), cost_hours=3.0)]
    for max_models, max_hours in [(5, 4.0), (3, 10.0), (50, 2.0), (0, 4.0)]:
        sample = choose(fleet, "2026-11-29", Budget(max_models=max_models, max_hours=max_hours))
        assert len(sample.picks) <= max_models
        assert sample.hours <= max_hours


def test_production_aliases_and_tier_1_come_first_then_never_audited_then_stale():
    fleet = _fleet(10) + [
        Candidate(name="never", version="2"),
        Candidate(name="stale", version="1", last_audit_date="2026-01-01"),
        Candidate(name="tier1", version="4", tier=1, last_audit_date="2026-11-28"),
        Candidate(name="served", version="7", aliases=("champion",), last_audit_date="2026-11-28"),
    ]
    sample = choose(fleet, "2026-11-29", Budget(max_models=4, max_hours=10))
    assert [p.ref for p in sample.picks] == ["models:/tier1/4", "models:/served/7", "models:/never/2", "models:/stale/1"]
    assert sample.picks[1].reason == "serving under alias 'champion'"
    assert sample.picks[0].reason == "materiality tier 1"


def test_the_draw_is_the_same_for_the_same_date_and_differs_across_dates():
    fleet = _fleet()
    first = [p.ref for p in choose(fleet, "2026-11-29").picks]
    again = [p.ref for p in choose(list(reversed(fleet)), "2026-11-29").picks]
    other = [p.ref for p in choose(fleet, "2026-11-30").picks]
    assert first == again
    assert first != other
    assert all(p.reason == "random draw for 2026-11-29" for p in choose(fleet, "2026-11-29").picks)


def test_a_rerun_for_the_same_date_picks_the_same_models_and_flags_the_ones_already_audited():
    fleet = _fleet(8) + [Candidate(name="never", version="1")]
    first = choose(fleet, "2026-11-29", Budget(max_models=3))
    audited = {p.ref for p in first.picks}
    after = [
        Candidate(name=c.name, version=c.version, last_audit_date="2026-11-29", previous_audit_date=c.last_audit_date, cost_hours=c.cost_hours)
        if c.ref in audited else c
        for c in fleet
    ]
    second = choose(after, "2026-11-29", Budget(max_models=3))
    assert [p.ref for p in second.picks] == [p.ref for p in first.picks]
    assert all(p.already_audited for p in second.picks)


def test_a_candidate_that_does_not_fit_is_skipped_with_the_reason_and_a_cheaper_one_still_fits():
    fleet = [Candidate(name="a", version="1", cost_hours=3.0), Candidate(name="b", version="1", cost_hours=2.0), Candidate(name="c", version="1", cost_hours=1.0)]
    sample = choose(fleet, "2026-11-29", Budget(max_models=5, max_hours=4.0))
    assert [p.ref for p in sample.picks] == ["models:/a/1", "models:/c/1"]
    assert sample.skipped == [("models:/b/1", "needs 2 h, 1 h of budget left")]


def test_tags_are_read_defensively():
    c = Candidate.from_tags("m", "3", ["champion"], {"repro.tier": "x", "repro.cost_hours": "-4", "repro.audit.date": "2026-11-01"})
    assert (c.tier, c.cost_hours, c.last_audit_date) == (None, 0.0, "2026-11-01")


def test_a_malformed_date_is_refused():
    with pytest.raises(BadInput, match="29/11/2026"):
        choose(_fleet(2), "29/11/2026")


def test_versions_not_reproduced_last_time_come_right_after_the_production_aliases():
    fleet = _fleet(10) + [
        Candidate(name="served", version="7", aliases=("champion",), last_audit_date="2026-11-28", last_verdict="REPRODUCED_BITWISE"),
        Candidate(name="broke", version="3", last_audit_date="2026-11-20", last_verdict="NOT_REPRODUCIBLE"),
        Candidate(name="drifted", version="1", last_audit_date="2026-11-10", last_verdict="OUT_OF_TOLERANCE"),
        Candidate(name="erred", version="2", last_audit_date="2026-11-25", last_verdict="ERROR"),
        Candidate(name="fine", version="1", last_audit_date="2026-11-27", last_verdict="REPRODUCED_WITHIN_TOLERANCE"),
    ]
    sample = choose(fleet, "2026-11-29", Budget(max_models=4, max_hours=10))
    # serving first; then not reproduced (stalest first); a reproduced one is not moved up; a known-unreproducible
    # one (NOT_REPRODUCIBLE nine days ago) waits for its slower re-assessment
    assert [p.ref for p in sample.picks][:3] == ["models:/served/7", "models:/drifted/1", "models:/erred/2"]
    assert sample.picks[1].reason == "not reproduced last time (OUT_OF_TOLERANCE on 2026-11-10)"
    assert "models:/broke/3" not in [p.ref for p in sample.picks]
    assert ("models:/broke/3", "known unreproducible (NOT_REPRODUCIBLE on 2026-11-20): next re-assessment 2027-02-19") in sample.skipped


def test_tonights_own_verdict_does_not_reorder_a_rerun_of_the_same_date():
    fleet = _fleet(10) + [Candidate(name="tonight", version="1", last_audit_date="2026-11-29", last_verdict="NOT_REPRODUCIBLE")]
    first = choose(fleet, "2026-11-29", Budget(max_models=3, max_hours=10))
    assert not any(p.reason.startswith("not reproduced") for p in first.picks)


def test_the_last_verdict_is_read_from_its_tag():
    c = Candidate.from_tags("m", "3", [], {"repro.audit.verdict": "NOT_REPRODUCIBLE", "repro.audit.date": "2026-11-01"})
    assert c.last_verdict == "NOT_REPRODUCIBLE"


def test_the_production_aliases_are_a_setting():
    from auditor.settings import Settings

    settings = Settings.from_env({"REPRO_PRODUCTION_ALIASES": " Blue, green ,,"})
    assert settings.production_aliases == ("blue", "green")
    assert "champion" in Settings.from_env({}).production_aliases  # the default is today's list
    fleet = _fleet(10) + [Candidate(name="b", version="1", aliases=("BLUE",), last_audit_date="2026-11-28"),
                          Candidate(name="c", version="1", aliases=("champion",), last_audit_date="2026-11-28")]
    sample = choose(fleet, "2026-11-29", Budget(max_models=1, max_hours=10, production_aliases=settings.production_aliases))
    assert [p.ref for p in sample.picks] == ["models:/b/1"] and sample.picks[0].reason == "serving under alias 'blue'"
