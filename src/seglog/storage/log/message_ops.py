"""The embedded (klevdb-style) API on top of Log: publish, consume, get."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from seglog.errors import InvalidOffsetError, NotFoundError
from seglog.storage.log import fastpath, isolation
from seglog.storage.record.batch import check_batch_crcs
from seglog.storage.record.message import (
    OFFSET_NEWEST,
    Message,
    decode_batches,
    encode_messages,
)

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.log import Log

__all__ = ["consume", "get", "publish"]


def publish(log: Log, messages: Sequence[Message]) -> int:
    """See ``Log.publish``."""
    if not messages:
        log._state.check_writable()
        return log.log_end_offset
    data = encode_messages(messages, log.config.max_message_bytes, mutable=True, reuse=True)
    return fastpath.publish_batches(log, data)


def consume(
    log: Log,
    offset: int,
    max_count: int,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> tuple[int, list[Message]]:
    """See ``Log.consume``."""
    if offset == OFFSET_NEWEST:
        return fastpath.consume_columns(log, offset, 0, isolation_level).next_offset, []
    # vectorised decode (record/columns.py), then Message objects
    cols = fastpath.consume_columns(log, offset, max_count, isolation_level)
    return cols.next_offset, cols.messages()


def get(log: Log, offset: int, isolation_level: IsolationLevel = "read_uncommitted") -> Message:
    """See ``Log.get``."""
    committed = isolation.check_level(isolation_level)
    upper = log.last_stable_offset if committed else log.high_watermark
    if offset < log.log_start_offset or offset >= upper:
        bound = "last stable offset" if committed else "high watermark"
        raise InvalidOffsetError(
            f"offset {offset} outside [{log.log_start_offset}, {upper}) (the {bound})"
        )
    for batch in log.batches(offset):
        why = isolation.unreadable(log._state, batch, offset, committed)
        if why is not None:
            raise NotFoundError(f"offset {offset} is {why}")
        if log.config.check_crcs:
            check_batch_crcs(batch)  # CorruptRecordError naming the batch's offset
        for m in decode_batches(batch):
            if m.offset == offset:
                return m
            if m.offset > offset:
                raise NotFoundError(f"offset {offset} is not stored")
        break
    raise NotFoundError(f"offset {offset} is not stored")
