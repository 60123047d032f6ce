"""What the audit door takes and gives: ``AuditOptions`` and ``AuditOutcome`` (``auditor.steps.session``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from auditor.errors import ReproError
    from auditor.judge.result import AuditResult


@dataclass(frozen=True)
class AuditOptions:
    """How to audit one version. The defaults are the CLI's: publish today's audit, one full rebuild.

    ``segments``/``budget`` replay part of the checkpoint chain instead of all of training (``workers``
    at a time). ``task=True`` is how an orchestrator calls: a ref that no longer resolves is an ERROR row
    rather than an exception, a failed publish raises (so the task is retried), and with ``last_try=False``
    an ERROR verdict raises ``InfrastructureError`` instead of being published (the retry audits afresh).
    """

    date: str | None = None
    audit_run: str = "cli"
    reruns: int = 1
    runner: str | None = None  # default: the settings' runner
    publish: bool = True
    segments: int | None = None
    budget: float | None = None
    workers: int = 1
    segment_seed: str | None = None  # fixes the segments' interior draw (to repeat an audit); None: drawn at audit time
    task: bool = False
    last_try: bool = True

    @property
    def replays_segments(self) -> bool:
        return self.segments is not None or self.budget is not None


@dataclass
class AuditOutcome:
    """What the door returns, published or not.

    ``result`` is None only when a task's ref could not be resolved (``error`` says why). ``report`` is the
    published report's URI; ``skipped`` says the evidence was already published (a repeat). When publishing
    failed after the verdict, ``publish_failure`` holds that failure: the verdict stands, and the entry point
    decides the exit code from both.
    """

    ref: str
    result: AuditResult | None
    report: str | None = None
    skipped: bool = False
    error: str | None = None
    publish_failure: ReproError | None = None

    @property
    def verdict(self) -> str:
        from auditor.judge.result import Verdict

        return self.result.verdict.value if self.result is not None else Verdict.ERROR.value

    @property
    def row(self) -> dict[str, Any]:
        """The summary row a nightly and an orchestrator keep: ``{ref, verdict, report, error, skipped}``."""
        error = self.error if self.result is None else self.result.error
        return {"ref": self.ref, "verdict": self.verdict, "report": self.report, "error": error, "skipped": self.skipped}


__all__ = ["AuditOptions", "AuditOutcome"]
