"""The model artifact of any flavour compared with its rebuild: the flavour's normalised comparison, in the
judge's terms (``WeightDiff``), so the existing tiers and both noise floors apply unchanged.

PyTorch weights go through the streamed safetensors diff (``auditor.judge.weights``). Every other flavour
is read by ``auditor.flavors`` without executing code (skops only through its allow-list) and compared by
its ladder (``auditor.flavors.base.diff_normals``): what differs structurally (parameters, tree count,
topology, split features, thresholds, array shapes) is listed as ``mismatched`` (another model: never a
reproduction), leaf values and fitted arrays are measured (max |Δ|, relative L2) for the same-seed floor.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from auditor.digests import sha256_digest
from auditor.judge.result import TensorDiff, WeightDiff

T = TypeVar("T")


def _streamed(flavor: str | None) -> bool:
    """PyTorch weights (and an artifact of no flavour): safetensors, hashed and diffed as streamed files, no normal form."""
    return not flavor or flavor == "torch"


def canonical_sha256(path: str | os.PathLike, flavor: str | None) -> str:
    """``sha256:`` of the normalised model (PyTorch: of the file itself)."""
    if _streamed(flavor):
        from auditor.judge.weights import sha256_file

        return sha256_file(path)
    return normal_form(path, flavor).digest()


def normal_form(path: str | os.PathLike, flavor: str) -> Any:
    """``flavor``'s normal form of the file at ``path``, read once per content: an audit reads the rebuilt model for its
    digest and again for the diff, a calibration each rerun's model once per pair; a tree flavour's read (skops, a
    booster) costs more than hashing the file. The bytes are read once, hashed and parsed: the form is of the bytes
    hashed, whatever writes the file meanwhile."""
    data = _bytes_of(path)
    key = (flavor, os.fspath(path), sha256_digest(data))
    with _FORMS_LOCK:
        if key in _FORMS:
            return _FORMS[key]
    normal = _read_ahead_or(path, flavor, key[2], lambda: _parsed(data, flavor, key[1]))
    with _FORMS_LOCK:
        _FORMS[key] = normal
        while len(_FORMS) > FORMS_KEPT:
            _FORMS.pop(next(iter(_FORMS)))
    return normal


#: normal forms by (flavour, path, sha256 of the bytes they were parsed from), the last ``FORMS_KEPT`` read
_FORMS: dict[tuple[str, str, str], Any] = {}
_FORMS_LOCK = threading.Lock()
FORMS_KEPT = 4


def _bytes_of(path: str | os.PathLike) -> bytes:
    """The file's bytes; a missing file is ``NotFound`` (as ``judge.weights.sha256_file`` says it)."""
    from pathlib import Path

    from auditor.errors import NotFound

    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise NotFound(f"weights file {path} does not exist") from None


def _parsed(data: bytes, flavor: str, name: str) -> Any:
    from auditor.flavors import module

    return module(flavor).normal_data(data, name)


def model_diff(a: str | os.PathLike, b: str | os.PathLike, flavor: str | None, *,
               registered_sha256: str | None = None) -> tuple[WeightDiff, dict[str, str]]:
    """Registered ``a`` against rebuilt ``b``: the judge's diff, and evidence lines (what was set aside, the
    first divergence) for the report. ``a`` is sniffed before any flavour reads it: a pickle, whatever its name, is
    ``UnsafeArtifact``; a file its flavour cannot read is ``UnreadableArtifact`` (both: the artifact cannot be
    recovered, NOT_REPRODUCIBLE). ``registered_sha256``: what ``a`` held before the rebuild ran (the audit's hash of
    it), where the rebuild was handed ``a``'s path: the diff reads ``a`` only as those bytes, and a file changed since is
    ``InputUnrecoverable`` (``unchanged``)."""
    from pathlib import Path

    from auditor.flavors.unsafe import refuse_unsafe

    refuse_unsafe(a)
    if _streamed(flavor):
        from auditor.judge.weights import _index, diff_safetensors, sha256_file

        _registered(a, "safetensors (PyTorch)", lambda: _index(Path(a)))
        unchanged(a, sha256_file(a), registered_sha256)  # streamed below: checked just before, not as it is read
        return diff_safetensors(a, b), {}
    from auditor.flavors.base import diff_normals

    # the registered file: never from the cache of normal forms; read ahead only as these very bytes (``read_ahead``)
    registered = _registered(a, flavor, lambda: _registered_form(a, flavor, registered_sha256))
    return as_weight_diff(diff_normals(registered, normal_form(b, flavor)), flavor)


def _registered_form(path: str | os.PathLike, flavor: str, expected: str | None) -> Any:
    """The registered file's normal form, of bytes read once now and found to be ``expected`` (where given): the
    read ahead where it is of those bytes, else those bytes parsed."""
    data = _bytes_of(path)
    sha256 = sha256_digest(data)
    unchanged(path, sha256, expected)
    return _read_ahead_or(path, flavor, sha256, lambda: _parsed(data, flavor, os.fspath(path)))


def unchanged(path: str | os.PathLike, sha256: str, expected: str | None) -> None:
    """``InputUnrecoverable`` where the registered file ``path`` no longer holds what it held before its rebuild ran
    (``expected``): the rebuild was handed its path to score it, and a process of the auditor's own user can write
    it, so one that changed (it may now hold the rebuild's own model) is never compared."""
    if expected is None or sha256 == expected:
        return
    from auditor.contract import ENV_EVALUATE_WEIGHTS
    from auditor.errors import InputUnrecoverable

    raise InputUnrecoverable(f"the registered model {os.path.basename(path)} changed while its rebuild ran (it held "
                             f"{expected}, now {sha256}): the rebuild's process wrote the file it was handed to score, "
                             "so nothing is compared with it",
                             hint=f"audit the recipe's code: it writes {ENV_EVALUATE_WEIGHTS}, which is read-only to a rebuild")


#: normal forms read while a rebuild ran: (flavour, path) -> the read (see ``read_ahead``)
_AHEAD: dict[tuple[str, str], concurrent.futures.Future[tuple[str, Any]]] = {}
_AHEAD_LOCK = threading.Lock()
AHEAD_KEPT = 4  # reads kept waiting to be taken (each holds a normal form); an audit that failed never takes its own


def read_ahead(path: str | os.PathLike, flavor: str | None) -> None:
    """Read the artifact ``path``'s normal form in a background thread while a rebuild runs.

    The auditor's process mostly waits for the rebuild, and a tree flavour's read is seconds (skops: 1-1.5 s for a
    600-tree forest, issue 41). The registered model is read as its rebuild starts (``model_diff`` takes it); the
    rebuilt one as soon as the run has written it, while the run goes on to score both models and exit
    (``normal_form`` takes it). The file's bytes are read once, hashed and parsed, so a file that a running process
    writes (or swaps and puts back) while it is read cannot pass one content's form for another's; a read is taken
    only where the file holds the bytes read when it is taken; where it failed, the file is read again (its failure
    worded as always). ``path`` passed ``refuse_unsafe`` first (the caller's). PyTorch weights are streamed by the
    diff itself: not read here."""
    if _streamed(flavor):
        return
    key = (flavor, os.fspath(path))
    future: concurrent.futures.Future[tuple[str, Any]] = concurrent.futures.Future()
    with _AHEAD_LOCK:
        _AHEAD[key] = future
        while len(_AHEAD) > AHEAD_KEPT:
            _AHEAD.pop(next(iter(_AHEAD)))

    def read() -> None:
        try:
            data = _bytes_of(path)
            future.set_result((sha256_digest(data), _parsed(data, flavor, key[1])))
        except BaseException as exc:  # noqa: BLE001 - handed to the diff, which words it as a read of its own would
            future.set_exception(exc)

    threading.Thread(target=read, name=f"repro-read-ahead-{flavor}", daemon=True).start()


def forget_ahead(path: str | os.PathLike, flavor: str | None) -> None:
    """Drop a read ahead of ``path`` nobody will take (its run failed): its normal form is not kept waiting."""
    with _AHEAD_LOCK:
        _AHEAD.pop((str(flavor), os.fspath(path)), None)


def _read_ahead_or(path: str | os.PathLike, flavor: str, sha256: str, read: Callable[[], T]) -> T:
    """The normal form ``read_ahead`` took of ``path`` where it read the bytes the caller hashed (``sha256``), else
    ``read()`` (of those bytes)."""
    with _AHEAD_LOCK:
        future = _AHEAD.pop((flavor, os.fspath(path)), None)
    if future is None or future.exception() is not None:  # a failure ahead is not the file's: only a read now counts
        return read()
    ahead, normal = future.result()
    return normal if ahead == sha256 else read()


def _registered(path: str | os.PathLike, kind: str, read: Callable[[], T]) -> T:
    """``read()`` of the registered artifact ``path``; a failure that lies in the file's bytes is ``UnreadableArtifact``.

    What lies elsewhere keeps its own meaning: an outage, a missing library (``MissingExtra``), a missing file or a
    disk error, and the flavour's own refusals (``UntrustedModel`` is already ``InputUnrecoverable``)."""
    from auditor.errors import MalformedRecord, ReproError, missing_extra
    from auditor.flavors.unsafe import UnreadableArtifact

    try:
        return read()
    except (ReproError, OSError, ImportError) as exc:
        if not isinstance(exc, MalformedRecord) or missing_extra(exc) is not None:
            raise
        why = exc
    except Exception as exc:  # noqa: BLE001 - a library's own error for bytes it cannot parse (XGBoostError, ...)
        if missing_extra(exc) is not None:
            raise
        why = exc
    raise UnreadableArtifact(f"the model artifact {os.fspath(path)} cannot be read as a {kind} model "
                             f"({type(why).__name__}: {str(why)[:500]}); it was not loaded",
                             hint="restore the file the run registered, or retrain and register the model with run.save_model") from why


def as_weight_diff(diff: Any, flavor: str) -> tuple[WeightDiff, dict[str, str]]:
    """A ``flavors.base.StructuralDiff`` as the judge's ``WeightDiff`` plus its evidence lines."""
    worst = [TensorDiff(name=e.name, identical=False, max_abs=e.max_abs, rel_l2=e.rel_l2, note=e.note) for e in diff.entries]
    if diff.first:
        first = next((t for t in worst if diff.first.startswith(f"{t.name}: ")), None)
        if first is not None:
            worst = [first, *[t for t in worst if t is not first]]
    evidence = {"model.flavor": flavor, "model.comparison": "normalised " + flavor + " model"}
    if diff.set_aside:
        evidence["model.set_aside"] = "; ".join(diff.set_aside)
    if diff.first:
        evidence["model.first_divergence"] = diff.first
    if diff.cause:
        evidence["model.cause"] = diff.cause
    if diff.twin is not None:  # the report draws the first divergent tree beside its registered twin
        import json

        evidence["model.first_tree"] = json.dumps({"tree": diff.twin[0], "nodes": [list(r) for r in diff.twin[1]]})
    result = WeightDiff(identical=diff.identical, tensors=diff.compared, differing=diff.differing, max_abs=diff.max_abs,
                        rel_l2=diff.rel_l2, only_in_a=list(diff.only_in_a), only_in_b=list(diff.only_in_b),
                        mismatched=list(diff.structural), worst=worst, unit="part(s) (parameters, trees, arrays)")
    return result, evidence


#: the metric the decision-flip rate is judged as, beside the run's own metrics
FLIP_METRIC = "decision_flip_rate"


def prediction_evidence(recorded: dict[str, Any], rebuild_dir: Any, *, floor: Any) -> tuple[dict[str, str], Any, str | None]:
    """The rebuild's scores of the recorded evaluation data, measured at the *recorded* threshold.

    Returns evidence lines, the flip rate as a ``MetricResult`` (None when nothing was scored) and why nothing
    was (None when it was). The flip rate's band is ``[0, 0]`` (the same-seed floor of a recipe whose reruns are
    identical, or of one never calibrated: fail closed); a calibration whose same-seed reruns differ measured no
    flip rate, so then it is reported, not judged (the models' distance is held to that floor). The scores are
    read with ``allow_pickle=False``: no model and no pickle is ever loaded here.
    """
    from pathlib import Path

    from auditor.contract import PREDICTIONS_FILE
    from auditor.errors import MalformedRecord
    from auditor.flavors import predictions
    from auditor.judge.result import Band
    from auditor.judge.tolerance import check_metric

    if not recorded:
        why = "not scored: the training script passed no evaluation data (run.save_model(model, eval_data=x_test, threshold=t))"
        return {"predictions": why}, None, why
    path = Path(rebuild_dir) / PREDICTIONS_FILE if rebuild_dir is not None else None
    if path is None or not path.is_file():
        why = "not scored: the rebuild left no predictions (it was not given the registered model, or saved none)"
        return {"predictions": why}, None, why
    try:
        meta, arrays = predictions.read(path)
        if meta.get("error"):
            raise MalformedRecord(f"the rebuild could not score both models: {meta['error']}")
        threshold = float(recorded["threshold"])
        found = predictions.compare(arrays, threshold)
    except (MalformedRecord, KeyError, TypeError, ValueError) as exc:
        why = f"not scored: {exc}"
        return {"predictions": why}, None, why
    lines = {"predictions": f"{found.rows} rows of the recorded evaluation data scored by both models in the rebuild",
             "predictions.threshold": repr(threshold), "predictions.max_abs_raw_score": repr(found.max_abs_raw),
             "predictions.max_abs_score": repr(found.max_abs_score), "predictions.flips": str(found.flips),
             "predictions.decision_flip_rate": repr(found.flip_rate)}
    if found.by_score:  # where the flips are, by the registered score: the report draws it
        import json

        lines["predictions.flips_by_score"] = json.dumps([list(b) for b in found.by_score])
    result = check_metric(found.flip_rate, None, name=FLIP_METRIC)
    if meta.get("data_sha256") != recorded.get("data_sha256") or meta.get("rows") != recorded.get("rows"):
        result.inside = False
        result.reason = (f"the rebuild scored other evaluation data ({meta.get('rows')} rows, {meta.get('data_sha256')}) "
                         f"than training recorded ({recorded.get('rows')} rows, {recorded.get('data_sha256')})")
        lines["predictions.data"] = result.reason
        return lines, result, None
    if floor is not None and not floor.bit_identical:
        result.reason = ("reported, not judged: the same-seed reruns differ and measured no flip rate "
                         "(the models' distance is held to the same-seed floor)")
        return lines, result, None
    band = Band(metric=FLIP_METRIC, lower=0.0, upper=0.0, reference=0.0, direction="lower", declared_by="repro-audit (the same-seed floor)",
                method="the same-seed floor: identical reruns flip no decision" if floor is not None
                else "no same-seed floor measured: no decision may flip")
    judged = check_metric(found.flip_rate, band, name=FLIP_METRIC, registered=0.0)
    if judged.inside is False:
        judged.reason = f"{found.flips} of {found.rows} decisions flip at threshold {threshold!r} ({found.flip_rate:.2%}): {judged.reason}"
    return lines, judged, None
