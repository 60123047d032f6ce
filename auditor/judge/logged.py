"""What the registered MLflow run shows beside the record: the metrics a reader of MLflow sees that the audit
never judged. Pure.

The audit judges the record's metrics (``outputs.metrics``, what ``run.log_metrics`` wrote). A metric logged to the
same MLflow run another way (``mlflow.log_metric`` after the block, an autologger) is shown on the model's page
but never recomputed, and a value there that is not the record's was not the one audited. Both are said, as
warnings naming the metrics: MLflow's latest value follows the step, so a script that logs out of step order can
differ honestly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from auditor.judge.calibrate import is_duration
from auditor.judge.tolerance import as_number
from auditor.lineage.findings import Finding

#: how far MLflow's value may lie from the record's (both are the float the script logged; MLflow keeps a double)
LOGGED_REL_TOL = 1e-9
SHOWN = 8


def _names(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def logged_metric_findings(recorded: Mapping[str, Any], logged: Mapping[str, Any], *, run_id: str) -> list[Finding]:
    """Warnings for the registered run's metrics (``logged``, MLflow's latest values) the record (``recorded``) does
    not hold, or holds with another value; durations aside."""
    unrecorded = sorted(n for n in logged if n not in recorded and not is_duration(n))
    differ = []
    for name in sorted(set(logged) & set(recorded)):
        a, b = as_number(logged[name]), as_number(recorded[name])
        if a is None or b is None or is_duration(name):
            continue
        if not (math.isnan(a) and math.isnan(b)) and not math.isclose(a, b, rel_tol=LOGGED_REL_TOL, abs_tol=1e-12):
            differ.append(f"{name} {a!r} in MLflow, {b!r} in the record")
    out = []
    if unrecorded:
        out.append(Finding(
            code="outputs.metric_unrecorded", path="outputs.metrics", severity="warning",
            message=(f"the registered run {run_id} shows metric(s) the run record does not hold, so no audit judges them: "
                     f"{_names(unrecorded)}"),
            hint="log every metric a reader relies on with run.log_metrics inside the tracked block"))
    if differ:
        out.append(Finding(
            code="outputs.metric_differs", path="outputs.metrics", severity="warning",
            message=(f"the registered run {run_id} shows another value than the run record, which is what the audit judges: "
                     f"{_names(differ)}"),
            hint="log metrics only through run.log_metrics, in step order; a value logged later was not audited"))
    return out


__all__ = ["logged_metric_findings"]
