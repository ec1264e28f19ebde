"""Decode stored record batches into Arrow columns, vectorised with numpy.

Input: whole record batches v2 as stored (Kafka's DefaultRecordBatch; 61-byte header, then
the records, compressed as a block when attributes bits 0-2 say gzip/snappy/lz4/zstd). Each
record (DefaultRecord) is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    [headerKeyLength varint | headerKey utf-8 | headerValueLength varint | headerValue]

Varints are zigzag-encoded (protobuf style). The numpy decoding of record batches lives in
the storage layer (``seglog.storage.record.columns.decode_columns``, also behind
``Log.consume_columns``): record boundaries found by checking guessed runs of equal-sized
records at once, every field decoded for all records at once. This module turns those
columns into Arrow: ``key``/``value`` are cut out of the buffer by one Arrow ``take``;
headers (only with ``includeHeaders``) are parsed per record, only for records with some.

Control batches (attributes bit 5) are skipped, as Kafka consumers do; with ``aborted``
(read_committed) the records of aborted transactions too. The timestamp of a
record is ``firstTimestamp + timestampDelta`` under CreateTime (attribute bit 3 clear,
``timestampType`` 0) and the batch's ``maxTimestamp`` under LogAppendTime (type 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seglog.columnar._schema import ARROW_HEADERS_TYPE, arrow_schema
from seglog.storage import BATCH_HEADER, I64, RecordColumns, decode_columns

__all__ = ["BATCH_HEADER", "columns_batch", "decode_batches", "empty_batch"]


def binary_layout(
    values: pa.Array,
) -> tuple[pa.Buffer, I64, npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """A binary Arrow array's own buffers, no copy: ``(data, offsets, bytes, nulls)`` —
    the data buffer (empty when there is none), each row's start and end (``len + 1``
    int64 offsets into it, the array's slice offset applied), the buffer as uint8 (one
    zero byte when empty, so ``take`` with ``mode="clip"`` works) and the rows' null mask."""
    n = len(values)
    _, offset_buffer, data = values.buffers()
    data = data if data is not None else pa.py_buffer(b"")
    first = values.offset
    offsets: I64 = np.frombuffer(offset_buffer, dtype=np.int32)[first : first + n + 1].astype(
        np.int64
    )
    buf = np.frombuffer(data, dtype=np.uint8) if data.size else np.zeros(1, dtype=np.uint8)
    return data, offsets, buf, np.asarray(values.is_null(), dtype=np.bool_)


def _cut(data: pa.Buffer, pos: I64, length: I64) -> pa.Array:
    """Binary column of ``data[pos:pos+length]`` per row, null where ``length`` is -1."""
    n = len(pos)
    if n == 0:
        return pa.array([], type=pa.binary())
    valid = length >= 0
    size = np.where(valid, length, 0)
    bounds = np.empty(2 * n + 1, dtype=np.int32)
    bounds[0:-1:2] = pos
    bounds[1::2] = pos + size
    bounds[-1] = bounds[-2]
    # One binary array over the whole buffer: [field0, gap0, field1, gap1, ...]; offsets
    # are monotonic because fields come in buffer order. Taking the even slots copies out
    # exactly the fields, with a null where the index is masked.
    spans = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(bounds), data])
    # no mask when no field is null: the result then has no validity bitmap for Spark's
    # Arrow reader to consult
    mask = None if valid.all() else ~valid
    index = pa.array(np.arange(0, 2 * n, 2, dtype=np.int32), mask=mask)
    return spans.take(index)


def empty_batch(include_headers: bool = False) -> pa.RecordBatch:
    """A zero-row batch of the source's Arrow schema."""
    return pa.RecordBatch.from_pylist([], schema=arrow_schema(include_headers))


def decode_batches(
    batches: Iterable[bytes | memoryview],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool = False,
    check_crcs: bool = True,
    aborted: Sequence[tuple[int, int]] | None = None,
) -> pa.RecordBatch:
    """Decode the records with ``start <= offset < end`` of whole record batches v2.

    Returns one ``pyarrow.RecordBatch`` of ``arrow_schema(include_headers)`` (possibly empty),
    rows in offset order. The caller bounds the input (a few MiB of batches per call): every
    field offset must fit an int32. Raises ``CorruptRecordError`` on a malformed batch or
    record (magic != 2, lengths that disagree, varint overrun, bad header UTF-8) and,
    with ``check_crcs`` (the default; Spark option ``checkCrcs``), on a batch whose
    CRC-32C does not match (the message names its offset).

    Control batches (transaction markers) are always dropped. ``aborted`` (read_committed):
    ``[(producer id, first offset)]`` of the aborted transactions overlapping the batches
    given, exactly a Fetch response's ``aborted_transactions`` for its records (or
    ``Log.aborted_transactions(first offset given, end)``): their records are dropped as
    Kafka's consumer drops them; pass batches below the last stable offset only.
    """
    cols = decode_columns(batches, start, end, check_crcs=check_crcs, aborted=aborted)
    return columns_batch(cols, topic=topic, partition=partition, include_headers=include_headers)


def columns_batch(
    cols: RecordColumns, *, topic: str, partition: int, include_headers: bool = False
) -> pa.RecordBatch:
    """The decoded records ``cols`` (``decode_columns``) as one ``pyarrow.RecordBatch`` of
    ``arrow_schema(include_headers)``; ValueError when ``cols.buffer`` is 2 GiB or more."""
    n = len(cols)
    if n == 0:
        return empty_batch(include_headers)
    if len(cols.buffer) >= 1 << 31:
        raise ValueError("decode_batches input over 2 GiB: pass fewer batches per call")
    data = pa.py_buffer(cols.buffer)
    columns: list[Any] = [
        _cut(data, cols.key_positions, cols.key_lengths),
        _cut(data, cols.value_positions, cols.value_lengths),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(cols.offsets),
        pa.array(cols.timestamps * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(cols.timestamp_types.astype(np.int32)),
    ]
    if include_headers:
        headers = cols.headers()
        list_offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([len(h) for h in headers], out=list_offsets[1:])
        flat = [kv for h in headers for kv in h]
        entries = pa.StructArray.from_arrays(
            [
                pa.array([k for k, _ in flat], type=pa.string()),
                pa.array([v for _, v in flat], type=pa.binary()),
            ],
            names=["key", "value"],
        )
        columns.append(
            pa.ListArray.from_arrays(pa.array(list_offsets), entries, type=ARROW_HEADERS_TYPE)
        )
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
