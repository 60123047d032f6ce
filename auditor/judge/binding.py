"""Bands bound to their evidence: a calibrated band must follow from the calibration that names it. Pure.

A band tag is editable; the calibration run's params are not. So a calibrated band names
its calibration run and the sha256 of that run's evidence artifact (per-rerun metrics,
seeds, weight digests), and the judge recomputes every band from that evidence with the
same function calibration used. A band that does not follow (narrowed, widened, moved,
or "calibrated" with no evidence) is refused, with a finding naming the metric; the
metric is then judged as having no band. Where the version has been calibrated, a band
for a metric the calibration covers must be the calibrated one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from auditor.judge.calibrate import bands_from_reruns
from auditor.judge.floors import Calibration
from auditor.judge.result import Band
from auditor.lineage.findings import Finding

_EDGES = ("lower", "upper", "reference")


def rerun_ids(calibration: Calibration) -> list[str]:
    """The rerun ids calibration gives its seed-varied reruns (the bands name them)."""
    return [f"rerun-{i + 1}-seed-{run.seed}" for i, run in enumerate(calibration.seed_varied)]


def expected_bands(calibration: Calibration, registered: Mapping[str, Any]) -> dict[str, Band]:
    """The bands ``calibration`` produces, exactly as ``auditor.steps.calibrate`` computed them."""
    zero = set(calibration.zero_spread)
    reruns = {
        run_id: {k: v for k, v in run.metrics.items() if k not in zero}
        for run_id, run in zip(rerun_ids(calibration), calibration.seed_varied, strict=True)
    }
    return bands_from_reruns(reruns, directions=calibration.directions, registered=registered,
                             calibrated_at=calibration.calibrated_at)


def _same(a: Band, b: Band) -> str | None:
    for name in _EDGES:
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None) or (x is not None and not math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15)):
            return f"{name} {x!r} where its evidence gives {y!r}"
    if a.direction != b.direction:
        return f"direction {a.direction!r} where its evidence gives {b.direction!r}"
    if list(a.runs) != list(b.runs):
        return f"{len(a.runs)} runs named where its evidence holds {len(b.runs)}"
    return None


def bind(
    bands: Mapping[str, Band],
    calibration: Calibration | None,
    evidence: Mapping[str, str] | None,
    registered: Mapping[str, Any],
) -> tuple[dict[str, Band], list[Finding]]:
    """The bands the judge may use, and a finding for each one refused.

    ``calibration`` is the version's newest calibration as its run stored it (checked against
    the run's sha256 param by the caller) and ``evidence`` names that run
    (``{"run_id", "sha256", "artifact"}``); both None when the version was never calibrated.
    """
    kept: dict[str, Band] = {}
    findings: list[Finding] = []
    expected = expected_bands(calibration, registered) if calibration is not None else {}

    def refuse(metric: str, why: str) -> None:
        findings.append(Finding(
            code="band.unbound", path=f"bands.{metric}", severity="warning",
            message=f"the band for {metric!r} was refused: {why}; the metric is judged as having no band",
            hint="re-run `repro-audit calibrate` (or remove the hand edit from the bands tag)"))

    for metric, band in bands.items():
        if band.provenance == "calibrated":
            if calibration is None or not band.evidence:
                refuse(metric, "it says calibrated but names no calibration evidence this version has")
                continue
            if evidence is not None and band.evidence.get("sha256") != evidence.get("sha256"):
                refuse(metric, (f"it names calibration evidence {band.evidence.get('sha256')}, not the newest "
                                f"calibration of this version ({evidence.get('sha256')}, run {evidence.get('run_id')})"))
                continue
            if metric not in expected:
                refuse(metric, "its calibration evidence gives no band for it")
                continue
            problem = _same(band, expected[metric])
            if problem:
                refuse(metric, f"it does not follow from its calibration evidence: {problem}")
                continue
        elif metric in expected:
            refuse(metric, (f"it is declared{' by ' + band.declared_by if band.declared_by else ''}, but this version "
                            f"was calibrated (run {(evidence or {}).get('run_id')}) and the calibration gives its band"))
            continue
        kept[metric] = band
    return kept, findings
