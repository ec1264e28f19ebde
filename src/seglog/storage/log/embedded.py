"""The embedded (klevdb-style) API of :class:`~seglog.storage.Log`, as a base class of
it: publish / publish_values, consume / consume_columns / consume_blocking /
consume_by_key, get / get_by_key / get_by_time, offset_by_key / offset_by_time,
wait_for_offset, next_offset. Thin methods: the work is in ``message_ops.py``,
``fastpath.py``, ``blocking.py`` and ``keys.py``; the writer side (append, sync,
close) stays in ``_log.py``. Thread-safety as ``Log``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, cast

from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage.log import blocking, fastpath, keys, message_ops
from seglog.storage.log.reader import LogReader

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from seglog.storage.log.blocking import CancelToken
    from seglog.storage.log.log import Log
    from seglog.storage.record.columns import RecordColumns
    from seglog.storage.record.message import Message

__all__ = ["EmbeddedLog"]


class EmbeddedLog(LogReader):
    """The embedded API methods of ``Log`` (only ``Log`` derives from it)."""

    @property
    def _log(self) -> Log:
        return cast("Log", self)

    def publish(self, messages: Sequence[Message]) -> int:
        """Append ``messages`` as record batches v2 and wait until they are durable (default
        policy); returns the next offset. Errors as ``append``."""
        return message_ops.publish(self._log, messages)

    def publish_values(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        timestamp_ms: int | Sequence[int] | npt.NDArray[np.int64] | None = None,
    ) -> int:
        """Columnar ``publish``: one record per value (None = null), ``keys`` one per value
        or None (all null), ``timestamp_ms`` one int for all, one per value, or None (now).
        No headers. Encoded vectorised into record batches v2 (split at
        max.message.bytes); waits until durable under the default policy; returns the
        next offset. ValueError on mismatched lengths; errors otherwise as ``append``."""
        return fastpath.publish_values(self._log, values, keys, timestamp_ms)

    def consume_columns(self, offset: int, max_count: int) -> RecordColumns:
        """Columnar ``consume``: up to ``max_count`` records from ``offset`` as numpy
        columns (``RecordColumns``: offsets, timestamps ms, key/value positions and
        lengths in one buffer, ``packed_values()`` for Arrow, ``messages()``); its
        ``next_offset`` is where to continue. Decoded vectorised (control batches skipped,
        compressed batches through kafka-python's codecs). OFFSET_OLDEST / OFFSET_NEWEST
        as ``consume``; InvalidOffsetError outside [log start, log end];
        CorruptRecordError on undecodable records."""
        return fastpath.consume_columns(self._log, offset, max_count)

    def consume(self, offset: int, max_count: int) -> tuple[int, list[Message]]:
        """Up to ``max_count`` messages from ``offset``; returns ``(next offset, messages)``.
        OFFSET_OLDEST starts at the log start; OFFSET_NEWEST returns ``(next offset, [])``.
        InvalidOffsetError outside [log start, log end]."""
        return message_ops.consume(self._log, offset, max_count)

    def consume_blocking(
        self,
        offset: int,
        max_count: int,
        timeout_s: float,
        *,
        cancel: CancelToken | None = None,
    ) -> tuple[int, list[Message]]:
        """As ``consume``, but when no message is available yet waits up to ``timeout_s``
        seconds for one (woken by the writer in this process, no polling; a read-only log
        polls every 50 ms). Returns ``(next offset, [])`` on timeout; OFFSET_NEWEST waits
        for the next message published. ``cancel`` (a ``CancelToken``) stops the wait from
        another thread: ``concurrent.futures.CancelledError``. Raises InvalidOffsetError
        (outside [log start, log end]), LogClosedError (also when the log closes while
        waiting)."""
        return blocking.consume_blocking(self._log, offset, max_count, timeout_s, cancel=cancel)

    def wait_for_offset(self, offset: int) -> Future[int]:
        """A future completing with the high watermark once the message at ``offset`` is
        visible (high watermark > ``offset``), failing with LogClosedError when the log
        closes or goes offline; cancel it to stop waiting. Woken by this process's writer;
        a read-only log completes it only from ``refresh`` (poll). Any number of waiters."""
        return self._log._notifier.wait(offset)

    def consume_by_key(self, key: bytes, offset: int, max_count: int) -> tuple[int, list[Message]]:
        """Up to ``max_count`` messages with ``key`` from ``offset`` on (sentinels
        allowed): ``(next offset, messages)``. Returns at once (next offset = high
        watermark) when the key index shows no later message with that key; else scans
        and decodes the batches in between. NoIndexError without ``key_index``,
        InvalidOffsetError outside [log start, log end]."""
        self._check_open()
        return keys.consume_by_key(self, key, offset, max_count)

    def get(self, offset: int) -> Message:
        """The message at ``offset``: InvalidOffsetError outside [log start, high
        watermark), NotFoundError if that offset is not stored (compacted away)."""
        return message_ops.get(self._log, offset)

    def get_by_key(self, key: bytes) -> Message:
        """The last message published with ``key`` (a tombstone has ``value=None``).
        NoIndexError if the log was opened without ``key_index``, NotFoundError if no
        message with that key is stored (never published, or every record of the key
        removed by retention, compaction or ``delete_offsets``; after compaction or a
        delete of its latest record, the latest surviving record is returned). Waits
        for that message to be durable if it is not yet."""
        offset = self.offset_by_key(key)
        try:
            return message_ops.get(self._log, offset)
        except InvalidOffsetError as e:  # a trim moved the log start past it meanwhile
            raise NotFoundError(f"the last message with key {key!r} was removed") from e

    def offset_by_key(self, key: bytes) -> int:
        """Offset of the last message with ``key``; errors as ``get_by_key``."""
        self._check_open()
        offset = keys.get_offset(self, key)
        if offset >= self._hwm and self._log._sync is not None:
            self._log.sync_future(offset + 1).result()
        return offset

    def offset_by_time(self, timestamp_ms: int) -> tuple[int, int]:
        """As ``offset_for_time``, NotFoundError instead of None (klevdb's OffsetByTime)."""
        found = self.offset_for_time(timestamp_ms)
        if found is None:
            raise NotFoundError(f"no message at or after {timestamp_ms} ms")
        return found

    def get_by_time(self, timestamp_ms: int) -> Message:
        """The first message whose timestamp is >= ``timestamp_ms`` (ms since the epoch),
        found through the time index (klevdb's GetByTime). NotFoundError if none is
        visible, LogClosedError."""
        return message_ops.get(self._log, self.offset_by_time(timestamp_ms)[0])

    def next_offset(self) -> int:
        """The log end offset: the offset the next published message gets."""
        self._check_open()
        return self._log_end
