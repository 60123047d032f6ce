"""Which models to audit tonight, under a budget. Pure: no I/O, no clock.

Order of preference (the reason is kept with each pick, for the summary):

0. *not reproduced last time*: the latest audit before tonight gave a verdict
   other than REPRODUCED_* (tag ``repro.audit.verdict``); tier first, then stalest;
1. *must*: serving under a production alias (``Budget.production_aliases``,
   from ``REPRO_PRODUCTION_ALIASES``), or materiality tier 1 (tag ``repro.tier``);
   tier first, then stalest;
2. *never audited*;
3. *stale*: last audited more than ``stale_after_days`` before the logical date,
   stalest first;
4. a random draw from the rest, seeded by the logical date, so a rerun for
   the same date picks the same models and another date picks others.

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
from auditor.outcomes import REPRODUCED
from auditor.settings import PRODUCTION_ALIASES
from auditor.tags import TAG_AUDIT_DATE, TAG_AUDIT_PREVIOUS_DATE, TAG_COST_HOURS, TAG_TIER, TAG_VERDICT
from auditor.uris import model_uri

DEFAULT_COST_HOURS = 0.25
#: the verdicts that count as reproduced (``auditor.judge.result.Verdict``)


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
    stale_after_days: int = 30
    production_aliases: tuple[str, ...] = PRODUCTION_ALIASES.default


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


def choose(candidates: list[Candidate], date: str, budget: Budget = Budget()) -> Sample:
    """Tonight's audits for logical date ``date`` (YYYY-MM-DD)."""
    try:
        dt.date.fromisoformat(date)  # a malformed date fails here, not halfway through
    except (TypeError, ValueError):
        raise BadInput(f"logical date {date!r} is not YYYY-MM-DD") from None
    ordered: list[tuple[Candidate, str]] = []
    rest: list[Candidate] = []
    failed, must, never, stale = [], [], [], []
    serving = {a.lower() for a in budget.production_aliases}
    for c in sorted(candidates, key=lambda c: (c.name, c.version)):
        last = _last_before(c, date)
        production = sorted(set(a.lower() for a in c.aliases) & serving)
        verdict = _not_reproduced_before(c, date)
        if verdict:
            failed.append((c.tier or 99, last or "", c, f"not reproduced last time ({verdict} on {c.last_audit_date})"))
        elif production or c.tier == 1:
            why = f"serving under alias '{production[0]}'" if production else "materiality tier 1"
            must.append((c.tier or 99, last or "", c, why))
        elif last is None:
            never.append((c, "never audited"))
        elif _days_between(last, date) > budget.stale_after_days:
            stale.append((last, c, f"stale: last audited {last}"))
        else:
            rest.append(c)
    ordered += [(c, why) for _, _, c, why in sorted(failed, key=lambda m: (m[0], m[1]))]
    ordered += [(c, why) for _, _, c, why in sorted(must, key=lambda m: (m[0], m[1]))]
    ordered += never
    ordered += [(c, why) for _, c, why in sorted(stale, key=lambda s: s[0])]
    rng = random.Random(int.from_bytes(hashlib.sha256(f"repro-sample:{date}".encode()).digest()[:8], "big"))
    rng.shuffle(rest)
    ordered += [(c, f"random draw for {date}") for c in rest]

    picks: list[Pick] = []
    skipped: list[tuple[str, str]] = []
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
