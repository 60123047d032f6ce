"""What ``evidence verify`` answers (``auditor.report.verify``): the counts, the chain head and each problem found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    """One thing verify found wrong; ``seq`` is the ledger position (None for a report with no entry)."""

    seq: int | None
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass
class Verification:
    """The outcome of ``verify``: counts, the chain head, and the problems in ledger order."""

    location: str
    entries: int = 0
    reports: int = 0
    head: str | None = None
    signed: int = 0  # entries whose attestation verified with the given, configured or pinned key
    pinned_keyid: str | None = None  # without a key: the key id of the first signed entry, every later one held to it
    pinned_key: Any = None  # without a key: the public key the first signed entry records (trust on first use)
    pinned_at: int | None = None  # the entry whose recorded key was pinned
    unchecked: int = 0  # without a key: signed entries whose signature no known key could check (no key recorded yet)
    unsigned_before_signing: int = 0  # entries published before signing was configured (accepted with a configured key)
    seen_signed: bool = False  # an entry with an attestation was met (an unsigned one after it is never "before signing")
    rotations: int = 0  # recorded key rotations that verified (signed by both keys they name)
    anchored: int | None = None  # ledger positions some anchor names (None: no anchors were given); per source below
    anchor_sources: dict[str, int] = field(default_factory=dict)  # each anchor source checked, and its anchors
    problems: list[Problem] = field(default_factory=list)
    #: which auditor published the evidence (``auditor.report.itself.describe_itself``) -> how many evidence files
    auditors: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def first(self) -> Problem | None:
        return self.problems[0] if self.problems else None
