"""Decode stored record batches into Arrow columns, vectorised with numpy.

Input: whole record batches v2 as stored (Kafka's DefaultRecordBatch; 61-byte header, then
the records, compressed as a block when attributes bits 0-2 say gzip/snappy/lz4/zstd). Each
record (DefaultRecord) is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    [headerKeyLength varint | headerKey utf-8 | headerValueLength varint | headerValue]

Varints are zigzag-encoded (protobuf style). Pure-Python record parsing runs ~0.45 M
records/s per core (PERF-NOTES), so only the walk over record boundaries is a Python loop
(one varint per record); every field is then decoded for all records at once with numpy, and
``key``/``value`` are cut out of the buffer by one Arrow ``take``. Headers (only with
``includeHeaders``) are parsed per record in Python, and only for records that have some.

Control batches (attributes bit 5) are skipped, as Kafka consumers do. The timestamp of a
record is ``firstTimestamp + timestampDelta`` under CreateTime (attribute bit 3 clear,
``timestampType`` 0) and the batch's ``maxTimestamp`` under LogAppendTime (type 1).
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seglog.errors import CorruptRecordError
from seglog.spark._schema import ARROW_HEADERS_TYPE, arrow_schema

with warnings.catch_warnings():
    # kafka-python 3.0's package import calls importlib.resources.read_text (deprecated)
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
__all__ = ["BATCH_HEADER", "decode_batches", "empty_batch"]

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
"""baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
firstTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount (61 B)."""

_CONTROL = 0x20
_TIMESTAMP_TYPE = 0x08
_CODEC_MASK = 0x07
_PAD = bytes(16)  # lets a corrupt trailing varint be read past the end without IndexError

I64 = npt.NDArray[np.int64]


def _decompress(codec: int, data: memoryview) -> bytes:
    if codec == 1:
        return bytes(kafka_codec.gzip_decode(data))
    if codec == 2:
        return bytes(kafka_codec.snappy_decode(bytes(data)))
    if codec == 3:
        return bytes(kafka_codec.lz4_decode(bytes(data)))
    if codec == 4:
        return bytes(kafka_codec.zstd_decode(bytes(data)))
    raise CorruptRecordError(f"unknown compression codec {codec} in record batch attributes")


def _walk(body: bytes, count: int, bounds: list[int]) -> None:
    """Append the position in ``body`` of each record's length varint (``count`` records).

    The only per-record Python loop: one or two bytes read per record in the common case.
    Lengths are not checked here; ``_record_spans`` re-decodes and checks them vectorised.
    """
    append = bounds.append
    pos = 0
    try:
        for _ in range(count):
            append(pos)
            b = body[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
                continue
            b2 = body[pos + 1]
            if b2 < 0x80:
                pos += 2 + ((b2 << 7 | (b & 0x7F)) >> 1)
                continue
            length, pos = _varint(body, pos)
            if length < 0:
                raise CorruptRecordError(f"negative record length {length}")
            pos += length
    except IndexError:
        raise CorruptRecordError("record batch ends inside a record") from None
    if pos != len(body):
        raise CorruptRecordError(
            f"record lengths disagree with the batch size ({pos} != {len(body)})"
        )


def _varints(buf: npt.NDArray[np.uint8], pos: I64) -> tuple[I64, I64]:
    """Decode one zigzag varint (up to 10 bytes) at each position: (values, next positions)."""
    limit = len(buf) - 1
    raw = np.zeros(len(pos), dtype=np.uint64)
    size = np.zeros(len(pos), dtype=np.int64)
    active = np.ones(len(pos), dtype=bool)
    for k in range(10):
        b = buf[np.minimum(pos + k, limit)].astype(np.uint64)
        raw |= np.where(active, (b & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        size += active
        active &= b >= 0x80
        if not active.any():
            break
    else:
        raise CorruptRecordError("varint longer than 10 bytes")
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -((raw & np.uint64(1)).astype(np.int64))
    return values, pos + size


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
    index = pa.array(np.arange(0, 2 * n, 2, dtype=np.int32), mask=~valid)
    return spans.take(index)


def _headers(
    body: bytes, pos: I64, counts: I64, ends: I64
) -> tuple[npt.NDArray[np.int32], list[str], list[bytes | None]]:
    """Parse headers of the records with a non-zero count; returns list offsets, keys, values."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    keys: list[str] = []
    values: list[bytes | None] = []
    for i in np.nonzero(counts)[0].tolist():
        p = int(pos[i])
        try:
            for _ in range(int(counts[i])):
                klen, p = _varint(body, p)
                if klen < 0:
                    raise CorruptRecordError(f"negative header key length {klen}")
                keys.append(body[p : p + klen].decode("utf-8"))
                p += klen
                vlen, p = _varint(body, p)
                if vlen >= 0:
                    values.append(body[p : p + vlen])
                    p += vlen
                else:
                    values.append(None)
        except (IndexError, UnicodeDecodeError) as exc:
            raise CorruptRecordError(f"bad record header: {exc}") from None
        if p != int(ends[i]):
            raise CorruptRecordError("record length disagrees with its headers")
    return offsets, keys, values


def _varint(body: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        b = body[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


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
) -> pa.RecordBatch:
    """Decode the records with ``start <= offset < end`` of whole record batches v2.

    Returns one ``pyarrow.RecordBatch`` of ``arrow_schema(include_headers)`` (possibly empty),
    rows in offset order. The caller bounds the input (a few MiB of batches per call): every
    field offset must fit an int32. Raises ``CorruptRecordError`` on a malformed batch or
    record (magic != 2, lengths that disagree, varint overrun, bad header UTF-8).
    """
    bodies: list[bytes] = []
    base_offsets: list[int] = []
    first_ts: list[int] = []
    max_ts: list[int] = []
    log_append: list[bool] = []
    counts: list[int] = []
    bounds: list[npt.NDArray[np.int64]] = []
    body_starts: list[int] = []
    total = 0
    for raw in batches:
        view = memoryview(raw)
        if len(view) < BATCH_HEADER.size:
            raise CorruptRecordError(f"record batch of {len(view)} bytes, below its header")
        (base, _, _, magic, _, attrs, last_delta, first, maximum, _, _, _, count) = (
            BATCH_HEADER.unpack_from(view)
        )
        if magic != 2:
            raise CorruptRecordError(f"record batch magic {magic}, only v2 is supported")
        if attrs & _CONTROL or base + last_delta < start or count <= 0:
            continue
        if base >= end:
            break
        codec = attrs & _CODEC_MASK
        body = bytes(view[BATCH_HEADER.size :]) if codec == 0 else _decompress(codec, view[61:])
        walked: list[int] = []
        _walk(body, count, walked)
        bounds.append(np.asarray(walked, dtype=np.int64))
        bodies.append(body)
        body_starts.append(total)
        total += len(body)
        base_offsets.append(base)
        first_ts.append(first)
        max_ts.append(maximum)
        log_append.append(bool(attrs & _TIMESTAMP_TYPE))
        counts.append(count)
    if not bounds:
        return empty_batch(include_headers)
    if total >= 1 << 31:
        raise ValueError("decode_batches input over 2 GiB: pass fewer batches per call")

    joined = b"".join([*bodies, _PAD])
    buf = np.frombuffer(joined, dtype=np.uint8)
    which = np.repeat(np.arange(len(counts)), counts)
    b = np.concatenate(bounds) + np.asarray(body_starts, dtype=np.int64)[which]
    rec_len, s = _varints(buf, b)
    e = s + rec_len
    if (rec_len < 6).any() or (e != np.append(b[1:], total)).any():
        raise CorruptRecordError("record lengths disagree with the record batch")
    ts_delta, p = _varints(buf, s + 1)  # + 1: the record's attributes byte (unused)
    off_delta, p = _varints(buf, p)
    key_len, p = _varints(buf, p)
    key_pos = p
    val_len, p = _varints(buf, p + np.maximum(key_len, 0))
    val_pos = p
    hdr_count, p = _varints(buf, p + np.maximum(val_len, 0))
    if (key_len < -1).any() or (val_len < -1).any() or (hdr_count < 0).any():
        raise CorruptRecordError("negative key, value or header count in a record")
    if (p > e).any() or ((hdr_count == 0) & (p != e)).any():
        raise CorruptRecordError("record length disagrees with its fields")

    offset = np.asarray(base_offsets, dtype=np.int64)[which] + off_delta
    appended = np.asarray(log_append, dtype=bool)[which]
    ts_ms = np.where(
        appended,
        np.asarray(max_ts, dtype=np.int64)[which],
        np.asarray(first_ts, dtype=np.int64)[which] + ts_delta,
    )
    keep = (offset >= start) & (offset < end)
    if not keep.all():
        offset, ts_ms, appended = offset[keep], ts_ms[keep], appended[keep]
        key_pos, key_len, val_pos, val_len = (
            key_pos[keep],
            key_len[keep],
            val_pos[keep],
            val_len[keep],
        )
        p, hdr_count, e = p[keep], hdr_count[keep], e[keep]
    n = len(offset)
    data = pa.py_buffer(joined)
    columns: list[Any] = [
        _cut(data, key_pos, key_len),
        _cut(data, val_pos, val_len),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(offset),
        pa.array(ts_ms * 1000, type=pa.timestamp("us", tz="UTC")),
        pa.array(appended.astype(np.int32)),
    ]
    if include_headers:
        list_offsets, hkeys, hvalues = _headers(joined, p, hdr_count, e)
        entries = pa.StructArray.from_arrays(
            [pa.array(hkeys, type=pa.string()), pa.array(hvalues, type=pa.binary())],
            names=["key", "value"],
        )
        columns.append(
            pa.ListArray.from_arrays(pa.array(list_offsets), entries, type=ARROW_HEADERS_TYPE)
        )
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))
