"""Sparse offset index and time index of one segment (Kafka's ``.index``/``.timeindex``).

Both are derived data, rebuildable from the ``.log``; entries are big-endian:

- offset index: ``(relative offset u32, position u32)``, 8 bytes: the batch whose base
  offset is ``segment base + relative offset`` starts at byte ``position``; one entry
  every ``index.interval.bytes`` of log.
- time index: ``(max timestamp i64, relative offset u32)``, 12 bytes: the largest batch
  max timestamp so far and the base offset (relative) of the batch holding it; appended
  alongside offset index entries when the timestamp grows, plus one final entry when a
  segment is rolled or closed.

Entries live in memory (``array``); the files are appended with ``os.write`` on a raw fd,
4 KiB at a time and at roll/close (a crash loses at most the unwritten tail of the last
segment's index, which recovery rebuilds: the last segment is always rescanned).
Not thread-safe: the owning segment serialises writers; lookups read a consistent prefix.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import pathlib
import struct
import sys
from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seglog.storage.fileio.counters import FileCounters

__all__ = ["OffsetIndex", "TimeIndex"]

_logger = logging.getLogger(__name__)
_FLUSH_BYTES = 4096
_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class _IndexFile:
    """One index file: in-memory entries plus an append-only raw fd (writer only)."""

    entry_size: int = 0

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pending = bytearray()  # entries not yet written (flushed every 4 KiB)
        self.counters: FileCounters | None = None
        """The owning log's file counters (``index_writes``), set with the segment's."""

    def _open_for_append(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _append_bytes(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= _FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Write buffered entries to the file (the page cache; ``sync`` fsyncs)."""
        if self._pending:
            view = memoryview(self._pending)
            size = -1
            try:
                fd = self._open_for_append()
                size = os.fstat(fd).st_size
                while view:
                    view = view[os.write(fd, view) :]
                if self.counters is not None:
                    self.counters.index_writes += 1
            except OSError as e:
                # derived data: the in-memory entries stay right; the file lacks some
                # entries (sparser, still correct) or gets rebuilt at the next open
                _logger.warning("cannot write %s: %s", self.path, e)
                if size >= 0:  # cut a partly written entry: the file stays whole entries
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)
            finally:
                del view  # (a live export would make clear() raise BufferError)
            self._pending.clear()

    def _rewrite(self, data: bytes) -> None:
        self._pending.clear()
        self.close()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        if self.counters is not None:
            self.counters.index_writes += 1

    def read_file(self) -> bytes | None:
        """The file's bytes, or None if missing."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def sync(self) -> None:
        """Flush buffered entries and fsync the file if it is open for writing."""
        self.flush()
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Flush, then close the writer fd (entries stay in memory)."""
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class OffsetIndex(_IndexFile):
    """Sparse offset index: relative offsets and positions, both ascending."""

    entry_size = 8

    def __init__(self, path: pathlib.Path) -> None:
        super().__init__(path)
        self.offsets = array("I")
        self.positions = array("I")

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, relative_offset: int, position: int, *, write: bool = True) -> None:
        """Add an entry (must be after the last one)."""
        self.offsets.append(relative_offset)
        self.positions.append(position)
        if write:
            self._append_bytes(_OFFSET_ENTRY.pack(relative_offset, position))

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """Largest entry ``(relative offset, position)`` at or before ``relative_offset``;
        ``(0, 0)`` when there is none (scan from the segment start)."""
        i = bisect.bisect_right(self.offsets, relative_offset) - 1
        if i < 0:
            return 0, 0
        return self.offsets[i], self.positions[i]

    def load(self, data: bytes, log_size: int) -> bool:
        """Replace entries by ``data`` if it is a consistent index for a log of
        ``log_size`` bytes (whole entries, ascending, positions inside); False otherwise."""
        if len(data) % self.entry_size:
            return False
        n = len(data) // self.entry_size
        raw = array("I", data)
        if sys.byteorder == "little":
            raw.byteswap()
        offsets, positions = raw[0::2], raw[1::2]
        for i in range(1, n):
            if offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]:
                return False
        if n and positions[-1] >= log_size:
            return False
        self.offsets, self.positions = array("I", offsets), array("I", positions)
        return True

    def to_bytes(self) -> bytes:
        """File image of the in-memory entries."""
        n = len(self.offsets)
        raw = array("I", bytes(8 * n))
        raw[0::2], raw[1::2] = self.offsets[:n], self.positions[:n]
        if sys.byteorder == "little":
            raw.byteswap()
        return raw.tobytes()

    def reset(self, offsets: array[int], positions: array[int], *, write: bool) -> None:
        """Replace every entry (rebuild); rewrite the file when ``write``."""
        self.offsets, self.positions = offsets, positions
        if write:
            self._rewrite(self.to_bytes())

    def truncate_to_position(self, position: int, *, write: bool) -> None:
        """Drop entries at or after ``position`` (log truncation)."""
        i = bisect.bisect_left(self.positions, position)
        if i < len(self.positions):
            self.reset(self.offsets[:i], self.positions[:i], write=write)


class TimeIndex(_IndexFile):
    """Time index: max timestamps so far (ascending) and their relative offsets."""

    entry_size = 12

    def __init__(self, path: pathlib.Path) -> None:
        super().__init__(path)
        self.timestamps = array("q")
        self.offsets = array("I")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the last entry, -1 if empty."""
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, relative_offset: int, *, write: bool = True) -> None:
        """Add an entry if ``timestamp`` is larger than the last one."""
        if timestamp > self.last_timestamp:
            self.timestamps.append(timestamp)
            self.offsets.append(relative_offset)
            if write:
                self._append_bytes(_TIME_ENTRY.pack(timestamp, relative_offset))

    def lookup_before(self, timestamp: int) -> int:
        """Relative offset of the last entry with a timestamp below ``timestamp``
        (every batch before that entry's offset is older), 0 if none."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else 0

    def load(self, data: bytes, max_relative_offset: int) -> bool:
        """Replace entries by ``data`` if consistent (ascending, offsets in range)."""
        if len(data) % self.entry_size:
            return False
        ts, offs = array("q"), array("I")
        prev_t, prev_o = -2, -1
        for t, o in _TIME_ENTRY.iter_unpack(data):
            if t <= prev_t or o < prev_o or o > max_relative_offset:
                return False
            ts.append(t)
            offs.append(o)
            prev_t, prev_o = t, o
        self.timestamps, self.offsets = ts, offs
        return True

    def to_bytes(self) -> bytes:
        """File image of the in-memory entries."""
        pairs = zip(self.timestamps, self.offsets, strict=True)
        return b"".join(_TIME_ENTRY.pack(t, o) for t, o in pairs)

    def reset(self, timestamps: array[int], offsets: array[int], *, write: bool) -> None:
        """Replace every entry (rebuild); rewrite the file when ``write``."""
        self.timestamps, self.offsets = timestamps, offsets
        if write:
            self._rewrite(self.to_bytes())
