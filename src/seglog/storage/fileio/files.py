"""All file naming of a partition directory, in one place (Kafka's names).

A partition directory holds, per segment, ``%020d.log`` (record batches v2 exactly as on
the wire), ``%020d.index`` (sparse offset index) and ``%020d.timeindex`` (time index),
named by the segment's base offset, plus ``%020d.txnindex`` (aborted transactions) once
the segment holds an ABORT marker. ``.deleted``, ``.cleaned`` and ``.swap`` suffixes are
reserved for retention and the cleaner. Two small files describe the log as a whole:
``.clean_shutdown`` (written by ``Log.close``: reopen skips the CRC scan) and
``recovery-point`` (base offset of the first segment that was not fully fsynced when
it was written; recovery scans from there).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import uuid
from collections.abc import Iterator
from typing import BinaryIO

from seglog.errors import DataDirLockedError

__all__ = [
    "CLEAN_SHUTDOWN",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "RECOVERY_POINT",
    "TIMEINDEX_SUFFIX",
    "TXNINDEX_SUFFIX",
    "atomic_file",
    "fsync_dir",
    "index_path",
    "list_segment_bases",
    "lock_log_dir",
    "log_path",
    "timeindex_path",
    "txnindex_path",
    "write_small_file",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEAN_SHUTDOWN = ".clean_shutdown"
RECOVERY_POINT = "recovery-point"
PARTITION_METADATA = "partition.metadata"
LOG_START_OFFSET = "log-start-offset"
"""Checkpoint of the log start offset once retention or DeleteRecords moved it (Kafka's
``log-start-offset-checkpoint``, one per partition directory here)."""
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
"""End offset of the range the cleaner (compaction, delete by offsets) has rewritten:
segments below it may hold offset gaps between batches (Kafka's file of that name)."""
BAK_SUFFIX = ".bak"
"""Segment files handed to the archive hook (NATS Streaming's slice archive script)."""


def _name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def log_path(directory: pathlib.Path, base_offset: int) -> pathlib.Path:
    """``<dir>/%020d.log`` of the segment starting at ``base_offset``."""
    return directory / _name(base_offset, LOG_SUFFIX)


def index_path(directory: pathlib.Path, base_offset: int) -> pathlib.Path:
    """``<dir>/%020d.index``: sparse offset index of that segment."""
    return directory / _name(base_offset, INDEX_SUFFIX)


def timeindex_path(directory: pathlib.Path, base_offset: int) -> pathlib.Path:
    """``<dir>/%020d.timeindex``: time index of that segment."""
    return directory / _name(base_offset, TIMEINDEX_SUFFIX)


def txnindex_path(directory: pathlib.Path, base_offset: int) -> pathlib.Path:
    """``<dir>/%020d.txnindex``: aborted-transaction index of that segment (Kafka's)."""
    return directory / _name(base_offset, TXNINDEX_SUFFIX)


def list_segment_bases(directory: pathlib.Path) -> list[int]:
    """Sorted base offsets of the ``%020d.log`` files in ``directory``."""
    bases = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    bases.sort()
    return bases


def fsync_dir(directory: pathlib.Path) -> None:
    """fsync a directory so entries created or renamed in it survive a power loss."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_file(path: pathlib.Path, *, tmp: pathlib.Path | None = None) -> Iterator[BinaryIO]:
    """Atomically replace ``path`` with what the ``with`` block writes to the yielded
    binary file (any size, streamed): the one implementation of write a temporary file,
    fsync it, rename it over ``path``, fsync the directory.

    ``tmp``: the temporary file (default ``.<random hex>.tmp`` beside ``path``; short, as
    ``path.name`` may be 254 bytes); a fixed name lets a caller find a crash's leftover.
    It is created (or truncated) with mode 0o644 in ``path``'s directory. The block must
    not close the file. When the block, the fsync or the rename raises (ENOSPC, EIO...),
    the temporary file is removed, ``path`` is left as it was and the error propagates;
    an error from the final directory fsync propagates with ``path`` already replaced.
    """
    if tmp is None:
        tmp = path.with_name(f".{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb", opener=_open_0o644) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # leave no temp file behind
        remove_if_exists(tmp)
        raise
    fsync_dir(path.parent)


def _open_0o644(file: str, flags: int) -> int:
    return os.open(file, flags, 0o644)


def write_small_file(path: pathlib.Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data`` (bytes): :func:`atomic_file` with one
    write. Raises OSError (``path`` then unchanged, no temporary file left)."""
    with atomic_file(path) as f:
        # os.write on its descriptor (nothing is buffered in f): a short write is
        # continued, and each write is an os-level call (the crash harness's write points)
        fd, view = f.fileno(), memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


def remove_if_exists(path: pathlib.Path) -> bool:
    """Unlink ``path``; no error when it is already gone. Returns whether it was there
    (for ``FileCounters.deletions``)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def lock_log_dir(path: pathlib.Path) -> int:
    """Take the exclusive writer flock on a partition directory (on the directory itself:
    no extra file); returns the fd holding it. DataDirLockedError if another writer,
    in this process or another, has the log open."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as e:
        os.close(fd)
        raise DataDirLockedError(f"log {path} is open by another writer") from e
    return fd
