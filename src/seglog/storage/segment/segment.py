"""One segment: a ``%020d.log`` file of record batches plus its offset and time index.

Not thread-safe for writers (the Log's write lock serialises ``append``/``truncate``);
readers may call ``find``/``read_at``/``find_time`` concurrently with one writer: they only
look at bytes below a ``size`` they snapshot first, and at index entries already complete.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import pathlib
import struct
import threading
import time
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from seglog.errors import CorruptRecordError, InvalidOffsetError, LogClosedError, StorageError
from seglog.storage.fileio import files
from seglog.storage.index.offset_time import OffsetIndex, TimeIndex
from seglog.storage.index.txn_index import TxnIndex
from seglog.storage.record.batch import HEADER_SIZE, BatchHeader, Scanned, parse_header, scan_buffer

if TYPE_CHECKING:
    from seglog.storage.fileio.counters import FileCounters

__all__ = ["Placed", "ScanResult", "Segment", "create_segment"]

_CHUNK = 1 << 20
_FIND_CHUNK = 64 << 10
_U32 = (1 << 32) - 1


Placed = tuple[int, int, int, int]
"""A batch being appended: (position in the data, base offset, size, max timestamp)."""


class ScanResult(NamedTuple):
    """Outcome of walking a segment's batches."""

    valid_size: int
    """Bytes of whole valid batches from the start of the file."""
    file_size: int
    """Bytes in the file when scanned."""
    next_offset: int
    """Offset after the last valid batch (the base offset if none)."""
    reason: str
    """Why the walk stopped before ``file_size`` ("" if it reached it)."""


class Segment:
    """A segment of a partition log, starting at ``base_offset``."""

    def __init__(self, directory: pathlib.Path, base_offset: int, *, read_only: bool) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.read_only = read_only
        self.path = files.log_path(directory, base_offset)
        flags = os.O_RDONLY if read_only else os.O_RDWR | os.O_CREAT
        self._flags = flags
        self._fd = os.open(self.path, flags, 0o644)
        self._fd_lock = threading.Lock()
        self.last_used = time.monotonic()
        """``time.monotonic()`` of the last use of ``fd`` (idle handle GC)."""
        self._counters: FileCounters | None = None
        self.size = 0
        """Bytes of whole valid batches (the visible end of the file)."""
        self.next_offset = base_offset
        """Offset after the last batch in this segment."""
        self.max_timestamp = -1
        self.offset_of_max_timestamp = 0  # relative
        self.bytes_since_index = 0
        self.first_append_ms = -1
        self.index = OffsetIndex(files.index_path(directory, base_offset))
        self.time_index = TimeIndex(files.timeindex_path(directory, base_offset))
        txn_path = files.txnindex_path(directory, base_offset)
        self.scanned = False
        """``scan`` walked every valid batch of the file (recovery, read-only refresh)."""
        self.walked_attributes = 0
        """OR of the attributes of the batches walked (``walk``): with ``scanned``, whether
        the segment holds no transactional or control batch (its replay is skipped)."""
        self.txn_index_suspect = False
        """The ``.txnindex`` file did not parse: recovery rebuilds it."""
        try:
            self.txn_index = TxnIndex.load(txn_path, read_only=read_only)
        except CorruptRecordError:
            self.txn_index = TxnIndex(txn_path, read_only=read_only)
            self.txn_index_suspect = True
        self.closed = False
        self._files_consistent = True
        self.index_suspect = False
        """Set when a lookup found the offset index disagreeing with the log."""
        self.allow_gaps = False
        """Offset gaps between batches are legal here (a segment the cleaner rewrote, below
        the ``cleaner-offset-checkpoint``); else a gap is corruption."""

    @property
    def counters(self) -> FileCounters | None:
        """The owning log's file counters (set by the Log): reopens, index writes."""
        return self._counters

    @counters.setter
    def counters(self, counters: FileCounters | None) -> None:
        self._counters = counters
        self.index.counters = counters
        self.time_index.counters = counters

    # -- the file handle (closed when idle by Log.gc, reopened on demand) -----------------

    @property
    def fd(self) -> int:
        """The ``.log`` file descriptor, reopened if ``release_fd`` closed it. Use it at
        once (a handle idle for longer than the GC's ``unused_for_s`` may be closed).
        InvalidOffsetError if the file was removed meanwhile (retention), LogClosedError
        after ``close``."""
        self.last_used = time.monotonic()
        fd = self._fd
        if fd >= 0:
            return fd
        with self._fd_lock:
            if self._fd < 0:
                if self.closed:
                    raise LogClosedError(f"segment {self.path} is closed")
                try:
                    self._fd = os.open(self.path, self._flags)
                except FileNotFoundError as e:
                    raise InvalidOffsetError(f"segment {self.path.name} was removed") from e
                if self.counters is not None:
                    self.counters.opens += 1
            return self._fd

    @property
    def fd_is_open(self) -> bool:
        """Whether the ``.log`` handle is open now."""
        return self._fd >= 0

    def release_fd(self, used_before: float) -> bool:
        """Close the ``.log`` handle if it was last used before ``used_before``
        (``time.monotonic()``); True if closed. Only for segments no writer appends to."""
        with self._fd_lock:
            if self._fd < 0 or self.closed or self.last_used >= used_before:
                return False
            fd, self._fd = self._fd, -1
        os.close(fd)
        return True

    # -- loading -------------------------------------------------------------------------

    def walk(
        self, start: int, end: int, expect_offset: int, *, verify_crc: bool, max_bytes: int
    ) -> Iterator[Scanned]:
        """Yield ``(position, base offset, size, max timestamp, next offset)`` of the whole
        valid batches in ``[start, end)``, reading 1 MiB at a time; stops silently at the
        first invalid or incomplete byte (the last yielded batch tells where)."""
        pos, expect = start, expect_offset
        limit = self.base_offset + _U32
        want = _CHUNK
        while end - pos >= HEADER_SIZE:
            buf = os.pread(self.fd, min(want, end - pos), pos)
            found, stop, invalid, attrs = scan_buffer(
                buf,
                0,
                expect,
                verify_crc=verify_crc,
                max_bytes=max_bytes,
                max_last_offset=limit,
                allow_gaps=self.allow_gaps,
            )
            self.walked_attributes |= attrs
            for p, base, size, mts, nxt in found:
                yield pos + p, base, size, mts, nxt
            if invalid or len(buf) < HEADER_SIZE:
                return
            if found:
                expect = found[-1][4]
                want = _CHUNK
            else:  # one batch larger than the buffer: read it whole
                want = struct.unpack_from(">i", buf, 8)[0] + 12
                if want <= len(buf) or pos + want > end:
                    return
            pos += stop

    def _add_to_indexes(
        self, pos: int, base_offset: int, size: int, max_ts: int, interval: int, *, write: bool
    ) -> None:
        rel = base_offset - self.base_offset
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = rel
        if self.bytes_since_index >= interval:
            self.index.append(rel, pos, write=write)
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, write=write
            )
            self.bytes_since_index = 0
        self.bytes_since_index += size

    def scan(self, interval: int, *, verify_crc: bool, max_bytes: int) -> ScanResult:
        """Walk the whole file, rebuilding the in-memory indexes. The index files are
        checked on the way (every offset index entry at a batch start with that base
        offset, every time index entry naming a batch with that max timestamp, ascending);
        when they agree with the data their entries are kept, else
        ``indexes_match_files()`` turns False (files untouched here)."""
        file_size = os.fstat(self.fd).st_size
        idata, tdata = self.index.read_file(), self.time_index.read_file()
        fidx = OffsetIndex.parse(idata, max(file_size, 1)) if idata is not None else None
        ftix = TimeIndex.parse(tdata, _U32) if tdata is not None else None
        ok = fidx is not None and ftix is not None
        f_off, f_pos = fidx if fidx is not None else (array("I"), array("I"))
        f_ts, f_toff = ftix if ftix is not None else (array("q"), array("I"))
        i = j = since = 0
        self.index.reset(array("I"), array("I"), write=False)
        self.time_index.reset(array("q"), array("I"), write=False)
        self.max_timestamp, self.offset_of_max_timestamp = -1, 0
        self.bytes_since_index, self.next_offset, self.size = 0, self.base_offset, 0
        add = self._add_to_indexes
        self.walked_attributes, self.scanned = 0, False
        # a whole-file read: ask the kernel for a larger readahead (halves a cold
        # recovery scan here), back to normal afterwards (PERF, issue 3)
        _fadvise(self.fd, os.POSIX_FADV_SEQUENTIAL)
        for pos, base, size, mts, nxt in self.walk(
            0, file_size, self.base_offset, verify_crc=verify_crc, max_bytes=max_bytes
        ):
            add(pos, base, size, mts, interval, write=False)
            self.size, self.next_offset = pos + size, nxt
            if ok:
                rel = base - self.base_offset
                if i < len(f_pos) and f_pos[i] < pos:
                    ok = False  # entry pointing inside a batch
                elif i < len(f_pos) and f_pos[i] == pos:
                    ok = f_off[i] == rel
                    i += 1
                    since = 0
                elif since >= interval:
                    ok = False  # an entry is missing here
                since += size
                while ok and j < len(f_toff) and f_toff[j] <= rel:
                    ok = f_toff[j] == rel and f_ts[j] == mts
                    j += 1
        self.scanned = True
        # the time index ends with the entry roll/close writes (the segment's max); a file
        # without it (lost tail, truncated) is rebuilt: a trusted open relies on it
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, write=False)
        ok = ok and i == len(f_pos) and j == len(f_toff)
        ok = ok and (f_ts[-1] if len(f_ts) else -1) == self.max_timestamp
        if ok:  # the files are right: entries read from them on lookup
            self.index.adopt_file(f_off, f_pos)
            self.time_index.adopt_file(f_ts, f_toff)
        _fadvise(self.fd, os.POSIX_FADV_NORMAL)
        self._files_consistent = ok
        reason = "" if self.size == file_size else f"invalid bytes at position {self.size}"
        return ScanResult(self.size, file_size, self.next_offset, reason)

    def load_trusted(self, interval: int, max_bytes: int) -> bool:
        """Load the index files and walk only the tail after the last offset index entry,
        or after the last time index entry if that is earlier (so the segment's max
        timestamp is exact even when time index entries were lost), headers only, no
        CRC. True if index and data agree; False leaves state undefined (rescan)."""
        file_size = os.fstat(self.fd).st_size
        idata, tdata = self.index.read_file(), self.time_index.read_file()
        fidx = OffsetIndex.parse(idata, max(file_size, 1)) if idata is not None else None
        ftix = TimeIndex.parse(tdata, _U32) if tdata is not None else None
        if fidx is None or ftix is None:
            return False
        offs, positions = fidx
        t_ts, t_offs = ftix
        n_idx, n_tix = len(offs), len(t_ts)
        last_ts = t_ts[-1] if n_tix else -1
        floor = n_idx - 1
        if n_tix:
            floor = bisect.bisect_right(offs, t_offs[-1]) - 1
        if floor >= 0:
            rel, pos = offs[floor], positions[floor]
        else:
            rel, pos = 0, 0
        next_entry = floor + 1
        if file_size == 0:
            self.size, self.next_offset = 0, self.base_offset
            self.index.adopt_file(offs, positions)
            self.time_index.adopt_file(t_ts, t_offs)
            return not n_idx and not n_tix
        self.max_timestamp = last_ts
        self.offset_of_max_timestamp = t_offs[-1] if n_tix else 0
        self.size, self.bytes_since_index = pos, 0
        first = True
        for p, base, size, mts, nxt in self.walk(
            pos, file_size, self.base_offset + rel, verify_crc=False, max_bytes=max_bytes
        ):
            if first and p != pos:
                return False
            first = False
            if mts > self.max_timestamp:
                self.max_timestamp = mts
                self.offset_of_max_timestamp = base - self.base_offset
            if next_entry < n_idx and p >= positions[next_entry]:
                if p > positions[next_entry]:
                    return False  # an entry pointing inside a batch
                if offs[next_entry] != base - self.base_offset:
                    return False
                if self.max_timestamp > last_ts:
                    return False  # the time index entry written with this one is missing
                next_entry += 1
                self.bytes_since_index = 0
            elif self.bytes_since_index >= interval:
                return False  # an index entry is missing here: rebuild
            self.bytes_since_index += size
            self.size, self.next_offset = p + size, nxt
        if first or self.size != file_size or next_entry != n_idx:
            return False
        if self.max_timestamp > last_ts:
            return False  # the final time index entry (written at roll/close) is missing
        last_rel = self.next_offset - 1 - self.base_offset
        if n_tix and t_offs[-1] > last_rel:
            return False
        # the files agree with the data: only their summaries stay in memory
        self.index.adopt_file(offs, positions)
        self.time_index.adopt_file(t_ts, t_offs)
        return True

    def extend(self, interval: int) -> int:
        """Read-only segments: take in whole valid batches another process appended after
        ``size`` (CRC-checked, stopping before a torn or incomplete one); new size."""
        file_size = os.fstat(self.fd).st_size
        for pos, base, size, mts, nxt in self.walk(
            self.size, file_size, self.next_offset, verify_crc=True, max_bytes=(1 << 31) - 1
        ):
            self._add_to_indexes(pos, base, size, mts, interval, write=False)
            self.next_offset = nxt
            self.size = pos + size
        return self.size

    def seal_indexes(self) -> bool:
        """A read-only segment no longer at the tail: if its index files hold exactly the
        entries in memory (plus the final time index entry the writer added at roll),
        keep only their summaries (lookups read the files); True if sealed."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, write=False)
        if not self.index.heap_entries() and not self.time_index.heap_entries():
            return True
        idata, tdata = self.index.read_file(), self.time_index.read_file()
        if idata != self.index.to_bytes() or tdata != self.time_index.to_bytes():
            return False
        return self.index.load(idata or b"", max(self.size, 1)) and self.time_index.load(
            tdata or b"", _U32
        )

    def write_indexes(self) -> None:
        """Rewrite both index files from memory (after a rebuild)."""
        self.index.reset(*self.index.entries(), write=True)
        self.time_index.reset(*self.time_index.entries(), write=True)

    def indexes_match_files(self) -> bool:
        """After ``scan``: did the index files agree with the data?"""
        return self._files_consistent

    def truncate(self, size: int) -> None:
        """Cut the log file to ``size`` bytes (a batch boundary) and fsync it."""
        os.ftruncate(self.fd, size)
        os.fsync(self.fd)
        self.size = size

    # -- writing -------------------------------------------------------------------------

    def append(
        self, data: bytes | bytearray, batches: list[Placed], end: int, interval: int
    ) -> None:
        """Write ``data`` (whole batches, offsets already patched) at the end of the file,
        then index them; ``end`` is the offset after the last one. On an OSError the file
        is cut back to its previous size and StorageError raised."""
        start = self.size
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self.fd, view[written:], start + written)
        except OSError as e:
            try:
                os.ftruncate(self.fd, start)
            except OSError as e2:
                raise StorageError(
                    f"write to {self.path} failed ({e}) and cut back failed ({e2})"
                ) from e
            raise StorageError(f"write to {self.path} failed: {e}") from e
        self.record_written(start, batches, end, interval)

    def record_written(self, start: int, batches: list[Placed], end: int, interval: int) -> None:
        """Take in ``batches`` already in the file at ``start`` (positions relative to it,
        in order, contiguous): index them (entries written to the index files' buffers) and
        move the segment's end past them; ``end`` is the offset after the last one."""
        for rel_pos, base, size, max_ts in batches:
            self._add_to_indexes(start + rel_pos, base, size, max_ts, interval, write=True)
        if batches:
            rel_pos, _, size, _ = batches[-1]
            self.size = start + rel_pos + size
        self.next_offset = end

    def finish_time_index(self) -> None:
        """Append a final time index entry covering every batch (at roll and close)."""
        if not self.read_only:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def sync(self) -> None:
        """fdatasync the log file."""
        os.fdatasync(self.fd)

    def sync_all(self) -> None:
        """fsync the log and the index files."""
        os.fsync(self.fd)
        self.index.sync()
        self.time_index.sync()
        if self.txn_index.entries:
            self.txn_index.sync()

    # -- reading -------------------------------------------------------------------------

    def find(self, offset: int, size: int) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch in ``[0, size)`` whose last offset is
        >= ``offset``; None if there is none. Raises StorageError on unparsable data."""
        rel_entry, pos = self.index.lookup(max(0, offset - self.base_offset))
        if pos >= size:
            pos = 0
        check_first = pos > 0
        while pos < size:
            chunk = os.pread(self.fd, min(_FIND_CHUNK, size - pos), pos)
            cpos = 0
            while len(chunk) - cpos >= HEADER_SIZE:
                h = parse_header(chunk, cpos)
                if check_first:
                    check_first = False
                    if h.base_offset != self.base_offset + rel_entry:
                        self.index_suspect = True  # index disagrees with the log: scan
                        break
                if h.size < HEADER_SIZE:
                    raise StorageError(f"{self.path}: bad batch length at {pos + cpos}")
                if h.last_offset >= offset:
                    return pos + cpos, h
                cpos += h.size
            else:
                if cpos == 0:
                    raise StorageError(f"{self.path}: truncated batch header at {pos}")
                pos += cpos
                continue
            pos = 0  # the suspect index entry: start again from the segment start
        return None

    def read_at(self, position: int, max_bytes: int, size: int, upper: int) -> bytes:
        """Whole batches from ``position`` (a batch start): up to ``max_bytes`` but at least
        one batch, only batches with a base offset below ``upper``, within ``size``."""
        want = min(max(max_bytes, HEADER_SIZE), size - position)
        if want <= 0:
            return b""
        data = os.pread(self.fd, want, position)
        first = parse_header(data, 0) if len(data) >= HEADER_SIZE else None
        if first is None or first.base_offset >= upper:
            return b""
        if first.size > len(data):
            return os.pread(self.fd, first.size, position)
        end = 0
        while len(data) - end >= HEADER_SIZE:
            h = parse_header(data, end)
            if h.base_offset >= upper or end + h.size > len(data):
                break
            end += h.size
        return data[:end] if end < len(data) else data

    def find_time(self, timestamp: int, size: int) -> tuple[int, BatchHeader] | None:
        """First batch (in ``[0, size)``) whose max timestamp is >= ``timestamp``."""
        if self.max_timestamp < timestamp:
            return None
        rel = self.time_index.lookup_before(timestamp)
        found = self.find(self.base_offset + rel, size)
        while found is not None:
            pos, h = found
            if h.max_timestamp >= timestamp:
                return found
            if pos + h.size >= size:
                return None
            hdr = os.pread(self.fd, HEADER_SIZE, pos + h.size)
            found = (pos + h.size, parse_header(hdr, 0))
        return None

    def close(self) -> None:
        """Close the log fd and the index writers."""
        if not self.closed:
            self.closed = True
            self.index.close()
            self.time_index.close()
            with self._fd_lock:
                fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)


def _fadvise(fd: int, advice: int) -> None:
    """posix_fadvise over the whole file; a hint only (ignored where unsupported)."""
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, 0, 0, advice)


def create_segment(directory: pathlib.Path, base: int) -> Segment:
    """Create the three files of a new segment (StorageError on failure, e.g. ENOSPC)."""
    try:
        seg = Segment(directory, base, read_only=False)
        for p in (seg.index.path, seg.time_index.path):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError as e:
        raise StorageError(f"cannot create segment {base:020d} in {directory}: {e}") from e
    return seg
