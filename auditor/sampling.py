"""Which models to audit tonight, under a budget. Pure: no I/O, no clock.

Order of preference (the reason is kept with each pick, for the summary):

1. *must*: serving under a production alias (``Budget.production_aliases``,
   from ``REPRO_PRODUCTION_ALIASES``), or materiality tier 1 (tag ``repro.tier``);
   tier first, then stalest. Always first: nothing a night can hold pushes them out;
2. *not reproduced last time*: the latest audit before tonight gave OUT_OF_TOLERANCE or
   ERROR (tag ``repro.audit.verdict``), which another night may settle; tier first, then stalest;
3. *never audited*; behind them the *unassessed*: never audited nor assessed and registered without a run
   record (no version tag ``repro.record_digest``: trained with plain MLflow), for which an audit can only say
   "no run record" until ``repro-audit adopt`` has assessed them;
4. *stale*: last audited more than ``stale_after_days`` (``REPRO_OVERDUE_DAYS``) before the
   logical date, stalest first; beside them, stalest first, the *known-unreproducible* versions
   (last verdict NOT_REPRODUCIBLE: no run record, a lost or changed input) whose last audit is
   more than ``recheck_unreproducible_days`` (``REPRO_UNREPRODUCIBLE_RECHECK_DAYS``) old: they are
   re-assessed on that slower cadence and otherwise not sampled at all (another night changes
   nothing for them); adoption assessments (last verdict LINEAGE_INSUFFICIENT) take the same slower cadence;
5. a random draw from the rest, seeded by the logical date, so a rerun for
   the same date picks the same models and another date picks others.

A version its owner marked retired (tag ``repro.retired=true``) is never sampled, whatever its
alias; it is listed among the skipped with that reason.

The budget is a maximum count and accelerator-hours (each version's recorded
training cost, tag ``repro.cost_hours``). A candidate that does not fit is
skipped with that reason and the walk goes on, so a cheaper one may still fit.
An audit already done for this logical date keeps its place in the sample
(the sample is stable) and is flagged so the audit step skips it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from dataclasses import dataclass, field

from auditor.errors import BadInput
from auditor.outcomes import REPRODUCED, Verdict
from auditor.settings import OVERDUE_DAYS, PRODUCTION_ALIASES, UNREPRODUCIBLE_RECHECK_DAYS
from auditor.tags import (
    RETIRED_VALUES,
    TAG_AUDIT_DATE,
    TAG_AUDIT_PREVIOUS_DATE,
    TAG_COST_HOURS,
    TAG_RECORD_DIGEST,
    TAG_RETIRED,
    TAG_TIER,
    TAG_VERDICT,
)
from auditor.uris import model_uri

DEFAULT_COST_HOURS = 0.25
#: the verdict of a version known not to reproduce (no run record, a lost or changed input): re-assessed slowly
KNOWN_UNREPRODUCIBLE = Verdict.NOT_REPRODUCIBLE.value
#: the verdicts re-checked on the slow cadence: known unreproducible, and an adoption assessment (nothing to rebuild yet)
SLOW_RECHECK = frozenset({KNOWN_UNREPRODUCIBLE, Verdict.LINEAGE_INSUFFICIENT.value})


def is_retired(tags) -> bool:
    """Whether a version's tags carry its owner's retirement mark (``repro.retired=true``)."""
    return str(tags.get(TAG_RETIRED, "")).strip().lower() in RETIRED_VALUES


@dataclass(frozen=True)
class Candidate:
    """One registered model version, as the sampler sees it."""

    name: str
    version: str
    aliases: tuple[str, ...] = ()
    tier: int | None = None  # 1 = most material
    last_audit_date: str | None = None  # logical date (YYYY-MM-DD) of the latest audit
    previous_audit_date: str | None = None  # the one before it, when the latest is tonight's
    cost_hours: float = DEFAULT_COST_HOURS
    last_verdict: str | None = None  # the verdict of the latest audit (the one on ``last_audit_date``)
    retired: bool = False  # its owner marked it retired (tag ``repro.retired``): never sampled
    recorded: bool | None = None  # registered with a run record (tag ``repro.record_digest``); None: not known

    @property
    def ref(self) -> str:
        return model_uri(self.name, self.version)

    @classmethod
    def from_tags(cls, name: str, version: str, aliases, tags: dict[str, str]) -> Candidate:
        def number(key: str, cast, default):
            try:
                return cast(tags[key])
            except (KeyError, ValueError, TypeError):
                return default

        return cls(
            name=name,
            version=str(version),
            aliases=tuple(aliases),
            tier=number(TAG_TIER, int, None),
            last_audit_date=tags.get(TAG_AUDIT_DATE),
            previous_audit_date=tags.get(TAG_AUDIT_PREVIOUS_DATE),
            cost_hours=max(0.0, number(TAG_COST_HOURS, float, DEFAULT_COST_HOURS)),
            last_verdict=tags.get(TAG_VERDICT),
            retired=is_retired(tags),
            recorded=bool(tags.get(TAG_RECORD_DIGEST)),
        )


@dataclass(frozen=True)
class Pick:
    ref: str
    reason: str
    cost_hours: float
    already_audited: bool = False  # an audit for this logical date exists: the audit step skips it


@dataclass(frozen=True)
class Sample:
    date: str
    picks: list[Pick] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (ref, why not)

    @property
    def hours(self) -> float:
        return sum(p.cost_hours for p in self.picks)

    def to_dict(self) -> dict:
        return {
            "date": self.date,
            "hours": round(self.hours, 4),
            "picks": [p.__dict__ for p in self.picks],
            "skipped": [{"ref": r, "reason": why} for r, why in self.skipped],
        }


@dataclass(frozen=True)
class Budget:
    max_models: int = 5
    max_hours: float = 4.0
    stale_after_days: int = OVERDUE_DAYS.default
    production_aliases: tuple[str, ...] = PRODUCTION_ALIASES.default
    recheck_unreproducible_days: int = UNREPRODUCIBLE_RECHECK_DAYS.default


def _last_before(c: Candidate, date: str) -> str | None:
    """The latest audit strictly before ``date`` (tonight's own audit does not count)."""
    if c.last_audit_date and c.last_audit_date < date:
        return c.last_audit_date
    if c.previous_audit_date and c.previous_audit_date < date:
        return c.previous_audit_date
    return None


def _not_reproduced_before(c: Candidate, date: str) -> str | None:
    """The verdict of the latest audit before ``date`` when it was not reproduced, else None.

    Only an audit strictly before tonight counts, so a rerun for the same date samples the same
    versions: tonight's own verdict does not move a version up.
    """
    if c.last_verdict and c.last_verdict not in REPRODUCED and c.last_audit_date and c.last_audit_date < date:
        return c.last_verdict
    return None


def _days_between(earlier: str, later: str) -> int:
    return (dt.date.fromisoformat(later) - dt.date.fromisoformat(earlier)).days


def _rank(candidates: list[Candidate], date: str, budget: Budget) -> tuple[list[tuple[Candidate, str]], list[tuple[str, str]]]:
    """Every candidate in the order of preference with its reason, and those never sampled tonight (with why)."""
    must, failed, never, unassessed, stale, rest = [], [], [], [], [], []
    excluded: list[tuple[str, str]] = []
    serving = {a.lower() for a in budget.production_aliases}
    for c in sorted(candidates, key=lambda c: (c.name, c.version)):
        last = _last_before(c, date)
        production = sorted(set(a.lower() for a in c.aliases) & serving)
        verdict = _not_reproduced_before(c, date)
        if c.retired:
            excluded.append((c.ref, f"retired by its owner (tag {TAG_RETIRED})"))
        elif production or c.tier == 1:
            why = f"serving under alias '{production[0]}'" if production else "materiality tier 1"
            must.append((c.tier or 99, last or "", c, why))
        elif verdict in SLOW_RECHECK:
            age = _days_between(c.last_audit_date, date)
            if age > budget.recheck_unreproducible_days:
                stale.append((c.last_audit_date, c, f"re-assessing: {verdict} on {c.last_audit_date}, "
                                                    f"re-checked every {budget.recheck_unreproducible_days} days"))
            else:
                due = dt.date.fromisoformat(c.last_audit_date) + dt.timedelta(days=budget.recheck_unreproducible_days + 1)
                excluded.append((c.ref, f"known unreproducible ({verdict} on {c.last_audit_date}): next re-assessment {due}"))
        elif verdict:
            failed.append((c.tier or 99, last or "", c, f"not reproduced last time ({verdict} on {c.last_audit_date})"))
        elif last is None and c.recorded is False:
            unassessed.append((c, "never assessed: registered without a run record (repro-audit adopt --assess-only)"))
        elif last is None:
            never.append((c, "never audited"))
        elif _days_between(last, date) > budget.stale_after_days:
            stale.append((last, c, f"stale: last audited {last}"))
        else:
            rest.append(c)
    ordered = [(c, why) for _, _, c, why in sorted(must, key=lambda m: (m[0], m[1]))]
    ordered += [(c, why) for _, _, c, why in sorted(failed, key=lambda m: (m[0], m[1]))]
    ordered += never
    ordered += unassessed
    ordered += [(c, why) for _, c, why in sorted(stale, key=lambda s: s[0])]
    rng = random.Random(int.from_bytes(hashlib.sha256(f"repro-sample:{date}".encode()).digest()[:8], "big"))
    rng.shuffle(rest)
    ordered += [(c, f"random draw for {date}") for c in rest]
    return ordered, excluded


def choose(candidates: list[Candidate], date: str, budget: Budget = Budget()) -> Sample:
    """Tonight's audits for logical date ``date`` (YYYY-MM-DD)."""
    try:
        dt.date.fromisoformat(date)  # a malformed date fails here, not halfway through
    except (TypeError, ValueError):
        raise BadInput(f"logical date {date!r} is not YYYY-MM-DD") from None
    ordered, skipped = _rank(candidates, date, budget)
    picks: list[Pick] = []
    hours = 0.0
    for c, why in ordered:
        if len(picks) >= budget.max_models:
            skipped.append((c.ref, f"count budget of {budget.max_models} reached"))
        elif hours + c.cost_hours > budget.max_hours + 1e-9:
            skipped.append((c.ref, f"needs {c.cost_hours:g} h, {budget.max_hours - hours:g} h of budget left"))
        else:
            hours += c.cost_hours
            picks.append(Pick(c.ref, why, c.cost_hours, already_audited=c.last_audit_date == date))
    return Sample(date=date, picks=picks, skipped=skipped)
