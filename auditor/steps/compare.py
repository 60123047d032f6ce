"""``compare``: is a candidate version's improvement over the incumbent real, or within seed noise?

Both versions' seed-varied reruns (their stored calibrations, each checked against its run's sha256
param; a version with none is calibrated first, through ``Session.calibrate``) go to the pure
comparison (``auditor.judge.compare``). The comparison document and the MLflow-native thresholds derived
from the measured noise are written to the reports store under ``comparisons/NAME/``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from auditor.errors import BadInput, Findings
from auditor.lineage.findings import Finding
from auditor.report.ledger import COMPARISONS
from auditor.steps.common import Progress, now

log = logging.getLogger(__name__)

#: where comparisons are written in the reports store (not ledgered: ``auditor.report.ledger.COMPARISONS``)
COMPARISONS_PREFIX = COMPARISONS.rstrip("/")


def _reruns_of(session: Any, ref: str, *, reruns: int, runner: str | None, calibrate_missing: bool,
               progress: Progress) -> tuple[Any, Any, bool, list[Finding]]:
    """(version, calibration, calibrated here, findings): the version's newest stored calibration, or a new one."""
    from auditor.steps.calibrate import stored_calibrations

    findings: list[Finding] = []
    info = session.registry.resolve(ref)  # pinned: an alias may move while we work
    calibration, _, _ = stored_calibrations(session, info, findings)
    if calibration is not None and calibration.seed_varied:
        return info, calibration, False, findings
    if not calibrate_missing:
        raise BadInput(f"{info.ref} has no calibration to compare with", hint=f"run `repro-audit calibrate {info.ref}` first")
    progress(f"{info.ref} has no seed-varied reruns: calibrating it ({reruns} reruns)")
    log.info("compare: calibrating %s first (%d reruns)", info.ref, reruns)
    bands = session.calibrate(info.ref, reruns=reruns, runner=runner, progress=progress)
    return session.registry.resolve(info.ref), bands.calibration, True, findings


def _directions(session: Any, info: Any) -> dict[str, str]:
    """Each metric's better direction as the version's bands say it (names decide for a metric without one)."""
    from auditor.judge.tolerance import bands_from_json
    from auditor.tags import TAG_BANDS

    text = session.registry.get_bands(info)
    if not text:
        return {}
    return {name: band.direction for name, band in bands_from_json(text, source=f"{info.ref} tag {TAG_BANDS}").items()
            if band.direction != "none"}


def _publish(session: Any, comparison: Any, candidate: Any, incumbent: Any) -> dict[str, str]:
    """Write the comparison and its thresholds to the reports store; returns their URIs."""
    stamp = (comparison.compared_at or now()).replace(":", "").replace("-", "")
    stem = f"{COMPARISONS_PREFIX}/{candidate.name}/v{candidate.version}-vs-{incumbent.name}-v{incumbent.version}-{stamp}"
    store = session.store
    documents = {"comparison": (f"{stem}.json", comparison.model_dump(mode="json")),
                 "thresholds": (f"{stem}.thresholds.json", comparison.thresholds())}
    published = {}
    for what, (key, doc) in documents.items():
        store.write(key, json.dumps(doc, indent=2, sort_keys=True).encode("utf-8"), overwrite=True)
        published[what] = f"{store.uri.rstrip('/')}/{key}"
    return published


def compare(session: Any, candidate_ref: str, incumbent_ref: str, *, reruns: int = 5, metrics: Sequence[str] | None = None,
            runner: str | None = None, calibrate_missing: bool = True, publish: bool = True, progress: Progress) -> Any:
    """Compare the candidate with the incumbent through both versions' seed-varied reruns; returns a
    ``judge.compare.Comparison`` (``published`` names what was written when ``publish``)."""
    from auditor.judge.compare import compare_reruns

    candidate, cand_cal, cand_new, found = _reruns_of(session, candidate_ref, reruns=reruns, runner=runner,
                                                      calibrate_missing=calibrate_missing, progress=progress)
    incumbent, inc_cal, inc_new, more = _reruns_of(session, incumbent_ref, reruns=reruns, runner=runner,
                                                   calibrate_missing=calibrate_missing, progress=progress)
    if candidate.ref == incumbent.ref:
        raise BadInput(f"{candidate_ref} and {incumbent_ref} are the same version, {candidate.ref}",
                       hint="compare the candidate with the version the production alias points at")
    for info, calibration in ((candidate, cand_cal), (incumbent, inc_cal)):
        if not calibration.same_seed.bit_identical and not calibration.explained_spread:
            raise Findings(f"{info.ref} cannot be compared: {calibration.findings()[0]}",
                           hint="pin the input its reruns read otherwise, retrain and calibrate; then compare")
    directions = {**_directions(session, incumbent), **_directions(session, candidate),
                  **dict(session.settings.metric_directions)}  # declared now: wins over what a band stored
    try:
        comparison = compare_reruns(candidate.ref, incumbent.ref, [r.metrics for r in cand_cal.seed_varied],
                                    [r.metrics for r in inc_cal.seed_varied], metrics=metrics, directions=directions,
                                    compared_at=now())
    except ValueError as exc:
        raise BadInput(f"{candidate.ref} vs {incumbent.ref}: {exc}", hint="name metrics both versions report (--metric)") from None
    comparison = comparison.model_copy(update={
        "reruns": {candidate.ref: len(cand_cal.seed_varied), incumbent.ref: len(inc_cal.seed_varied)},
        "calibrated_now": [i.ref for i, new in ((candidate, cand_new), (incumbent, inc_new)) if new],
        "cost": {i.ref: {**(c.cost or {}), "reused": not new}
                 for i, c, new in ((candidate, cand_cal, cand_new), (incumbent, inc_cal, inc_new))},
        "findings": [f.message for f in [*found, *more]] + [line for c in (cand_cal, inc_cal) for line in c.findings()]})
    if publish:
        comparison = comparison.model_copy(update={"published": _publish(session, comparison, candidate, incumbent)})
    log.info("compare %s vs %s: %s", candidate.ref, incumbent.ref, comparison.words)
    return comparison


__all__ = ["COMPARISONS_PREFIX", "compare"]
