"""The world size a run really trained at, from the framework, never from the environment (issue 42).

A distributed world size explains same-seed spread (gradients all-reduced in another order), so it may widen a
tolerance; a ``WORLD_SIZE`` variable alone proves nothing: a script can set it in a single process that never
starts ``torch.distributed``. While the block runs, ``torch.distributed.init_process_group`` is watched; at its end
the record's ``infrastructure.world_size`` is the largest process group the run initialised (1 when none).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from auditor.lineage.redact import redacted_logger

log = redacted_logger(__name__)


class WorldWatch:
    """The hook on ``init_process_group`` and the largest world size it saw."""

    def __init__(self) -> None:
        self.seen = 0
        self._undo: list[Any] = []

    def _note(self) -> None:
        dist = _distributed()
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                self.seen = max(self.seen, int(dist.get_world_size()))
        except Exception:  # noqa: BLE001 - a framework that cannot say is a world of one
            return

    def install(self) -> None:
        self._note()
        dist = _distributed()
        original = getattr(dist, "init_process_group", None) if dist is not None else None
        if original is None:
            return
        watch = self

        @functools.wraps(original)
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            finally:
                watch._note()

        dist.init_process_group = init_process_group
        self._undo.append(functools.partial(setattr, dist, "init_process_group", original))

    def stop(self) -> int:
        self._note()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        return max(self.seen, 1)


def _distributed() -> Any:
    """``torch.distributed`` when the script imported torch (never imported here)."""
    torch = sys.modules.get("torch")
    return getattr(torch, "distributed", None) if torch is not None else None


def start_world(run: Any) -> None:
    watch = WorldWatch()
    try:
        watch.install()
    except Exception as exc:  # noqa: BLE001 - the record then keeps a world of one
        log.warning("repro: the world size could not be watched: %s", exc)
    run._world = watch


def stop_world(run: Any) -> None:
    """The record's world size: the process group the run initialised (the environment's claim is only logged)."""
    watch = getattr(run, "_world", None)
    infrastructure = run.record.infrastructure
    if watch is None or infrastructure is None:
        return
    run._world = None
    claimed, world = infrastructure.world_size, watch.stop()
    if claimed != world:
        log.warning("repro: WORLD_SIZE says %s, but the run initialised %s: the record keeps world size %s (a "
                    "distributed world size counts only when torch.distributed ran at that size)",
                    claimed, "no process group" if world == 1 else f"a process group of {world}", world)
    infrastructure.world_size = world
