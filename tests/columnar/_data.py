"""Record batches for the columnar and Spark tests, built with kafka-python's record builder."""

from __future__ import annotations

import struct
import time
import warnings
from collections.abc import Sequence

import seglog.storage  # noqa: F401  (imports kafka-python quietly, see storage/record/message.py)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

Header = tuple[str, bytes | None]
Row = tuple[bytes | None, bytes | None, list[Header]]


def record_batch(rows: Sequence[Row], codec: int = 0, timestamp_ms: int | None = None) -> bytes:
    """One record batch v2 (kafka-python's builder) of ``rows``, base offset 0."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    for i, (key, value, headers) in enumerate(rows):
        assert builder.append(i, now + i, key, value, headers) is not None
    return bytes(builder.build())


def control_batch(base_offset: int = 0) -> bytes:
    """A transaction marker (control batch, COMMIT) as a broker would write it."""
    buf = bytearray(record_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])]))
    attributes_at = 21
    (attrs,) = struct.unpack_from(">h", buf, attributes_at)
    struct.pack_into(">h", buf, attributes_at, attrs | 0x30)
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    return bytes(buf)
