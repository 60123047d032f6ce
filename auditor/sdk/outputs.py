"""Where a run's outputs go: an MLflow run at training time, ``REPRO_OUTPUT_DIR`` in a rebuild.

Training starts (or attaches to) an MLflow run when the block begins and logs the record, the
weights and everything MLflow users expect when it ends (``auditor.registry.tracking``). A rebuild
does no MLflow I/O: it leaves ``run_record.json``, ``metrics.json`` (and ``evaluation.json``) in
``REPRO_OUTPUT_DIR``, and the forked evaluation child ends there.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from auditor.contract import EVALUATION_FILE, METRICS_FILE, RECORD_FILE
from auditor.lineage.redact import redacted_logger
from auditor.sdk.evaluation import end_child
from auditor.sdk.run import Run

log = redacted_logger(__name__)


def start_session(run: Run, tracking_uri: str | None, experiment: str | None) -> None:
    """Start (or attach to) the MLflow run that training logs to."""
    from auditor.registry import tracking

    with _generators_untouched():  # MLflow draws its run names from `random`: a rebuild would not
        run._session = tracking.start(tracking_uri, experiment)
    run.run_id, run.tracking_uri = run._session.run_id, run._session.uri


def write_outputs(run: Run, train_seconds: float) -> None:
    """At the end of the block: log the run to MLflow, or in a rebuild write its outputs (and end an evaluation child)."""
    if run.rebuild:
        _write_rebuild_outputs(run)
        if run._evaluation_child:
            end_child(failed=run.failed, failure=run._exit_exc, scratch=run._scratch)
        return
    from auditor.registry import tracking

    tracking.finish(
        run._session, run.record, run.diff, weights=run._weights, train_seconds=train_seconds, failed=run.failed,
        pyfunc=run._pyfunc,
    )
    log.info("repro: logged run %s to %s (record %s)", run.run_id, run.tracking_uri, run.record.digest())


def _write_rebuild_outputs(run: Run) -> None:
    out = run._output_dir
    assert out is not None
    # The record is written even when training failed: its environment section explains the failure.
    (out / RECORD_FILE).write_text(run.record.to_json() + "\n", encoding="utf-8")
    if not run.failed:
        metrics = {k: v for k, v in run.record.outputs.metrics.items()}
        (out / METRICS_FILE).write_text(json.dumps(metrics, sort_keys=True, indent=2) + "\n", encoding="utf-8")
        if run._evaluated is not None:
            (out / EVALUATION_FILE).write_text(json.dumps({"weights": str(run._evaluated)}) + "\n", encoding="utf-8")


class _generators_untouched:  # noqa: N801 - a context manager used like a function
    """Keep Python's and NumPy's global generator states across code that is not the script's (MLflow's run names).

    Training logs to MLflow and a rebuild does not: whatever MLflow draws would shift the script's own draws
    at training time only, and the first segment's end state (and any draw the script makes) would differ.
    """

    def __init__(self) -> None:
        self._python: Any = None
        self._numpy: Any = None

    def __enter__(self) -> None:
        import random

        self._python = random.getstate()
        numpy = sys.modules.get("numpy")
        self._numpy = numpy.random.get_state() if numpy is not None else None

    def __exit__(self, *exc: Any) -> None:
        import random

        random.setstate(self._python)
        if self._numpy is not None:
            sys.modules["numpy"].random.set_state(self._numpy)
