"""The weights file a run saves: safetensors on disk, and the pyfunc spec MLflow logs over it.

``Run.save_weights`` and ``Run.restore_weights`` call these; this module knows nothing of ``Run``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from auditor.digests import bare, sha256_file
from auditor.errors import BadInput


def write_safetensors(state_dict: Mapping[str, Any], target: Path) -> tuple[str, int]:
    """Write ``state_dict`` to ``target`` as safetensors (atomically); returns its sha256 and size."""
    from safetensors.torch import save_file

    seen: set[int] = set()
    tensors = {}
    for key, tensor in state_dict.items():
        tensor = tensor.detach().cpu().contiguous()
        # safetensors refuses tensors sharing memory (tied weights): give repeats their own copy
        pointer = tensor.data_ptr()
        tensors[key] = tensor.clone() if pointer in seen else tensor
        seen.add(pointer)
    partial = target.with_name(target.name + ".partial")
    save_file(tensors, str(partial), metadata={"format": "pt"})
    partial.replace(target)
    return bare(sha256_file(target)), target.stat().st_size


def load_safetensors(model: Any, path: Path) -> None:
    """Load a safetensors file into ``model`` (no pickle)."""
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(path)))


def pyfunc_spec(factory: str, kwargs: Mapping[str, Any] | None, example: Any, module: Any) -> dict[str, Any]:
    """What ``tracking.finish`` needs to log the pyfunc LoggedModel: factory, its file, example and signature."""
    found = _factory_module(factory)
    try:
        json.dumps(dict(kwargs or {}))
    except TypeError:
        raise BadInput(f"factory_kwargs of {factory!r} must be JSON values (they go into the MLmodel)") from None
    signature = None
    if example is not None:
        example, signature = _signature(example, module)
    return {"factory": factory, "factory_kwargs": dict(kwargs or {}), "code": str(Path(found.__file__).resolve()),
            "input_example": example, "signature": signature}


def _factory_module(factory: str) -> Any:
    """The module of ``"module:function"`` (the running script when it is named so), checked to hold the function."""
    import importlib

    module_name, _, function = factory.partition(":")
    if not module_name or not function:
        raise BadInput(f"factory {factory!r} is not 'module:function'", hint='e.g. factory="train:build_model"')
    main = sys.modules.get("__main__")
    found = main if main is not None and Path(getattr(main, "__file__", "") or "").stem == module_name else None
    try:
        found = found or importlib.import_module(module_name)
    except ImportError as exc:
        raise BadInput(f"factory {factory!r}: module {module_name!r} cannot be imported ({exc})") from None
    if not callable(getattr(found, function, None)):
        raise BadInput(f"factory {factory!r}: {module_name} has no function {function!r}")
    return found


def _signature(example: Any, module: Any) -> tuple[Any, Any]:
    """The input example as float32 and the MLflow signature inferred from it (and from ``module``'s output)."""
    import numpy as np
    from mlflow.models import infer_signature

    inputs = np.asarray(example.detach().cpu() if hasattr(example, "detach") else example, dtype=np.float32)
    outputs = None
    if module is not None:
        import torch

        was_training = module.training
        module.eval()
        with torch.no_grad():
            outputs = module(torch.as_tensor(inputs)).detach().cpu().numpy()
        module.train(was_training)
    return inputs, infer_signature(inputs, outputs)
