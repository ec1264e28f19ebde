"""Control batches: the COMMIT/ABORT markers that end a Kafka transaction on a partition.

A transaction coordinator ends a producer's transaction by appending, to each partition the
transaction wrote, one record batch v2 (see ``batch.py`` for the header) with attribute
bits 4 (isTransactional) and 5 (isControl) set, the producer's id and epoch, baseSequence
-1 and exactly one record (Kafka's ``EndTransactionMarker``, ``ControlRecordType``)::

    key   (4 bytes)  version i16 = 0, type i16 (0 = ABORT, 1 = COMMIT)
    value (6 bytes)  version i16 = 0, coordinatorEpoch i32

The marker occupies one offset of the log; readers never see it as a record.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c
from kafka.record.util import decode_varint

from seglog.errors import CorruptRecordError
from seglog.storage.record.batch import ATTR_CONTROL, BATCH_HEADER

__all__ = [
    "ATTR_CONTROL",
    "ATTR_TRANSACTIONAL",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "AbortedFilter",
    "control_marker",
    "encode_control_batch",
    "is_control_batch",
    "is_transactional_batch",
]

ATTR_TRANSACTIONAL = 0x10
"""Attribute bit 4: the batch belongs to a transaction."""
CONTROL_ABORT = 0
"""ControlRecordType ABORT."""
CONTROL_COMMIT = 1
"""ControlRecordType COMMIT."""

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
_ATTRS_AT = 21
_CRC_AT = 17
_CRC_START = 21
_HEADER_SIZE = 61
# the one record: length 16 (zigzag 0x20), attributes 0, timestampDelta 0, offsetDelta 0,
# keyLength 4 (zigzag 0x08), key, valueLength 6 (zigzag 0x0c), value, headerCount 0


def is_transactional_batch(attributes: int) -> bool:
    """Whether a batch's attributes (i16) carry the isTransactional bit (4)."""
    return bool(attributes & ATTR_TRANSACTIONAL)


def is_control_batch(attributes: int) -> bool:
    """Whether a batch's attributes (i16) carry the isControl bit (5)."""
    return bool(attributes & ATTR_CONTROL)


def encode_control_batch(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """One control batch (78 bytes) ending ``producer_id``'s transaction: COMMIT when
    ``commit``, else ABORT; base offset 0 (the log assigns it), baseSequence -1, both
    timestamps ``timestamp_ms``, CRC-32C over bytes [21, end). Appendable with
    ``Log.append(batch, origin="coordinator")``. Kafka's ``EndTransactionMarker``."""
    key = _KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    record = b"\x20\x00\x00\x00\x08" + key + b"\x0c" + value + b"\x00"
    size = _HEADER_SIZE + len(record)
    buf = bytearray(size)
    BATCH_HEADER.pack_into(
        buf,
        0,
        0,  # baseOffset
        size - 12,  # batchLength
        0,  # partitionLeaderEpoch (stamped on append)
        2,  # magic
        0,  # crc (below)
        ATTR_TRANSACTIONAL | ATTR_CONTROL,
        0,  # lastOffsetDelta
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        -1,  # baseSequence
        1,  # recordCount
    )
    buf[_HEADER_SIZE:] = record
    struct.pack_into(">I", buf, _CRC_AT, crc32c.crc32c(memoryview(buf)[_CRC_START:]))
    return bytes(buf)


def control_marker(batch: bytes | bytearray | memoryview) -> tuple[bool, int] | None:
    """``(commit, coordinator epoch)`` of the control batch at the start of ``batch``, or
    None when it is not a control batch. Raises CorruptRecordError when a control batch
    does not hold a decodable marker record (uncompressed, key of 4 bytes, value of at
    least 6, as Kafka's ``ControlRecordType.parse`` / ``EndTransactionMarker``)."""
    if len(batch) < _HEADER_SIZE:
        raise CorruptRecordError(f"record batch of {len(batch)} bytes: shorter than a header")
    (attributes,) = struct.unpack_from(">h", batch, _ATTRS_AT)
    if not attributes & ATTR_CONTROL:
        return None
    if attributes & 0x07:
        raise CorruptRecordError("compressed control batch")
    (length,) = struct.unpack_from(">i", batch, 8)  # batchLength: this batch only
    rec = bytes(batch[_HEADER_SIZE : length + 12])
    try:
        _, pos = decode_varint(rec, 0)  # length
        _, pos = decode_varint(rec, pos + 1)  # attributes (one byte), timestampDelta
        _, pos = decode_varint(rec, pos)  # offsetDelta
        key_len, pos = decode_varint(rec, pos)
        key = rec[pos : pos + key_len]
        pos += max(key_len, 0)
        value_len, pos = decode_varint(rec, pos)
        value = rec[pos : pos + value_len]
        version, kind = _KEY.unpack(key)
        _, epoch = _VALUE.unpack_from(value, 0)
    except (IndexError, struct.error) as e:
        raise CorruptRecordError("control batch without a transaction marker record") from e
    if version != 0 or kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise CorruptRecordError(f"control record version {version}, type {kind}")
    return kind == CONTROL_COMMIT, epoch


class AbortedFilter:
    """Kafka's consumer-side read_committed filter (``Fetcher``'s ``abortedProducerIds``):
    walking batches in offset order, an aborted transaction ``(producer id, first offset)``
    becomes active once a batch reaches its first offset; a transactional batch of an
    active producer is skipped; that producer's ABORT marker ends it."""

    def __init__(self, aborted: Sequence[tuple[int, int]]) -> None:
        self.queue = sorted(aborted, key=lambda a: a[1])
        self.at = 0
        self.active: set[int] = set()

    def skip(self, view: memoryview, pos: int, attrs: int, last: int, producer_id: int) -> bool:
        """Whether the batch at ``view[pos:]`` (``attrs``, last offset ``last``) is
        skipped: a control batch (an ABORT marker ends its producer's aborted
        transaction) or a batch of an aborted transaction."""
        queue = self.queue
        while self.at < len(queue) and queue[self.at][1] <= last:
            self.active.add(queue[self.at][0])
            self.at += 1
        if attrs & ATTR_CONTROL:
            if producer_id in self.active:
                marker = control_marker(view[pos:])
                if marker is not None and not marker[0]:
                    self.active.discard(producer_id)
            return True
        return bool(attrs & ATTR_TRANSACTIONAL) and producer_id in self.active
