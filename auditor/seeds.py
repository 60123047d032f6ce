"""Seed every generator a training run draws from, set the determinism flags, and record both.

``seed_everything(7)`` seeds Python's ``random``, NumPy's global generator and
torch (CPU and every CUDA device), derives separate seeds for the DataLoader's
shuffling generator, its workers and augmentation, switches on deterministic
algorithms, and returns the ``seeds`` section of the run record with the flags
*as read back*, not as requested.

Derived seeds are a hash of (seed, generator name), so adding a generator never
shifts another one's stream.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import sys
from typing import Any

from auditor.lineage.record import SeedInfo

# PYTHONHASHSEED only acts at interpreter start, so read it at import time.
_PYTHONHASHSEED_AT_START = os.environ.get("PYTHONHASHSEED", "unset" if sys.flags.hash_randomization else "0")

DEFAULT_USED = ("python", "numpy", "torch", "dataloader", "dataloader_workers")
CUBLAS_WORKSPACE = ":4096:8"


def derive_seed(seed: int, name: str) -> int:
    """A 63-bit seed for generator ``name``, stable across platforms and versions."""
    raw = hashlib.sha256(f"repro-audit:{seed}:{name}".encode()).digest()
    return int.from_bytes(raw[:8], "big") >> 1


def seed_everything(seed: int, deterministic: bool = True, *, used: tuple[str, ...] = DEFAULT_USED) -> SeedInfo:
    """Seed Python, NumPy and torch (CPU and CUDA); derive loader, worker and augmentation seeds.

    ``used`` names the generators the training draws from; the gate blocks a
    record where one of them has no recorded seed.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        from auditor.errors import BadInput

        raise BadInput(f"seed must be a non-negative integer, got {seed!r}")
    generators: dict[str, int] = {"python": seed}
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
        generators["numpy"] = seed % 2**32
    except ImportError:
        pass
    flags: dict[str, Any] = {}
    if deterministic:
        # must be in the environment before cuBLAS initialises
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.manual_seed(seed)  # also seeds every CUDA device
        generators["torch"] = seed
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
            generators["cuda"] = seed
        torch.use_deterministic_algorithms(deterministic)
        torch.backends.cudnn.deterministic = deterministic
        torch.backends.cudnn.benchmark = not deterministic and torch.backends.cudnn.benchmark
        flags = {
            "use_deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "torch_num_threads": torch.get_num_threads(),
        }
    for name in ("dataloader", "dataloader_workers", "augmentation"):
        generators[name] = derive_seed(seed, name)
    flags["CUBLAS_WORKSPACE_CONFIG"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    flags["MKL_CBWR"] = os.environ.get("MKL_CBWR")
    return SeedInfo(
        seed=seed,
        generators=generators,
        used=list(used),
        deterministic=deterministic,
        flags=flags,
        pythonhashseed=_PYTHONHASHSEED_AT_START,
    )


def _seed_worker(worker_id: int, *, base: int) -> None:
    worker_seed = (base + worker_id) % 2**32
    random.seed(worker_seed)
    try:
        import numpy as np

        np.random.seed(worker_seed)
    except ImportError:
        pass
    import torch

    torch.manual_seed(worker_seed)


def worker_init_fn(info: SeedInfo):
    """A picklable ``worker_init_fn`` seeding each DataLoader worker from the recorded worker seed."""
    return functools.partial(_seed_worker, base=info.generators["dataloader_workers"])


def loader_generator(info: SeedInfo):
    """A ``torch.Generator`` seeded with the recorded DataLoader seed (drives shuffling)."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(info.generators["dataloader"])
    return generator


def dataloader_kwargs(info: SeedInfo) -> dict[str, Any]:
    """``DataLoader(..., **dataloader_kwargs(info))``: the seeded generator and worker_init_fn."""
    return {"generator": loader_generator(info), "worker_init_fn": worker_init_fn(info)}
