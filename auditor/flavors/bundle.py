"""A model artifact of several files as one: a zip archive written byte-for-byte reproducibly, read in memory.

Members are stored (no compression, fixed timestamps, sorted names), so the same members give the same
bytes. Reading never extracts to disk: members are read by name into memory after their names, count
and sizes are checked (no path games, no archive bombs: FACTS.md, tarfile's filter is not to be trusted).
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

from auditor.errors import MalformedRecord

MAX_MEMBERS = 16
MAX_BYTES = 2 << 30  # 2 GiB in all
_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_bundle(members: Mapping[str, bytes], target: str | os.PathLike) -> None:
    """Write ``members`` (name -> bytes) to ``target`` atomically, reproducibly."""
    target = Path(target)
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED) as z:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            z.writestr(info, members[name])
    partial.replace(target)


def read_bundle(path: str | os.PathLike | bytes, expected: tuple[str, ...], *, name: str | None = None) -> dict[str, bytes]:
    """The members named ``expected``, in memory; ``MalformedRecord`` for anything else in the archive. ``path`` may
    be the archive's bytes, already read (``name`` says whose, in messages)."""
    if isinstance(path, bytes):
        path, name = io.BytesIO(path), name or "the model bundle"
    where = name or path
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            names = sorted(i.filename for i in infos)
            if len(infos) > MAX_MEMBERS or sum(i.file_size for i in infos) > MAX_BYTES:
                raise MalformedRecord(f"{where}: {len(infos)} members / {sum(i.file_size for i in infos)} bytes is over the limit")
            if names != sorted(expected):
                raise MalformedRecord(f"{where}: holds {names}, expected exactly {sorted(expected)}")
            return {name: z.read(name) for name in expected}
    except zipfile.BadZipFile as exc:
        raise MalformedRecord(f"{where} is not a model bundle (zip): {exc}") from None
