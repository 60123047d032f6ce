"""seed_everything + dataloader_kwargs make a CPU training with shuffling workers bitwise repeatable.

Two trainings of a small torch model with ``seed_everything(7)`` and
``DataLoader(num_workers=2, shuffle=True, **dataloader_kwargs(info))`` give the
same weights bit for bit; seed 8 gives other weights. The dataset draws NumPy
noise inside the workers, so worker seeding is exercised, not just the sampler.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from auditor.seeds import dataloader_kwargs, seed_everything

_INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16}


class NoisyTable(Dataset):
    """A fixed table (independent of the seed under test) plus per-sample noise drawn in the worker."""

    def __init__(self) -> None:
        fixed = torch.Generator().manual_seed(1234)
        self.x = torch.randn(1024, 12, generator=fixed)
        self.y = (self.x[:, :3].sum(1) > 0).float()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        noise = torch.from_numpy(np.random.normal(0.0, 0.05, size=12).astype(np.float32))
        return self.x[index] + noise, self.y[index]


def _train(seed: int) -> dict[str, torch.Tensor]:
    info = seed_everything(seed)
    loader = DataLoader(NoisyTable(), batch_size=64, shuffle=True, num_workers=2, **dataloader_kwargs(info))
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(model(xb).squeeze(1), yb).backward()
            optimizer.step()
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Every tensor equal by value (torch.equal) *and* by bits (an integer view: NaN, -0.0)."""
    if a.keys() != b.keys():
        return False
    for name in a:
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
            return False
        view = _INT_VIEW.get(x.dtype)
        if view is not None and not torch.equal(x.view(view), y.view(view)):
            return False
    return True


@pytest.fixture(autouse=True)
def _restore_torch_state(monkeypatch):
    """seed_everything switches process-wide flags on; give other tests the process back as it was."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    deterministic = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.set_num_threads(threads)


def test_two_trainings_with_the_same_seed_give_bitwise_identical_weights():
    first, second = _train(7), _train(7)
    assert list(first) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    assert _bitwise_equal(first, second)


def test_a_different_seed_gives_different_weights():
    assert not _bitwise_equal(_train(7), _train(8))


def test_the_integer_view_catches_what_torch_equal_misses():
    """Why both comparisons: torch.equal calls +0.0 and -0.0 equal."""
    a, b = {"w": torch.tensor([0.0, 1.0])}, {"w": torch.tensor([-0.0, 1.0])}
    assert torch.equal(a["w"], b["w"])
    assert not _bitwise_equal(a, b)


#: a fresh interpreter: seed, then (optionally) a compiler import, then what PyTorch's own switch would have left
_SWITCH = r"""
import json, sys
import torch
from auditor.seeds import seed_everything
mode = sys.argv[1] == "on"
seed_everything(3, mode)
state = {"loaded": "torch._inductor.config" in sys.modules, "flag": torch.are_deterministic_algorithms_enabled(),
         "warn_only": torch.is_deterministic_algorithms_warn_only_enabled()}
if sys.argv[2] != "-":
    __import__(sys.argv[2])
    import torch._inductor.config as config
    state["inductor"] = config.deterministic
print(json.dumps(state))
"""


@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.parametrize("first", ["-", "torch._dynamo", "torch._inductor", "torch._inductor.config"])
def test_the_deterministic_switch_leaves_what_pytorchs_own_leaves_without_loading_the_compiler(mode, first, monkeypatch):
    """Issue 41: ``seed_everything`` sets PyTorch's flag at once and TorchInductor's as the compiler is first imported,
    whichever package comes first; the compiler is not imported by seeding (1.2-2.3 s a rebuild)."""
    import json
    import subprocess
    import sys

    monkeypatch.setenv("TORCHINDUCTOR_DETERMINISTIC", "0" if mode == "on" else "1")  # the opposite of the switch
    out = subprocess.run([sys.executable, "-c", _SWITCH, mode, first], capture_output=True, text=True, check=True).stdout
    state = json.loads(out.splitlines()[-1])
    assert state["loaded"] is False
    assert state["flag"] is (mode == "on") and state["warn_only"] is False
    if first != "-":
        assert state["inductor"] is (mode == "on")


_TRACED = r"""
import importlib.util, json, os, sys, threading, time
import torch
from auditor.lineage.tracing import Tracer
from auditor.seeds import seed_everything
how, what = sys.argv[1], sys.argv[2]
if how == "eager":
    import torch._inductor.config  # what PyTorch's own switch imported as seeding ran, before tracing began
seed_everything(3)
tracer = Tracer(repo_top=None).start()
if what == "compile":
    importlib.util.find_spec("torch._dynamo")  # a probe: it must not use up the deferred switch
    compiled = torch.compile(lambda x: x + 1, backend="eager")
    compiled(torch.ones(2))
    import torch._inductor.config as config
    assert config.deterministic is True, "TorchInductor's deterministic option was not set"
elif what == "sympy":
    import sympy
else:  # another thread reads a variable while this one imports the compiler: it is the script's input
    os.environ["REPRO_TEST_KNOB"] = "1"
    reader = threading.Thread(target=lambda: [time.sleep(0.05) or os.environ.get("REPRO_TEST_KNOB") for _ in range(40)])
    reader.start()
    import torch._dynamo
    reader.join()
print(json.dumps(sorted(v.name for v in tracer.stop().env)))
"""


@pytest.mark.parametrize("what", ["compile", "sympy", "thread"])
def test_a_compiler_first_imported_inside_the_block_reads_what_the_eager_switch_left_read(what):
    """A record made when seeding imported the compiler must compare equal with a rebuild where the script's
    ``torch.compile`` (after a ``find_spec`` probe) or ``import sympy`` imports it inside the block: the compiler's and
    sympy's own import reads (AOTINDUCTOR_*, SYMPY_*, CXX …) are not traced, as they were not when seeding imported
    them before tracing began; a read by another thread meanwhile is the script's, and traced both ways."""
    import json
    import subprocess
    import sys

    def traced(how: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", _TRACED, how, what], capture_output=True, text=True, check=True).stdout
        return json.loads(out.splitlines()[-1])

    lazy = traced("lazy")
    assert lazy == traced("eager")
    assert not [name for name in lazy if name.startswith(("AOT", "SYMPY_", "MPMATH_", "CXX"))]
    assert ("REPRO_TEST_KNOB" in lazy) is (what == "thread")
