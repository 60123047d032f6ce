"""Hashing: every path gets the BLAKE3 of every byte, whatever route (in-process, forked workers, big-file threads)."""

from __future__ import annotations

import os

import blake3
import pytest

from auditor.errors import NotFound
from auditor.snapshots import hashing
from auditor.snapshots.hashing import hash_bytes, hash_file, hash_paths


def _expected(path) -> tuple[int, str]:
    data = path.read_bytes()
    return len(data), blake3.blake3(data).hexdigest()


def test_a_few_files_are_hashed_in_process_correctly(tmp_path):
    paths = []
    for n, size in enumerate([0, 1, 4096, 4 << 20, (4 << 20) + 1, 5_000_001]):
        path = tmp_path / f"f{n}"
        path.write_bytes(os.urandom(size))
        paths.append(path)
    assert hash_paths(paths) == [_expected(p) for p in paths]


def test_many_files_hashed_by_forked_workers_come_back_in_order(tmp_path):
    paths = []
    for n in range(hashing._FORK_MIN_FILES + 37):
        path = tmp_path / f"f{n:04d}"
        path.write_bytes(os.urandom(n * 13 % 9000))
        paths.append(path)
    seen: list[tuple[str, int, int]] = []
    result = hash_paths(paths, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert result == [_expected(p) for p in paths]
    assert seen[-1] == ("hashing", len(paths), len(paths))


def test_a_big_file_among_many_small_ones_is_hashed_with_all_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(hashing, "_BIG", 64 * 1024)  # keep the test small: "big" means 64 KiB here
    paths = [tmp_path / f"s{n:04d}" for n in range(hashing._FORK_MIN_FILES)]
    for path in paths:
        path.write_bytes(os.urandom(100))
    big = tmp_path / "big"
    big.write_bytes(os.urandom(200_000))
    paths.insert(5, big)
    assert hash_paths(paths) == [_expected(p) for p in paths]


def test_one_file_and_bytes_agree_with_the_reference_blake3(tmp_path):
    data = os.urandom(20 << 20)  # above the threaded threshold
    path = tmp_path / "big"
    path.write_bytes(data)
    reference = blake3.blake3(data).hexdigest()
    assert hash_file(path) == (len(data), reference)
    assert hash_bytes(data) == reference


def test_a_file_that_vanished_is_reported_by_name(tmp_path):
    with pytest.raises(NotFound, match="gone.bin"):
        hash_paths([tmp_path / "gone.bin"])


def test_a_missing_file_among_many_is_reported_by_name(tmp_path):
    paths = [tmp_path / f"f{n}" for n in range(hashing._FORK_MIN_FILES)]
    for path in paths:
        path.write_bytes(b"x")
    paths.append(tmp_path / "vanished.bin")
    with pytest.raises(NotFound, match="vanished.bin"):
        hash_paths(paths)


def test_a_worker_that_dies_leaves_its_share_to_this_process(tmp_path, monkeypatch):
    real_child = hashing._child

    def crashing_second_worker(paths, start, step, out):
        if start == 1:
            raise RuntimeError("worker crashed")
        real_child(paths, start, step, out)

    monkeypatch.setattr(hashing, "_child", crashing_second_worker)
    monkeypatch.setattr(hashing, "_workers", lambda: 2)
    paths = [tmp_path / f"f{n}" for n in range(hashing._FORK_MIN_FILES)]
    for n, path in enumerate(paths):
        path.write_bytes(str(n).encode())
    assert hash_paths(paths) == [_expected(p) for p in paths]
