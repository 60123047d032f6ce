"""Predictive multiplicity: would a row get the same decision from an equally good model trained under another seed?

A calibration's seed-varied reruns are equally good models of one recipe (they differ only in the seed).
Each leaves its decisions on the recorded evaluation rows at the recorded decision threshold
(``auditor.flavors.predictions.decisions``). Over those reruns:

- **flip share** (Marx, Calmon and Ustun's *ambiguity*, ICML 2020, arXiv 1909.06677): the share of rows whose
  decision is not the same in every rerun. The number a regulator asking "would this applicant get the same
  answer from an equally good model?" gets: for that share of applicants, no;
- **discrepancy**: the largest share of rows on which two reruns disagree (the worst pair);
- **mean pairwise flip rate**: the share of rows two reruns disagree on, averaged over every pair;
- the **most affected rows**: those whose decision is split most evenly between the reruns (the minority's
  share: 0.5 is a coin toss), and, when the rows carry a segment, each segment's flip share, worst first.

Decisions travel packed (``pack``/``unpack``: one bit per row for a binary decision, base64), so a calibration
document holds them at 1/8 of a byte a row. Pure: no I/O.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

#: the most affected rows and segments a report lists
TOP = 10
SOURCE = "Marx, Calmon and Ustun, Predictive Multiplicity in Classification, ICML 2020 (arXiv 1909.06677)"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AffectedRow(_Model):
    row: int  # the row's index in the evaluation data
    majority: int  # reruns that gave the row's most common decision
    reruns: int
    minority: float  # the share of reruns that disagree with the majority: 0.5 is a coin toss
    segment: str | None = None


class SegmentFlips(_Model):
    segment: str
    rows: int
    flipped: int

    @property
    def share(self) -> float:
        return self.flipped / self.rows if self.rows else 0.0


class Multiplicity(_Model):
    """The multiplicity figure of one calibration's seed-varied reruns (``status`` says when it could not be made)."""

    status: str = "measured"  # measured | not_measured
    reason: str = ""  # why not measured, in words, with the fix
    reruns: int = 0
    rows: int = 0
    threshold: float | None = None
    flipped: int = 0  # rows whose decision is not the same in every rerun
    flip_share: float = 0.0
    discrepancy: float = 0.0  # the worst pair of reruns: the share of rows they disagree on
    mean_pairwise: float = 0.0
    most_affected: list[AffectedRow] = Field(default_factory=list)
    segments: list[SegmentFlips] = Field(default_factory=list)
    source: str = SOURCE

    @property
    def sentence(self) -> str:
        if self.status != "measured":
            return f"Predictive multiplicity not measured: {self.reason}"
        return (f"{self.flipped} of {self.rows} evaluation rows ({self.flip_share:.1%}) get another decision from at least one "
                f"of {self.reruns} equally good models that differ only in the seed (at threshold {self.threshold:g}); two such "
                f"models disagree on {self.mean_pairwise:.1%} of rows on average, {self.discrepancy:.1%} at worst.")


def not_measured(reason: str, reruns: int = 0) -> Multiplicity:
    return Multiplicity(status="not_measured", reason=reason, reruns=reruns)


def pack(decisions: Sequence[Any]) -> str:
    """Binary decisions as base64 of their bits (``np.packbits``); the row count travels beside them."""
    bits = np.asarray(decisions).astype(bool)
    return base64.b64encode(np.packbits(bits).tobytes()).decode("ascii")


def unpack(text: str, rows: int) -> np.ndarray:
    """The ``rows`` binary decisions ``pack`` wrote; ``ValueError`` when the text holds fewer."""
    raw = np.frombuffer(base64.b64decode(text.encode("ascii"), validate=True), dtype=np.uint8)
    bits = np.unpackbits(raw)
    if len(bits) < rows or len(raw) != (rows + 7) // 8:
        raise ValueError(f"packed decisions hold {len(bits)} bits, not the {rows} rows recorded")
    return bits[:rows].astype(bool)


def measure(decisions: Sequence[Sequence[Any]], *, threshold: float | None = None, segments: Sequence[Any] | None = None,
            top: int = TOP) -> Multiplicity:
    """The multiplicity figure of one decision vector per rerun (same rows, same order); see the module docstring.

    ``ValueError`` when fewer than 2 reruns are given or their row counts differ (never a silent figure).
    """
    vectors = [np.asarray(d).reshape(-1) for d in decisions]
    if len(vectors) < 2:
        raise ValueError(f"predictive multiplicity needs the decisions of at least 2 reruns, got {len(vectors)}")
    if len({len(v) for v in vectors}) != 1:
        raise ValueError(f"the reruns' decisions cover different numbers of rows: {sorted({len(v) for v in vectors})}")
    matrix = np.stack(vectors)
    reruns, rows = matrix.shape
    if segments is not None and len(segments) != rows:
        raise ValueError(f"{len(segments)} segment labels for {rows} rows")
    first = matrix[0]
    flipped_rows = np.any(matrix != first, axis=0)
    pairs = [float(np.mean(matrix[i] != matrix[j])) for i, j in itertools.combinations(range(reruns), 2)] if rows else [0.0]
    # per row: how many reruns side with its most common decision
    majority = np.array([np.max(np.unique(matrix[:, r], return_counts=True)[1]) for r in range(rows)], dtype=int)
    minority = (reruns - majority) / reruns
    order = sorted((r for r in range(rows) if flipped_rows[r]), key=lambda r: (-minority[r], r))[:top]
    labels = [None if segments is None else str(segments[r]) for r in range(rows)]
    affected = [AffectedRow(row=r, majority=int(majority[r]), reruns=reruns, minority=float(minority[r]), segment=labels[r])
                for r in order]
    by_segment: list[SegmentFlips] = []
    if segments is not None:
        names = sorted({str(s) for s in segments})
        for name in names:
            members = [r for r in range(rows) if labels[r] == name]
            by_segment.append(SegmentFlips(segment=name, rows=len(members), flipped=int(sum(flipped_rows[r] for r in members))))
        by_segment.sort(key=lambda s: (-s.share, s.segment))
        by_segment = by_segment[:top]
    flipped = int(np.count_nonzero(flipped_rows))
    return Multiplicity(reruns=reruns, rows=rows, threshold=threshold, flipped=flipped, flip_share=flipped / rows if rows else 0.0,
                        discrepancy=max(pairs), mean_pairwise=sum(pairs) / len(pairs), most_affected=affected, segments=by_segment)


def from_calibration(calibration: Any) -> Multiplicity | None:
    """The figure from a calibration's stored decisions (``FloorRun.decisions``); None without a calibration.

    Reruns that kept no decisions, or decisions on other rows or at another threshold than the rest, make it
    ``not_measured`` with the reason: a figure over unlike rows would mean nothing.
    """
    if calibration is None or not calibration.seed_varied:
        return None
    runs = calibration.seed_varied
    kept = [r.decisions for r in runs if r.decisions]
    if len(kept) < len(runs):
        return not_measured(
            f"{len(runs) - len(kept)} of {len(runs)} seed-varied reruns left no scores on the recorded evaluation data; record it "
            "with run.save_model(model, eval_data=x_test, threshold=t) (PyTorch: run.save_weights(module, eval_data=x_test, "
            "threshold=t), the rows as the module takes them) and recalibrate",
            len(runs))
    if len(kept) < 2:
        return not_measured("fewer than 2 seed-varied reruns kept their decisions", len(kept))
    shapes = {(d.get("rows"), d.get("threshold"), d.get("data_sha256")) for d in kept}
    if len(shapes) != 1:
        return not_measured("the reruns scored different evaluation rows or thresholds: "
                            + "; ".join(f"{rows} rows at {t} ({sha})" for rows, t, sha in sorted(shapes, key=str)), len(kept))
    rows, threshold, _ = shapes.pop()
    try:
        decided = [unpack(str(d["packed"]), int(rows)) for d in kept]
    except (KeyError, TypeError, ValueError) as exc:
        return not_measured(f"the stored decisions cannot be read: {exc}", len(kept))
    return measure(decided, threshold=float(threshold) if threshold is not None else None)


__all__ = ["SOURCE", "TOP", "AffectedRow", "Multiplicity", "SegmentFlips", "from_calibration", "measure", "not_measured", "pack",
           "unpack"]
