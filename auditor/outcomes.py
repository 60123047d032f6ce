"""The verdicts and what each one means to a process and to an orchestrator: one table keyed by ``Verdict``.

How a verdict is *shown* (its colour in the index, its style on a terminal, its headline in a report) is
the one view table, ``auditor.report.view.VERDICT_VIEW``. The exit codes for everything that is not a
verdict (bad input, findings, an outage, a crash of ours) are ``auditor.errors.EXIT_CODES``, which
takes the verdicts' codes from here. Pure: no I/O.
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """Overall verdicts, strongest first."""

    REPRODUCED_BITWISE = "REPRODUCED_BITWISE"
    REPRODUCED_WITHIN_TOLERANCE = "REPRODUCED_WITHIN_TOLERANCE"
    OUT_OF_TOLERANCE = "OUT_OF_TOLERANCE"
    NOT_REPRODUCIBLE = "NOT_REPRODUCIBLE"
    #: an adoption assessment (``auditor.adopt``): lineage read from plain MLflow metadata, nothing rebuilt; never a pass
    LINEAGE_INSUFFICIENT = "LINEAGE_INSUFFICIENT"
    ERROR = "ERROR"

    @property
    def reproduced(self) -> bool:
        return VERDICTS[self].reproduced

    @property
    def exit_code(self) -> int:
        return VERDICTS[self].exit_code


class Meaning:
    """What one verdict means: reproduced or not, the process's exit status, the orchestrator's task outcome."""

    __slots__ = ("exit_code", "reproduced", "task")

    def __init__(self, *, reproduced: bool, exit_code: int, task: str) -> None:
        self.reproduced, self.exit_code, self.task = reproduced, exit_code, task


#: DESIGN.md's exit codes for verdicts: 0 reproduced, 1 not reproduced, 3 an ERROR no evidence came from.
#: ``task``: what an orchestrator does with the audit task's verdict (an ERROR is retried afresh).
VERDICTS: dict[Verdict, Meaning] = {
    Verdict.REPRODUCED_BITWISE: Meaning(reproduced=True, exit_code=0, task="success"),
    Verdict.REPRODUCED_WITHIN_TOLERANCE: Meaning(reproduced=True, exit_code=0, task="success"),
    Verdict.OUT_OF_TOLERANCE: Meaning(reproduced=False, exit_code=1, task="fail"),
    Verdict.NOT_REPRODUCIBLE: Meaning(reproduced=False, exit_code=1, task="fail"),
    Verdict.LINEAGE_INSUFFICIENT: Meaning(reproduced=False, exit_code=1, task="fail"),
    Verdict.ERROR: Meaning(reproduced=False, exit_code=3, task="retry"),
}

#: the verdict names that count as reproduced (tags and ledgers hold names, not enum members)
REPRODUCED = frozenset(v.value for v, meaning in VERDICTS.items() if meaning.reproduced)
