"""Sparse offset index and time index of one segment (Kafka's ``.index``/``.timeindex``).

Both are derived data, rebuildable from the ``.log``; entries are big-endian:

- offset index: ``(relative offset u32, position u32)``, 8 bytes: the batch whose base
  offset is ``segment base + relative offset`` starts at byte ``position``; one entry
  every ``index.interval.bytes`` of log.
- time index: ``(max timestamp i64, relative offset u32)``, 12 bytes: the largest batch
  max timestamp so far and the base offset (relative) of the batch holding it; appended
  alongside offset index entries when the timestamp grows, plus one final entry when a
  segment is rolled or closed.

Entries that the file holds are not kept on the Python heap (issue 7: the broker's RSS
stays flat in log size): only a summary stays, the first key of every block of
:data:`BLOCK_ENTRIES` entries (0.1-0.2 % of the file), and a lookup reads the one block it
needs with ``pread`` through :data:`BLOCK_CACHE`, a process-wide LRU of decoded blocks
bounded in count. ``pread`` rather than Kafka's ``mmap``: pages of a mapping a lookup
touched count in the process's RSS (``RssFile``) for as long as the mapping lives, so
after a full scan of a mapped index its whole file would; page cache read by ``pread``
is not the process's. No file handle stays open for reading (a cache miss opens, reads
and closes the file).

Entries not (yet) in the file stay in memory (``array`` tails): the active segment's
entries since the last whole flushed block, a rebuilt index not written yet, or an index
whose file disagrees (a read-only open, a failed write). The files are appended with
``os.write`` on a raw fd, 4 KiB at a time and at roll/close (a crash loses at most the
unwritten tail of the last segment's index, which recovery rebuilds: the last segment is
always rescanned).

Not thread-safe for writers: the owning segment serialises them; lookups run beside one
writer and read a consistent prefix (the paged state is replaced, never mutated, except
for appends to its tail).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import pathlib
import struct
import threading
from array import array
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from seglog.storage.fileio.counters import FileCounters

__all__ = ["BLOCK_CACHE", "BLOCK_ENTRIES", "BlockCache", "OffsetIndex", "TimeIndex"]

_logger = logging.getLogger(__name__)
_FLUSH_BYTES = 4096
_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
BLOCK_ENTRIES = 512
"""Entries per block read by one lookup (4 KiB of offset index, 6 KiB of time index)."""

Block = tuple["array[int]", "array[int]"]


class BlockCache:
    """Process-wide LRU of decoded index blocks ``(keys, values)``, at most ``max_blocks``
    (each <= :data:`BLOCK_ENTRIES` entries, <= 6 KiB); thread-safe."""

    def __init__(self, max_blocks: int) -> None:
        self.max_blocks = max_blocks
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[object, int], Block] = OrderedDict()
        self.misses = 0
        """Blocks read from a file (cache misses), since the start."""

    def __len__(self) -> int:
        return len(self._blocks)

    def get(self, key: tuple[object, int]) -> Block | None:
        """The block cached under ``key`` (now the most recent), None if absent."""
        # no lock: each OrderedDict call is atomic under the GIL; a block evicted between
        # the two is a miss
        try:
            block = self._blocks[key]
            self._blocks.move_to_end(key)
        except KeyError:
            return None
        return block

    def put(self, key: tuple[object, int], block: Block) -> None:
        """Cache ``block``, dropping the least recently used beyond ``max_blocks``."""
        with self._lock:
            self.misses += 1
            self._blocks[key] = block
            while len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)

    def clear(self) -> None:
        """Drop every block."""
        with self._lock:
            self._blocks.clear()


BLOCK_CACHE = BlockCache(512)
"""The blocks of every open index (<= 512 x 6 KiB = 3 MiB)."""


class _Paged:
    """An index's entries: ``n_file`` in the file (blocks starting at ``starts``, first keys
    ``keys``), then the in-memory ``tail`` (appended in place; the rest is immutable)."""

    __slots__ = ("keys", "n_file", "starts", "tail_k", "tail_v", "token")

    def __init__(  # noqa: PLR0917 (internal record)
        self,
        token: object,
        n_file: int,
        starts: array[int],
        keys: array[int],
        tail_k: array[int],
        tail_v: array[int],
    ) -> None:
        self.token = token
        self.n_file = n_file
        self.starts = starts
        self.keys = keys
        self.tail_k = tail_k
        self.tail_v = tail_v


class _IndexFile:
    """One index file: entries as ``(key, value)`` (file-backed blocks + in-memory tail)
    plus an append-only raw fd (writer only)."""

    entry_size: int = 0
    key_code = "I"
    _dtype: np.dtype[np.void]

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pending = bytearray()  # entries not yet written (flushed every 4 KiB)
        self.counters: FileCounters | None = None
        """The owning log's file counters (``index_writes``), set with the segment's."""
        self._state = self._heap_state(array(self.key_code), array("I"))
        self._flushed = 0  # entries the file holds
        self._file_ok = True  # the file's entries are our first _flushed entries
        self._last_key = -1
        self._last_value = 0

    def _heap_state(self, keys: array[int], values: array[int]) -> _Paged:
        return _Paged(object(), 0, array("Q"), array(self.key_code), keys, values)

    def __len__(self) -> int:
        st = self._state
        return st.n_file + len(st.tail_v)

    def heap_entries(self) -> int:
        """Entries held in memory (the rest are read from the file on lookup)."""
        return len(self._state.tail_v)

    # -- the writer ----------------------------------------------------------------------

    def _add(self, key: int, value: int, packed: bytes | None) -> None:
        st = self._state
        st.tail_k.append(key)
        st.tail_v.append(value)  # second: readers take len(tail_v) entries
        self._last_key, self._last_value = key, value
        if packed is None:
            self._file_ok = False  # an entry the file lacks
        else:
            self._pending += packed
            if len(self._pending) >= _FLUSH_BYTES:
                self.flush()

    def _open_for_append(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

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
                self._flushed += len(self._pending) // self.entry_size
            except OSError as e:
                # derived data: the in-memory entries stay right; the file lacks some
                # entries (sparser, still correct) or gets rebuilt at the next open
                _logger.warning("cannot write %s: %s", self.path, e)
                self._file_ok = False
                if size >= 0:  # cut a partly written entry: the file stays whole entries
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, size)
            finally:
                del view  # (a live export would make clear() raise BufferError)
            self._pending.clear()
            self._spill()

    def _spill(self, *, final: bool = False) -> None:
        """Move whole blocks of entries the file holds out of the heap (every entry it
        holds when ``final``: the writer is done)."""
        st = self._state
        k = self._flushed - st.n_file
        if not final:
            k = k // BLOCK_ENTRIES * BLOCK_ENTRIES
        if not self._file_ok or k <= 0:
            return
        starts, keys = array("Q", st.starts), array(self.key_code, st.keys)
        for i in range(0, k, BLOCK_ENTRIES):
            starts.append(st.n_file + i)
            keys.append(st.tail_k[i])
        self._state = _Paged(st.token, st.n_file + k, starts, keys, st.tail_k[k:], st.tail_v[k:])

    def _adopt(self, keys: array[int], values: array[int]) -> None:
        """The file holds exactly these entries: keep only their summary in memory."""
        n = len(values)
        self._state = _Paged(
            object(),
            n,
            array("Q", range(0, n, BLOCK_ENTRIES)),
            keys[::BLOCK_ENTRIES],
            array(self.key_code),
            array("I"),
        )
        self._flushed, self._file_ok = n, True
        self._last_key, self._last_value = (keys[-1], values[-1]) if n else (-1, 0)

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

    def reset(self, keys: array[int], values: array[int], *, write: bool) -> None:
        """Replace every entry (rebuild); rewrite the file when ``write`` (then only the
        summary stays in memory), else keep them in memory."""
        if write:
            self._rewrite(self.image(keys, values))
            self._adopt(keys, values)
        else:
            self._pending.clear()
            self._state = self._heap_state(array(self.key_code, keys), array("I", values))
            self._flushed, self._file_ok = 0, False
            n = len(values)
            self._last_key, self._last_value = (keys[-1], values[-1]) if n else (-1, 0)

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
        """Flush, then close the writer fd (lookups read the file on their own); every
        entry the file holds leaves the heap."""
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._spill(final=True)

    # -- reading -------------------------------------------------------------------------

    def _decode(self, data: bytes) -> Block:
        rec = np.frombuffer(data, dtype=self._dtype)
        keys = array(self.key_code, rec["k"].astype(self.key_code).tobytes())
        return keys, array("I", rec["v"].astype(np.uint32).tobytes())

    def _read(self, first: int, count: int) -> bytes:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, count * self.entry_size, first * self.entry_size)
        finally:
            os.close(fd)

    def _block(self, st: _Paged, k: int) -> Block | None:
        """Block ``k`` of ``st``'s file part; None if the file no longer holds it (removed
        by retention, rewritten by a truncation)."""
        cache_key = (st.token, k)
        block = BLOCK_CACHE.get(cache_key)
        if block is None:
            first = st.starts[k]
            count = (st.starts[k + 1] if k + 1 < len(st.starts) else st.n_file) - first
            try:
                data = self._read(first, count)
            except OSError:
                return None
            if len(data) != count * self.entry_size:
                return None
            block = self._decode(data)
            if block[0][0] != st.keys[k]:
                return None
            BLOCK_CACHE.put(cache_key, block)
        return block

    def _floor(self, key: int, *, strict: bool) -> tuple[int, int] | None:
        """The last entry whose key is <= ``key`` (< when ``strict``), None if none;
        ``(-1, -1)`` if its block could not be read (callers fall back to a scan)."""
        st = self._state
        search = bisect.bisect_left if strict else bisect.bisect_right
        n = len(st.tail_v)
        if n and (st.tail_k[0] < key if strict else st.tail_k[0] <= key):
            i = search(st.tail_k, key, 0, n) - 1
            return st.tail_k[i], st.tail_v[i]
        k = search(st.keys, key) - 1
        if k < 0:
            return None
        block = self._block(st, k)
        if block is None:
            return -1, -1
        i = search(block[0], key) - 1
        return block[0][i], block[1][i]

    def entries(self) -> Block:
        """Every entry, ``(keys, values)`` in memory (maintenance: backup, truncation,
        rewrites; O(entries)). OSError if the file part cannot be read."""
        st = self._state
        n = len(st.tail_v)
        if st.n_file:
            data = self._read(0, st.n_file)
            if len(data) != st.n_file * self.entry_size:
                raise OSError(f"{self.path}: shorter than its {st.n_file} entries")
            keys, values = self._decode(data)
        else:
            keys, values = array(self.key_code), array("I")
        keys.extend(st.tail_k[:n])
        values.extend(st.tail_v[:n])
        return keys, values

    def image(self, keys: array[int], values: array[int]) -> bytes:
        """File image (bytes) of the entries ``(keys, values)``."""
        rec = np.empty(len(values), dtype=self._dtype)
        rec["k"], rec["v"] = np.asarray(keys), np.asarray(values)
        return rec.tobytes()

    def to_bytes(self) -> bytes:
        """File image of the entries."""
        return self.image(*self.entries())

    @classmethod
    def _parse(cls, data: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        if len(data) % cls.entry_size:
            return None
        rec = np.frombuffer(data, dtype=cls._dtype)
        return rec["k"].astype(np.int64), rec["v"].astype(np.int64)


class OffsetIndex(_IndexFile):
    """Sparse offset index: relative offsets and positions, both ascending."""

    entry_size = 8
    key_code = "I"
    _dtype = np.dtype([("k", ">u4"), ("v", ">u4")])

    @property
    def offsets(self) -> array[int]:
        """Every relative offset (read from the file: maintenance only)."""
        return self.entries()[0]

    @property
    def positions(self) -> array[int]:
        """Every position (read from the file: maintenance only)."""
        return self.entries()[1]

    def append(self, relative_offset: int, position: int, *, write: bool = True) -> None:
        """Add an entry (must be after the last one)."""
        packed = _OFFSET_ENTRY.pack(relative_offset, position) if write else None
        self._add(relative_offset, position, packed)

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """Largest entry ``(relative offset, position)`` at or before ``relative_offset``;
        ``(0, 0)`` when there is none (scan from the segment start)."""
        found = self._floor(relative_offset, strict=False)
        if found is None or found[0] < 0:
            return 0, 0
        return found

    @classmethod
    def parse(cls, data: bytes, log_size: int) -> Block | None:
        """``(relative offsets, positions)`` of ``data`` if it is a consistent index for a
        log of ``log_size`` bytes (whole entries, ascending, positions inside), else None."""
        parsed = cls._parse(data)
        if parsed is None:
            return None
        offs, pos = parsed
        if len(offs) > 1 and not (np.all(offs[1:] > offs[:-1]) and np.all(pos[1:] > pos[:-1])):
            return None
        if len(pos) and pos[-1] >= log_size:
            return None
        return array("I", offs.astype(np.uint32).tobytes()), array(
            "I", pos.astype(np.uint32).tobytes()
        )

    def load(self, data: bytes, log_size: int) -> bool:
        """Take ``data`` (this index's file) as the entries if it is consistent (see
        ``parse``); False otherwise (entries unchanged)."""
        parsed = self.parse(data, log_size)
        if parsed is None:
            return False
        self._pending.clear()
        self._adopt(*parsed)
        return True

    def adopt_file(self, offsets: array[int], positions: array[int]) -> None:
        """The file holds exactly these entries (parsed from it): use them."""
        self._pending.clear()
        self._adopt(offsets, positions)

    def truncate_to_position(self, position: int, *, write: bool) -> None:
        """Drop entries at or after ``position`` (log truncation)."""
        offsets, positions = self.entries()
        i = bisect.bisect_left(positions, position)
        if i < len(positions):
            self.reset(offsets[:i], positions[:i], write=write)


class TimeIndex(_IndexFile):
    """Time index: max timestamps so far (ascending) and their relative offsets."""

    entry_size = 12
    key_code = "q"
    _dtype = np.dtype([("k", ">i8"), ("v", ">u4")])

    @property
    def timestamps(self) -> array[int]:
        """Every timestamp (read from the file: maintenance only)."""
        return self.entries()[0]

    @property
    def offsets(self) -> array[int]:
        """Every relative offset (read from the file: maintenance only)."""
        return self.entries()[1]

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the last entry, -1 if empty."""
        return self._last_key

    @property
    def last_offset(self) -> int:
        """Relative offset of the last entry, 0 if empty."""
        return self._last_value

    def maybe_append(self, timestamp: int, relative_offset: int, *, write: bool = True) -> None:
        """Add an entry if ``timestamp`` is larger than the last one."""
        if timestamp > self._last_key:
            packed = _TIME_ENTRY.pack(timestamp, relative_offset) if write else None
            self._add(timestamp, relative_offset, packed)

    def lookup_before(self, timestamp: int) -> int:
        """Relative offset of the last entry with a timestamp below ``timestamp``
        (every batch before that entry's offset is older), 0 if none."""
        found = self._floor(timestamp, strict=True)
        return 0 if found is None or found[0] < 0 else found[1]

    @classmethod
    def parse(cls, data: bytes, max_relative_offset: int) -> Block | None:
        """``(timestamps, relative offsets)`` of ``data`` if consistent (timestamps
        strictly ascending from >= -1, offsets ascending and <= the maximum), else None."""
        parsed = cls._parse(data)
        if parsed is None:
            return None
        ts, offs = parsed
        if len(ts) and (ts[0] <= -2 or offs[0] < 0 or offs[-1] > max_relative_offset):
            return None
        if len(ts) > 1 and not (np.all(ts[1:] > ts[:-1]) and np.all(offs[1:] >= offs[:-1])):
            return None
        return array("q", ts.tobytes()), array("I", offs.astype(np.uint32).tobytes())

    def load(self, data: bytes, max_relative_offset: int) -> bool:
        """Take ``data`` as the entries if consistent (see ``parse``); False otherwise."""
        parsed = self.parse(data, max_relative_offset)
        if parsed is None:
            return False
        self._pending.clear()
        self._adopt(*parsed)
        return True

    def adopt_file(self, timestamps: array[int], offsets: array[int]) -> None:
        """The file holds exactly these entries (parsed from it): use them."""
        self._pending.clear()
        self._adopt(timestamps, offsets)
