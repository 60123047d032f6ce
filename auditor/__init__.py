"""repro-audit: record the five inputs of a training run, rebuild it, judge it, publish evidence.

The training-side API is re-exported here lazily, so ``import auditor`` stays
cheap (no torch, mlflow or boto3 until used)::

    import auditor
    with auditor.track(config="config.yaml", data={"train": "snapshot:blake3:…"}, seed=7) as run:
        ...
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "track": "auditor.sdk",
    "register_model": "auditor.sdk",
    "start": "auditor.sdk",
    "finish": "auditor.sdk",
    "tracked": "auditor.sdk",
    "generated": "auditor.sdk",
    "checkpoint": "auditor.sdk",
    "checkpoint_every": "auditor.sdk",
    "step_done": "auditor.sdk",
    "resume": "auditor.sdk",
    "stop_step": "auditor.sdk",
    "save_model": "auditor.sdk",
    "seed_everything": "auditor.seeds",
    "RunRecord": "auditor.lineage.record",
    "ReproError": "auditor.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'auditor' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
