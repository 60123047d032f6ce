"""Unsafe artifacts: a registered model file whose bytes would run code when loaded, found by content alone.

A model registered by the SDK is saved without pickle (``auditor.flavors``); a file that is a pickle anyway,
whatever its name (``model.skops``, ``model.lightgbm.txt``, a ``.safetensors``, a ``.json``), was put there by
something else. ``sniff`` reads the first bytes (and a zip's member list and each member's first bytes) and
never executes anything: ``pickletools``' opcode table walks the stream as data, compressed streams are
inflated a few KiB at most. It finds

- a pickle of protocol 2 to 5 (``\\x80`` and the protocol byte) and of protocol 0 or 1 (text opcodes naming
  a global), checked by walking its first opcodes;
- the same compressed as ``joblib.dump(..., compress=...)`` writes it (zlib, gzip, bz2, lzma, xz; joblib's
  old ``ZF`` header);
- a NumPy ``.npy`` holding an object array (``np.load(allow_pickle=True)`` unpickles it);
- a zip holding a pickle: ``torch.save``'s ``data.pkl``, any ``*.pkl``/``*.pickle`` member, or a member whose
  own bytes are one of the above.

``refuse_unsafe`` turns a finding into ``UnsafeArtifact``, an ``InputUnrecoverable``: in an audit the
registered artifact cannot be recovered safely, so the verdict is NOT_REPRODUCIBLE (never ERROR, which the
nightly would retry every night), and the file is never loaded, here or in a rebuild. A file that is no
pickle but still cannot be read as its flavour's model (random bytes, a truncated file) is
``UnreadableArtifact`` (``auditor.judge.models``): also the artifact's own fault, also no retry.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import pickletools
import zipfile
import zlib
from pathlib import Path

from auditor.errors import InputUnrecoverable

#: how much of a file (or of a zip member, or of an inflated stream) is read to judge it
HEAD_BYTES = 64 << 10
MEMBER_BYTES = 4 << 10
#: how many opcodes are walked at most, and how many a binary pickle must show before anything else
WALK_OPS = 256
MIN_OPS = 3
#: zip members whose bytes are read (beyond them, names only)
MAX_MEMBERS = 4096
#: what to do instead: the SDK's pickle-free formats
FIX = ("save the model with run.save_model (skops for scikit-learn, UBJ for XGBoost, text for LightGBM, cbm for "
       "CatBoost) or its weights with run.save_weights (safetensors for PyTorch), then register that run")

_OPS = {op.code.encode("latin-1"): op for op in pickletools.opcodes}
_NAMES_GLOBAL = {"GLOBAL", "INST", "STACK_GLOBAL"}
#: the first opcode of a protocol 0 or 1 pickle of anything that names a type
_TEXT_STARTS = frozenset(b"(c}]")
_SAFETENSORS_MAX_HEADER = 100 << 20


class UnsafeArtifact(InputUnrecoverable):
    """A model artifact whose bytes run code when loaded (a pickle, however named or compressed): refused by its
    content before any flavour reads it, never loaded (in an audit: NOT_REPRODUCIBLE)."""


class UnreadableArtifact(InputUnrecoverable):
    """A registered model artifact that its flavour cannot read (random bytes, a truncated file, another format):
    the file itself cannot be recovered, so no retry changes it (in an audit: NOT_REPRODUCIBLE)."""


def _walk(data: bytes) -> tuple[list[tuple[str, object]], str]:
    """The opcodes at the start of ``data`` (name, argument), read as data, and how the walk ended: ``stop`` (the
    pickle's end), ``exhausted`` (``data`` ends first: a head), ``limit`` or ``invalid`` (not an opcode here)."""
    stream, ops = io.BytesIO(data), []
    while len(ops) < WALK_OPS:
        code = stream.read(1)
        if not code:
            return ops, "exhausted"
        op = _OPS.get(code)
        if op is None:
            return ops, "invalid"
        try:
            arg = op.arg.reader(stream) if op.arg is not None else None
        except Exception:  # noqa: BLE001 - an argument that does not decode: the bytes end here, or are no pickle
            return ops, "exhausted" if stream.tell() >= len(data) else "invalid"
        ops.append((op.name, arg))
        if op.name == "STOP":
            return ops, "stop"
    return ops, "limit"


def _names_a_global(ops: list[tuple[str, object]]) -> bool:
    """A protocol 0/1 ``GLOBAL``/``INST`` whose argument is ``module name``, both dotted identifiers."""
    for name, arg in ops:
        if name in _NAMES_GLOBAL and isinstance(arg, str):
            parts = arg.split(" ")
            if len(parts) == 2 and all(p and all(s.isidentifier() for s in p.split(".")) for p in parts):
                return True
    return False


def _looks_like_safetensors(data: bytes) -> bool:
    """An 8-byte little-endian header length, then the JSON header: safetensors, whose length may begin ``\\x80``."""
    return len(data) > 8 and data[8:9] == b"{" and 0 < int.from_bytes(data[:8], "little") <= _SAFETENSORS_MAX_HEADER


def _pickle(data: bytes) -> str | None:
    """``a pickle (protocol N)`` when ``data`` begins a pickle stream."""
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5 and not _looks_like_safetensors(data):
        ops, end = _walk(data)
        if len(ops) >= MIN_OPS or (end != "invalid" and len(ops) >= 2):  # joblib writes raw array bytes inside its stream
            return f"a pickle (protocol {data[1]})"
    if data[:1] and data[0] in _TEXT_STARTS:
        ops, end = _walk(data)
        if (end == "stop" and len(ops) >= 2) or (end in ("exhausted", "limit") and len(ops) >= MIN_OPS and _names_a_global(ops)):
            return "a pickle (protocol 0 or 1)"
    return None


def _inflate(data: bytes) -> tuple[str, bytes] | None:
    """(how it was compressed, the first inflated bytes) for the compressions joblib writes; None for none."""
    def bounded(decompress) -> bytes:
        return decompress(data, MEMBER_BYTES)

    try:
        if data[:1] == b"\x78" and len(data) > 1 and (data[0] << 8 | data[1]) % 31 == 0:
            return "zlib", bounded(zlib.decompressobj().decompress)
        if data[:2] == b"ZF":  # joblib < 0.10: "ZF", the length in hex padded to 19 bytes, then a zlib stream
            return "zlib", zlib.decompressobj().decompress(data[21:], MEMBER_BYTES)
        if data[:2] == b"\x1f\x8b":
            return "gzip", bounded(zlib.decompressobj(wbits=31).decompress)
        if data[:3] == b"BZh":
            return "bz2", bz2.BZ2Decompressor().decompress(data, max_length=MEMBER_BYTES)
        if data[:6] == b"\xfd7zXZ\x00" or data[:3] == b"\x5d\x00\x00":
            return "lzma", lzma.LZMADecompressor().decompress(data, max_length=MEMBER_BYTES)
    except (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError):
        return None
    return None


def _npy_object(data: bytes) -> str | None:
    """A ``.npy`` whose dtype holds Python objects: ``np.load`` can only unpickle it."""
    if not data.startswith(b"\x93NUMPY") or len(data) < 10:
        return None
    size, start = (int.from_bytes(data[8:10], "little"), 10) if data[6] == 1 else (int.from_bytes(data[8:12], "little"), 12)
    header = data[start:start + size].decode("latin-1")
    return "a NumPy object array (np.load unpickles it)" if "'|O" in header else None


def _stream(data: bytes) -> str | None:
    """A pickle, compressed or not, or an object array, at the start of ``data``."""
    found = _pickle(data) or _npy_object(data)
    if found:
        return found
    inflated = _inflate(data)
    if inflated is not None:
        how, head = inflated
        inner = _pickle(head)
        if inner:
            return f"{inner}, {how}-compressed (as joblib.dump(..., compress=...) writes it)"
    return None


def _zip(source: str | os.PathLike | io.BytesIO) -> str | None:
    """A zip member that is a pickle: by name (``*.pkl``, ``*.pickle``, ``torch.save``'s ``data.pkl``) or by its bytes."""
    try:
        with zipfile.ZipFile(source) as z:
            infos = z.infolist()
            for info in infos:
                if info.filename.rsplit("/", 1)[-1] == "data.pkl":
                    return f"a zip holding a pickle ({info.filename}, as torch.save writes it)"
                if info.filename.lower().endswith((".pkl", ".pickle")):
                    return f"a zip holding a pickle ({info.filename})"
            for info in infos[:MAX_MEMBERS]:
                if info.is_dir() or info.flag_bits & 0x1:  # a folder, or encrypted: nothing to read
                    continue
                with z.open(info) as member:
                    found = _stream(member.read(MEMBER_BYTES))
                if found:
                    return f"a zip holding {found} ({info.filename})"
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError, ValueError, RuntimeError,
            zlib.error, lzma.LZMAError):
        return None  # not a zip one can read: the flavour's own reader says what it is
    return None


def sniff(data: bytes) -> str | None:
    """What makes ``data`` (a file's bytes, or its first bytes) run code when loaded, e.g. ``a pickle (protocol 4)``;
    None when nothing does. Pure: reads ``data`` as data, executes nothing."""
    found = _stream(data)
    if found is None and data[:4] == b"PK\x03\x04":
        found = _zip(io.BytesIO(data))
    return found


def sniff_file(path: str | os.PathLike) -> str | None:
    """``sniff`` of the file at ``path``: its first bytes, and a zip's members wherever the archive begins."""
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    found = _stream(head)
    if found is None and zipfile.is_zipfile(path):
        found = _zip(path)
    return found


def refuse_unsafe(path: str | os.PathLike, name: str | None = None) -> None:
    """``UnsafeArtifact`` when the model artifact at ``path`` (shown as ``name``) is a pickle; it is never loaded.
    A missing file is left to the reader that needs it (``NotFound``: not the artifact's content)."""
    if not Path(path).is_file():
        return
    found = sniff_file(path)
    if found:
        raise UnsafeArtifact(f"unsafe format: pickle: the model artifact {name or Path(path).name} is {found}; it was not "
                             "loaded (loading a pickle runs whatever code it names)", hint=FIX)


__all__ = ["FIX", "UnreadableArtifact", "UnsafeArtifact", "refuse_unsafe", "sniff", "sniff_file"]
