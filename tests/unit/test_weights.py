"""The streamed weight diff, on real safetensors files written by torch."""

from __future__ import annotations

import hashlib
import math
import tracemalloc

import pytest
import torch
from safetensors.torch import save_file

from auditor.errors import MalformedRecord, NotFound
from auditor.judge.weights import diff_safetensors, sha256_file


def _state(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "fc1.weight": torch.randn(64, 33, generator=g),
        "fc1.bias": torch.randn(64, generator=g),
        "emb.bf16": torch.randn(300, 7, generator=g).bfloat16(),
        "head.f16": torch.randn(129, generator=g).half(),
        "head.f64": torch.randn(31, generator=g).double(),
        "bn.num_batches_tracked": torch.tensor(1234),
        "mask": torch.rand(77, generator=g) > 0.5,
        "q.f8": torch.randn(96, generator=g).to(torch.float8_e4m3fn),
    }


def _write(path, tensors: dict[str, torch.Tensor]):
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))
    return path


def _reference(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, float]:
    a, b = a.double().flatten(), b.double().flatten()
    return (
        (a - b).abs().max().item(),
        ((a - b).norm() / a.norm()).item(),
        torch.nn.functional.cosine_similarity(a, b, dim=0).item(),
    )


def test_two_saves_of_the_same_weights_are_identical_and_carry_matching_hashes(tmp_path):
    state = _state()
    a, b = _write(tmp_path / "a.safetensors", state), _write(tmp_path / "b.safetensors", state)
    diff = diff_safetensors(a, b, hash_files=True)
    assert diff.identical and diff.differing == 0 and diff.tensors == len(state)
    assert diff.max_abs == 0.0 and diff.rel_l2 == 0.0 and diff.worst == []
    assert diff.sha256_a == diff.sha256_b == "sha256:" + hashlib.sha256(a.read_bytes()).hexdigest()


def test_one_ulp_in_one_element_is_found_and_measured_exactly(tmp_path):
    state = _state()
    changed = {k: v.clone() for k, v in state.items()}
    old = changed["fc1.weight"][5, 7].clone()
    changed["fc1.weight"][5, 7] = torch.nextafter(old, torch.tensor(math.inf))  # one float32 ULP
    step = changed["fc1.weight"][5, 7].item() - old.item()
    assert step > 0
    diff = diff_safetensors(_write(tmp_path / "a.st", state), _write(tmp_path / "b.st", changed))
    assert not diff.identical and diff.differing == 1
    [worst] = diff.worst
    assert worst.name == "fc1.weight" and not worst.identical
    assert worst.max_abs == step == diff.max_abs
    assert diff.sha256_a is None  # hashing is opt-in
    hashed = diff_safetensors(tmp_path / "a.st", tmp_path / "b.st", hash_files=True)
    assert hashed.sha256_a != hashed.sha256_b


@pytest.mark.parametrize("chunk_bytes", [8, 100, 4 << 20])
def test_statistics_match_a_float64_reference_for_every_dtype_whatever_the_window_size(tmp_path, chunk_bytes):
    a_state, b_state = _state(0), _state(1)
    b_state["bn.num_batches_tracked"] = torch.tensor(1200)
    diff = diff_safetensors(
        _write(tmp_path / "a.st", a_state), _write(tmp_path / "b.st", b_state), worst=100, chunk_bytes=chunk_bytes
    )
    got = {t.name: t for t in diff.worst}
    assert set(got) == set(a_state)
    for name in got:
        max_abs, rel_l2, cosine = _reference(a_state[name], b_state[name])
        assert got[name].max_abs == pytest.approx(max_abs, rel=1e-6), name
        assert got[name].rel_l2 == pytest.approx(rel_l2, rel=1e-4), name
        assert got[name].cosine == pytest.approx(cosine, rel=1e-4, abs=1e-6), name


def test_totals_are_over_all_tensors_and_the_worst_come_first(tmp_path):
    state = {f"t{i}": torch.ones(1000) for i in range(4)}
    changed = {k: v.clone() for k, v in state.items()}
    changed["t1"][:10] += 0.5  # rel L2 0.05
    changed["t3"][:10] += 2.0  # rel L2 0.2
    changed["t2"][:1] += 0.1  # rel L2 0.0032
    diff = diff_safetensors(_write(tmp_path / "a.st", state), _write(tmp_path / "b.st", changed), worst=2)
    assert [t.name for t in diff.worst] == ["t3", "t1"] and diff.differing == 3
    assert diff.max_abs == 2.0
    expected = math.sqrt(10 * 0.25 + 10 * 4.0 + 0.01) / math.sqrt(4000)
    assert diff.rel_l2 == pytest.approx(expected, rel=1e-6)


def test_nan_equals_its_own_copy_bitwise_where_torch_equal_says_otherwise(tmp_path):
    t = torch.tensor([1.0, math.nan, 3.0])
    assert not torch.equal(t, t.clone())  # why equality goes by bytes (FACTS.md)
    diff = diff_safetensors(_write(tmp_path / "a.st", {"w": t}), _write(tmp_path / "b.st", {"w": t.clone()}))
    assert diff.identical


def test_negative_zero_differs_bitwise_where_torch_equal_sees_no_difference(tmp_path):
    a, b = torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0])
    assert torch.equal(a, b)
    diff = diff_safetensors(_write(tmp_path / "a.st", {"w": a}), _write(tmp_path / "b.st", {"w": b}))
    assert not diff.identical and diff.differing == 1 and diff.worst[0].max_abs == 0.0


def test_a_tensor_holding_nan_that_differs_is_reported_without_non_json_numbers(tmp_path):
    a, b = torch.tensor([1.0, math.nan]), torch.tensor([2.0, math.nan])
    ok = torch.ones(3)
    diff = diff_safetensors(
        _write(tmp_path / "a.st", {"w": a, "ok": ok}), _write(tmp_path / "b.st", {"w": b, "ok": ok})
    )
    [worst] = diff.worst
    assert not diff.identical and worst.max_abs is None and "NaN" in worst.note
    assert diff.max_abs == 0.0  # totals cover the tensors with finite values


def test_names_shapes_and_dtypes_that_differ_are_reported_not_crashed_on(tmp_path):
    a = {"same": torch.ones(3), "shape": torch.ones(3, 4), "dtype": torch.ones(5), "gone": torch.ones(1)}
    b = {"same": torch.ones(3), "shape": torch.ones(4, 3), "dtype": torch.ones(5).double(), "new": torch.ones(2)}
    diff = diff_safetensors(_write(tmp_path / "a.st", a), _write(tmp_path / "b.st", b))
    assert not diff.identical
    assert diff.only_in_a == ["gone"] and diff.only_in_b == ["new"] and diff.mismatched == ["dtype", "shape"]
    assert diff.tensors == 5 and diff.differing == 2
    notes = {t.name: t.note for t in diff.worst}
    assert "F32[5] vs F64[5]" in notes["dtype"] and "[3, 4] vs" in notes["shape"]


def test_a_file_that_is_not_safetensors_is_malformed_and_a_missing_one_is_not_found(tmp_path):
    good = _write(tmp_path / "good.st", {"w": torch.ones(2)})
    bad = tmp_path / "bad.st"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(MalformedRecord, match="bad.st"):
        diff_safetensors(good, bad)
    with pytest.raises(NotFound, match="absent.st"):
        diff_safetensors(good, tmp_path / "absent.st")
    with pytest.raises(NotFound, match="absent.st"):
        sha256_file(tmp_path / "absent.st")


def test_sha256_file_equals_hashlib_over_several_buffers(tmp_path):
    path = tmp_path / "blob"
    data = bytes(range(256)) * 40_000  # about 10 MiB: more than one 8 MiB buffer
    path.write_bytes(data)
    assert sha256_file(path) == "sha256:" + hashlib.sha256(data).hexdigest()


def test_memory_stays_bounded_by_the_window_not_the_tensor(tmp_path):
    big = torch.arange(12 << 20, dtype=torch.float32)  # one 48 MiB tensor
    other = big.clone()
    other[-1] += 1
    a, b = _write(tmp_path / "a.st", {"w": big}), _write(tmp_path / "b.st", {"w": other})
    del big, other
    tracemalloc.start()
    try:
        diff = diff_safetensors(a, b, chunk_bytes=1 << 20, hash_files=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert diff.differing == 1 and diff.max_abs == 1.0
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB for a 48 MiB tensor"
