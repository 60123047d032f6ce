"""What a calibration keeps of each rerun beyond its metrics: its decisions, and what the reruns cost.

- **decisions**: a seed-varied rerun that leaves its own scores on the recorded evaluation data (the
  predictions file, ``auditor.flavors.predictions``) keeps its decisions at the recorded threshold, packed a
  bit a row (``auditor.judge.multiplicity.pack``), so the predictive multiplicity figure is worked out from
  the stored calibration, never by rerunning;
- **cost**: how many reruns, their wall seconds, and the CPU seconds of the processes they ran
  (``RUSAGE_CHILDREN``: the children this process waited for; a container runner's CPU is the engine's and
  is not counted, said as ``cpu_s: None``).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def rerun_decisions(run: Any) -> dict[str, Any] | None:
    """The rerun's own binary decisions on the recorded evaluation rows, packed; None when it left no scores."""
    from auditor.contract import PREDICTIONS_FILE
    from auditor.errors import MalformedRecord

    path = run.output_dir / PREDICTIONS_FILE
    if not path.is_file():
        return None
    from auditor.flavors.predictions import decisions, read
    from auditor.judge.multiplicity import pack

    try:
        meta, arrays = read(path)
    except MalformedRecord as exc:
        log.warning("calibration: %s; its decisions are not kept", exc)
        return None
    score, threshold = arrays.get("rebuilt_score"), meta.get("threshold")
    if score is None or not isinstance(threshold, int | float):
        return None
    decided = decisions(score, float(threshold))
    if decided.dtype != bool:  # a multi-class arg-max: not packed as bits
        return None
    return {"packed": pack(decided), "rows": int(len(decided)), "threshold": float(threshold),
            "data_sha256": meta.get("data_sha256")}


def children_cpu_s() -> float | None:
    """CPU seconds (user + system) of every child process this one has waited for; None where not measurable."""
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    from auditor.rebuild import warm

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + warm.children_cpu_s()  # a warm rebuild is its worker's child, not ours


def cost(runs: list[Any], cpu_before: float | None, *, runner: str | None) -> dict[str, Any]:
    """What a calibration's reruns cost: how many, wall seconds, CPU seconds (process runner only), device seconds."""
    after = children_cpu_s()
    cpu = round(after - cpu_before, 3) if after is not None and cpu_before is not None and runner in (None, "process") else None
    device = [r.accelerator_s for r in runs if getattr(r, "accelerator_s", None) is not None]
    return {"reruns": len(runs), "wall_s": round(sum(r.wall_s for r in runs), 3), "cpu_s": cpu,
            "accelerator_s": round(sum(device), 3) if device else None, "runner": runner or "process"}


__all__ = ["children_cpu_s", "cost", "rerun_decisions"]
