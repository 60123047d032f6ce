"""The environment and infrastructure sections: interpreter, platform, CPU, torch and CUDA, threads, image, host.

Each fact has one small function (after Sacred's ``host_info``). A missing or broken torch is
recorded as data (``torch_error``), never raised.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from auditor import settings as _settings
from auditor.contract import ENV_TORCH_THREADS, THREAD_VARS
from auditor.digests import sha256_digest
from auditor.lineage.gather.packages import _lock_file, installed_packages, local_packages
from auditor.lineage.record import EnvironmentInfo, Infrastructure
from auditor.lineage.redact import redact_value

# Environment variables that shape numerics or placement; everything else is ignored
# (allowlist, so a credential in the environment can never reach a record).
ENV_ALLOWLIST = (
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_CBWR",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "NUMEXPR_NUM_THREADS",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_DETERMINISTIC",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "TZ",
    "LANG",
    "LC_ALL",
    _settings.IMAGE.name,
    _settings.IMAGE_DIGEST.name,
    _settings.INSTANCE_TYPE.name,
    ENV_TORCH_THREADS,
)


def _cpu() -> tuple[str | None, str | None]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or None, None
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    flags_digest = None
    if flags:
        flags_digest = sha256_digest(" ".join(sorted(flags.group(1).split())))
    return (model.group(1).strip() if model else None), flags_digest


def _torch_facts() -> dict[str, Any]:
    if importlib.util.find_spec("torch") is None:
        return {"torch_error": "torch is not installed"}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is a fact to record
        return {"torch_error": f"torch failed to import: {exc}"}
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        facts["cudnn"] = str(cudnn) if cudnn else None
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            facts["accelerator"] = torch.cuda.get_device_name(0)
            facts["accelerator_count"] = count
            facts["driver"] = _nvidia_driver()
    except Exception as exc:  # noqa: BLE001
        facts["torch_error"] = f"could not query CUDA: {exc}"
    return facts


def _nvidia_driver() -> str | None:
    path = Path("/proc/driver/nvidia/version")
    if path.exists():
        match = re.search(r"Kernel Module\s+([\d.]+)", path.read_text())
        if match:
            return match.group(1)
    return None


def _threads(env: Mapping[str, str]) -> dict[str, Any]:
    threads: dict[str, Any] = {"cpu_count": os.cpu_count()}
    for name in THREAD_VARS:
        threads[name] = env.get(name)
    if "torch" in sys.modules:  # only read it when training already imported torch
        threads["torch_intra_op"] = sys.modules["torch"].get_num_threads()
    return threads


def _image(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    ref = env.get(_settings.IMAGE.name) or None
    image_digest = env.get(_settings.IMAGE_DIGEST.name) or None
    if ref and "@sha256:" in ref and not image_digest:
        image_digest = ref.split("@", 1)[1]
    return ref, image_digest


def environment_info(env: Mapping[str, str] | None = None, *, search: Sequence[Path] = (Path("."),)) -> EnvironmentInfo:
    """Interpreter, platform, packages, lock file, image, accelerator and threads of *this* process."""
    env = os.environ if env is None else env
    lock_file, lock_digest = _lock_file(search)
    cpu_model, cpu_flags = _cpu()
    image_ref, image_digest = _image(env)
    variables = {k: redact_value(k, env[k]) for k in ENV_ALLOWLIST if k in env}
    return EnvironmentInfo(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        platform=platform.platform(),
        machine=platform.machine(),
        packages=installed_packages(),
        lock_file=lock_file,
        lock_digest=lock_digest,
        image_ref=image_ref,
        image_digest=image_digest,
        cpu_model=cpu_model,
        cpu_flags_digest=cpu_flags,
        threads=_threads(env),
        variables=variables,
        local_packages=local_packages(env),
        **_torch_facts(),
    )


def infrastructure_info(env: Mapping[str, str] | None = None) -> Infrastructure:
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        world = 1
    return Infrastructure(
        world_size=world,
        hostname=socket.gethostname(),
        instance_type=env.get(_settings.INSTANCE_TYPE.name) or None,
    )
