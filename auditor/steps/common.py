"""What every step shares: the progress callback, the clock, the lineage gate before a rebuild, drift."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from auditor.errors import InfrastructureError, LineageIncomplete, ReproError

if TYPE_CHECKING:
    from auditor.judge.result import EnvDrift
    from auditor.lineage.findings import Finding
    from auditor.lineage.record import RunRecord
    from auditor.rebuild.run import RunResult

Progress = Callable[[str], None]


def now() -> str:
    """UTC now, ISO 8601 to the second with a ``Z``: the spelling of every timestamp the steps write."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def today() -> str:
    """Today's date (UTC), the default audit id."""
    return dt.datetime.now(dt.UTC).date().isoformat()


def quiet(_: str) -> None:
    """The progress callback that shows nothing (a DAG task, a pod, ``--json``)."""


def gate(record: RunRecord, diff: str | None) -> list[Finding]:
    from auditor.lineage.gate import check

    return check(record, diff=diff)


def read_record(registry: Any, info: Any) -> tuple[RunRecord | None, str | None, ReproError | None]:
    """A version's record and diff, or why there is none (lost, missing, malformed, edited; ``unreadable`` words it):
    one reading for the audit and for adoption's assessment of an SDK-recorded version. An outage still raises."""
    try:
        record, diff = registry.load_record(info)
    except InfrastructureError:
        raise
    except ReproError as exc:  # RecordMissing, a malformed or rewritten record
        return None, None, exc
    return record, diff, None


def unreadable(exc: ReproError) -> Finding:
    """The blocking finding of a record that cannot be read: the one the error carries, else ``record.unreadable``."""
    from auditor.lineage.findings import Finding as _Finding

    return getattr(exc, "finding", None) or _Finding(code="record.unreadable", path="record", severity="blocking",
                                                     message=str(exc), hint="re-register the version with a valid run record")


def require_complete_lineage(ref: str, record: RunRecord, diff: str | None) -> None:
    """Refuse to rebuild a version whose lineage has a blocking finding (``LineageIncomplete``)."""
    from auditor.lineage.gate import blocking

    blockers = blocking(gate(record, diff))
    if blockers:
        raise LineageIncomplete(blockers, subject=ref)


def drift(record: RunRecord, run: RunResult) -> EnvDrift | None:
    """How the rebuild's environment differs from the recorded one (None: one of them is unknown)."""
    from auditor.rebuild.drift import environment_drift

    if run.record and run.record.environment and record.environment:
        return environment_drift(record.environment, run.record.environment)
    return None


def resolving(session: Any, ref: str, progress: Progress) -> Any:
    """``ref`` resolved in the session's registry, said first: the registry's client opens here, lazily (MLflow's
    import and store take seconds), so the first progress line comes before it, not after (issue 41)."""
    import logging

    progress(f"resolving {ref} in the registry")
    logging.getLogger("auditor.steps").info("%s: resolving it in the registry at %s", ref, redacted(session.settings.tracking_uri or "the default"))
    return session.registry.resolve(ref)


def redacted(uri: str) -> str:
    from auditor.lineage.redact import redact_text

    return redact_text(uri)


def in_parallel(run: Callable[[Any], Any], items: Iterable[Any], workers: int) -> list[Any]:
    """``run`` of each item, ``workers`` at a time, results in the items' order. Reruns and segment replays write
    their outputs to folders of their own, but share the workspace (the project folder as the working directory,
    and its HOME): a script that writes beside itself (a relative cache or checkpoint) races with its twin, so
    ``REPRO_RERUN_WORKERS`` above 1 is for scripts that write only through the SDK (the README says so)."""
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [run(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(run, items))
