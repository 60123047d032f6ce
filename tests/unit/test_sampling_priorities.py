"""Production aliases are always audited; known-unreproducible versions wait; retired ones never run (issue 29, point 3)."""

from __future__ import annotations

from auditor.sampling import Budget, Candidate, choose
from auditor.settings import Settings

TONIGHT = "2026-11-29"


def _never_reproducible(n: int = 6, audited: str = "2026-11-28") -> list[Candidate]:
    """Versions that can never reproduce (plain registrations, a lost input): NOT_REPRODUCIBLE each night they ran."""
    return [Candidate(name=f"plain-{i}", version="1", last_audit_date=audited, last_verdict="NOT_REPRODUCIBLE") for i in range(n)]


def test_six_never_reproducible_versions_do_not_push_out_a_champion_last_audited_62_days_ago():
    champion = Candidate(name="churn", version="4", aliases=("champion",), last_audit_date="2026-09-28", last_verdict="REPRODUCED_BITWISE")
    for audited in ("2026-11-28", "2026-01-01"):  # known recently, and due for their slow re-assessment
        for fleet in ([*_never_reproducible(audited=audited), champion], [champion, *_never_reproducible(audited=audited)]):
            sample = choose(fleet, TONIGHT, Budget())  # the default budget: five a night
            assert sample.picks[0].ref == "models:/churn/4", sample.picks
            assert sample.picks[0].reason == "serving under alias 'champion'"


def test_a_champion_outranks_a_version_that_failed_last_night():
    champion = Candidate(name="churn", version="4", aliases=("prod",), last_audit_date="2026-09-28")
    failed = [Candidate(name=f"oot-{i}", version="1", last_audit_date="2026-11-28", last_verdict="OUT_OF_TOLERANCE") for i in range(3)]
    sample = choose([*failed, champion], TONIGHT, Budget(max_models=1))
    assert [p.ref for p in sample.picks] == ["models:/churn/4"]


def test_known_unreproducible_versions_are_reassessed_on_the_slower_cadence():
    recent, due = _never_reproducible(1, audited="2026-10-01")[0], Candidate(
        name="lost", version="2", last_audit_date="2026-07-01", last_verdict="NOT_REPRODUCIBLE")
    sample = choose([recent, due], TONIGHT, Budget(recheck_unreproducible_days=90))
    assert [p.ref for p in sample.picks] == ["models:/lost/2"]
    assert sample.picks[0].reason == "re-assessing: NOT_REPRODUCIBLE on 2026-07-01, re-checked every 90 days"
    assert dict(sample.skipped)["models:/plain-0/1"].startswith("known unreproducible (NOT_REPRODUCIBLE on 2026-10-01)")
    # a shorter cadence makes both due
    assert len(choose([recent, due], TONIGHT, Budget(recheck_unreproducible_days=30)).picks) == 2


def test_a_retired_version_is_never_sampled_even_under_a_production_alias():
    retired = Candidate.from_tags("old", "1", ["champion"], {"repro.retired": "True"})
    never = Candidate.from_tags("new", "1", [], {"repro.retired": "false"})
    assert retired.retired and not never.retired
    sample = choose([retired, never], TONIGHT, Budget(max_models=5))
    assert [p.ref for p in sample.picks] == ["models:/new/1"]
    assert ("models:/old/1", "retired by its owner (tag repro.retired)") in sample.skipped


def test_the_recheck_cadence_is_a_setting():
    settings = Settings.from_env({"REPRO_UNREPRODUCIBLE_RECHECK_DAYS": "14"})
    assert settings.unreproducible_recheck_days == 14
    assert Settings.from_env({}).unreproducible_recheck_days == Budget().recheck_unreproducible_days == 90
