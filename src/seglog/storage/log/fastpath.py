"""The columnar embedded API on top of Log: ``publish_values`` and ``consume_columns``.

``publish_values`` skips :class:`Message` objects altogether (values, keys and timestamps
as sequences/arrays go straight to the vectorised encoder, ``record/encode.py``);
``consume_columns`` returns numpy columns (``_columns.RecordColumns``) decoded from the
stored record batches, ready for ``pyarrow.Array.from_buffers`` or pandas.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from seglog.storage.log import append, isolation, reader
from seglog.storage.record.columns import (
    RecordColumns,
    concat_columns,
    decode_columns,
    empty_columns,
)
from seglog.storage.record.encode import encode_records
from seglog.storage.record.encode_same import give_back
from seglog.storage.record.message import OFFSET_NEWEST, OFFSET_OLDEST, stamp_i64, stamps_i64

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.log import Log
    from seglog.storage.segment.segment import Segment

__all__ = ["consume_columns", "publish_batches", "publish_values"]

_MIN_READ = 64 << 10
_MAX_READ = 8 << 20
_GUESS_BYTES_PER_RECORD = 160


def publish_values(
    log: Log,
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    timestamp_ms: int | Sequence[int] | npt.NDArray[np.int64] | None = None,
) -> int:
    """See ``Log.publish_values``."""
    n = len(values)
    if n == 0:
        log._state.check_writable()
        return log.log_end_offset
    ts: int | npt.NDArray[np.int64]
    if timestamp_ms is None:
        ts = time.time_ns() // 1_000_000
    elif isinstance(timestamp_ms, int):
        ts = stamp_i64(timestamp_ms)
    else:
        ts = timestamp_ms if isinstance(timestamp_ms, np.ndarray) else stamps_i64(timestamp_ms)
        ts = np.asarray(ts, dtype=np.int64)
        if ts.shape != (n,):
            raise ValueError(f"{len(ts)} timestamps for {n} values")
    if keys is not None and len(keys) != n:
        raise ValueError(f"{len(keys)} keys for {n} values")
    cap = log._state.config.max_message_bytes
    data = encode_records(values, keys, ts, None, cap, mutable=True, reuse=True)
    return publish_batches(log, data)


def publish_batches(log: Log, data: bytes | bytearray) -> int:
    """Append record batches this process's encoder made (``encode_records``,
    ``encode_messages``: trusted, their CRCs not checked again; a bytearray is taken
    over: patched in place, then handed back to the encoder's pool, ``give_back``) and,
    under the default policy, wait until they are durable, running the fsync in this
    thread when no other round is under way (``GroupCommit.sync``); return the next
    offset. ``publish`` and ``publish_values``."""
    st = log._state
    gc = st.group_commit
    try:
        if not st.config.fsync_before_ack or gc is None:
            return log.append(data).last_offset + 1  # through Log.append (MemoryLog's too)
        end = append.append(st, data, caller_syncs=True, take=True, trusted=True).last_offset + 1
    finally:
        give_back(data)  # written (or refused): nothing refers to it any more
    try:
        gc.sync(end)
    except BaseException:
        gc.appended(end, sync_now=True)  # interrupted: the fsync thread makes it durable
        raise
    return end


def consume_columns(
    log: Log,
    offset: int,
    max_count: int,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> RecordColumns:
    """See ``Log.consume_columns``."""
    committed = isolation.check_level(isolation_level)
    if offset == OFFSET_NEWEST:
        log._state.check_open()
        return empty_columns(log.last_stable_offset if committed else log.high_watermark)
    if offset == OFFSET_OLDEST:
        offset = log.log_start_offset
    log._state.check_open()
    if log.read_only and offset >= log.log_end_offset:
        log.refresh()  # another process may have written up to (or past) it
    offset, _ = reader.resolve_read(
        log._state, offset, None
    )  # InvalidOffsetError with read's message
    upper = log.last_stable_offset if committed else log.high_watermark
    if offset > upper:  # read_committed from past the LSO: nothing yet, stay there
        return empty_columns(offset)
    entries = reader.aborted_entries(log._state, offset, upper) if committed else None
    parts: list[RecordColumns] = []
    have, nxt = 0, offset
    want = max(_MIN_READ, min(_MAX_READ, max_count * _GUESS_BYTES_PER_RECORD))
    segs = log._state.segments  # before reading: a hint never outlives the list it was read in
    last: tuple[Segment, int, bytes] | None = None
    while have < max_count:
        log._state.check_open()
        data, seg, pos = reader.read_next(log._state, nxt, want, upper)
        if not data or seg is None:
            break
        last = seg, pos, data
        aborted = None
        if entries is not None:  # those whose marker is not behind this read
            aborted = [(e.producer_id, e.first_offset) for e in entries if e.last_offset >= nxt]
        cols = decode_columns(
            data,
            start=nxt,
            max_count=max_count - have,
            check_crcs=log.config.check_crcs,
            aborted=aborted,
        )
        parts.append(cols)
        have += len(cols)
        nxt = max(nxt, cols.next_offset)
        want = min(_MAX_READ, want * 2)
    if last is not None:
        reader.remember(log._state, nxt, segs, *last)
    return concat_columns(parts, nxt)
