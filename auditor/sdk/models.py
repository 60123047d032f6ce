"""Saving any supported model without pickle: the flavour's file, its hashes and its determinism knobs.

``Run.save_model`` calls ``write_model``; ``save_model`` is the form without a handle (the run of the
innermost ``track``/``start``). This module knows nothing of ``Run``'s internals: it writes the file and
says what to record. PyTorch modules and state dicts go through ``Run.save_weights`` as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditor.contract import ENV_EVALUATE_WEIGHTS, PREDICTIONS_FILE, model_file
from auditor.digests import bare, sha256_file
from auditor.lineage.redact import redacted_logger

log = redacted_logger(__name__)


@dataclass
class SavedModel:
    """What a saved model's artifact records."""

    flavor: str
    path: Path
    sha256: str  # bare hex, as the record's artifacts hold it
    size: int
    canonical_sha256: str
    set_aside: list[str] = field(default_factory=list)
    knobs: dict[str, Any] = field(default_factory=dict)
    #: the model as read back from ``path`` where its normal form is read from the loaded model (scikit-learn): its
    #: rebuild's scores are taken from it rather than from a second load of the same file (a skops load of a large
    #: forest takes about a second); never recorded, and never normalised again once scored (a KNeighbors tree's
    #: call counters move as it predicts)
    loaded: Any = field(default=None, repr=False, compare=False)


def write_model(model: Any, flavor: str, folder: Path) -> SavedModel:
    """Save ``model`` (of ``flavor``, not torch) into ``folder`` in its flavour's pickle-free format.

    The knobs are read from the fitted model; the normal form is read back from the file just written,
    so what is recorded is what an audit will read.
    """
    from auditor.flavors import module, refuse

    flavour = module(flavor)
    target = folder / model_file(flavor)
    try:
        flavour.save(model, target)
    except (AttributeError, TypeError, ValueError) as exc:  # not fitted, or not a model this flavour saves
        raise refuse(model, f"the {flavor} flavour could not save it: {exc}") from None
    knobs = flavour.knobs(model)
    loaded = flavour.load(target) if hasattr(flavour, "normal_of") else None  # read back once, for both uses
    normal = flavour.normal_of(loaded) if loaded is not None else flavour.normal(target)
    for finding in _rule_findings(flavor, knobs):
        log.warning("repro: %s", finding)
    return SavedModel(flavor=flavor, path=target, sha256=bare(sha256_file(target)), size=target.stat().st_size,
                      canonical_sha256=normal.digest(), set_aside=sorted(set(normal.set_aside)), knobs=knobs,
                      loaded=loaded)


def _rule_findings(flavor: str, knobs: dict[str, Any]) -> list[Any]:
    from auditor.flavors.rules import findings

    return findings(flavor, knobs)


def score_predictions(saved: SavedModel, eval_data: Any, threshold: float, rebuild_env: Mapping[str, str] | None) -> dict[str, Any]:
    """What the artifact records of the evaluation data (``{}`` without any); in an audit's rebuild given the
    registered model (``REPRO_EVALUATE_WEIGHTS``), also both models' scores on it, left in ``predictions.npz``.

    Both files are loaded by the flavour's safe loader in this (the rebuild's) process. A registered model that
    cannot be loaded or scored leaves the reason in the file instead: the audit reports it, the training goes on.
    """
    if eval_data is None:
        return {}
    from auditor.flavors import predictions

    x = predictions.as_matrix(eval_data)
    meta = predictions.recorded(x, threshold)
    if rebuild_env is None:
        return meta
    # a rebuild: an audit's hands it the registered model (both are scored); a calibration rerun's scores alone
    # are kept, for the predictive-multiplicity figure (auditor.steps.reruns)
    registered = rebuild_env.get(ENV_EVALUATE_WEIGHTS) or None
    arrays = None
    try:
        arrays = predictions.score_both(saved.flavor, registered, saved.path, x, rebuilt_model=saved.loaded)
    except Exception as exc:  # noqa: BLE001 - the audit reports why the predictions were not scored
        meta = {**meta, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        log.warning("repro: the registered model and its rebuild could not both be scored: %s", meta["error"])
    predictions.write(saved.path.parent / PREDICTIONS_FILE, meta, arrays)
    return meta


def module_predictions(module: Any, eval_data: Any, threshold: float, folder: Path,
                       rebuild_env: Mapping[str, str] | None) -> dict[str, Any]:
    """``score_predictions`` for a PyTorch module (``run.save_weights(module, eval_data=..., threshold=...)``): the
    module scores the data itself, and in an audit's rebuild a copy of it holding the registered safetensors weights
    scores it too (a module's architecture is code: only the script that built it can load its weights)."""
    from auditor.flavors import predictions
    from auditor.flavors import torch as torch_flavor

    x = predictions.as_matrix(eval_data.detach().cpu().numpy() if hasattr(eval_data, "detach") else eval_data)
    meta = predictions.recorded(x, threshold)
    if rebuild_env is None:
        return meta
    registered = rebuild_env.get(ENV_EVALUATE_WEIGHTS) or None
    arrays: dict[str, Any] | None = {}
    try:
        sides = (("registered", torch_flavor.with_weights(module, registered)),) if registered else ()
        for side, model in (*sides, ("rebuilt", module)):
            raw, score = torch_flavor.scores(model, x)
            arrays[f"{side}_raw"], arrays[f"{side}_score"] = raw, score
    except Exception as exc:  # noqa: BLE001 - the audit reports why the predictions were not scored
        arrays = None
        meta = {**meta, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        log.warning("repro: the registered module and its rebuild could not both be scored: %s", meta["error"])
    predictions.write(folder / PREDICTIONS_FILE, meta, arrays)
    return meta
