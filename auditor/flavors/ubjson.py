"""Universal Binary JSON (UBJSON, draft 12) as XGBoost writes it, read with every typed array as a numpy view.

XGBoost's own binary model format (``Booster.save_raw("ubj")``) stores each per-node field of a tree as one
typed array (``[$l#L<n>`` then ``n`` big-endian int32s, say). Reading it with ``np.frombuffer`` costs one Python
call per array instead of one per number: a 2,000-tree model's ten-odd fields of 10^5 nodes each are read in
milliseconds, where its JSON form (``save_raw("json")`` then ``json.loads``) costs several times loading the model.
No library reads UBJSON into numpy; the format is small (scalars, strings, arrays and objects with optional type
and count), so the whole of it is read here. Only bytes XGBoost itself wrote are read (the flavour loads the
model with XGBoost first and reads back what it saves), but a malformed stream still raises ``MalformedRecord``.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any

import numpy as np

from auditor.errors import MalformedRecord

#: scalar markers (as byte values): the numpy dtype of one value (big-endian, as UBJSON stores numbers)
_NUMBERS = {ord(m): np.dtype(d) for m, d in (("i", ">i1"), ("U", ">u1"), ("I", ">i2"), ("l", ">i4"), ("L", ">i8"),
                                              ("d", ">f4"), ("D", ">f8"))}
_STRUCTS = {marker: struct.Struct(">" + code) for marker, code in zip(_NUMBERS, "bBhiqfd", strict=True)}
_FLOATS = (ord("d"), ord("D"))
_CONSTANTS = {ord("Z"): None, ord("T"): True, ord("F"): False}
_NOOP, _TYPE, _COUNT, _STRING, _HIGH, _CHAR, _ARRAY, _END_ARRAY, _OBJECT, _END_OBJECT = b"N$#SHC[]{}"
_INT64 = _STRUCTS[ord("L")]
#: XGBoost's documents nest a handful of levels: far deeper is a malformed (or hostile) stream
_DEPTH = 64


class Span(tuple):
    """A typed numeric array, not yet read: (where its values start in the bytes, how many, of which dtype). A bare
    tuple subclass: made by C (``Span((offset, count, dtype))``), a NamedTuple's Python ``__new__`` cost more than the
    whole rest of reading a forest."""

    __slots__ = ()

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def count(self) -> int:
        return self[1]

    @property
    def dtype(self) -> np.dtype:
        return self[2]


class Records:
    """An array of objects that hold the same keys in the same order (a forest's trees), read column by column: a
    typed array as its offset and count in two machine-integer arrays (``spans``), anything else in a list. Saves a
    dict and a ``Span`` per field of every tree (a 2,000-tree model's parsed form held more than its bytes)."""

    def __init__(self, first: dict[str, Any]) -> None:
        self.names = list(first)
        self.dtypes = {k: v.dtype for k, v in first.items() if isinstance(v, Span)}
        self.offsets = {k: array("q", [first[k].offset]) for k in self.dtypes}
        self.counts = {k: array("q", [first[k].count]) for k in self.dtypes}
        self.other = {k: [v] for k, v in first.items() if k not in self.dtypes}
        self.length = 1

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: Span((self.offsets[k][i], self.counts[k][i], self.dtypes[k])) if k in self.dtypes else self.other[k][i]
                for k in self.names}

    def __iter__(self) -> Any:
        return (self[i] for i in range(self.length))

    def cut(self) -> list[dict[str, Any]]:
        """The objects read whole (each column cut to ``length``: a record read halfway is read again)."""
        return [self[i] for i in range(self.length)]


def loads(data: bytes | bytearray | memoryview, *, spans: bool = False) -> Any:
    """The document ``data`` holds: dicts, lists, str, int, float, bool, None, and typed numeric arrays as read-only
    numpy arrays (big-endian views of ``data``), or with ``spans`` as ``Span`` (read many at once with ``gather``:
    one numpy call per field of a forest, not one per tree)."""
    reader = _Reader(bytes(data) if isinstance(data, memoryview) else data, spans)
    try:
        value = reader.value(reader.marker(), 0)
    except (IndexError, KeyError, struct.error, ValueError, TypeError, OverflowError, UnicodeDecodeError, RecursionError) as exc:
        raise MalformedRecord(f"not a well-formed UBJSON document at byte {reader.at}: {exc}") from None
    if reader.at != len(reader.data):
        raise MalformedRecord(f"UBJSON document ends at byte {reader.at} of {len(reader.data)}")
    return value


class _Reader:
    """A cursor over the bytes. Markers are read as ints (indexing, not slicing: no object per byte), and a key
    already seen is not decoded again (a forest repeats the same sixteen keys per tree)."""

    def __init__(self, data: bytes | bytearray, spans: bool = False) -> None:
        self.data, self.at, self.spans = data, 0, spans
        self.keys: dict[bytes, str] = {}

    def marker(self) -> int:
        data = self.data
        while data[self.at] == _NOOP:
            self.at += 1
        self.at += 1
        return data[self.at - 1]

    def number(self, marker: int) -> Any:
        packer = _STRUCTS[marker]
        (value,) = packer.unpack_from(self.data, self.at)
        self.at += packer.size
        return float(value) if marker in _FLOATS else int(value)

    def text(self) -> str:
        marker = self.marker()
        if marker == 76:  # "L": XGBoost writes every length as an int64
            (size,) = _INT64.unpack_from(self.data, self.at)
            self.at += 8
        else:
            size = self.number(marker)
        end = self.at + size
        if size < 0 or not isinstance(size, int) or end > len(self.data):
            raise ValueError(f"bad string length {size!r}")
        raw = bytes(self.data[self.at:end])
        self.at = end
        found = self.keys.get(raw)
        if found is None:
            found = raw.decode("utf-8")
            if len(self.keys) < 4096:  # keys and short values repeat; a long list of names need not be held twice
                self.keys[raw] = found
        return found

    def value(self, marker: int, depth: int) -> Any:
        if marker in _STRUCTS:
            return self.number(marker)
        if marker == _ARRAY or marker == _OBJECT:
            if depth > _DEPTH:
                raise ValueError("nested too deep")
            return self.array(depth + 1) if marker == _ARRAY else self.object(depth + 1)
        if marker == _STRING:
            return self.text()
        if marker in _CONSTANTS:
            return _CONSTANTS[marker]
        if marker == _HIGH:  # a high-precision number, as its decimal text
            text = self.text()
            return int(text) if text.lstrip("-").isdigit() else float(text)
        if marker == _CHAR:
            self.at += 1
            return chr(self.data[self.at - 1])
        raise ValueError(f"unknown marker {bytes([marker])!r}")

    def header(self) -> tuple[int | None, int | None]:
        """A container's optional ``$type`` and ``#count``."""
        kind = count = None
        data = self.data
        if data[self.at] == _TYPE:
            self.at += 1
            kind = self.marker()
        if data[self.at] == _COUNT:
            self.at += 1
            count = self.number(self.marker())
            if not isinstance(count, int) or count < 0:
                raise ValueError(f"bad count {count!r}")
        elif kind is not None:
            raise ValueError("a typed container without a count")
        return kind, count

    def array(self, depth: int) -> Any:
        kind, count = self.header()
        if kind in _NUMBERS and count is not None:  # the fast path: one view of the bytes, no object per number
            dtype = _NUMBERS[kind]
            start, self.at = self.at, self.at + count * dtype.itemsize
            if self.at > len(self.data):
                raise IndexError("array past the end of data")
            return Span((start, count, dtype)) if self.spans else np.frombuffer(self.data, dtype=dtype, count=count, offset=start)
        if count is not None and kind is None and self.spans and count > 1 and self.data[self.at] == _OBJECT:
            return self.records(count, depth)
        if count is not None:
            return [self.value(self.marker() if kind is None else kind, depth) for _ in range(count)]
        out = []
        while (marker := self.marker()) != _END_ARRAY:
            out.append(self.value(marker, depth))
        return out

    def object(self, depth: int) -> dict[str, Any]:
        kind, count = self.header()
        out: dict[str, Any] = {}
        if count is not None:
            for _ in range(count):
                key = self.text()
                out[key] = self.value(self.marker() if kind is None else kind, depth)
            return out
        data, keys, numbers = self.data, self.keys, _NUMBERS
        at = self.at
        while data[at] != _END_OBJECT:  # the hot loop (a forest's 16 keys per tree), inlined: a key, then its value
            if data[at] == 76:  # "L": XGBoost's int64 key length
                (size,) = _INT64.unpack_from(data, at + 1)
                at += 9
            else:
                self.at = at + 1
                size = self.number(data[at])
                at = self.at
            raw = bytes(data[at:at + size])
            key = keys.get(raw) or self.key(raw, size)
            at += size
            if data[at] == _ARRAY and data[at + 1] == _TYPE and data[at + 3] == _COUNT and data[at + 4] == 76 and data[at + 2] in numbers:
                dtype = numbers[data[at + 2]]  # a typed array with an int64 count: XGBoost's per-node fields
                (n,) = _INT64.unpack_from(data, at + 5)
                start = at + 13
                at = start + n * dtype.itemsize
                if n < 0 or at > len(data):
                    raise ValueError(f"bad array length {n}")
                out[key] = Span((start, n, dtype)) if self.spans else np.frombuffer(data, dtype=dtype, count=n, offset=start)
            elif data[at] == _STRING and data[at + 1] == 76:  # a string (XGBoost's numbers in tree_param are strings)
                (n,) = _INT64.unpack_from(data, at + 2)
                raw = bytes(data[at + 10:at + 10 + n])
                out[key] = keys.get(raw) or self.key(raw, n)
                at += 10 + n
            else:
                self.at = at + 1
                out[key] = self.value(data[at], depth)
                at = self.at
        self.at = at + 1
        return out

    def records(self, count: int, depth: int) -> Records | list[Any]:
        """``count`` objects, as ``Records`` while each holds the first one's keys in order with typed arrays where it
        had them; from the first that does not, as a list (read again from its start, generically)."""
        self.at += 1
        first = self.object(depth)
        out = Records(first)
        markers = {d: bytes([m]) for m, d in _NUMBERS.items()}
        expected = [(b"L" + _INT64.pack(len(k.encode("utf-8"))) + k.encode("utf-8")  # the key, then a typed array's header
                     + (b"[$" + markers[out.dtypes[k]] + b"#L" if k in out.dtypes else b""), k, out.dtypes.get(k)) for k in out.names]
        for done in range(1, count):
            start = self.at
            if not self.record(out, expected, depth):
                self.at = start
                rest = [self.value(self.marker(), depth) for _ in range(count - done)]
                return out.cut() + rest
            out.length += 1
        return out

    def record(self, out: Records, expected: list[tuple[bytes, str, Any]], depth: int) -> bool:
        """One more object of ``out`` (False, nothing kept: it is not one; a record read halfway is cut by ``length``)."""
        data = self.data
        at = self.at
        if data[at] != _OBJECT:
            return False
        at += 1
        for prefix, key, dtype in expected:
            if not data.startswith(prefix, at):
                return False
            at += len(prefix)
            if dtype is None:
                self.at = at + 1
                out.other[key].append(self.object(depth) if data[at] == _OBJECT and depth < _DEPTH else self.value(data[at], depth))
                at = self.at
                continue
            (n,) = _INT64.unpack_from(data, at)
            if n < 0 or at + 8 + n * dtype.itemsize > len(data):
                raise ValueError(f"bad array length {n}")
            out.offsets[key].append(at + 8)
            out.counts[key].append(n)
            at += 8 + n * dtype.itemsize
        if data[at] != _END_OBJECT:
            return False
        self.at = at + 1
        return True

    def key(self, raw: bytes, size: int) -> str:
        if size < 0 or len(raw) != size:
            raise ValueError(f"bad key length {size}")
        found = raw.decode("utf-8")
        if len(self.keys) < 4096:
            self.keys[raw] = found
        return found

def column(data: bytes | bytearray, spans: list[Span] | Records, key: str | None = None) -> np.ndarray:
    """The values of ``spans`` (or of ``Records`` column ``key``) end to end (``gather``)."""
    if isinstance(spans, Records):
        return gather(data, spans.offsets[key], spans.counts[key], spans.dtypes[key])
    if not spans:
        return np.empty(0)
    if any(s.dtype != spans[0].dtype for s in spans):
        raise MalformedRecord(f"one field holds arrays of several types ({sorted({str(s.dtype) for s in spans})})")
    return gather(data, [s.offset for s in spans], [s.count for s in spans], spans[0].dtype)


def gather(data: bytes | bytearray, offsets: Any, counts: Any, dtype: np.dtype) -> np.ndarray:
    """Arrays of ``dtype`` at ``offsets`` of ``counts`` values each, end to end in native byte order: their bytes
    joined in C (a slice of a memoryview copies nothing), then read as one array."""
    view, size = memoryview(data), dtype.itemsize
    joined = b"".join([view[offset:offset + count * size] for offset, count in zip(offsets, counts, strict=True)])
    return np.frombuffer(joined, dtype=dtype).astype(dtype.newbyteorder("="))


def plain(data: bytes | bytearray, value: Any) -> Any:
    """``value`` (read with ``spans``) with each ``Span`` as a list of Python numbers: JSON's form of the document."""
    if isinstance(value, Span):
        return np.frombuffer(data, dtype=value.dtype, count=value.count, offset=value.offset).tolist()
    if isinstance(value, dict):
        return {k: plain(data, v) for k, v in value.items()}
    if isinstance(value, (list, Records)):
        return [plain(data, v) for v in value]
    return value
