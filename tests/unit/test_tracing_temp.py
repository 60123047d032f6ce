"""Issue 26, build point 5: tracing without blind spots it does not admit (real files, the real audit hook).

Files in the temporary folder and in /dev/shm are inputs like any other; what the run makes itself there is
not; libraries' own folders there are not; and ``traced.notes`` names every folder and reader left out.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from auditor.lineage import tracing
from auditor.lineage.record import RunRecord


@pytest.fixture()
def temp(tmp_path, monkeypatch) -> Path:
    """$TMPDIR set to another folder than /tmp (``tempfile.gettempdir()`` answers it)."""
    folder = tmp_path / "elsewhere-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _trace(action, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    tracer = tracing.start(RunRecord(), repo_dir=None, env={"REPRO_DATA_TRAIN": str(data), "HOME": str(tmp_path / "home")})
    try:
        action()
    finally:
        traced = tracer.stop()
    return traced


def test_a_file_an_earlier_step_left_in_the_temp_folder_is_traced(temp, tmp_path):
    left = temp / "features.csv"
    left.write_text("a,b\n")
    shm = Path("/dev/shm") / f"repro-unit-{tmp_path.name}.bin" if os.access("/dev/shm", os.W_OK) else None
    if shm is not None:
        shm.write_bytes(b"x")
    try:
        def read():
            left.read_text()
            if shm is not None:
                shm.read_bytes()
            Path("/dev/null").read_bytes()  # /dev itself is not an input

        traced = _trace(read, tmp_path)
    finally:
        if shm is not None:
            shm.unlink()
    paths = [f.path for f in traced.files]
    assert str(left) in paths and "/dev/null" not in paths
    if shm is not None:
        assert str(shm) in paths


def test_what_the_run_makes_itself_in_the_temp_folder_is_not_an_input(temp, tmp_path):
    def make_and_read():
        own = Path(tempfile.mkdtemp())  # a folder it created: everything under it is its own
        (own / "cache.npy").write_bytes(b"1")
        (own / "cache.npy").read_bytes()
        fd, name = tempfile.mkstemp()
        os.close(fd)
        Path(name).read_bytes()
        written = temp / "written.txt"
        written.write_text("w")  # created (truncated) by the run, then read back
        written.read_text()
        shutil.copyfile(written, temp / "copied.txt")
        (temp / "copied.txt").read_text()
        os.replace(temp / "copied.txt", temp / "moved.txt")
        (temp / "moved.txt").read_text()

    (temp / "torchinductor_someone").mkdir()
    (temp / "torchinductor_someone" / "old.py").write_text("cached")
    traced = _trace(make_and_read, tmp_path)
    assert traced.files == []

    traced = _trace(lambda: (temp / "torchinductor_someone" / "old.py").read_text(), tmp_path)
    assert traced.files == []  # a kernel cache an earlier run left is not the model's input


def test_a_file_appended_to_and_read_back_is_still_an_input(temp, tmp_path):
    """Appending does not make a file the run's own: what was there before is read back with it."""
    log = temp / "history.txt"
    log.write_text("before\n")

    def append_and_read():
        with log.open("a") as handle:
            handle.write("after\n")
        log.read_text()

    assert [f.path for f in _trace(append_and_read, tmp_path).files] == [str(log)]


def test_traced_notes_name_every_folder_and_reader_left_out(temp, tmp_path):
    traced = _trace(lambda: None, tmp_path)
    notes = " | ".join(traced.notes)
    assert str(tmp_path / "data") in notes  # the data folder, by name
    assert "the Python installation" in notes and "/proc, /sys, /dev except /dev/shm" in notes
    assert "/etc/ssl" in notes and "~/.aws" in notes and "torchinductor_*" in notes
    assert str(temp) in notes  # the temporary folder is named where libraries' folders in it are left out
    for reader in ("native code", "child processes", "network reads", "without opening it", "made itself inside the block"):
        assert reader in notes, reader
