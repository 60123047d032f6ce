"""Tolerance bands: how they are stored, validated on load, and checked against a value.

Storage format (one JSON document per model version, the registry's choice of carrier):

    {"schema": "repro.bands/1",
     "bands": {"auc": {"lower": 0.90, "upper": 0.92, "reference": 0.91, "direction": "higher",
                       "provenance": "calibrated", "method": "...", "runs": ["..."], "spread": {...}},
               "log_loss": {"reference": 0.31, "abs_tol": 0.01, "direction": "lower"}}}

The registry keeps it as the model-version tag ``repro.bands`` (:data:`BANDS_TAG`).
A band gives its edges either as ``lower``/``upper`` or, when *declared* by an owner, as a ``reference``
with ``abs_tol`` and/or ``rel_tol`` (edges = reference ∓ max(abs_tol, rel_tol·|reference|));
:func:`bands_to_json` always writes the explicit edges.

Judging rules (:func:`check_metric`): a value passes when ``lower <= value <= upper``; a value exactly on
an edge passes (the band is closed, so a declared "at least 0.90" means what it says). NaN, ±inf, a
missing value or anything that is not a number never passes. A band that is malformed never lets a value
pass either: :func:`bands_from_json` refuses it, naming the metric and the field.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from auditor.canonical import canonical_json
from auditor.errors import MalformedRecord
from auditor.judge.result import Band, MetricResult
from auditor.tags import TAG_BANDS

BANDS_SCHEMA = "repro.bands/1"
BANDS_TAG = TAG_BANDS

_DIRECTIONS = ("higher", "lower", "none")
_PROVENANCES = ("declared", "calibrated")
_BAND_FIELDS = set(Band.model_fields) | {"abs_tol", "rel_tol"}
_HINT = "fix the band (its format: README.md, section \"Band format\") or re-run `repro-audit calibrate`"


def as_number(value: Any) -> float | None:
    """``value`` as a float when it is a real number (bools are not), else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _display(value: Any) -> float | str | None:
    # NaN/inf have no JSON spelling: keep them as text so the evidence file stays canonical.
    number = as_number(value)
    if number is not None:
        return number if math.isfinite(number) else repr(number)
    if value is None or isinstance(value, str):
        return value
    return repr(value)


# -- loading and validation ---------------------------------------------------------------------------


def _bad(source: str, metric: str, field: str, problem: str) -> MalformedRecord:
    return MalformedRecord(f"{source}: band for metric {metric!r}, field {field!r}: {problem}", hint=_HINT)


def _finite(source: str, metric: str, field: str, value: Any) -> float:
    number = as_number(value)
    if number is None:
        raise _bad(source, metric, field, f"must be a number, got {value!r}")
    if not math.isfinite(number):
        raise _bad(source, metric, field, f"must be finite, got {value!r}")
    return number


def _choice(source: str, metric: str, field: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise _bad(source, metric, field, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def band_from_dict(metric: str, data: Any, *, source: str = "band") -> Band:
    """Validate one band as found in a bands document; every error names ``metric`` and the field."""
    if not isinstance(metric, str) or not metric:
        raise MalformedRecord(f"{source}: a band has an empty or non-text metric name {metric!r}", hint=_HINT)
    if not isinstance(data, Mapping):
        raise _bad(source, metric, "(band)", f"must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - _BAND_FIELDS)
    if unknown:
        raise _bad(source, metric, unknown[0], f"unknown field; allowed: {', '.join(sorted(_BAND_FIELDS))}")
    if "metric" in data and data["metric"] != metric:
        raise _bad(source, metric, "metric", f"says {data['metric']!r} but the band is filed under {metric!r}")

    reference = None if data.get("reference") is None else _finite(source, metric, "reference", data["reference"])
    has_edges = "lower" in data or "upper" in data
    has_tols = "abs_tol" in data or "rel_tol" in data
    if has_edges and has_tols:
        raise _bad(
            source,
            metric,
            "abs_tol" if "abs_tol" in data else "rel_tol",
            "give either lower/upper or tolerances around a reference, not both",
        )
    if has_tols:
        if reference is None:
            raise _bad(source, metric, "reference", "is required when the band is given as abs_tol/rel_tol")
        tols = {}
        for field in ("abs_tol", "rel_tol"):
            tol = _finite(source, metric, field, data.get(field, 0.0))
            if tol < 0:
                raise _bad(source, metric, field, f"must not be negative, got {tol!r}")
            tols[field] = tol
        half = max(tols["abs_tol"], tols["rel_tol"] * abs(reference))
        lower, upper = reference - half, reference + half
    else:
        for field in ("lower", "upper"):
            if field not in data:
                raise _bad(
                    source, metric, field, "is missing (give lower and upper, or reference with abs_tol/rel_tol)"
                )
        lower = _finite(source, metric, "lower", data["lower"])
        upper = _finite(source, metric, "upper", data["upper"])
    if lower > upper:
        raise _bad(source, metric, "lower", f"{lower!r} is above upper {upper!r}")

    provenance = _choice(source, metric, "provenance", data.get("provenance", "declared"), _PROVENANCES)
    method = data.get("method")
    if method is not None and not isinstance(method, str):
        raise _bad(source, metric, "method", f"must be text, got {method!r}")
    runs = data.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, str) and r for r in runs):
        raise _bad(source, metric, "runs", f"must be a list of run ids, got {runs!r}")
    if provenance == "calibrated":
        # A calibrated band without its method and runs cannot be re-checked, so it is not evidence.
        if not method:
            raise _bad(source, metric, "method", "is required for a calibrated band")
        if not runs:
            raise _bad(source, metric, "runs", "must name the reruns a calibrated band came from")
    spread = data.get("spread", {})
    if not isinstance(spread, Mapping):
        raise _bad(source, metric, "spread", f"must be an object of numbers, got {spread!r}")
    spread = {str(k): _finite(source, metric, f"spread.{k}", v) for k, v in spread.items()}
    calibrated_at = data.get("calibrated_at")
    if calibrated_at is not None and not isinstance(calibrated_at, str):
        raise _bad(source, metric, "calibrated_at", f"must be an ISO time as text, got {calibrated_at!r}")
    evidence = data.get("evidence")
    if evidence is not None and not (isinstance(evidence, Mapping) and all(isinstance(v, str) for v in evidence.values())):
        raise _bad(source, metric, "evidence", f"must name the calibration run as text fields, got {evidence!r}")
    declared_by = data.get("declared_by")
    if declared_by is not None and not isinstance(declared_by, str):
        raise _bad(source, metric, "declared_by", f"must be text, got {declared_by!r}")

    return Band(
        metric=metric,
        lower=lower,
        upper=upper,
        reference=reference,
        direction=_choice(source, metric, "direction", data.get("direction", "none"), _DIRECTIONS),
        provenance=provenance,
        method=method,
        runs=list(runs),
        spread=spread,
        calibrated_at=calibrated_at,
        evidence=dict(evidence) if evidence is not None else None,
        declared_by=declared_by,
    )


def bands_from_json(text: str | bytes, source: str) -> dict[str, Band]:
    """Parse and validate a bands document; ``source`` (tag or file name) goes into every error."""
    try:
        # NaN/Infinity literals parse to floats here so that the field check below names the field.
        doc = json.loads(text)
    except ValueError as exc:
        raise MalformedRecord(f"{source}: bands document is not valid JSON: {exc}", hint=_HINT) from exc
    if not isinstance(doc, dict):
        raise MalformedRecord(f"{source}: bands document must be a JSON object", hint=_HINT)
    if doc.get("schema") != BANDS_SCHEMA:
        raise MalformedRecord(
            f"{source}: bands document field 'schema' is {doc.get('schema')!r}, expected {BANDS_SCHEMA!r}",
            hint=_HINT,
        )
    extra = sorted(set(doc) - {"schema", "bands"})
    if extra:
        raise MalformedRecord(f"{source}: bands document has unknown field {extra[0]!r}", hint=_HINT)
    bands = doc.get("bands")
    if not isinstance(bands, dict):
        raise MalformedRecord(f"{source}: bands document field 'bands' must be an object of metric -> band", hint=_HINT)
    return {metric: band_from_dict(metric, data, source=source) for metric, data in bands.items()}


def bands_from_tags(tags: Mapping[str, str], *, source: str = "model version") -> dict[str, Band]:
    """The bands stored in a model version's tags; empty when the version has none."""
    text = tags.get(BANDS_TAG)
    if text is None:
        return {}
    return bands_from_json(text, f"{source} tag {BANDS_TAG}")


def bands_to_json(bands: Mapping[str, Band]) -> str:
    """Serialise bands as the canonical ``repro.bands/1`` document (stable bytes: same bands, same tag)."""
    body: dict[str, Any] = {}
    for metric, band in bands.items():
        if band.metric != metric:
            raise MalformedRecord(f"band filed under {metric!r} is for metric {band.metric!r}", hint=_HINT)
        # Round-trip through the validator so a band that would be refused on load is never written.
        data = band.model_dump(mode="python", exclude={"metric"}, exclude_none=True)
        band_from_dict(metric, data, source="bands_to_json")
        body[metric] = data
    return canonical_json({"schema": BANDS_SCHEMA, "bands": body}).decode("utf-8")


# -- checking a value -----------------------------------------------------------------------------------


def _band_problem(band: Band) -> str | None:
    # Bands built in code skip bands_from_json; check again so a bad one can never let a value through.
    edges = (as_number(band.lower), as_number(band.upper))
    if edges[0] is None or edges[1] is None or not all(math.isfinite(e) for e in edges):
        return f"band is malformed: edges {band.lower!r}..{band.upper!r} are not finite numbers"
    if edges[0] > edges[1]:
        return f"band is malformed: lower {band.lower!r} is above upper {band.upper!r}"
    return None


def _side_word(band: Band, above: bool) -> str:
    if band.direction == "none":
        return ""
    better = (band.direction == "higher") == above
    return " (better than the band)" if better else " (worse than the band)"


def check_metric(value: Any, band: Band | None, *, name: str | None = None, registered: Any = None) -> MetricResult:
    """Judge one rebuilt value against its band.

    ``inside`` is True only for a finite number with ``lower <= value <= upper`` (edges pass), False for
    anything else, and None when there is no band (the metric is reported, not judged). ``distance`` is
    the signed distance to the nearest edge: negative inside, 0.0 on an edge, positive outside, None when
    the value or band is not a finite number.
    """
    metric = name or (band.metric if band is not None else None)
    if not metric:
        raise ValueError("check_metric needs a band or a metric name")
    result = MetricResult(name=metric, registered=_display(registered), rebuilt=[_display(value)], band=band)
    if band is None:
        result.reason = "no band: reported, not judged (declare one or run `repro-audit calibrate`)"
        return result

    result.inside = False
    problem = _band_problem(band)
    number = as_number(value)
    if problem is not None:
        result.reason = problem
    elif value is None:
        result.reason = "missing: the rebuild did not report this metric"
    elif number is None:
        result.reason = f"not a number: {value!r}"
    elif math.isnan(number):
        result.reason = "NaN never passes"
    elif math.isinf(number):
        result.reason = f"{number!r} never passes"
    elif number < band.lower:
        result.distance = band.lower - number
        result.reason = f"below lower edge {band.lower!r} by {result.distance:.6g}{_side_word(band, above=False)}"
    elif number > band.upper:
        result.distance = number - band.upper
        result.reason = f"above upper edge {band.upper!r} by {result.distance:.6g}{_side_word(band, above=True)}"
    else:
        result.inside = True
        result.distance = 0.0 - min(number - band.lower, band.upper - number)
        result.reason = "on the edge (edges pass)" if result.distance == 0.0 else "inside"
    if result.distance is not None and not math.isfinite(result.distance):
        result.distance = None  # a difference that overflows has no JSON form; inside/reason still say it all
    return result


def check_metrics(
    rebuilt: Sequence[Mapping[str, Any]],
    bands: Mapping[str, Band],
    registered: Mapping[str, Any] | None = None,
) -> list[MetricResult]:
    """Judge every metric over one or more reruns; a metric is inside only when every rerun is.

    Metrics are the union of the bands, the rebuilt and the registered names, sorted. A banded metric
    missing from any rerun fails; an unbanded one is reported with ``inside=None``. ``distance`` and
    ``reason`` are the worst rerun's.
    """
    registered = registered or {}
    names = sorted(set(bands) | {k for run in rebuilt for k in run} | set(registered))
    results = []
    for name in names:
        per_run = [check_metric(run.get(name), bands.get(name), name=name) for run in rebuilt] or [
            check_metric(None, bands.get(name), name=name)
        ]
        worst = per_run[0]
        for candidate in per_run[1:]:
            if _worse(candidate, worst):
                worst = candidate
        inside = None if name not in bands else all(r.inside for r in per_run)
        results.append(
            MetricResult(
                name=name,
                registered=_display(registered.get(name)),
                rebuilt=[_display(run.get(name)) for run in rebuilt],
                band=bands.get(name),
                inside=inside,
                distance=worst.distance,
                reason=worst.reason if len(per_run) == 1 else _multi_reason(per_run, worst),
            )
        )
    return results


def _worse(a: MetricResult, b: MetricResult) -> bool:
    if a.inside != b.inside:
        return a.inside is False
    if a.distance is None or b.distance is None:
        return a.distance is None and b.distance is not None and a.inside is False
    return a.distance > b.distance


def _multi_reason(per_run: list[MetricResult], worst: MetricResult) -> str:
    failed = sum(1 for r in per_run if r.inside is False)
    if failed == 0:
        return f"all {len(per_run)} reruns inside; closest to an edge: {worst.reason}"
    return f"{failed} of {len(per_run)} reruns outside; worst: {worst.reason}"
