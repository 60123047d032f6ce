"""Reading and writing a record folder: ``run_record.json`` with ``diff.patch`` beside it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from auditor.contract import DIFF_FILE, RECORD_FILE
from auditor.errors import MalformedRecord, NotFound
from auditor.lineage.record import RunRecord


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_record(folder: Path, record: RunRecord, diff: str | None) -> Path:
    """Write ``run_record.json`` (and ``diff.patch`` when given) atomically into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    if diff is not None:
        _atomic_write(folder / DIFF_FILE, diff.encode("utf-8"))
    path = folder / RECORD_FILE
    _atomic_write(path, (record.to_json() + "\n").encode("utf-8"))
    return path


def read_record(path: Path) -> tuple[RunRecord, str | None]:
    """A record file (or a folder holding one) and the diff beside it, if any."""
    path = Path(path)
    if path.is_dir():
        path = path / RECORD_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"run record {path} does not exist") from None
    except OSError as exc:
        raise MalformedRecord(f"cannot read run record {path}: {exc.strerror}") from None
    record = RunRecord.from_json(raw, source=str(path))
    diff = None
    if record.code and record.code.diff_file:
        diff_path = path.parent / Path(record.code.diff_file).name
        if diff_path.exists():
            diff = diff_path.read_text(encoding="utf-8")
    return record, diff
