"""``auditor.register_model(run, name)``: register a tracked run as a model version, if its lineage passes the gate."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from auditor.errors import BadInput, LineageIncomplete
from auditor.lineage.findings import Finding
from auditor.lineage.record import RunRecord
from auditor.sdk.env import rebuild_mode
from auditor.sdk.run import Run
from auditor.tags import RECORD_ARTIFACT

log = logging.getLogger(__name__)


def register_model(run: Run | str, name: str, *, tracking_uri: str | None = None) -> str | None:
    """Register ``run`` as the next version of model ``name``; returns the version number.

    Refuses with ``LineageIncomplete`` listing every blocking gate finding, in
    which case nothing is registered. ``run`` is the handle ``track`` yielded
    (after its block ended) or a run id logged by ``track``. In rebuild mode it
    does nothing and returns None: an audit never registers.

    ``name`` is held to the audit's rule for model names first (``auditor.uris.registrable_name``): a name the audit
    would refuse (a bidi control such as U+202E, ':', '@' …) is ``BadInput`` and nothing is registered; the name is
    registered in Unicode's composed form (NFC), and a registered name that looks like it (another case, the
    decomposed form, fullwidth letters) is warned about, on stderr and in the log.
    """
    from auditor.lineage.gate import blocking, check
    from auditor.registry import tracking
    from auditor.uris import registrable_name

    if (run.rebuild if isinstance(run, Run) else rebuild_mode()):
        return None
    given, name = name, registrable_name(name)
    if isinstance(run, Run):
        _check_ended(run)
        assert run._session is not None  # a finished training run has its MLflow session
        record, diff, run_id = run.record, run.diff, run.run_id or ""
        client, uri = run._session.client, run._session.uri
    else:
        from auditor.registry.mlflow import MlflowRegistry

        uri = tracking.tracking_uri(tracking_uri)
        registry = MlflowRegistry(uri)
        record, diff, run_id = *_record_of_run(registry, run), run
        client = registry.client
    findings = check(record, diff=diff)
    found = blocking(findings)
    if found:
        raise LineageIncomplete(found, subject=f"run {run_id} (not registered as {name!r})")
    alikes = tracking.look_alike_names(client, uri, name)
    if alikes:
        log.warning("model name %s looks like registered model(s) %s: one name on screen, %d models in MLflow",
                    _shown(name), ", ".join(_shown(n) for n in alikes), len(alikes) + 1)
    version = tracking.register(client, uri, run_id, name, record)
    announce(name, version, run_id, [f for f in findings if not f.blocking], given=given, look_alikes=alikes)
    return version


def _shown(name: str) -> str:
    """A name as a reader can tell it apart: hidden characters written out, and its code points when not ASCII."""
    from auditor.uris import visible

    return repr(visible(name)) if name.isascii() else f"{visible(name)!r} ({ascii(name)})"


def announce(name: str, version: str | None, run_id: str, warnings: list[Finding], *, stream: TextIO | None = None,
             given: str | None = None, look_alikes: Sequence[str] = ()) -> None:
    """Say what was registered and every warning the gate computed, by name and with its fix (on stderr, redacted);
    ``given``: the name as the caller spelled it (said when NFC changed it); ``look_alikes``: registered names that
    look like ``name``."""
    from auditor.lineage.redact import redact_text
    from auditor.uris import model_uri, visible

    out = stream or sys.stderr
    lines = [f"repro-audit: registered {visible(model_uri(name, str(version)))} (run {run_id})"]
    if given is not None and given != name:
        lines.append(f"repro-audit: the name was given as {ascii(given)} and is registered in Unicode's composed form "
                     f"(NFC) as {ascii(name)}: one spelling for one name")
    if look_alikes:
        lines.append(f"repro-audit: warning: {_shown(name)} looks like registered model(s) "
                     f"{', '.join(_shown(n) for n in look_alikes)}: one name on screen, {len(look_alikes) + 1} models in "
                     "MLflow\n      fix: if they are one model, register its versions under the existing name; if not, "
                     "give this one a name that reads differently")
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
