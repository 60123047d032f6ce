"""Re-evaluating the registered weights in the rebuild's own process (``REPRO_EVALUATE_THEN_TRAIN``).

Without ``REPRO_EVALUATE_THEN_TRAIN`` a rebuild given ``REPRO_EVALUATE_WEIGHTS`` evaluates them, as the
contract always said. With it, the first time the script asks for the weights (``run.weights_to_evaluate``)
the process forks: the child evaluates (its outputs and log in ``REPRO_OUTPUT_DIR/evaluation``, and it ends
when the block does), the parent waits for it, writes its exit status beside them, and trains. One
interpreter, one set of imports and one capture serve both; the child's memory is its own.

This module holds the process mechanics only (whether to fork, the fork, the child's end); ``Run`` keeps
the decision and its folders (``Run._evaluate_here``), so this module knows nothing of ``Run``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from auditor.contract import ENV_EVALUATE_THEN_TRAIN, EVALUATION_DIR, EVALUATION_LOG_FILE, EVALUATION_STATUS_FILE
from auditor.lineage.redact import redacted_logger

log = redacted_logger(__name__)


def can_fork(env: Mapping[str, str]) -> bool:
    """Whether the rebuild asked to evaluate in a forked child (``REPRO_EVALUATE_THEN_TRAIN=1``) and may fork."""
    if env.get(ENV_EVALUATE_THEN_TRAIN) != "1" or not hasattr(os, "fork"):
        return False
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():  # CUDA cannot be used in a forked child
            return False
    except ImportError:
        pass
    return True


def fork(output_dir: Path) -> Path | None:
    """Fork the evaluation child: in the child, its output folder; in the parent, once the child ended, None.

    A fork copies no threads: a child that enters an OpenMP pool its parent started (torch's first parallel
    operation starts one, as do scikit-learn and XGBoost) waits forever for the pool's threads. Whether the
    parent started one cannot be told reliably (a script may run torch code before ``auditor.start``, which
    hung an audit of the adapted public example), so the child always evaluates with every native pool
    limited to one thread: its metrics agree to float resolution, inside the evaluation band.
    """
    folder = output_dir / EVALUATION_DIR
    folder.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: evaluate into its own folder, then end (see end_child)
        log_fd = os.open(folder / EVALUATION_LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        one_thread()
        return folder
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    status_doc = {"exit_code": code, "seconds": round(time.monotonic() - started, 3)}
    (folder / EVALUATION_STATUS_FILE).write_text(json.dumps(status_doc) + "\n", encoding="utf-8")
    return None


def one_thread() -> None:
    """Limit every native thread pool of this (forked) process to one thread: OpenMP, BLAS, and torch's own."""
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)  # omp_set_num_threads(1) and the BLAS setters of every loaded runtime
    except Exception as exc:  # noqa: BLE001 - torch's own setting below still covers torch's pool
        log.warning("repro: could not limit the native thread pools of the evaluation child (%s)", exc)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def end_child(*, failed: bool, failure: tuple[Any, Any, Any] | None, scratch: Path) -> NoReturn:
    """End the forked evaluation child once its outputs are written (the parent trains)."""
    if failure is not None:  # os._exit below ends the child before Python would print the traceback
        import traceback

        traceback.print_exception(*failure, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    shutil.rmtree(scratch, ignore_errors=True)
    os._exit(1 if failed else 0)
