"""Model flavours: one module per model kind (torch, sklearn, xgboost, lightgbm, catboost).

Each saves its model in a format read without executing code, loads it safely, gives its normalised
canonical form (``base.Normal``: what the file holds that is not the model is set aside, and said so),
and lists the determinism knobs as resolved at fit time (judged by ``auditor.flavors.rules``).

Nothing heavy is imported here: a flavour's library is imported by the flavour's functions only, when
used. ``flavor_of`` recognises a model by its class's module, without importing any library.

=============  ===========================================  =========================================
flavour        artifact (``auditor.contract.MODEL_FILES``)  loaded by
=============  ===========================================  =========================================
``torch``      safetensors state dict                       safetensors (no pickle)
``sklearn``    skops                                        skops, an explicit allow-list of types
``xgboost``    bundle: UBJSON model + ``save_config`` JSON  xgboost's own format (no pickle)
``lightgbm``   text model (full precision)                  parsed as text; lightgbm's ``model_str``
``catboost``   bundle: ``cbm`` + JSON dump                  the JSON dump (parsed as data); ``cbm``
=============  ===========================================  =========================================
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Mapping
from typing import Any

from auditor.contract import MODEL_FILES
from auditor.errors import BadInput

FLAVORS = tuple(MODEL_FILES)

#: the route to suggest for a model no flavour saves
NEAREST_ROUTE = (
    "save a PyTorch module's state dict (run.save_weights), a scikit-learn estimator or Pipeline of "
    "scikit-learn types, or an XGBoost, LightGBM or CatBoost model (its Booster or its scikit-learn "
    "wrapper); export other models to one of those (e.g. a Keras or ONNX model cannot be saved without pickle here)"
)


def module(name: str) -> Any:
    """The flavour module of ``name`` (imports its library lazily: the module itself imports none)."""
    if name not in MODEL_FILES:
        raise BadInput(f"unknown model flavour {name!r}", hint=f"one of {', '.join(FLAVORS)}")
    return importlib.import_module(f"auditor.flavors.{name}")


def prefetch(name: str | None) -> None:
    """Import ``name``'s reading libraries (its module's ``HEAVY_IMPORTS``) in a background thread.

    A rebuild calls it as its run starts: the auditor's process mostly waits for the run, and reading the rebuilt
    and registered models afterwards then finds the libraries imported (skops's import lists every scikit-learn
    estimator, torch's array API included: 4-6 s on a 2-core machine). A failure is left for that reading to meet
    and word; the import lock makes a reading that comes first wait for the import, never import twice."""
    if name not in MODEL_FILES:
        return
    heavy = getattr(module(name), "HEAVY_IMPORTS", ())
    if heavy and not all(m in sys.modules for m in heavy):
        threading.Thread(target=_import_quietly, args=(heavy,), name=f"repro-prefetch-{name}", daemon=True).start()


def _import_quietly(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the model's reading meets the same failure and words it
            return


def flavor_of(model: Any) -> str | None:
    """The flavour that saves ``model``, by its class's top-level module (no library imported); None: none does."""
    if isinstance(model, Mapping) and model and all(type(v).__module__.split(".")[0] == "torch" for v in model.values()):
        return "torch"
    for klass in type(model).__mro__:
        root = (klass.__module__ or "").split(".")[0]
        if root == "sklearn":
            return "sklearn"
        if root in ("torch", "xgboost", "lightgbm", "catboost"):
            return root
    return None


def refuse(model: Any, why: str | None = None) -> BadInput:
    """The error for a model the SDK cannot save safely: the reason and the nearest supported route."""
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    return BadInput(f"cannot save a {kind} without pickle: {why or 'no model flavour recognises its type'}",
                    hint=NEAREST_ROUTE)
