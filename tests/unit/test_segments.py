"""The checkpoint format and the segment selection (issue 18): no I/O beyond a temporary file."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from auditor import segments
from auditor.errors import BadInput


def test_the_selection_always_holds_the_first_a_random_interior_and_the_last_segment():
    """Issue 26: the minimum sample is what an honest chain cannot fake cheaply: the first segment (from the seed), one
    interior segment drawn at random, the last; a smaller count is raised to it, and the basis says so."""
    picks = {seed: segments.pick_segments(20, seed=seed, count=1) for seed in (f"s{i}" for i in range(40))}
    assert all(len(p) == 3 and p[0] == 0 and p[-1] == 19 and 0 < p[1] < 19 for p in picks.values())
    assert len({p[1] for p in picks.values()}) > 5  # the interior one is drawn, not fixed
    assert segments.pick_segments(20, seed="s1", count=1) == picks["s1"]  # a given seed repeats the audit
    assert segments.pick_segments(20, seed="d", budget=0.1) == segments.pick_segments(20, seed="d", count=3)
    assert segments.pick_segments(20, seed="d", count=5)[:1] == [0] and len(segments.pick_segments(20, seed="d", count=5)) == 5
    assert segments.pick_segments(3, seed="d", count=1) == [0, 1, 2]
    assert segments.pick_segments(2, seed="d", count=1) == [0, 1] and segments.pick_segments(1, seed="d") == [0]
    assert segments.minimum_sample(6) == 3 and segments.minimum_sample(2) == 2
    basis = segments.sample_basis(6, seed="abc", drawn=True, count=1, budget=None)
    assert "minimum sample is 3 of 6" in basis and "the first, one random interior, the last" in basis
    assert "1 asked for, raised to the minimum" in basis and "after the chain was registered" in basis
    with pytest.raises(BadInput):
        segments.pick_segments(20, seed="d", budget=1.5)
    with pytest.raises(BadInput):
        segments.pick_segments(20, seed="d", count=0)


def test_the_interior_draw_is_seeded_at_audit_time_so_a_trainer_cannot_aim_at_it():
    """What the trainer knows at registration (the record, any date) does not fix the draw: the seed is drawn by the
    auditor per audit from the operating system's randomness, and audits of one chain replay different interiors."""
    seeds = {segments.draw_seed() for _ in range(50)}
    assert len(seeds) == 50 and all(len(s) == 16 for s in seeds)
    interiors = {segments.pick_segments(30, seed=s)[1] for s in seeds}
    assert len(interiors) > 10


def test_a_chain_in_an_edited_record_is_named_as_edited():
    from auditor.lineage.record import Artifact, Outputs, RunRecord

    def record(*digests):
        return RunRecord(outputs=Outputs(artifacts=[Artifact(name=f"checkpoint@{10 * (i + 1)}", uri=f"runs:/r/checkpoints/{d}.safetensors",
                                                             sha256=d) for i, d in enumerate(digests)]))

    edited, earlier = record("a" * 64, "c" * 64), record("a" * 64, "b" * 64)
    said = segments.chain_edited(edited, earlier)
    assert "the checkpoint chain was edited after registration" in said and "checkpoint@20 now sha256:cccc" in said
    assert "it was sha256:bbbb" in said and "checkpoint@10" not in said
    assert "an edited chain (a checkpoint replaced and the record rewritten to match it)" in segments.chain_edited(edited)
    assert segments.chain_edited(edited, edited) is None and segments.chain_edited(RunRecord()) is None


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


def test_a_replay_of_another_shape_fails_its_segment_whatever_the_floor(tmp_path):
    """A non-deterministic recipe's replay is held to the same-seed floor, but never when it is another model: the
    distance over the tensors both hold says nothing of a tensor of another shape."""
    from auditor.judge.floors import FloorRun, SameSeedFloor

    torch.manual_seed(0)
    narrow, wide = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    wide.weight = torch.nn.Parameter(torch.cat([narrow.weight.detach(), torch.zeros(1, 4)]))  # 4x4: another shape
    wide.bias = torch.nn.Parameter(narrow.bias.detach().clone())
    segments.save(tmp_path / "stored", 10, model=narrow)
    segments.save(tmp_path / "replayed", 10, model=wide)
    comparison = segments.compare_checkpoints(tmp_path / "stored", tmp_path / "replayed", tmp_path / "s")
    floor = SameSeedFloor(runs=[FloorRun(seed=7, weights_sha256="a"), FloorRun(seed=7, weights_sha256="b")],
                          bit_identical=False, max_abs=1e9, rel_l2=1e9)
    part = segments.segments([segments.Link(step=10, digest="0" * 64)])[0]
    check = segments.judge_segment(part, comparison, deterministic=False, floor=floor, wall_s=1.0, replayed_digest=None)
    assert check.status == "fail" and "another model" in check.summary
    assert "model.weight has another shape: F32 of shape [3, 4] in the registered weights, F32 of shape [4, 4] in the rebuild" in check.summary
