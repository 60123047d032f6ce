"""Issue 42, build 1: a distributed world size counts only when the run really initialised a process group of that
size (recorded by the SDK from ``torch.distributed``), never because ``WORLD_SIZE`` says so. Real gloo groups on
loopback, two processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

CHILD = r'''
import os, sys
import torch
import torch.distributed as dist
from auditor.sdk.world import WorldWatch

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
watch = WorldWatch()
watch.install()
if world:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    dist.barrier()
seen = watch.stop()
if world:
    dist.destroy_process_group()
print("seen", seen, flush=True)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, ranks: int, world: int, env: dict[str, str]) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(rank), str(world), port], env={**os.environ, **env},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(ranks)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    return [o[0].strip() for o in outs]


def test_a_process_group_of_two_is_a_world_of_two(tmp_path):
    assert _run(tmp_path, 2, 2, {}) == ["seen 2", "seen 2"]


def test_a_world_size_variable_alone_is_a_world_of_one(tmp_path):
    """The trap: the script sets WORLD_SIZE=2 in a single process that never starts torch.distributed."""
    assert _run(tmp_path, 1, 0, {"WORLD_SIZE": "2"}) == ["seen 1"]


def test_the_record_keeps_the_framework_s_world_size_and_says_so(tmp_path):
    from auditor.lineage.record import Infrastructure, RunRecord
    from auditor.sdk.world import start_world, stop_world

    class _Run:
        record = RunRecord(infrastructure=Infrastructure(world_size=2))

    run = _Run()
    start_world(run)
    stop_world(run)
    assert run.record.infrastructure.world_size == 1
