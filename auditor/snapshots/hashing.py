"""BLAKE3 over many files at close to the speed of reading them.

Measured on two cores (see FACTS.md and ``bench/bench_snapshots.py``): Python
threads make tiny files *slower*, one-thread-per-file costs more again, and a
big file gains 1.8x from BLAKE3's own threads. So: files under 16 MiB are
hashed one thread each in forked worker processes that take an interleaved
share of the list (no per-file task, results streamed back as fixed-size
records), and big files are hashed in this process with ``update_mmap`` over
all cores. Every byte is read every time: size and mtime are never trusted.

    hash_paths(paths, progress=None) -> list[tuple[int, str]]   # (size, hex digest) per path
    hash_file(path) -> tuple[int, str]
    hash_bytes(data) -> str
"""

from __future__ import annotations

import os
import selectors
import signal
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import blake3

from auditor.errors import BadInput, InfrastructureError, NotFound

ALGORITHM = "blake3"
#: progress(stage, done, total): called now and then, never per tiny file.
ProgressFn = Callable[[str, int, int], None]

_BIG = 16 << 20
_BUFFER = 4 << 20
_FORK_MIN_FILES = 256
_MAX_WORKERS = 8
# index, size (or a negative marker), errno, digest
_RECORD = struct.Struct("<IqI32s")
_IS_BIG, _FAILED = -1, -2
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)


def hash_bytes(data: bytes | memoryview) -> str:
    """Hex BLAKE3 of ``data`` (threaded when it is big)."""
    threads = blake3.blake3.AUTO if len(data) >= _BIG else 1
    return blake3.blake3(data, max_threads=threads).hexdigest()


def _hash_fd(fd: int, buf: bytearray, view: memoryview) -> tuple[int, bytes] | None:
    """(size, digest) read to EOF, or None for a big file (hashed with all cores instead)."""
    n = os.readv(fd, [buf])
    if n < len(buf):  # a short read of a regular file is EOF: one read call for a small file
        return n, blake3.blake3(view[:n]).digest()
    if os.fstat(fd).st_size >= _BIG:
        return None
    hasher = blake3.blake3(view[:n])
    total = n
    # Read to EOF rather than to st_size: a file that grows or shrinks meanwhile is hashed as read.
    while n := os.readv(fd, [buf]):
        hasher.update(view[:n])
        total += n
    return total, hasher.digest()


def _hash_big(path: str) -> tuple[int, str]:
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    size = os.stat(path, follow_symlinks=False).st_size
    if size:
        hasher.update_mmap(path)
    return size, hasher.hexdigest()


def _error(path: str | os.PathLike, err: int) -> Exception:
    message = os.strerror(err) if err else "unreadable"
    if err == 2:
        return NotFound(f"cannot hash {path}: it no longer exists", hint="was the data changed while it was read?")
    if err == 40:  # ELOOP: O_NOFOLLOW met a symlink where a file was listed
        return BadInput(f"cannot hash {path}: it became a symlink while it was read")
    return InfrastructureError(f"cannot hash {path}: {message}")


def _hash_one(path: str, buf: bytearray, view: memoryview) -> tuple[int, str] | None:
    """(size, hex) of a small file; None when it is big (the caller hashes it with all cores)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        raise _error(path, exc.errno or 0) from None
    try:
        result = _hash_fd(fd, buf, view)
        return None if result is None else (result[0], result[1].hex())
    except OSError as exc:
        raise _error(path, exc.errno or 0) from None
    finally:
        os.close(fd)


def hash_file(path: str | Path) -> tuple[int, str]:
    """(size, hex BLAKE3) of one file, read in full."""
    buf = bytearray(_BUFFER)
    result = _hash_one(os.fspath(path), buf, memoryview(buf))
    return result if result is not None else _hash_big(os.fspath(path))


def _workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_WORKERS))


def _child(paths: Sequence[str], start: int, step: int, out: int) -> None:
    buf = bytearray(_BUFFER)
    view = memoryview(buf)
    batch = bytearray()
    for index in range(start, len(paths), step):
        size, err, digest = _FAILED, 0, b""
        try:
            fd = os.open(paths[index], _OPEN_FLAGS)
            try:
                result = _hash_fd(fd, buf, view)
                size, digest = (_IS_BIG, b"") if result is None else result
            finally:
                os.close(fd)
        except OSError as exc:
            size, err = _FAILED, exc.errno or 0
        batch += _RECORD.pack(index, size, err, digest)
        if len(batch) >= 256 * _RECORD.size:
            _write_all(out, batch)
            batch.clear()
    _write_all(out, batch)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _collect(readers: dict[int, int], results: list, progress: ProgressFn | None, stage: str) -> None:
    """Read every worker's records into ``results``; reap each worker at its EOF."""
    done = 0
    pending: dict[int, bytearray] = {fd: bytearray() for fd in readers}
    with selectors.DefaultSelector() as selector:
        for fd in readers:
            selector.register(fd, selectors.EVENT_READ)
        while readers:
            for key, _ in selector.select():
                fd = key.fd
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    selector.unregister(fd)
                    os.close(fd)
                    os.waitpid(readers.pop(fd), 0)
                    continue
                buffer = pending[fd]
                buffer += chunk
                usable = len(buffer) - len(buffer) % _RECORD.size
                for index, size, err, digest in _RECORD.iter_unpack(bytes(buffer[:usable])):
                    if size >= 0:
                        results[index] = (size, digest.hex())
                    elif size == _IS_BIG:
                        results[index] = _IS_BIG
                    else:
                        results[index] = (_FAILED, err)
                    done += 1
                del buffer[:usable]
                if progress is not None:
                    progress(stage, done, len(results))


def _hash_forked(paths: Sequence[str], workers: int, progress: ProgressFn | None, stage: str) -> list:
    """Results per index: (size, hex), _IS_BIG, (_FAILED, errno) or None (a worker died)."""
    results: list = [None] * len(paths)
    readers: dict[int, int] = {}
    for worker in range(workers):
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no more processes: this worker's share is left as None and hashed in-process
            os.close(read_end)
            os.close(write_end)
            break
        if pid == 0:  # child: never return into the caller's code
            code = 0
            try:
                os.close(read_end)
                _child(paths, worker, workers, write_end)
            except BaseException:  # noqa: BLE001 - the parent re-hashes whatever a dead worker left
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        readers[read_end] = pid
    try:
        _collect(readers, results, progress, stage)
    finally:
        for fd, pid in readers.items():  # only left when collecting failed (e.g. Ctrl-C): stop the workers
            os.close(fd)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
    return results


def hash_paths(
    paths: Sequence[str | Path], *, progress: ProgressFn | None = None, stage: str = "hashing"
) -> list[tuple[int, str]]:
    """(size, hex BLAKE3) of each file, in the order given; reads every byte."""
    names = [os.fspath(p) for p in paths]
    workers = _workers()
    use_fork = hasattr(os, "fork") and workers > 1 and len(names) >= _FORK_MIN_FILES
    results: list = _hash_forked(names, workers, progress, stage) if use_fork else [None] * len(names)
    buf = bytearray(_BUFFER)
    view = memoryview(buf)
    out: list[tuple[int, str]] = []
    for index, (name, result) in enumerate(zip(names, results, strict=True)):
        if result is None:  # not forked, or its worker died: hash it here
            result = _hash_one(name, buf, view) or _IS_BIG
        if result == _IS_BIG:
            result = _hash_big(name)
        elif result[0] == _FAILED:
            raise _error(name, result[1])
        out.append(result)
        if progress is not None and (not use_fork or result[0] >= _BIG) and (index % 64 == 63 or result[0] >= _BIG):
            progress(stage, index + 1, len(names))
    if progress is not None:
        progress(stage, len(names), len(names))
    return out
