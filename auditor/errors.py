"""One exception root for the whole library.

Every error names the field, file or id at fault and says what to do. Only the
CLI turns them into exit codes (see ``auditor.cli``); library callers catch
``ReproError`` or a subclass.
"""

from __future__ import annotations


class ReproError(Exception):
    """Root of every error raised on purpose by repro-audit."""

    #: the CLI's exit code for this kind of failure (DESIGN.md):
    #: 1 findings / not reproduced, 2 bad input or usage, 3 infrastructure.
    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")


class BadInput(ReproError):
    """The caller gave something unusable: a malformed file, URI or argument."""

    exit_code = 2


class MalformedRecord(BadInput):
    """A run record, band or manifest does not parse or validate."""


class UnsafePath(BadInput):
    """A path in a manifest or archive would escape its destination."""


class NotFound(BadInput):
    """A model version, snapshot, commit or object that was named does not exist."""


class UnknownScheme(BadInput):
    """A URI uses a scheme no backend is registered for."""


class Findings(ReproError):
    """The input was read fine but the answer is 'no': blocking findings, corrupt data."""

    exit_code = 1


class LineageIncomplete(Findings):
    """The lineage gate blocked: one or more of the five inputs is missing or mutable."""

    def __init__(self, findings: list, *, subject: str = "run record") -> None:
        self.findings = list(findings)
        lines = "\n".join(f"  - {f.path}: {f.message} (fix: {f.hint})" for f in self.findings)
        super().__init__(f"{subject} has {len(self.findings)} blocking finding(s):\n{lines}")


class SnapshotCorrupt(Findings):
    """A snapshot's bytes no longer match its manifest."""

    def __init__(self, snapshot_id: str, problems: list) -> None:
        self.snapshot_id = snapshot_id
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems[:20])
        more = f"\n  … and {len(self.problems) - 20} more" if len(self.problems) > 20 else ""
        super().__init__(
            f"snapshot {snapshot_id} failed verification with {len(self.problems)} problem(s):\n{lines}{more}",
        )


class ObjectConflict(Findings):
    """An immutable object or manifest already exists with different bytes."""


class RebuildFailed(ReproError):
    """The recorded recipe could not be rebuilt (workspace, commit, diff or run failed)."""

    exit_code = 1


class InputUnrecoverable(RebuildFailed):
    """A recorded input cannot be recovered: commit gone, diff does not apply, snapshot lost."""


class InfrastructureError(ReproError):
    """Something outside the input failed (network, engine, server); retrying may help."""

    exit_code = 3


class RunFailed(InfrastructureError):
    """The training entrypoint exited non-zero or timed out during a rebuild (the log tail says why)."""
