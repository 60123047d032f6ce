"""The report's headline: which evidence failed, in one sentence, from the tier that failed.

A verdict has several causes: an OUT_OF_TOLERANCE may be a metric outside its band, weights farther from
the registered ones than the same-seed floor allows while every metric is inside, weights that differ where
the recipe is bit-identical, or another model altogether. The banner names the one that happened, so
that no report says "a metric left its band" when every metric is inside. Pure: reads an ``AuditResult``.
"""

from __future__ import annotations

from typing import NamedTuple

from auditor.judge.result import AuditResult, Verdict

#: the codes of findings that say a recorded data input differs from training's
DATA_CHANGED_CODES = ("data.changed",)
#: the code of the finding that says a download gave other bytes than at training (``auditor.sdk``'s downloads)
SOURCE_CHANGED_CODE = "data.source_changed"
#: the causes whose evidence is the weights' distance (the report pictures it against the same-seed floor)
WEIGHT_CAUSES = ("floor", "deterministic", "no_floor", "unseeded", "input_spread", "unverified")
#: the causes whose failing evidence is the same-seed spread itself, not the rebuild's distance (the floor picture says
#: so): reruns that should be bit-identical differ. An unverified noise claim is not one: its spread was never checked
SPREAD_CAUSES = ("input_spread",)


class Cause(NamedTuple):
    """What failed: a key (tests and CSS), the banner's title after the verdict, the explanation beneath it."""

    key: str
    title: str
    explanation: str


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _weights_cause(summary: str, outside: int) -> Cause:
    """The statistical tier failed on the weights: which rule of the judge (``auditor.judge.verdict``) said no."""
    text = summary.lower()
    metrics = ("every banded metric is inside its band" if not outside
               else f"{outside} {_plural(outside, 'metric', 'metrics')} also left {_plural(outside, 'its band', 'their bands')}")
    if "no recorded seed controls" in text or "expected not reproducible" in text:
        return Cause("unseeded", "the run draws randomness no recorded seed controls",
                     "The rebuilt weights differ, and the run uses a random generator that no recorded seed controls, so "
                     f"no band or floor can tell its noise from a divergence ({metrics}). Seed every generator the script uses.")
    if "same-seed reruns differ although" in text or "reruns at calibration differed although" in text:
        return Cause("input_spread", "same-seed reruns differ although nothing in the record says this run cannot be bitwise",
                     "Reruns under the recorded seed should have been bit-identical (no GPU, world size or declared "
                     "nondeterministic source in the record), yet calibration measured them apart (the bar below: it should be "
                     "zero). The spread comes from an input the record does not pin (the clock, an unseeded generator, a side "
                     f"file), so no floor can excuse the rebuild's difference ({metrics}). Pin that input, retrain and register.")
    if "claim was never verified" in text:
        return Cause("unverified", "the claimed noise source was never verified",
                     "Same-seed reruns differ and the record claims why, but the claim was not verified by reruns with execution "
                     f"made deterministic, so it widens no tolerance ({metrics}). Recalibrate (`repro-audit calibrate`).")
    if "bit-identical" in text:
        return Cause("deterministic", "the weights differ where the recipe is bit-identical",
                     "Same-seed calibration showed this recipe bit-identical on this platform, yet the rebuilt weights differ "
                     f"from the registered ones: an input the record does not pin has changed ({metrics}).")
    if "no same-seed floor" in text:
        return Cause("no_floor", "the weights differ and no same-seed floor was measured",
                     "The rebuilt weights differ from the registered ones and no same-seed calibration says by how much they "
                     f"may ({metrics}): run `repro-audit calibrate` to measure the floor.")
    return Cause("floor", "the weights lie outside the same-seed floor",
                 "The model was rebuilt, but its weights lie farther from the registered ones than reruns under the recorded "
                 f"seed ever did (the same-seed floor, pictured under Weights); {metrics}.")


#: hyperparameters in the words a validator uses (XGBoost calls the learning rate ``eta``)
PARAM_WORDS = {"eta": "learning rate", "learning_rate": "learning rate", "n_estimators": "number of trees",
               "num_iterations": "number of trees", "iterations": "number of trees", "max_depth": "maximum depth"}


def _parameter_cause(audit: AuditResult) -> Cause | None:
    """The rebuild resolved another hyperparameter than training (``model.cause``, named by the flavour's diff): the
    root cause, in a validator's words, with the decisions it flips."""
    said = audit.evidence.get("model.cause")
    if not said or not said.startswith("parameter "):
        return None
    name, _, values = said.removeprefix("parameter ").partition(": ")
    trained, _, rebuilt = values.partition(" vs ")
    short = PARAM_WORDS.get(name.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1].replace("_", " "))
    title = f"the rebuild resolved {short} {_number(rebuilt)} where training used {_number(trained)}"
    flips, rows = audit.evidence.get("predictions.flips"), audit.evidence.get("predictions", "").split(" rows")[0]
    if flips and rows.isdigit():
        title += f"; {flips} of {rows} decisions flip"
    return Cause("parameter", title,
                 f"The rebuilt model is another model because a hyperparameter resolved otherwise than at training ({name}: "
                 f"{values}); the differing trees and values listed below follow from it. Pin it in the recorded config (or "
                 "find what changed it: a library default, an environment variable, a side file), then retrain and register.")


def _number(text: str) -> str:
    """A parameter's value as a validator reads it: a float echoed at float32 precision rounded to 6 digits."""
    raw = text.strip().strip("'\"")
    try:
        return f"{float(raw):.6g}"
    except ValueError:
        return raw


def _tolerance(audit: AuditResult) -> Cause:
    diff = audit.weight_diff
    parameter = _parameter_cause(audit)
    if parameter is not None:
        return parameter
    if diff is not None and (diff.only_in_a or diff.only_in_b or diff.mismatched):
        return Cause("another_model", "the rebuild is another model",
                     "The rebuilt weights hold other tensors, or tensors of another shape or dtype, than the registered ones: "
                     "whatever the metrics say, this is not the registered model.")
    outside = [m for m in audit.metrics if m.band is not None and m.inside is False]
    stat = audit.tiers.get("statistical")
    if stat is not None and stat.status == "fail" and f"weights: {stat.summary}" in stat.details:
        return _weights_cause(stat.summary, len(outside))
    if outside:
        names = ", ".join(m.name for m in outside)
        return Cause("metrics", f"{len(outside)} {_plural(len(outside), 'metric', 'metrics')} outside the band",
                     f"The model was rebuilt, but {names} left {_plural(len(outside), 'its band', 'their bands')}.")
    if stat is not None and stat.status == "fail":
        return Cause("statistical", "the statistical tier failed", f"The model was rebuilt, but {stat.summary}.")
    return Cause("bitwise", "the weights differ and nothing tolerates it",
                 "The rebuilt weights differ from the registered ones and neither a band nor a same-seed floor says how far "
                 "they may: the tolerance is zero. Run `repro-audit calibrate` to measure both.")


def _not_reproducible(audit: AuditResult) -> Cause:
    blocking = [f for f in audit.findings if f.blocking]
    source = [f for f in audit.findings if f.code == SOURCE_CHANGED_CODE]
    if source:
        return Cause("source_changed", "the source changed since training",
                     "The data the script downloads is no longer what it downloaded at training: the source changed since "
                     "training. " + " ".join(f.message for f in source[:3]))
    changed = [f for f in blocking if f.code.startswith(DATA_CHANGED_CODES)]
    if changed:
        names = sorted({f.path.removeprefix("data.") for f in changed})
        return Cause("data_changed", f"the data of {', '.join(repr(n) for n in names)} changed since training",
                     "A data snapshot the model was trained on no longer holds the bytes it was registered with, so a rebuild "
                     "would train on other data. The data row below names the files.")
    if blocking:
        return Cause("lineage", f"{len(blocking)} input(s) missing or mutable",
                     "An input of the training run is missing or mutable, so it cannot be rebuilt.")
    recovery = audit.tiers.get("artifact_recovery")
    if recovery is not None and recovery.status == "fail":
        return Cause("artifact", "the registered artifact failed its check", f"{recovery.summary[:1].upper()}{recovery.summary[1:]}.")
    return Cause("unrecoverable", "The run cannot be rebuilt",
                 "Every input is identified, but one can no longer be recovered or the recorded recipe "
                 "cannot be rerun, so the model cannot be rebuilt from what was recorded.")


def cause(audit: AuditResult) -> Cause | None:
    """The cause of a red or amber verdict; None for a reproduction, an error or an adoption (their own words)."""
    if audit.verdict is Verdict.OUT_OF_TOLERANCE:
        return _tolerance(audit)
    if audit.verdict is Verdict.NOT_REPRODUCIBLE:
        return _not_reproducible(audit)
    return None


__all__ = ["SPREAD_CAUSES", "WEIGHT_CAUSES", "Cause", "cause"]
