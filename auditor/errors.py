"""One exception root for the whole library, and what each kind of failure means.

Every error names the field, file or id at fault and says what to do. Each class carries a
``meaning``: what the failure says about the caller, the model or the machinery. Two functions turn
meanings into consequences, and nothing else does:

- :func:`verdict_failure` says what an exception raised while auditing one version means for its
  verdict (``NOT_REPRODUCIBLE`` or ``ERROR``);
- :func:`exit_code` is the one table of exit codes, used by the CLI and the pod entry point.

=================  ==============================================  ==========  =========
meaning            when                                            in a audit  exit code
=================  ==============================================  ==========  =========
``caller``         bad input or usage: a malformed file, URI, arg  see below   2
``findings``       read fine, the answer is no (gate, corruption)  NOT_REPR.   1
``unrecoverable``  a recorded input cannot be recovered            NOT_REPR.   1
``infrastructure`` network, engine, server failed; retry may help  ERROR       3
``crash``          the recorded entrypoint crashed or timed out    ERROR       3
=================  ==============================================  ==========  =========

Inside an audit, a ``caller`` error raised by the model's own inputs (a tag-only image in the
record, an unusable entrypoint) is the model's problem: NOT_REPRODUCIBLE. A malformed manifest
or band found mid-audit is ERROR, so that it is named and never passes silently. The version's own
run record is the exception: one that does not load, or was rewritten after registration, is a
blocking lineage finding (``auditor.steps.audit_record._read_record``), so NOT_REPRODUCIBLE: no retry brings it back.
"""

from __future__ import annotations

from enum import StrEnum

from auditor.outcomes import VERDICTS, Verdict


class Meaning(StrEnum):
    """What a failure says; see the module docstring for its consequences."""

    CALLER = "caller"
    FINDINGS = "findings"
    UNRECOVERABLE = "unrecoverable"
    INFRASTRUCTURE = "infrastructure"
    CRASH = "crash"


#: DESIGN.md's exit codes: 0 success or reproduced, 1 findings or not reproduced, 2 bad input or
#: usage, 3 infrastructure error. Keys are meanings and verdict names (their codes: ``auditor.outcomes``).
EXIT_CODES: dict[str, int] = {
    Meaning.CALLER: 2,
    Meaning.FINDINGS: 1,
    Meaning.UNRECOVERABLE: 1,
    Meaning.INFRASTRUCTURE: 3,
    Meaning.CRASH: 3,
    **{verdict.value: meaning.exit_code for verdict, meaning in VERDICTS.items()},
}
EXIT_OK = 0
EXIT_USAGE = EXIT_CODES[Meaning.CALLER]
#: the shell's convention for a run stopped by Ctrl-C (128 + SIGINT)
EXIT_INTERRUPTED = 130


class ReproError(Exception):
    """Root of every error raised on purpose by repro-audit."""

    meaning: Meaning = Meaning.CALLER

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.meaning]


# -- the caller's error: exit 2 ----------------------------------------------------------
class BadInput(ReproError):
    """The caller gave something unusable: a malformed file, URI or argument."""

    meaning = Meaning.CALLER


class MalformedRecord(BadInput):
    """A run record, band or manifest does not parse or validate."""


class UnsafePath(BadInput):
    """A path in a manifest or archive would escape its destination."""


class NotFound(BadInput):
    """A model version, snapshot, commit or object that was named does not exist."""


class UnknownScheme(BadInput):
    """A URI uses a scheme no backend is registered for."""


#: the optional extra of ``pyproject.toml`` that brings each importable top-level module (one table)
EXTRAS: dict[str, str] = {
    "mlflow": "mlflow", "torch": "torch", "boto3": "s3", "botocore": "s3", "docker": "docker",
    "airflow": "airflow", "deltalake": "delta", "pyiceberg": "iceberg", "dvc": "dvc",
    "sklearn": "sklearn", "skops": "sklearn", "xgboost": "xgboost", "lightgbm": "lightgbm", "catboost": "catboost",
}


class MissingExtra(BadInput):
    """This install of repro-audit lacks the optional extra a command needs (a usage error: exit 2)."""

    def __init__(self, module: str, extra: str) -> None:
        self.module, self.extra = module, extra
        super().__init__(f"this command needs {module}, which this install of repro-audit lacks",
                         hint=f"pip install 'repro-audit[{extra}]'")


def missing_extra(exc: BaseException) -> MissingExtra | None:
    """The ``MissingExtra`` behind ``exc`` (itself or what caused it) when a module of an extra was not found."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MissingExtra):
            return current
        name = getattr(current, "name", None) if isinstance(current, ModuleNotFoundError) else None
        if name and name.split(".")[0] in EXTRAS:
            return MissingExtra(name.split(".")[0], EXTRAS[name.split(".")[0]])
        current = current.__cause__ or current.__context__
    return None


# -- the answer is no: exit 1 ---------------------------------------------------------------
class Findings(ReproError):
    """The input was read fine but the answer is 'no': blocking findings, corrupt data."""

    meaning = Meaning.FINDINGS


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


class InputUnrecoverable(ReproError):
    """A recorded input cannot be recovered: commit gone, diff does not apply, snapshot lost,
    project folder or entrypoint missing at the recorded commit, outputs missing after a clean exit.
    No retry changes it: the audit's verdict is NOT_REPRODUCIBLE."""

    meaning = Meaning.UNRECOVERABLE


# -- retryable: exit 3 ---------------------------------------------------------------------
class InfrastructureError(ReproError):
    """Something outside the input failed (network, engine, server); retrying may help."""

    meaning = Meaning.INFRASTRUCTURE


class RecipeCrashed(ReproError):
    """The recorded entrypoint exited non-zero or timed out during a rebuild (``log_tail`` says why).

    An audit cannot tell a flaky machine from a broken recipe by one crash, so it is ERROR (retried).
    The audit reruns a crashed rebuild once: a crash that repeats identically is a persistent recipe
    failure, which it raises as ``InputUnrecoverable`` (NOT_REPRODUCIBLE).
    """

    meaning = Meaning.CRASH
    log_tail: str = ""
    timed_out: bool = False


def meaning_of(exc: BaseException) -> Meaning:
    """The meaning of any exception: a ``ReproError``'s own, anything else is a crash of ours."""
    return exc.meaning if isinstance(exc, ReproError) else Meaning.CRASH


def verdict_failure(exc: BaseException) -> str:
    """The verdict an exception raised while auditing one version gives it: ``NOT_REPRODUCIBLE`` or ``ERROR``."""
    if isinstance(exc, MalformedRecord):  # a band, manifest or record that does not parse: named, never a pass
        return Verdict.ERROR.value
    if meaning_of(exc) in (Meaning.INFRASTRUCTURE, Meaning.CRASH):
        return Verdict.ERROR.value
    return Verdict.NOT_REPRODUCIBLE.value


def exit_code(outcome: BaseException | str) -> int:
    """The process exit status for an exception, a meaning or a verdict name (one table: ``EXIT_CODES``)."""
    if isinstance(outcome, BaseException):
        return EXIT_CODES[meaning_of(outcome)]
    return EXIT_CODES[str(outcome)]


#: what an orchestrator does with a task whose audit gave a verdict, by its exit code (from ``auditor.outcomes``)
TASK_OUTCOMES: dict[int, str] = {meaning.exit_code: meaning.task for meaning in VERDICTS.values()}


def task_outcome(verdict: str) -> str:
    """``success`` (reproduced), ``fail`` (not reproduced or out of tolerance: no retry changes it) or ``retry`` (ERROR)."""
    return VERDICTS[Verdict(str(verdict))].task


def describe(exc: BaseException) -> str:
    """The text a failure is reported with: ours as they are, anything else named by its type."""
    if isinstance(exc, ReproError):
        return str(exc)
    extra = missing_extra(exc)
    return str(extra) if extra is not None else f"unexpected {type(exc).__name__}: {exc}"
