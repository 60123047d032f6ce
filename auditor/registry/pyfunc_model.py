"""The pyfunc flavour of a registered version: a torch module rebuilt by its factory, loaded from safetensors.

MLflow loads this file as *model code* (``python_model=<this file>``), so nothing is pickled: the
``MLmodel`` names the factory (``module:function`` in the training script, copied as a code path)
and its keyword arguments, and the weights are the same safetensors file the audit hashes. So
``mlflow.pyfunc.load_model("models:/NAME@ALIAS").predict(x)`` works on a version the SDK
registered. The auditor itself never loads this: it compares the safetensors weights.
"""

from __future__ import annotations

import importlib
from typing import Any

import mlflow
from mlflow.pyfunc import PythonModel


class SafetensorsModule(PythonModel):
    """``factory(**factory_kwargs)`` with the registered weights, in eval mode; predicts on float32 arrays."""

    def load_context(self, context: Any) -> None:
        from safetensors.torch import load_file

        config = context.model_config
        module_name, _, function = config["factory"].partition(":")
        factory = getattr(importlib.import_module(module_name), function)
        self.module = factory(**(config.get("factory_kwargs") or {}))
        self.module.load_state_dict(load_file(context.artifacts["weights"]))
        self.module.eval()

    def predict(self, context: Any, model_input: Any, params: dict[str, Any] | None = None) -> Any:
        import numpy as np
        import torch

        values = model_input.to_numpy() if hasattr(model_input, "to_numpy") else model_input
        with torch.no_grad():
            return self.module(torch.as_tensor(np.asarray(values, dtype=np.float32))).cpu().numpy()


mlflow.models.set_model(SafetensorsModule())
