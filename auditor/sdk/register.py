"""``auditor.register_model(run, name)``: register a tracked run as a model version, if its lineage passes the gate."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from auditor.errors import BadInput, LineageIncomplete
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.sdk.env import rebuild_mode
from auditor.sdk.run import Run
from auditor.tags import RECORD_ARTIFACT


def register_model(run: Run | str, name: str, *, tracking_uri: str | None = None) -> str | None:
    """Register ``run`` as the next version of model ``name``; returns the version number.

    Refuses with ``LineageIncomplete`` listing every blocking gate finding, in
    which case nothing is registered. ``run`` is the handle ``track`` yielded
    (after its block ended) or a run id logged by ``track``. In rebuild mode it
    does nothing and returns None: an audit never registers.
    """
    from auditor.lineage.gate import blocking, check
    from auditor.registry import tracking

    if isinstance(run, Run):
        if run.rebuild:
            return None
        _check_ended(run)
        assert run._session is not None  # a finished training run has its MLflow session
        record, diff, run_id = run.record, run.diff, run.run_id or ""
        client, uri = run._session.client, run._session.uri
    else:
        if rebuild_mode():
            return None
        from auditor.registry.mlflow import MlflowRegistry

        uri = tracking.tracking_uri(tracking_uri)
        registry = MlflowRegistry(uri)
        record, diff, run_id = *_record_of_run(registry, run), run
        client = registry.client
    findings = check(record, diff=diff)
    found = blocking(findings)
    if found:
        raise LineageIncomplete(found, subject=f"run {run_id} (not registered as {name!r})")
    version = tracking.register(client, uri, run_id, name, record)
    announce(name, version, run_id, [f for f in findings if not f.blocking])
    return version


def announce(name: str, version: str | None, run_id: str, warnings: list[Finding], *, stream: TextIO | None = None) -> None:
    """Say what was registered and every warning the gate computed, by name and with its fix (on stderr, redacted)."""
    from auditor.lineage.redact import redact_text
    from auditor.uris import model_uri, visible

    out = stream or sys.stderr
    lines = [f"repro-audit: registered {visible(model_uri(name, str(version)))} (run {run_id})"]
    if warnings:
        lines.append(f"repro-audit: {len(warnings)} warning(s) from the lineage gate (registered anyway; each lowers what an audit can prove):")
        lines += [f"  - {f.code} ({f.path}): {f.message}\n      fix: {f.hint}" for f in warnings]
    else:
        lines.append("repro-audit: the lineage gate found nothing to warn about")
    print(redact_text("\n".join(lines)), file=out, flush=True)


def _check_ended(run: Run) -> None:
    if not run.finished:
        raise BadInput(
            "register_model was called inside the `with auditor.track(...)` block",
            hint="call it after the block, when metrics and weights are in the record",
        )
    if run.failed:
        raise BadInput(f"run {run.run_id} failed; a failed run is not registered")


def _record_of_run(registry: Any, run_id: str) -> tuple[RunRecord, str | None]:
    from auditor.errors import NotFound

    raw = registry._read_run_file(run_id, RECORD_ARTIFACT)
    if raw is None:
        raise NotFound(f"run {run_id} has no artifact {RECORD_ARTIFACT}", hint="log the run with auditor.track(...)")
    where = f"run {run_id} (artifact {RECORD_ARTIFACT})"
    record = RunRecord.from_json(raw, source=where)
    return record, registry._load_diff(run_id, record, where)
