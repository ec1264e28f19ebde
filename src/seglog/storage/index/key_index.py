"""Key index: the last offset of every record key (``get_by_key``, ``offset_by_key``,
``consume_by_key``), an option per log (``LogConfig.key_index``, topic config
``seglog.key.index``).

In memory a dict ``key → offset``, updated on each append (which decodes the appended
batches: the per-record cost is why it is optional). Persisted to ``<dir>/key-index`` when
a writer closes the log, as derived data (like Kafka's indexes): at open the file is used
only if it still describes this log, then the batches after it are decoded; otherwise the
whole index is rebuilt from the data. File layout (big-endian)::

    magic b"SGKI" | version u16 = 1 | end offset i64 (log end offset covered)
    | last batch base offset i64 | last batch CRC u32 (the batch ending at end offset,
      the fingerprint proving the log still holds the data indexed)
    | count u32 | count x (key length u32, key, offset i64) | CRC-32C u32 of all before

Not thread-safe by itself: the Log updates it under its write lock; a lookup reads one
dict entry (atomic under the GIL).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib
import struct
from typing import TYPE_CHECKING

import crc32c

from seglog.errors import InvalidOffsetError, NoIndexError, NotFoundError, StorageError
from seglog.storage.fileio import files
from seglog.storage.record.batch import HEADER_SIZE, parse_header
from seglog.storage.record.columns import decode_columns
from seglog.storage.record.message import OFFSET_NEWEST, OFFSET_OLDEST, Message, decode_batches

if TYPE_CHECKING:
    from seglog.storage.log.reader import LogReader

__all__ = [
    "KEY_INDEX_FILE",
    "KeyIndex",
    "consume_by_key",
    "drop_key_index_file",
    "forget_removed",
    "load_key_index",
    "rebuild_key_index",
]

_logger = logging.getLogger(__name__)
KEY_INDEX_FILE = "key-index"
"""The key index file of a partition directory."""
_MAGIC = b"SGKI"
_HEAD = struct.Struct(">4sHqqII")
_KEYLEN = struct.Struct(">I")
_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")


class KeyIndex:
    """Map record key → offset of the last record with that key."""

    def __init__(self) -> None:
        self._last: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._last)

    def add(self, batches: bytes | bytearray | memoryview) -> None:
        """Index the records of whole record batches (offsets already assigned)."""
        last = self._last
        for m in decode_batches(batches):
            if m.key is not None:
                last[m.key] = m.offset

    def get(self, key: bytes) -> int | None:
        """Offset of the last record with ``key``, None if none."""
        return self._last.get(key)

    def prune_below(self, start: int) -> int:
        """Forget keys whose last record is below ``start`` (the new log start offset:
        every record of those keys is gone); returns how many were forgotten."""
        stale = [k for k, o in self._last.items() if o < start]
        for k in stale:
            del self._last[k]
        return len(stale)

    def size_bytes(self) -> int:
        """Approximate bytes of the persisted form (keys + 12 bytes per entry)."""
        return sum(len(k) + 12 for k in self._last)

    # -- persistence -------------------------------------------------------------------

    def to_bytes(self, end_offset: int, last_base: int, last_crc: int) -> bytes:
        """File image (see the module docstring)."""
        parts = [_HEAD.pack(_MAGIC, 1, end_offset, last_base, last_crc, len(self._last))]
        for key, offset in self._last.items():
            parts += (_KEYLEN.pack(len(key)), key, _OFFSET.pack(offset))
        body = b"".join(parts)
        return body + _CRC.pack(crc32c.crc32c(body))

    @classmethod
    def from_bytes(cls, data: bytes) -> tuple[KeyIndex, int, int, int] | None:
        """``(index, end offset, last batch base, last batch CRC)``, None if invalid."""
        if len(data) < _HEAD.size + 4 or _CRC.unpack_from(data, len(data) - 4)[0] != (
            crc32c.crc32c(data[:-4])
        ):
            return None
        magic, version, end, base, crc, count = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != 1:
            return None
        idx, pos, limit = cls(), _HEAD.size, len(data) - 4
        try:
            for _ in range(count):
                (n,) = _KEYLEN.unpack_from(data, pos)
                key = data[pos + 4 : pos + 4 + n]
                (offset,) = _OFFSET.unpack_from(data, pos + 4 + n)
                pos += 12 + n
                idx._last[key] = offset
        except struct.error:
            return None
        return (idx, end, base, crc) if pos == limit else None


def _fingerprint(log: LogReader, end: int) -> tuple[int, int] | None:
    """(base offset, CRC) of the batch ending at ``end`` (exclusive), None if none.
    Reads the segments directly (also while the log is closing)."""
    if end <= log.log_start_offset:
        return None
    try:
        loc = log._locate(end - 1, end)
        if loc is None:
            return None
        seg, pos, _ = loc
        h = parse_header(os.pread(seg.fd, HEADER_SIZE, pos))
    except (InvalidOffsetError, StorageError, OSError, struct.error):
        return None
    return (h.base_offset, h.crc) if h.next_offset == end else None


def load_key_index(log: LogReader, end: int) -> KeyIndex:
    """The key index of ``log`` up to ``end`` (its log end offset at open): from the
    ``key-index`` file when its fingerprint matches the data, plus the batches after it;
    else rebuilt by decoding every batch."""
    path = log.directory / KEY_INDEX_FILE
    loaded = None
    with contextlib.suppress(FileNotFoundError):
        loaded = KeyIndex.from_bytes(path.read_bytes())
    start = OFFSET_OLDEST
    idx = KeyIndex()
    if loaded is not None:
        file_idx, file_end, base, crc = loaded
        if file_end == log.log_start_offset == 0 or (
            file_end <= end and _fingerprint(log, file_end) == (base, crc)
        ):
            idx, start = file_idx, file_end
        else:
            _logger.info("%s: stale key index file, rebuilding from the data", path)
    if start == OFFSET_OLDEST or start < end:
        for batch in log.batches(start, end):
            idx.add(batch)
    return idx


def rebuild_key_index(log: LogReader) -> KeyIndex:
    """Rebuild the key index of an open log from its data (after a cleaner or delete
    changed stored batches) and install it; NoIndexError without ``key_index``."""
    if log._keys is None:
        raise NoIndexError(f"log {log.directory} was opened without key_index")
    with log._lock:
        idx = KeyIndex()
        end = log.log_end_offset
        for batch in log.batches(OFFSET_OLDEST, end):
            idx.add(batch)
        log._keys = idx
    return idx


def drop_key_index_file(directory: pathlib.Path) -> None:
    """Unlink ``<directory>/key-index`` (the cleaner, before it commits a rewrite: the
    file describes the old data and its fingerprint may still match after a crash). The
    caller fsyncs the directory. Written again from memory by the next clean close."""
    files.remove_if_exists(directory / KEY_INDEX_FILE)


def forget_removed(log: LogReader, removed: list[int], *, rescan: bool) -> None:
    """Fix the in-memory key index after the records at ``removed`` were deleted by
    compaction or ``delete_offsets`` (called under the maintenance lock, after the
    rewrite): a key whose last offset was removed points at its latest surviving older
    record, found by decoding the log from the log start up to that offset (``rescan``:
    delete-by-offsets), or is forgotten (compaction removes a key's last record, a
    tombstone, only when no earlier record of the key is kept). Appends that happened
    meanwhile win (an entry no longer naming a removed offset is left alone)."""
    keys = log._keys
    if keys is None or not removed:
        return
    gone = set(removed)
    with log._lock:
        stale = {k: o for k, o in keys._last.items() if o in gone}
    if not stale:
        return
    found: dict[bytes, int] = {}
    if rescan:
        upper = max(stale.values())
        nxt = log.log_start_offset
        while nxt < upper:
            data = log.read(nxt, 8 << 20, upper=upper)
            if not data:
                break
            cols = decode_columns(data, start=nxt, end=upper)
            for off, key in zip(cols.offsets.tolist(), cols.keys(), strict=True):
                if key is not None and off < stale.get(key, -1):
                    found[key] = off
            if cols.next_offset <= nxt:
                break
            nxt = cols.next_offset
    with log._lock:
        for k, o in stale.items():
            if keys._last.get(k) != o:
                continue
            if k in found:
                keys._last[k] = found[k]
            else:
                del keys._last[k]


def save_key_index(directory: pathlib.Path, keys: KeyIndex, log: LogReader, end: int) -> None:
    """Persist ``keys`` (covering offsets below ``end``) atomically (writer at close)."""
    fp = _fingerprint(log, end) or (0, 0)
    files.write_small_file(directory / KEY_INDEX_FILE, keys.to_bytes(end, *fp))


def consume_by_key(
    log: LogReader, key: bytes, offset: int, max_count: int
) -> tuple[int, list[Message]]:
    """See ``Log.consume_by_key``."""
    keys = log._keys
    if keys is None:
        raise NoIndexError(f"log {log.directory} was opened without key_index")
    end = log.high_watermark
    if offset == OFFSET_NEWEST:
        return end, []
    if offset == OFFSET_OLDEST:
        offset = log.log_start_offset
    last = keys.get(key)
    if last is None or last < offset:
        offset, _ = log._resolve_read(offset, None)  # InvalidOffsetError as ``read``
        return max(offset, end), []
    out: list[Message] = []
    for batch in log.batches(offset, end):
        for m in decode_batches(batch):
            if m.offset < offset or m.key != key:
                continue
            out.append(m)
            if len(out) >= max_count:
                return m.offset + 1, out
            if m.offset >= last:
                return max(end, m.offset + 1), out
    return max(offset, end), out


def get_offset(log: LogReader, key: bytes) -> int:
    """Offset of the last visible record with ``key`` (see ``Log.offset_by_key``)."""
    keys = log._keys
    if keys is None:
        raise NoIndexError(f"log {log.directory} was opened without key_index")
    offset = keys.get(key)
    if offset is None:
        raise NotFoundError(f"no message with key {key!r}")
    if offset < log.log_start_offset:
        raise NotFoundError(f"the last message with key {key!r} was removed by retention")
    return offset
