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
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from auditor.canonical import canonical_json
from auditor.errors import MalformedRecord
from auditor.judge.result import Band, Direction, MetricResult, Provenance
from auditor.tags import TAG_BANDS

BANDS_SCHEMA = "repro.bands/1"
BANDS_TAG = TAG_BANDS

_HINT = "fix the band (its format: docs/reference/formats.md, \"Band format\") or re-run `repro-audit calibrate`"


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


def _finite(value: Any) -> float:
    number = as_number(value)
    if number is None:
        raise ValueError(f"must be a number, got {value!r}")
    if not math.isfinite(number):
        raise ValueError(f"must be finite, got {value!r}")
    return number


#: a JSON number that is finite (``true`` is not a number)
Finite = Annotated[float, BeforeValidator(_finite)]
Tolerance = Annotated[Finite, Field(ge=0)]
RunId = Annotated[str, Field(min_length=1)]


class _FieldError(ValueError):
    """A problem a check across fields finds, and the field to name."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


class StoredBand(BaseModel):
    """One band as a ``repro.bands/1`` document stores it; :meth:`band` is the :class:`Band` it gives.

    The edges are ``lower``/``upper`` or, for a band declared by hand, a ``reference`` with ``abs_tol`` and/or
    ``rel_tol`` (a null is an absent field). A calibrated band names its method and its reruns. Validate with
    ``context={"metric": name}``: a ``metric`` field must repeat the name the band is filed under.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    metric: str | None = None
    lower: Finite | None = None
    upper: Finite | None = None
    reference: Finite | None = None
    abs_tol: Tolerance | None = None
    rel_tol: Tolerance | None = None
    direction: Direction = "none"
    provenance: Provenance = "declared"
    method: str | None = None
    runs: list[RunId] = Field(default_factory=list)
    spread: dict[str, Finite] = Field(default_factory=dict)
    calibrated_at: str | None = None
    evidence: dict[str, str] | None = None  # names the calibration run as text fields
    declared_by: str | None = None

    @field_validator("metric")
    @classmethod
    def _filed_under(cls, metric: str | None, info: ValidationInfo) -> str | None:
        filed = (info.context or {}).get("metric")
        if filed is not None and metric != filed:
            raise ValueError(f"says {metric!r} but the band is filed under {filed!r}")
        return metric

    @model_validator(mode="after")
    def _complete(self) -> StoredBand:
        tolerances = [name for name in ("abs_tol", "rel_tol") if getattr(self, name) is not None]
        if tolerances and (self.lower is not None or self.upper is not None):
            raise _FieldError(tolerances[0], "give either lower/upper or tolerances around a reference, not both")
        if tolerances and self.reference is None:
            raise _FieldError("reference", "is required when the band is given as abs_tol/rel_tol")
        for name in () if tolerances else ("lower", "upper"):
            if getattr(self, name) is None:
                raise _FieldError(name, "is missing (give lower and upper, or reference with abs_tol/rel_tol)")
        lower, upper = self.edges()
        if lower > upper:
            raise _FieldError("lower", f"{lower!r} is above upper {upper!r}")
        # A calibrated band without its method and runs cannot be re-checked, so it is not evidence.
        if self.provenance == "calibrated" and not self.method:
            raise _FieldError("method", "is required for a calibrated band")
        if self.provenance == "calibrated" and not self.runs:
            raise _FieldError("runs", "must name the reruns a calibrated band came from")
        return self

    def edges(self) -> tuple[float, float]:
        """``(lower, upper)``: as given, or reference ∓ max(abs_tol, rel_tol·|reference|)."""
        if self.reference is None or (self.abs_tol is None and self.rel_tol is None):
            return self.lower, self.upper  # both present: _complete checked
        half = max(self.abs_tol or 0.0, (self.rel_tol or 0.0) * abs(self.reference))
        return self.reference - half, self.reference + half

    def band(self, metric: str) -> Band:
        lower, upper = self.edges()
        kept = self.model_dump(exclude={"metric", "lower", "upper", "abs_tol", "rel_tol"})
        return Band(metric=metric, lower=lower, upper=upper, **kept)


#: pydantic's error types, as a band's errors say them (the rest: pydantic's own words)
_PROBLEMS = {
    "model_type": "must be a JSON object",
    "string_type": "must be text",
    "string_too_short": "must not be empty",
    "greater_than_equal": "must not be below {ge}",
    "list_type": "must be a list",
    "dict_type": "must be an object",
    "literal_error": "must be one of {expected}",
}


def _field_and_problem(error: ErrorDetails) -> tuple[str, str]:
    """The field a pydantic ``error`` is about (``spread.std``; ``(band)``: the whole band) and the problem."""
    ctx = error.get("ctx", {})
    cause = ctx.get("error")
    field = getattr(cause, "field", None) or ".".join(str(part) for part in error["loc"]) or "(band)"
    if isinstance(cause, ValueError):  # one of the checks above: its words
        return field, str(cause)
    if error["type"] == "extra_forbidden":
        return field, f"unknown field; allowed: {', '.join(sorted(StoredBand.model_fields))}"
    words = _PROBLEMS[error["type"]].format(**ctx) if error["type"] in _PROBLEMS else error["msg"]
    got = type(error["input"]).__name__ if error["type"] == "model_type" else repr(error["input"])
    return field, f"{words}, got {got}"


def band_from_dict(metric: str, data: Any, *, source: str = "band") -> Band:
    """Validate one band as found in a bands document; every error names ``metric`` and the field."""
    if not isinstance(metric, str) or not metric:
        raise MalformedRecord(f"{source}: a band has an empty or non-text metric name {metric!r}", hint=_HINT)
    try:
        stored = StoredBand.model_validate(data, context={"metric": metric})
    except ValidationError as exc:
        field, problem = _field_and_problem(exc.errors()[0])
        raise MalformedRecord(f"{source}: band for metric {metric!r}, field {field!r}: {problem}", hint=_HINT) from None
    return stored.band(metric)


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
