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

import logging
import struct
from collections.abc import Collection, Mapping

import crc32c

from seglog.storage.record.message import decode_batches

__all__ = ["KEY_INDEX_FILE", "KeyIndex"]

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

    def entries_at(self, offsets: Collection[int]) -> dict[bytes, int]:
        """The ``key → offset`` entries whose offset is one of ``offsets``."""
        return {k: o for k, o in self._last.items() if o in offsets}

    def repoint(self, stale: Mapping[bytes, int], found: Mapping[bytes, int]) -> None:
        """For each ``key → offset`` of ``stale`` still in the index (an entry changed
        since, by an append, is left alone): point the key at ``found[key]``, or forget
        it when ``found`` has no such key."""
        for k, o in stale.items():
            if self._last.get(k) != o:
                continue
            if k in found:
                self._last[k] = found[k]
            else:
                del self._last[k]

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
