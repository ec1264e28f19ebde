"""Key index: the last offset of every key, for ``get_by_key`` / ``offset_by_key``.

Kept in memory only: built at open by decoding every stored record batch, then updated
on each append (which decodes the appended batches: the per-record cost is why it is a
per-log option, ``LogConfig.key_index``). Not thread-safe by itself: the Log updates it
under its write lock; a lookup reads one dict entry (atomic under the GIL).
"""

from __future__ import annotations

from seglog.storage._message import decode_batches

__all__ = ["KeyIndex"]


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
