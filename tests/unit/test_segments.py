"""The checkpoint format and the segment selection (issue 18): no I/O beyond a temporary file."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from auditor import segments
from auditor.errors import BadInput


def test_the_selection_is_seeded_by_the_date_and_always_holds_the_last():
    picks = {d: segments.pick_segments(20, date=d, salt="r", count=2) for d in ("2026-12-01", "2026-12-02", "2026-12-03")}
    assert all(len(p) == 2 and p[-1] == 19 for p in picks.values())
    assert segments.pick_segments(20, date="2026-12-01", salt="r", count=2) == picks["2026-12-01"]
    assert len({tuple(p) for p in picks.values()}) > 1  # another date, another segment
    assert segments.pick_segments(20, date="d", budget=0.1) == sorted(segments.pick_segments(20, date="d", count=2))
    assert segments.pick_segments(3, date="d", count=9) == [0, 1, 2]
    with pytest.raises(BadInput):
        segments.pick_segments(20, date="d", budget=1.5)


def _state():
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_a_checkpoint_restores_weights_optimizer_and_every_generator(tmp_path):
    model, optimizer = _state()
    generator = torch.Generator().manual_seed(5)
    random.seed(1)
    np.random.seed(2)
    path = tmp_path / "c.safetensors"
    digest = segments.save(path, 7, model=model, optimizer=optimizer, loader_state={"epoch": 1, "batch": 3}, generators=[generator])
    assert digest == segments.sha256_of(path)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)), float(torch.rand(1, generator=generator)))
    fresh_model, fresh_optimizer = _state()
    other = torch.Generator().manual_seed(99)
    restored = segments.restore(path, model=fresh_model, optimizer=fresh_optimizer, generators=[other])
    assert restored.step == 7 and restored.loader_state == {"epoch": 1, "batch": 3}
    assert (random.random(), float(np.random.rand()), float(torch.rand(1)), float(torch.rand(1, generator=other))) == expected
    for a, b in zip(model.parameters(), fresh_model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert fresh_optimizer.state_dict()["state"][0]["exp_avg"].equal(optimizer.state_dict()["state"][0]["exp_avg"])


def test_the_same_state_saves_to_the_same_bytes_and_a_change_shows(tmp_path):
    model, optimizer = _state()
    a = segments.save(tmp_path / "a", 1, model=model, optimizer=optimizer)
    b = segments.save(tmp_path / "b", 1, model=model, optimizer=optimizer)
    assert a == b
    assert segments.compare_checkpoints(tmp_path / "a", tmp_path / "b", tmp_path / "s").identical
    with torch.no_grad():
        model[0].weight[0, 0] += 1e-6
    segments.save(tmp_path / "c", 1, model=model, optimizer=optimizer)
    comparison = segments.compare_checkpoints(tmp_path / "a", tmp_path / "c", tmp_path / "s2")
    assert not comparison.identical and comparison.differs == ["model.0.weight"] and comparison.model_diff.max_abs > 0
