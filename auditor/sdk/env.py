"""The script's side of the entry-point contract: what a rebuild's environment tells the SDK.

A rebuild (``REPRO_REBUILD=1``) takes its config, seed, determinism, thread count and output folder
from the variables ``auditor.contract`` names; this module reads them and refuses malformed ones.
It knows nothing of ``Run``: the bottom of ``auditor.sdk``, beside ``evaluation`` and ``weights``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from auditor.contract import ENV_CONFIG, ENV_OUTPUT_DIR, ENV_TORCH_THREADS, is_rebuild
from auditor.errors import BadInput


def rebuild_mode(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is an audit's rebuild (``REPRO_REBUILD=1``)."""
    return is_rebuild(os.environ if env is None else env)


def env_flag(env: Mapping[str, str], name: str) -> bool | None:
    """``1``/``0`` as True/False; None when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    if raw in {"1", "0"}:
        return raw == "1"
    raise BadInput(f"environment variable {name}={raw!r} must be 1 or 0")


def env_int(env: Mapping[str, str], name: str) -> int | None:
    """An integer variable; None when unset or empty."""
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadInput(f"environment variable {name}={raw!r} is not an integer") from None


def rebuild_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The resolved config the audit passes as a JSON file (``REPRO_CONFIG``)."""
    raw = env.get(ENV_CONFIG)
    if not raw:
        raise BadInput(f"rebuild mode: {ENV_CONFIG} is unset", hint="the audit passes the resolved config as a JSON file")
    try:
        value = json.loads(Path(raw).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"rebuild mode: cannot read {ENV_CONFIG}={raw}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"rebuild mode: {ENV_CONFIG}={raw} is not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(value, dict):
        raise BadInput(f"rebuild mode: {ENV_CONFIG}={raw} holds {type(value).__name__}, not a JSON object")
    return value


def output_dir(env: Mapping[str, str]) -> Path:
    """The folder for the rebuild's outputs (``REPRO_OUTPUT_DIR``), created if missing."""
    raw = env.get(ENV_OUTPUT_DIR)
    if not raw:
        raise BadInput(f"rebuild mode: {ENV_OUTPUT_DIR} is unset", hint="the audit names the folder for metrics and weights")
    path = Path(raw)
    path.mkdir(parents=True, exist_ok=True)
    return path


def pin_torch_threads(env: Mapping[str, str], rebuild: bool) -> None:
    """In a rebuild, run torch on the recorded thread count (``REPRO_TORCH_THREADS``): it changes the weights."""
    raw = env.get(ENV_TORCH_THREADS) if rebuild else None
    if not raw:
        return
    try:
        import torch
    except ImportError:
        return
    threads = env_int(env, ENV_TORCH_THREADS)
    if threads and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
