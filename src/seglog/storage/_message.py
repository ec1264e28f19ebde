"""Message, the offset sentinels, and encode/decode between messages and record batches.

Encoding uses kafka-python's ``DefaultRecordBatchBuilder`` (record batch v2, magic 2);
decoding uses ``kafka.record.MemoryRecords``, which handles every compression codec.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

with warnings.catch_warnings():
    # kafka-python 3.0's package import calls importlib.resources.read_text (deprecated);
    # silence it here so `import seglog` works under -W error.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

from seglog.errors import RecordTooLargeError

__all__ = ["OFFSET_NEWEST", "OFFSET_OLDEST", "Message", "decode_batches", "encode_messages"]

OFFSET_OLDEST = -2
"""Sentinel offset: the log start offset (Kafka ListOffsets' EARLIEST_TIMESTAMP, -2)."""
OFFSET_NEWEST = -1
"""Sentinel offset: the next offset, i.e. only messages published from now on
(Kafka ListOffsets' LATEST_TIMESTAMP, -1)."""

_BATCH_OVERHEAD = 61


@dataclass(frozen=True, slots=True)
class Message:
    """One record of a log."""

    offset: int = -1
    """Offset in the log; -1 before publish (assigned by the log)."""
    timestamp: int = -1
    """Timestamp in ms since the epoch; -1 = set to the publish time."""
    key: bytes | None = None
    """Record key, or None."""
    value: bytes | None = None
    """Record value, or None (a tombstone in a compacted log)."""
    headers: Sequence[tuple[str, bytes | None]] = ()
    """Record headers as ``(name, value)`` pairs."""


def _builder(batch_size: int) -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=batch_size,
    )


def encode_messages(messages: Sequence[Message], max_batch_bytes: int) -> bytes:
    """Record batches v2 (uncompressed, offsets from 0 within each batch) holding
    ``messages``, split so each batch is at most ``max_batch_bytes``. Raises
    RecordTooLargeError if one message alone does not fit."""
    now = time.time_ns() // 1_000_000
    out: list[bytes] = []
    builder = _builder(max_batch_bytes)
    n = 0
    for m in messages:
        ts = m.timestamp if m.timestamp >= 0 else now
        headers = list(m.headers)
        meta = builder.append(n, timestamp=ts, key=m.key, value=m.value, headers=headers)
        if meta is None:  # full: start a new batch
            out.append(bytes(builder.build()))
            builder, n = _builder(max_batch_bytes), 0
            meta = builder.append(0, timestamp=ts, key=m.key, value=m.value, headers=headers)
        n += 1
    if n:
        out.append(bytes(builder.build()))
    for batch in out:
        if len(batch) > max_batch_bytes:
            raise RecordTooLargeError(
                f"a message needs a {len(batch)}-byte batch, over {max_batch_bytes} bytes"
            )
    return b"".join(out)


def decode_batches(data: bytes | bytearray | memoryview) -> Iterator[Message]:
    """Messages of the record batches in ``data`` (control batches skipped); timestamps
    are the batch max timestamp for LogAppendTime batches."""
    records = MemoryRecords(bytes(data))
    while True:
        batch = records.next_batch()
        if batch is None:
            return
        if batch.is_control_batch:
            continue
        for r in batch:
            yield Message(
                offset=r.offset,
                timestamp=r.timestamp,
                key=r.key,
                value=r.value,
                headers=tuple(r.headers),
            )
