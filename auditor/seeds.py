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
import importlib.abc
import importlib.machinery
import os
import random
import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from auditor.contract import CUBLAS_WORKSPACE
from auditor.lineage.record import SeedInfo

# PYTHONHASHSEED only acts at interpreter start, so read it at import time.
_PYTHONHASHSEED_AT_START = os.environ.get("PYTHONHASHSEED", "unset" if sys.flags.hash_randomization else "0")

DEFAULT_USED = ("python", "numpy", "torch", "dataloader", "dataloader_workers")


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
        use_deterministic_algorithms(torch, deterministic)
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


#: what ``torch.use_deterministic_algorithms`` imports to set TorchInductor's own flag (``deterministic`` in
#: ``torch._inductor.config``): that module, and with it TorchDynamo and TorchInductor
INDUCTOR_CONFIG = "torch._inductor.config"
COMPILER_PACKAGES = ("torch._dynamo", "torch._inductor")
#: libraries the compiler's import brought along that read variables of their own as they load (SYMPY_*, MPMATH_*,
#: SAGE_ROOT): their first import is untraced too while the switch waits for the compiler, as it was before tracing
COMPANIONS = ("sympy", "mpmath")


def use_deterministic_algorithms(torch: Any, mode: bool) -> None:
    """``torch.use_deterministic_algorithms(mode)``, without importing the compiler where the script has not yet.

    PyTorch's switch sets its C++ flag and imports ``torch._inductor.config`` to set ``deterministic`` there, which
    brings in TorchDynamo and TorchInductor (1.2-2.3 s measured, issue 41) that a run without ``torch.compile`` never
    uses. Here the flag is set at once; the first import of either compiler package then imports the configuration
    and sets its value before the package is handed to the script, with input tracing paused in the importing
    thread as it runs (and for the first import of ``COMPANIONS``), as the switch's own import ran before
    ``track()`` began tracing: what the import reads is never the script's input, and a record made with the eager
    switch compares equal. Where the compiler is loaded already, or torch lacks the private setter, PyTorch's own
    switch runs. What differs: the compiler reads its own variables (``TORCHINDUCTOR_*``) as the script first uses
    it, not as seeding runs, so one the script sets in between now takes effect."""
    setter = getattr(getattr(torch, "_C", None), "_set_deterministic_algorithms", None)
    if setter is None or any(name in sys.modules for name in (INDUCTOR_CONFIG, *COMPILER_PACKAGES)):
        torch.use_deterministic_algorithms(mode)
        return
    setter(mode, warn_only=False)
    _CompilerImport.mode, _CompilerImport.done = mode, False
    if not any(isinstance(finder, _CompilerImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CompilerImport())


class _CompilerImport(importlib.abc.MetaPathFinder):
    """Until the compiler is imported, wraps the loader of each compiler package (and companion) it finds.

    A small import-system finder (wrapt's post-import hooks would be a new core dependency for it): it finds the
    module as the path finder does and wraps that spec's own loader, so a spec only looked at
    (``importlib.util.find_spec``) changes nothing; the outermost compiler package that executes imports the
    configuration and sets its value. It stays in the list, inert once that is done."""

    mode = True
    done = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if _CompilerImport.done or fullname not in (*COMPILER_PACKAGES, *COMPANIONS):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader

        def exec_then(module: ModuleType) -> None:
            from auditor.lineage.tracing import paused_here

            outermost = fullname in COMPILER_PACKAGES and not _CompilerImport.done
            _CompilerImport.done = _CompilerImport.done or outermost  # a package it imports is loaded plainly
            with paused_here():
                type(loader).exec_module(loader, module)
                if outermost:
                    importlib.import_module(INDUCTOR_CONFIG).deterministic = _CompilerImport.mode

        loader.exec_module = exec_then  # type: ignore[method-assign]  # this spec's own loader instance
        return spec


def flags_at_end() -> dict[str, Any]:
    """The determinism flags as the block leaves them (what ran, where ``seed_everything`` saw only the start):

    - ``FLAG_TORCH_CUDA_USED``: whether torch allocated CUDA memory in the process (the record's own GPU query
      initialises CUDA, so ``is_initialized`` proves nothing; a CPU run on a GPU host allocates none);
    - ``use_deterministic_algorithms`` as it is now, and ``deterministic_warn_only`` (PyTorch's ``warn_only=True``
      runs the nondeterministic kernels it only warns about).

    {} without torch; a flag torch cannot answer is left out (not recorded)."""
    from auditor.contract import FLAG_TORCH_CUDA_USED

    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    flags: dict[str, Any] = {}
    try:
        used = False
        if torch.cuda.is_initialized():
            for device in range(torch.cuda.device_count()):
                stats = torch.cuda.memory_stats(device)
                if torch.cuda.max_memory_allocated(device) > 0 or stats.get("allocation.all.allocated", 0) > 0:
                    used = True
                    break
        flags[FLAG_TORCH_CUDA_USED] = used
    except Exception:  # noqa: BLE001 - a broken CUDA build: not known, so not recorded
        pass
    try:
        flags["use_deterministic_algorithms"] = bool(torch.are_deterministic_algorithms_enabled())
        flags["deterministic_warn_only"] = bool(torch.is_deterministic_algorithms_warn_only_enabled())
    except Exception:  # noqa: BLE001
        pass
    return flags


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


# -- the script's own seeding over the audit's seed -----------------------------------------------
#: (module, function, generator): the global seeding calls a script makes by habit
_SEEDING_CALLS = (
    ("random", "seed", "python"),
    ("numpy.random", "seed", "numpy"),
    ("torch", "manual_seed", "torch"),
    ("torch.random", "manual_seed", "torch"),
    ("torch.cuda", "manual_seed", "cuda"),
    ("torch.cuda", "manual_seed_all", "cuda"),
)
#: callers whose seeding is not the script's: ours, and the libraries' internals (torch.manual_seed seeds CUDA itself)
_INTERNAL_CALLERS = ("auditor.seeds", "torch", "numpy", "random")
_CONSTANT_ARG = re.compile(r"(?:manual_seed(?:_all)?|\bseed)\(\s*(?:seed\s*=\s*)?-?\d+\s*\)")


@dataclass(frozen=True)
class SeedOverride:
    """One call by the script that reseeded a global generator after the SDK seeded it."""

    call: str  # e.g. "torch.manual_seed"
    generator: str
    value: Any
    where: str  # "train.py:42"
    constant: bool  # the argument is a literal in the source line

    def message(self, seed: int) -> str:
        what = f"the constant {self.value!r}" if self.constant else repr(self.value)
        return (
            f"{self.where}: {self.call}({self.value!r}) reseeds the {self.generator} generator with {what} "
            f"after auditor.track seeded it with {seed}: the audit's seed no longer reaches it, so calibration's "
            f"reruns (which vary the seed) measure nothing. Fix: {self.call}(run.seed), or delete the call"
        )


def _expected(info: SeedInfo, generator: str) -> Any:
    return info.generators.get(generator, info.seed)


class SeedGuard:
    """Watches the global seeding functions while a run is active and reports the script's own seeding.

    The functions are wrapped (module attributes replaced, originals restored by
    ``uninstall``); a call from this process, outside the auditor and the libraries'
    internals, that seeds a generator with a literal constant or with another value
    than the audit's seed is an ``SeedOverride``, reported once per source line
    through ``report``. DataLoader workers (other processes) are not watched: their
    seeding is the loader's.
    """

    def __init__(self, info: SeedInfo, report) -> None:
        self.info = info
        self.report = report
        self.found: list[SeedOverride] = []
        self._pid = os.getpid()
        self._patched: list[tuple[Any, str, Any, Any]] = []
        self._seen: set[str] = set()

    def install(self) -> SeedGuard:
        for module_name, attribute, generator in _SEEDING_CALLS:
            module = sys.modules.get(module_name)
            original = getattr(module, attribute, None) if module is not None else None
            if original is None or getattr(original, "_repro_guarded", False):
                continue
            wrapper = self._wrap(original, f"{'np.random' if module_name == 'numpy.random' else module_name}.{attribute}", generator)
            setattr(module, attribute, wrapper)
            self._patched.append((module, attribute, original, wrapper))
        return self

    def uninstall(self) -> None:
        for module, attribute, original, wrapper in reversed(self._patched):
            if getattr(module, attribute, None) is wrapper:
                setattr(module, attribute, original)
        self._patched.clear()

    def _wrap(self, original, call: str, generator: str):
        guard = self

        @functools.wraps(original)
        def seeding(*args: Any, **kwargs: Any) -> Any:
            try:
                guard._check(call, generator, args, kwargs, sys._getframe(1))
            except Exception:  # noqa: BLE001 - the guard must never break the script's own call
                pass
            return original(*args, **kwargs)

        seeding._repro_guarded = True  # type: ignore[attr-defined]
        return seeding

    def _check(self, call: str, generator: str, args: tuple, kwargs: dict, frame) -> None:
        if os.getpid() != self._pid:
            return
        module = str(frame.f_globals.get("__name__", ""))
        if any(module == name or module.startswith(name + ".") for name in _INTERNAL_CALLERS):
            return
        value = args[0] if args else kwargs.get("seed", kwargs.get("a"))
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        import linecache

        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        constant = bool(_CONSTANT_ARG.search(line))
        expected = _expected(self.info, generator)
        if not constant and _same_seed(value, expected):
            return
        if where in self._seen:
            return
        self._seen.add(where)
        found = SeedOverride(call=call, generator=generator, value=value, where=where, constant=constant)
        self.found.append(found)
        self.report(found.message(self.info.seed))


def _same_seed(value: Any, expected: Any) -> bool:
    try:
        return int(value) == int(expected)
    except (TypeError, ValueError):
        return False


def guard_seeding(info: SeedInfo, report) -> SeedGuard:
    """Install a ``SeedGuard`` for ``info``; call ``uninstall()`` on it when the run ends."""
    return SeedGuard(info, report).install()
