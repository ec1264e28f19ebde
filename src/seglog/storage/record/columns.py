"""Decode stored record batches into columns, vectorised with numpy (the consume path).

Input: whole record batches v2 (Kafka's DefaultRecordBatch: 61-byte header, then the
records, compressed as one block when attributes bits 0-2 say gzip/snappy/lz4/zstd; the
record layout is in ``record/encode.py``). Output: :class:`RecordColumns`, numpy arrays of
offsets, timestamps and the positions/lengths of keys, values and headers in one buffer.

Work per batch is one header unpack (compressed batches: one kafka-python codec call).
Record boundaries are a chain (each record starts with its length), found by guessing that
the next records all have the current record's size and checking every guess at once;
runs of equal-sized records (the usual case: a batch changes size once, at offset delta
64) cost a few numpy calls, and a batch whose records all differ falls back to a Python
walk of one varint per record. Then every field of every record is decoded at once.
Control batches (attributes bit 5) are skipped, as Kafka consumers do; given the aborted
transactions of the range (``aborted``), so are the batches of aborted transactions (the
read_committed filter of Kafka's consumer, see ``AbortedFilter``). A record's
timestamp is firstTimestamp + timestampDelta under CreateTime and the batch maxTimestamp
under LogAppendTime (attributes bit 3), as kafka-python's ``MemoryRecords`` gives them.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Sequence

import crc32c
import numpy as np
import numpy.typing as npt

from seglog.errors import CorruptRecordError
from seglog.storage.record.batch import BATCH_HEADER, crc_mismatch
from seglog.storage.record.control import AbortedFilter
from seglog.storage.record.message import Message, new_messages
from seglog.storage.record.varint import I64, U8, decode_varints, gather

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
    from kafka.record.util import decode_varint

__all__ = [
    "RecordColumns",
    "concat_columns",
    "decode_columns",
    "decompress",
    "empty_columns",
]

_CONTROL = 0x20
_CRC_BEFORE_BODY = BATCH_HEADER.size - 21  # the CRC covers the header from byte 21 on
_LOG_APPEND_TIME = 0x08
_CODEC_MASK = 0x07
_MIN_RECORD = 6  # attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount
_MIN_RUN = 8  # a guessed run shorter than this: walk the rest of the batch in Python
_FIRST_WINDOW = 64  # records checked first for a run of equal-sized records (_run_length)
_NO_LIMIT = (1 << 63) - 1
_EMPTY = np.zeros(0, dtype=np.int64)

Headers = tuple[tuple[str, bytes | None], ...]

_Raw = bytes | memoryview
"""Stored batches being decoded: bytes, or a view borrowed with ``decode_columns(borrow=True)``."""


class RecordColumns:
    """Records of record batches as columns (all arrays of one length, offset order).

    ``buffer`` holds the bytes every position points into (the stored batches, or, when
    some were compressed, the record bodies of every batch, decompressed, in batch order):
    positions ascend with the rows; a ``memoryview`` of the caller's buffer when decoded
    with ``borrow=True`` (``keys()``, ``values()`` and ``headers()`` then each copy it). Lengths
    are bytes, -1 for a null key or value. ``next_offset``: where the next consume
    continues (after the last record returned when ``max_count`` cut the input short, else
    after the last batch seen).
    """

    __slots__ = (
        "buffer",
        "header_counts",
        "header_positions",
        "key_lengths",
        "key_positions",
        "next_offset",
        "offsets",
        "record_ends",
        "timestamp_types",
        "timestamps",
        "value_lengths",
        "value_positions",
    )

    def __init__(  # noqa: PLR0917 (one argument per column)
        self,
        buffer: _Raw,
        offsets: I64,
        timestamps: I64,
        timestamp_types: npt.NDArray[np.int8],
        key_positions: I64,
        key_lengths: I64,
        value_positions: I64,
        value_lengths: I64,
        header_counts: I64,
        header_positions: I64,
        record_ends: I64,
        next_offset: int,
    ) -> None:
        self.buffer = buffer
        """The bytes positions point into."""
        self.offsets = offsets
        """int64 offsets."""
        self.timestamps = timestamps
        """int64 timestamps, ms since the epoch."""
        self.timestamp_types = timestamp_types
        """int8: 0 CreateTime, 1 LogAppendTime (Spark's Kafka source timestampType)."""
        self.key_positions = key_positions
        self.key_lengths = key_lengths
        self.value_positions = value_positions
        self.value_lengths = value_lengths
        self.header_counts = header_counts
        """Number of headers per record."""
        self.header_positions = header_positions
        """Position of each record's first header (after its headerCount varint)."""
        self.record_ends = record_ends
        """Position after each record."""
        self.next_offset = next_offset

    def __len__(self) -> int:
        return len(self.offsets)

    def _bytes(self) -> bytes:
        buffer = self.buffer
        return buffer if isinstance(buffer, bytes) else bytes(buffer)

    def _cut(self, pos: I64, length: I64) -> list[bytes | None]:
        raw = self._bytes()
        n = len(length)
        if n == 0:
            return []
        lo, hi = int(length.min()), int(length.max())
        if lo == hi and lo > 0 and n >= _MIN_RUN:
            # one length (records of one size: the usual batch, whose records grow by one
            # byte at offset delta 64): each run of positions a fixed stride apart is one
            # strided array of void scalars, whose tolist() makes the bytes objects in C
            steps = np.diff(pos)
            cuts = np.flatnonzero(steps[1:] != steps[:-1]) + 1  # run i: steps[cuts[i-1]:cuts[i]]
            if len(cuts) * _MIN_RUN <= n and int(steps.min()) >= lo:
                out: list[bytes | None] = []
                bounds = [0, *cuts.tolist(), n - 1]
                for a, b in itertools.pairwise(bounds):
                    # items a..b-1 start at pos[a], steps[a] apart (b == n - 1: through n - 1)
                    count = b - a + 1 if b == n - 1 else b - a
                    view = np.ndarray((count,), f"V{lo}", raw, int(pos[a]), (int(steps[a]),))
                    out += view.tolist()
                    if b == n - 1:
                        break
                return out
        starts, ends = pos.tolist(), (pos + length).tolist()
        if lo >= 0:
            return [raw[a:b] for a, b in zip(starts, ends, strict=True)]
        if hi < 0:
            return [None] * n
        return [raw[a:b] if b >= a else None for a, b in zip(starts, ends, strict=True)]

    def keys(self) -> list[bytes | None]:
        """Record keys (None = null)."""
        return self._cut(self.key_positions, self.key_lengths)

    def values(self) -> list[bytes | None]:
        """Record values (None = null, a tombstone)."""
        return self._cut(self.value_positions, self.value_lengths)

    def headers(self) -> list[Headers]:
        """Record headers as ``((name, value), ...)`` per record. Raises CorruptRecordError
        on a malformed header (bad UTF-8, lengths disagreeing with the record)."""
        out: list[Headers] = [()] * len(self)
        if not self.header_counts.any():
            return out
        raw = self._bytes()
        for i in np.flatnonzero(self.header_counts).tolist():
            out[i] = _parse_headers(
                raw,
                int(self.header_positions[i]),
                int(self.header_counts[i]),
                int(self.record_ends[i]),
            )
        return out

    def messages(self) -> list[Message]:
        """The records as :class:`Message` objects."""
        return new_messages(
            self.offsets.tolist(),
            self.timestamps.tolist(),
            self.keys(),
            self.values(),
            self.headers(),
        )

    def packed_values(self) -> tuple[I64, U8]:
        """Values packed as Arrow's binary layout: ``(int64 offsets of len + 1 entries,
        uint8 data)``; nulls are empty (see ``value_lengths < 0`` for the validity).
        ``pyarrow.Array.from_buffers(pa.large_binary(), n, [validity, offsets, data])``."""
        return gather(
            np.frombuffer(self.buffer, np.uint8), self.value_positions, self.value_lengths
        )

    def packed_keys(self) -> tuple[I64, U8]:
        """Keys packed as ``packed_values`` packs values."""
        return gather(np.frombuffer(self.buffer, np.uint8), self.key_positions, self.key_lengths)


def _parse_headers(raw: bytes, p: int, count: int, end: int) -> Headers:
    out: list[tuple[str, bytes | None]] = []
    try:
        for _ in range(count):
            klen, p = decode_varint(raw, p)
            if klen < 0:
                raise CorruptRecordError(f"negative header key length {klen}")
            name = raw[p : p + klen].decode("utf-8")
            p += klen
            vlen, p = decode_varint(raw, p)
            if vlen >= 0:
                out.append((name, raw[p : p + vlen]))
                p += vlen
            else:
                out.append((name, None))
    except (IndexError, ValueError) as exc:  # ValueError: bad UTF-8, varint over 10 bytes
        raise CorruptRecordError(f"bad record header: {exc}") from None
    if p != end:
        raise CorruptRecordError("record length disagrees with its headers")
    return tuple(out)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Records of a compressed batch (kafka-python's codecs: 1 gzip, 2 snappy, 3 lz4,
    4 zstd). CorruptRecordError on an unknown codec."""
    if codec == 1:
        return bytes(kafka_codec.gzip_decode(data))
    if codec == 2:
        return bytes(kafka_codec.snappy_decode(bytes(data)))
    if codec == 3:
        return bytes(kafka_codec.lz4_decode(bytes(data)))
    if codec == 4:
        return bytes(kafka_codec.zstd_decode(bytes(data)))
    raise CorruptRecordError(f"unknown compression codec {codec} in record batch attributes")


def _walk_python(raw: _Raw, p: int, end: int, count: int, out: list[int]) -> int:
    """Append the start of ``count`` records from ``p``; return the position after them."""
    append = out.append
    try:
        for _ in range(count):
            append(p)
            b = raw[p]
            if b < 0x80 and not b & 1:  # a one-byte, non-negative length
                p += 1 + (b >> 1)
                continue
            length, p = decode_varint(raw, p)
            if length < 0:
                raise CorruptRecordError(f"negative record length {length}")
            p += length
    except IndexError:
        raise CorruptRecordError("record batch ends inside a record") from None
    except ValueError:  # kafka-python: a varint over 10 bytes
        raise CorruptRecordError("varint longer than 10 bytes") from None
    if p > end:
        raise CorruptRecordError("record batch ends inside a record")
    return p


_Part = tuple[I64, I64 | None, I64 | None]
"""Record starts, and when already decoded their lengths and the positions after them."""


def _run_length(buf: U8, p: int, stride: int, width: int, m: int) -> int:
    """How many of the next ``m`` records, if all of the size of the one at ``p``, would
    start every ``stride`` bytes with its ``width`` length varint bytes: checked one byte
    column at a time, in windows growing eightfold from 64 records (a batch's records
    change size a few times: checking all ``m`` each time read the batch once per run)."""
    lo, hi = 0, min(m, _FIRST_WINDOW)
    while True:
        heads = np.ndarray((hi - lo, width), np.uint8, buf, p + lo * stride, (stride, 1))
        ok = heads[:, 0] == buf[p]
        for k in range(1, width):
            ok &= heads[:, k] == buf[p + k]
        if not ok.all():
            return lo + int(np.argmin(ok))
        if hi == m:
            return m
        lo, hi = hi, min(m, hi * 8)


def _walk(buf: U8, raw: _Raw, p: int, end: int, count: int, parts: list[_Part]) -> None:  # noqa: PLR0917
    """Record starts of one batch body ``[p, end)`` holding ``count`` records, appended to
    ``parts``. CorruptRecordError when the records do not tile the body exactly."""
    while count >= _MIN_RUN:
        try:
            length, after = decode_varint(raw, p)
        except IndexError:
            raise CorruptRecordError("record batch ends inside a record") from None
        except ValueError:  # kafka-python: a varint over 10 bytes
            raise CorruptRecordError("varint longer than 10 bytes") from None
        stride = after - p + length
        if length < _MIN_RECORD or p + stride > end:
            raise CorruptRecordError(f"record length {length} disagrees with the batch")
        j = _run_length(buf, p, stride, after - p, min(count, (end - p) // stride))
        guess = np.arange(p, p + j * stride, stride, dtype=np.int64)
        parts.append((guess, np.full(j, length, dtype=np.int64), guess + (after - p)))
        count -= j
        p += j * stride
        if j < _MIN_RUN:
            break
    if count:
        rest: list[int] = []
        p = _walk_python(raw, p, end, count, rest)
        parts.append((np.array(rest, dtype=np.int64), None, None))
    if p != end:
        raise CorruptRecordError(f"record lengths disagree with the batch size ({p} != {end})")


class _Batches:
    """Per-batch facts gathered by the header walk."""

    def __init__(self) -> None:
        self.base: list[int] = []
        self.first_ts: list[int] = []
        self.max_ts: list[int] = []
        self.log_append: list[bool] = []
        self.counts: list[int] = []
        self.bodies: list[tuple[int, int]] = []  # (start, end) in the input
        self.decompressed: list[bytes | None] = []  # body of each compressed batch
        self.any_compressed = False
        self.next_offset = -1


def _scan_batches(  # noqa: PLR0917 (internal)
    raw: _Raw,
    start: int,
    end: int,
    max_count: int,
    check_crcs: bool,
    aborted: AbortedFilter | None,
) -> _Batches:
    out = _Batches()
    pos, n = 0, len(raw)
    view = memoryview(raw)
    have = 0  # records at or after start so far (at most; compaction leaves gaps)
    while pos < n and have < max_count:
        if n - pos < BATCH_HEADER.size:
            raise CorruptRecordError(f"record batch of {n - pos} bytes, below its header")
        (base, blen, _, magic, crc, attrs, last_delta, first, maximum, pid, _, _, count) = (
            BATCH_HEADER.unpack_from(raw, pos)
        )
        size = blen + 12
        if magic != 2:
            raise CorruptRecordError(f"record batch magic {magic}, only v2 is supported")
        if size < BATCH_HEADER.size or pos + size > n:
            raise CorruptRecordError(f"record batch at byte {pos} truncated or malformed")
        if base >= end:
            break
        out.next_offset = base + last_delta + 1
        if aborted is not None and aborted.skip(view, pos, attrs, base + last_delta, pid):
            pos += size
            continue
        body_pos, pos = pos + BATCH_HEADER.size, pos + size
        if attrs & _CONTROL or base + last_delta < start or count <= 0:
            continue
        if check_crcs and crc32c.crc32c(view[body_pos - _CRC_BEFORE_BODY : pos]) != crc:
            raise CorruptRecordError(crc_mismatch(base))
        codec = attrs & _CODEC_MASK
        out.bodies.append((body_pos, pos))
        if codec:
            out.decompressed.append(decompress(codec, memoryview(raw)[body_pos:pos]))
            out.any_compressed = True
        else:
            out.decompressed.append(None)
        out.base.append(base)
        out.first_ts.append(first)
        out.max_ts.append(maximum)
        out.log_append.append(bool(attrs & _LOG_APPEND_TIME))
        out.counts.append(count)
        have += min(count, base + last_delta + 1 - max(start, base))
    return out


def decode_columns(
    data: bytes | bytearray | memoryview | Iterable[bytes | bytearray | memoryview],
    start: int = 0,
    end: int = _NO_LIMIT,
    max_count: int | None = None,
    *,
    check_crcs: bool = True,
    borrow: bool = False,
    aborted: Sequence[tuple[int, int]] | None = None,
) -> RecordColumns:
    """Decode the records with ``start <= offset < end`` (at most ``max_count``, the
    first ones) of whole record batches v2: ``data`` is their concatenation or an
    iterable of them. Batches at or past ``end`` are not looked at. Raises
    CorruptRecordError on a malformed batch or record (magic != 2, truncation, lengths
    that disagree, varint overrun) and, with ``check_crcs`` (the default, as Kafka's
    consumer ``check.crcs``), on a batch whose records are decoded and whose CRC-32C does
    not match (the message names its base offset).

    ``borrow=True``: a ``bytearray`` or ``memoryview`` is decoded where it lies instead of
    copied to bytes first, and the columns' ``buffer`` is a view of it: the caller keeps
    it unchanged while it uses them (a reader decoding into one reused buffer).

    ``aborted`` (read_committed): ``[(producer id, first offset)]`` of the aborted
    transactions overlapping the batches given (any order): exactly what a Fetch
    response's ``aborted_transactions`` carries for its records, or
    ``Log.aborted_transactions(start, end)`` for a range whose batches are all given from
    ``start`` on; the records of those transactions are dropped, as Kafka's consumer
    drops them. Pass it with batches read up to the last stable offset only. Control
    batches are dropped whatever ``aborted`` is. An aborted transaction whose ABORT
    marker lies before the first batch given must not be in the list (Fetch and
    ``Log.aborted_transactions`` never include one)."""
    raw: _Raw
    if isinstance(data, bytes):
        raw = data
    elif isinstance(data, bytearray | memoryview):
        raw = memoryview(data).cast("B") if borrow else bytes(data)
    else:
        raw = b"".join(data)
    limit = _NO_LIMIT if max_count is None else max_count
    info = _scan_batches(
        raw, start, end, limit, check_crcs, None if aborted is None else AbortedFilter(aborted)
    )
    if info.any_compressed:
        # one buffer of the record bodies in batch order (positions ascend with offsets)
        view = memoryview(raw)
        pieces = [
            d if d is not None else view[p:e]
            for (p, e), d in zip(info.bodies, info.decompressed, strict=True)
        ]
        bounds = np.cumsum([0, *map(len, pieces)]).tolist()
        info.bodies = list(itertools.pairwise(bounds))
        raw = b"".join(pieces)
    buf = np.frombuffer(raw, dtype=np.uint8)
    parts: list[_Part] = []
    for (p, e), count in zip(info.bodies, info.counts, strict=True):
        _walk(buf, raw, p, e, count, parts)
    lengths, after = [], []
    for starts, known_len, known_after in parts:
        if known_len is None or known_after is None:
            known_len, known_after = decode_varints(buf, starts)  # noqa: PLW2901
        lengths.append(known_len)
        after.append(known_after)
    if len(parts) == 1:
        rec_len, s = lengths[0], after[0]
    else:
        rec_len = np.concatenate(lengths) if parts else _EMPTY
        s = np.concatenate(after) if parts else _EMPTY
    return _fields(raw, buf, rec_len, s, info, start, end, max_count)


def _fields(  # noqa: PLR0917 (internal)
    raw: _Raw,
    buf: U8,
    rec_len: I64,
    s: I64,
    info: _Batches,
    start: int,
    end: int,
    max_count: int | None,
) -> RecordColumns:
    """Decode every field of the records at once (``rec_len``: their lengths, ``s``: the
    positions after their length varints)."""
    if (rec_len < _MIN_RECORD).any():
        raise CorruptRecordError("record shorter than its fixed fields")
    e = s + rec_len
    ts_delta, p = decode_varints(buf, s + 1)  # + 1: the attributes byte (unused)
    off_delta, p = decode_varints(buf, p)
    key_len, key_pos = decode_varints(buf, p)
    val_len, val_pos = decode_varints(buf, key_pos + np.maximum(key_len, 0))
    hdr_count, hdr_pos = decode_varints(buf, val_pos + np.maximum(val_len, 0))
    if len(key_len) == 0:
        bad = False
    elif min(int(key_len.min()), int(val_len.min())) < -1 or int(hdr_count.min()) < 0:
        bad = True
    elif int(hdr_count.max()) == 0:  # no headers (the usual case): each record ends there
        bad = bool((hdr_pos != e).any())
    else:
        bad = bool(((hdr_pos > e) | ((hdr_count == 0) & (hdr_pos != e))).any())
    if bad:
        raise CorruptRecordError("record fields disagree with the record length")
    if len(info.counts) == 1:  # one batch (the usual consume): scalars, no gathers
        offsets = off_delta + info.base[0]
        appended = np.full(len(offsets), info.log_append[0], dtype=np.int8)
        timestamps = (
            np.full(len(offsets), info.max_ts[0], dtype=np.int64)
            if info.log_append[0]
            else ts_delta + info.first_ts[0]
        )
    else:
        counts = np.asarray(info.counts, dtype=np.int64)
        offsets = np.repeat(np.asarray(info.base, dtype=np.int64), counts)
        offsets += off_delta
        if not any(info.log_append):  # all CreateTime (the usual): no selection
            appended = np.zeros(len(offsets), dtype=np.int8)
            timestamps = np.repeat(np.asarray(info.first_ts, dtype=np.int64), counts)
            timestamps += ts_delta
        else:
            which = np.repeat(np.arange(len(counts)), counts)
            appended = np.asarray(info.log_append, dtype=np.int8)[which]
            timestamps = np.where(
                appended,
                np.asarray(info.max_ts, dtype=np.int64)[which],
                np.asarray(info.first_ts, dtype=np.int64)[which] + ts_delta,
            )
    cols: list[I64] = [offsets, timestamps, key_pos, key_len, val_pos, val_len]
    cols += [hdr_count, hdr_pos, e]
    next_offset = info.next_offset if info.next_offset >= 0 else start
    if len(offsets) and (int(offsets.min()) < start or int(offsets.max()) >= end):
        keep = (offsets >= start) & (offsets < end)
        cols = [c[keep] for c in cols]
        appended = appended[keep]
    if max_count is not None and len(cols[0]) > max_count:
        cols = [c[:max_count] for c in cols]
        appended = appended[:max_count]
        next_offset = int(cols[0][-1]) + 1 if max_count else start
    return RecordColumns(
        raw,
        cols[0],
        cols[1],
        appended,
        cols[2],
        cols[3],
        cols[4],
        cols[5],
        cols[6],
        cols[7],
        cols[8],
        next_offset,
    )


def empty_columns(next_offset: int) -> RecordColumns:
    """Zero records; ``next_offset`` as given."""
    e = _EMPTY
    return RecordColumns(b"", e, e, e.astype(np.int8), e, e, e, e, e, e, e, next_offset)


def concat_columns(parts: list[RecordColumns], next_offset: int) -> RecordColumns:
    """One RecordColumns of ``parts`` in order (their buffers joined, positions moved)."""
    parts = [c for c in parts if len(c)]
    if not parts:
        return empty_columns(next_offset)
    if len(parts) == 1:
        c = parts[0]
        c.next_offset = next_offset
        return c
    shift = np.cumsum([0, *(len(c.buffer) for c in parts[:-1])])

    def cat(name: str, moved: bool = False) -> I64:
        arrays = [getattr(c, name) for c in parts]
        if moved:
            arrays = [a + int(d) for a, d in zip(arrays, shift, strict=True)]
        return np.concatenate(arrays)

    return RecordColumns(
        b"".join(c.buffer for c in parts),
        cat("offsets"),
        cat("timestamps"),
        np.concatenate([c.timestamp_types for c in parts]),
        cat("key_positions", True),
        cat("key_lengths"),
        cat("value_positions", True),
        cat("value_lengths"),
        cat("header_counts"),
        cat("header_positions", True),
        cat("record_ends", True),
        next_offset,
    )
