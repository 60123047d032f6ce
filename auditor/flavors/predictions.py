"""Predictions as evidence: the registered model and its rebuild scored on the recorded evaluation data.

At training time ``run.save_model(model, eval_data=x, threshold=t)`` records what the evaluation data is
(rows, sha256 of its bytes) and the decision threshold (``Artifact.predictions``). In an audit's rebuild the
SDK scores that data with both models, each loaded from its file by its flavour's safe loader *inside the
rebuild's process* (the auditor never loads a model file that could execute code), and leaves the scores in
``REPRO_OUTPUT_DIR/predictions.npz`` (plain numeric arrays: read back with ``allow_pickle=False``). The auditor
then measures them against the *recorded* threshold: the largest raw-score difference and the decision-flip
rate (the share of rows whose accept/decline decision differs), ``compare``.

A score is the positive class's probability for a binary classifier (the decision is ``score >= threshold``),
the class probabilities for a multi-class one (the decision is the arg-max), else the prediction itself.
The raw score is the margin before the link function (XGBoost's ``output_margin``, LightGBM's ``raw_score``,
CatBoost's ``RawFormulaVal``, scikit-learn's ``decision_function``). Pure but for ``write``/``read``/``score_both``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from auditor.digests import sha256_digest
from auditor.errors import BadInput, MalformedRecord

#: the arrays of the predictions file, as the rebuild writes them
ARRAYS = ("registered_raw", "rebuilt_raw", "registered_score", "rebuilt_score")


def as_matrix(x: Any) -> Any:
    """The evaluation data as the model scores it: a DataFrame as it is (a pipeline's column transformer selects its
    columns by name; its columns may be of any type), else a numeric array of rows by features."""
    if _is_mixed_frame(x):
        return x
    array = np.asarray(x.to_numpy() if hasattr(x, "to_numpy") else x)
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise BadInput(f"eval_data must be numeric rows (an array or a DataFrame); it has dtype {array.dtype}",
                       hint="pass the evaluation features the model scores, e.g. x_test")
    if array.ndim != 2:
        raise BadInput(f"eval_data must be a 2-D array of rows by features; it has shape {list(array.shape)}",
                       hint="pass the evaluation features the model scores, e.g. x_test")
    return x if hasattr(x, "columns") else array


def _is_mixed_frame(x: Any) -> bool:
    """A pandas DataFrame with a column that is not numeric (strings, categories, dates)."""
    dtypes = getattr(x, "dtypes", None)
    return hasattr(x, "columns") and dtypes is not None and any(getattr(d, "kind", "O") not in "biuf" for d in dtypes)


def fingerprint(x: Any) -> str:
    """``sha256:`` of the evaluation data: its dtype, shape and bytes (C order); for a mixed DataFrame its column names
    and types, and pandas' own hash of every row (``pandas.util.hash_pandas_object``: the same values hash alike)."""
    if _is_mixed_frame(x):
        import pandas as pd

        head = json.dumps([[str(c) for c in x.columns], [str(d) for d in x.dtypes], list(x.shape)]).encode()
        return sha256_digest(head + b"\0" + pd.util.hash_pandas_object(x, index=True).to_numpy().tobytes())
    x = np.ascontiguousarray(x.to_numpy() if hasattr(x, "to_numpy") else x)  # a numeric DataFrame: its values
    head = json.dumps([str(x.dtype), list(x.shape)]).encode()
    return sha256_digest(head + b"\0" + x.tobytes())


def recorded(x: Any, threshold: float) -> dict[str, Any]:
    """What the run's artifact records about its evaluation data and decision threshold."""
    threshold = float(threshold)
    if not np.isfinite(threshold):
        raise BadInput(f"threshold {threshold!r} is not a finite number", hint="pass the decision threshold, e.g. threshold=0.5")
    return {"rows": int(x.shape[0]), "data_sha256": fingerprint(x), "threshold": threshold}


def score_both(flavor: str, registered: str | os.PathLike | None, rebuilt: str | os.PathLike, x: Any, *,
               rebuilt_model: Any = None) -> dict[str, np.ndarray]:
    """Both model files loaded by the flavour's safe loader and scored on ``x`` (run this in the rebuild only);
    with ``registered`` None (a calibration rerun: no registered model is handed to it) the rebuilt one alone.
    ``rebuilt_model``: ``rebuilt`` as that loader already read it back (``sdk.models.SavedModel.loaded``), not
    loaded again."""
    from auditor.flavors import module

    flavour = module(flavor)
    out: dict[str, np.ndarray] = {}
    sides = (("registered", registered), ("rebuilt", rebuilt)) if registered else (("rebuilt", rebuilt),)
    for side, path in sides:
        model = rebuilt_model if side == "rebuilt" and rebuilt_model is not None else flavour.load(path)
        raw, score = flavour.scores(model, x)
        out[f"{side}_raw"] = np.asarray(raw, dtype=np.float64)
        out[f"{side}_score"] = np.asarray(score, dtype=np.float64)
    return out


def write(path: str | os.PathLike, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None) -> None:
    """The predictions file: the metadata as a JSON string array, the scores as float64 arrays (no objects)."""
    target = Path(path)
    partial = target.with_name(target.name + ".partial.npz")
    np.savez(partial, meta=np.array(json.dumps(meta, sort_keys=True)), **(arrays or {}))
    partial.replace(target)


def read(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The metadata and arrays of a predictions file; never unpickles (``allow_pickle=False``)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: np.asarray(z[k], dtype=np.float64) for k in ARRAYS if k in z.files}
    except (OSError, ValueError, KeyError) as exc:
        raise MalformedRecord(f"{path}: not a readable predictions file: {exc}") from None
    if not isinstance(meta, dict):
        raise MalformedRecord(f"{path}: its metadata is not a JSON object")
    return meta, arrays


@dataclass(frozen=True)
class PredictionDiff:
    """The two models' scores compared at the recorded threshold."""

    rows: int
    max_abs_raw: float  # the largest raw-score (margin) difference
    max_abs_score: float  # the largest score (probability) difference
    flips: int  # rows whose decision differs
    threshold: float
    by_score: tuple[tuple[float, float, int, int], ...] = ()  # (low, high, rows, flips) per bin of the registered score

    @property
    def flip_rate(self) -> float:
        return self.flips / self.rows if self.rows else 0.0


def decisions(score: np.ndarray, threshold: float) -> np.ndarray:
    """Accept/decline per row: ``score >= threshold``; with one column per class, the arg-max."""
    if score.ndim == 2 and score.shape[1] > 1:
        return np.argmax(score, axis=1)
    return np.asarray(score).reshape(len(score), -1)[:, 0] >= threshold


def compare(arrays: dict[str, np.ndarray], threshold: float) -> PredictionDiff:
    """``MalformedRecord`` when the arrays do not pair up (another row count, a NaN): never a silent pass."""
    missing = [k for k in ARRAYS if k not in arrays]
    if missing:
        raise MalformedRecord(f"the predictions file lacks {', '.join(missing)}")
    ra, rb, sa, sb = (arrays[k] for k in ARRAYS)
    if ra.shape != rb.shape or sa.shape != sb.shape or len(sa) != len(ra):
        raise MalformedRecord(f"the two models' scores do not pair up: raw {list(ra.shape)} vs {list(rb.shape)}, "
                              f"scores {list(sa.shape)} vs {list(sb.shape)}")
    if not (np.all(np.isfinite(ra)) and np.all(np.isfinite(rb)) and np.all(np.isfinite(sa)) and np.all(np.isfinite(sb))):
        raise MalformedRecord("a score is NaN or infinite: the predictions cannot be compared")
    rows = len(sa)
    flipped = decisions(sa, threshold) != decisions(sb, threshold)
    flips = int(np.count_nonzero(flipped))
    gap_raw = float(np.max(np.abs(ra - rb))) if ra.size else 0.0
    gap_score = float(np.max(np.abs(sa - sb))) if sa.size else 0.0
    return PredictionDiff(rows=rows, max_abs_raw=gap_raw, max_abs_score=gap_score, flips=flips, threshold=float(threshold),
                          by_score=_by_score(sa, flipped) if flips and sa.ndim == 1 else ())  # one score per row only


def _by_score(scores: np.ndarray, flipped: np.ndarray, bins: int = 20) -> tuple[tuple[float, float, int, int], ...]:
    """Where the flips are: rows and flipped rows per bin of the registered model's score (the report's picture)."""
    lo, hi = float(np.min(scores)), float(np.max(scores))
    edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    rows, _ = np.histogram(scores, bins=edges)
    flips, _ = np.histogram(scores[flipped], bins=edges)
    return tuple((float(edges[i]), float(edges[i + 1]), int(rows[i]), int(flips[i])) for i in range(bins))
