"""Encode records into record batches v2 without per-record Python work (the publish path).

Output is byte-identical to kafka-python's ``DefaultRecordBatchBuilder`` (magic 2,
uncompressed, baseOffset 0, partitionLeaderEpoch 0, producerId/epoch/baseSequence -1,
offsets 0..n-1 within each batch, firstTimestamp = the first record's, one CRC-32C over
bytes [21, end)) for the same records, including how records are split into batches of at
most ``max_batch_bytes``. Each record (Kafka's DefaultRecord)::

    length varint | attributes int8 (0) | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | [headerKeyLength varint | key utf-8 | valueLength varint | value]

Lengths, deltas and positions are computed for all records at once with numpy; keys and
values are joined with ``bytes.join`` and copied into place by strided copies
(``_varint.scatter``); headers, rare, are encoded per record in Python. Compressed batches
are left to kafka-python's builder (``_message.encode_messages_reference``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Literal, overload

import crc32c
import numpy as np
from kafka.record.util import encode_varint

from seglog.errors import RecordTooLargeError
from seglog.storage.record.batch import BATCH_HEADER
from seglog.storage.record.encode_same import (
    OD_LIMITS,
    PACK_MAX,
    Buffer,
    encode_same,
    encode_same_into,
    same_size,
    varint_bytes,
    varint_columns,
)
from seglog.storage.record.varint import I64, U8, encode_varints, scatter, varint_sizes

__all__ = ["encode_record_columns", "encode_record_columns_into", "encode_records"]


HeaderList = Sequence[tuple[str, bytes | None]]

_CRC = struct.Struct(">I")
_HEADER_SIZE = 61
_NO_HEADERS = b"\x00"


def _headers_blob(headers: HeaderList) -> bytes:
    """headerCount varint + headers, as kafka-python writes them."""
    out = bytearray()
    write = out.append
    encode_varint(len(headers), write)
    for name, value in headers:
        raw = name.encode("utf-8")
        encode_varint(len(raw), write)
        out += raw
        if value is None:
            write(1)  # -1 as a zigzag varint: null
        else:
            encode_varint(len(value), write)
            out += value
    return bytes(out)


def _join(items: Sequence[bytes | None]) -> bytes:
    """The items concatenated, None skipped."""
    try:
        return b"".join(items)  # type: ignore[arg-type]
    except TypeError:  # some None (or not bytes-like: raised again below)
        return b"".join([x for x in items if x is not None])


def _lengths(items: Sequence[bytes | None]) -> list[int]:
    """Byte length of each item, -1 for None."""
    try:
        return list(map(len, items))  # type: ignore[arg-type]
    except TypeError:  # some None
        return [-1 if x is None else len(x) for x in items]


@overload
def encode_records(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    timestamps: I64 | int,
    headers: Sequence[HeaderList] | None,
    max_batch_bytes: int,
    *,
    mutable: Literal[False] = False,
    reuse: bool = False,
) -> bytes: ...


@overload
def encode_records(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    timestamps: I64 | int,
    headers: Sequence[HeaderList] | None,
    max_batch_bytes: int,
    *,
    mutable: bool,
    reuse: bool = False,
) -> bytes | bytearray: ...


def encode_records(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None,
    timestamps: I64 | int,
    headers: Sequence[HeaderList] | None,
    max_batch_bytes: int,
    *,
    mutable: bool = False,
    reuse: bool = False,
) -> bytes | bytearray:
    """Record batches v2 holding one record per value (offsets from 0 within each batch).

    ``values``/``keys`` (None entries are null; ``keys=None``: all null), ``timestamps``:
    ms, one per record (int64 array) or one int for all, ``headers``: one sequence of
    ``(name, value)`` per record or None for none. Records are split into batches of at
    most ``max_batch_bytes`` exactly as kafka-python's builder splits them (a batch always
    takes its first record). ``mutable``: the result may be a new bytearray (no final copy;
    the publish path hands it to ``append``, which patches it in place). ``reuse`` (with
    ``mutable``): the bytearray may be one lent by ``encode_same.give_back``'s pool, to be
    handed back there once written (the publish path). Raises
    RecordTooLargeError if one record alone needs a bigger batch, TypeError on keys/values
    that are not bytes-like.
    """
    n = len(values)
    if n == 0:
        return b""
    # every key one length, every value one length, one timestamp, no headers (what
    # publish and publish_values get): no length lists at all (encode_same.same_size)
    if headers is None and isinstance(timestamps, int) and n <= PACK_MAX:
        fast = same_size(values, keys, n, timestamps, max_batch_bytes, reuse and mutable)
        if fast is not None:
            return fast if mutable or isinstance(fast, bytes) else bytes(fast)
    # _lengths' fast path inline: each Python call saved counts after an fdatasync
    try:
        vl = list(map(len, values))  # type: ignore[arg-type]
    except TypeError:  # some None
        vl = _lengths(values)
    kl: list[int] | None = None
    if keys is not None:
        try:
            kl = list(map(len, keys))  # type: ignore[arg-type]
        except TypeError:
            kl = _lengths(keys)
    vblob = _join(values)
    kblob = b"" if keys is None else _join(keys)
    return _encode_lists(
        n, vl, kl, vblob, kblob, timestamps, headers, max_batch_bytes, mutable=mutable, reuse=reuse
    )


def encode_record_columns(  # noqa: PLR0917 (the columns)
    value_lengths: I64,
    values: Buffer,
    key_lengths: I64 | None,
    keys: Buffer,
    timestamps: I64 | int,
    max_batch_bytes: int,
) -> bytes | bytearray:
    """``encode_records`` for columns already laid out as Arrow lays out a binary column:
    ``value_lengths`` (int64, one per record, -1 for null) and ``values`` (every non-null
    value's bytes back to back, in record order; any buffer: bytes, memoryview, an Arrow
    buffer's memoryview), the same for keys (``key_lengths=None``: every key null). No
    headers. Returns the record batches (byte-identical to ``encode_records`` on the same
    records) without joining or measuring any Python object per record. Raises
    RecordTooLargeError, ValueError if a buffer's size disagrees with its lengths."""
    n, vblob, kblob, same = _columns(value_lengths, values, key_lengths, keys, timestamps)
    if n == 0:
        return b""
    if same is not None:
        fast = encode_same(n, same[1], kblob, same[0], vblob, same[2], max_batch_bytes)  # type: ignore[arg-type]
        if fast is not None:
            return fast
    return _encode_column_lists(
        n, value_lengths, vblob, key_lengths, kblob, timestamps, max_batch_bytes
    )


def encode_record_columns_into(  # noqa: PLR0917 (the columns)
    into: bytearray,
    value_lengths: I64,
    values: Buffer,
    key_lengths: I64 | None,
    keys: Buffer,
    timestamps: I64 | int,
    max_batch_bytes: int,
) -> Iterator[bytes | bytearray | memoryview]:
    """``encode_record_columns``' bytes in pieces: every key one length, every value one
    length and one timestamp, one record batch at a time built at the start of ``into``
    (``encode_same_into``: each piece valid until the next is asked for; ``into`` grows
    to the largest batch); other records, all their batches in one piece. Raises as
    ``encode_record_columns``, when iterated."""
    n, vblob, kblob, same = _columns(value_lengths, values, key_lengths, keys, timestamps)
    if same is not None:
        pieces = encode_same_into(into, n, same[1], kblob, same[0], vblob, same[2], max_batch_bytes)
        if pieces is not None:
            yield from pieces
            return
    if n:  # checked and viewed once (_columns); encode_same_into's None: so is encode_same's
        yield _encode_column_lists(
            n, value_lengths, vblob, key_lengths, kblob, timestamps, max_batch_bytes
        )


def _encode_column_lists(  # noqa: PLR0917 (internal: the columns)
    n: int,
    value_lengths: I64,
    vblob: memoryview,
    key_lengths: I64 | None,
    kblob: memoryview,
    timestamps: I64 | int,
    max_batch_bytes: int,
) -> bytes | bytearray:
    """The general path of the column encoders (``_columns``' views), through length lists."""
    kl = None if key_lengths is None else key_lengths.tolist()
    return _encode_lists(n, value_lengths.tolist(), kl, vblob, kblob, timestamps, None,  # type: ignore[arg-type]
                         max_batch_bytes, mutable=True, reuse=False)  # fmt: skip


def _columns(
    value_lengths: I64, values: Buffer, key_lengths: I64 | None, keys: Buffer, timestamps: I64 | int
) -> tuple[int, memoryview, memoryview, tuple[int, int, int] | None]:
    """(record count, values and keys as byte views, (value length, key length,
    timestamp) when each is one for every record, else None); ValueError if a buffer's
    size disagrees with its lengths."""
    n = len(value_lengths)
    if n == 0:
        return n, memoryview(b""), memoryview(b""), None
    for lengths, blob, name in ((value_lengths, values, "values"), (key_lengths, keys, "keys")):
        want = 0 if lengths is None else int(np.maximum(lengths, 0).sum())
        if memoryview(blob).nbytes != want:
            raise ValueError(f"{name}: {memoryview(blob).nbytes} bytes for lengths summing {want}")
    vblob = memoryview(values).cast("B")
    kblob = memoryview(keys).cast("B")
    if not isinstance(timestamps, int):
        return n, vblob, kblob, None
    # one size each, told by numpy (no list of lengths for _encode_lists to count)
    v0 = int(value_lengths[0])
    k0 = -1 if key_lengths is None else int(key_lengths[0])
    if v0 < 0 or not bool((value_lengths == v0).all()):
        return n, vblob, kblob, None
    if key_lengths is not None and not bool((key_lengths == k0).all()):
        return n, vblob, kblob, None
    return n, vblob, kblob, (v0, k0, timestamps)


def _encode_lists(  # noqa: PLR0917 (internal: the columns)
    n: int,
    vl: list[int],
    kl: list[int] | None,
    vblob: bytes,
    kblob: bytes,
    timestamps: I64 | int,
    headers: Sequence[HeaderList] | None,
    max_batch_bytes: int,
    *,
    mutable: bool,
    reuse: bool,
) -> bytes | bytearray:
    """The batches of ``n`` records given as lengths (-1: null) and joined bytes."""
    no_headers = headers is None or not any(headers)
    ts: I64 | None = None
    one_ts: int | None = None
    if isinstance(timestamps, int):
        one_ts = timestamps  # the int64 column only if the general path needs it
    else:
        ts = np.asarray(timestamps, dtype=np.int64)
    # every key one length, every value one length, no headers: the usual case, encoded as
    # a few 2-D blocks of identical records (_encode_uniform); with one timestamp too (what
    # publish gets), the batch split is arithmetic (encode_same.py)
    uniform = (
        no_headers and vl.count(vl[0]) == n and (kl is None or kl.count(kl[0]) == n)
    )  # fmt: skip
    if uniform and vl[0] >= 0 and (ts is None or ts.shape == (n,)) and len(vblob) == n * vl[0]:
        k0 = -1 if kl is None else kl[0]
        if ts is not None and int(ts.min()) == int(ts.max()):
            one_ts = int(ts[0])
        if one_ts is not None and len(kblob) == n * max(k0, 0):
            fast = encode_same(
                n, k0, kblob, vl[0], vblob, one_ts, max_batch_bytes, reuse=reuse and mutable
            )
            if fast is not None:
                return fast if mutable or isinstance(fast, bytes) else bytes(fast)
    if ts is None:
        ts = np.full(n, timestamps, dtype=np.int64)
    vlen = np.array(vl, dtype=np.int64)
    klen = np.full(n, -1, dtype=np.int64) if kl is None else np.array(kl, dtype=np.int64)
    if no_headers:
        hblobs: list[bytes] | None = None
        hlen = np.ones(n, dtype=np.int64)
    else:
        assert headers is not None
        hblobs = [_headers_blob(h) if h else _NO_HEADERS for h in headers]
        hlen = np.fromiter(map(len, hblobs), np.int64, n)
    fixed = 1 + varint_sizes(klen) + np.maximum(klen, 0) + varint_sizes(vlen)
    fixed += np.maximum(vlen, 0) + hlen  # attributes + key + value + headers
    out: list[bytes] = []
    lo = 0
    while lo < n:
        # sizes of the records from lo on, as if all went into one batch starting at lo;
        # a batch [lo, hi) takes the prefix that fits (kafka-python's builder rule: a
        # record joins while 61 + sizes so far + its size <= max_batch_bytes)
        sizes = _record_sizes(fixed, ts, lo, n)
        ends = np.cumsum(sizes[0] + sizes[1])
        ends += _HEADER_SIZE
        hi = lo + max(1, int(np.searchsorted(ends, max_batch_bytes, side="right")))
        if hi < n:
            m = hi - lo
            sizes = (sizes[0][:m], sizes[1][:m], sizes[2][:m], sizes[3][:m], sizes[4][:m])
            ends = ends[:m]
        out.append(
            _encode_batch(lo, hi, ts, klen, vlen, hblobs, sizes, ends, kblob, vblob, uniform)
        )
        lo = hi
    if len(out[0]) > max_batch_bytes or any(len(b) > max_batch_bytes for b in out[1:]):
        raise RecordTooLargeError(
            f"a message needs a {max(map(len, out))}-byte batch, over {max_batch_bytes} bytes"
        )
    return out[0] if len(out) == 1 else b"".join(out)


def _record_sizes(fixed: I64, ts: I64, lo: int, hi: int) -> tuple[I64, I64, I64, I64, I64]:
    """Per record of ``[lo, hi)`` as the first record of a batch: (body length, its varint
    size, timestamp delta, its varint size, offset delta varint size)."""
    tsd = ts[lo:hi] - ts[lo]
    ts_size = varint_sizes(tsd)
    od_size = varint_sizes(np.arange(hi - lo, dtype=np.int64))
    body = fixed[lo:hi] + ts_size + od_size
    return body, varint_sizes(body), tsd, ts_size, od_size


def _encode_batch(  # noqa: PLR0917 (internal: the columns of one batch)
    lo: int,
    hi: int,
    ts: I64,
    klen: I64,
    vlen: I64,
    hblobs: list[bytes] | None,
    sizes: tuple[I64, I64, I64, I64, I64],
    ends: I64,
    kblob: bytes,
    vblob: bytes,
    uniform: bool,
) -> bytes:
    body, body_size, tsd, ts_size, od_size = sizes
    starts = ends - body - body_size
    total = int(ends[-1])
    buf = bytearray(total)
    out = np.frombuffer(buf, dtype=np.uint8)
    k, v = klen[lo:hi], vlen[lo:hi]
    if uniform and _encode_uniform(out, lo, hi, starts, sizes, int(k[0]), int(v[0]), kblob, vblob):
        return _finish(buf, ts, lo, hi, total)
    encode_varints(out, starts, body, body_size)
    p = starts + body_size + 1  # attributes byte: 0
    if tsd.any():  # else every delta is varint 0: the zero bytes already there
        encode_varints(out, p, tsd, ts_size)
    p += ts_size
    encode_varints(out, p, np.arange(hi - lo, dtype=np.int64), od_size)
    p += od_size
    p = _length_and_bytes(out, p, k, klen, kblob, lo)
    p = _length_and_bytes(out, p, v, vlen, vblob, lo)
    if hblobs is not None:
        h = np.fromiter(map(len, hblobs[lo:hi]), np.int64, hi - lo)
        scatter(out, p, np.frombuffer(b"".join(hblobs[lo:hi]), dtype=np.uint8), h)
    # else every headerCount is varint 0: the zero bytes already there
    return _finish(buf, ts, lo, hi, total)


def _length_and_bytes(  # noqa: PLR0917 (internal: one column of one batch)
    out: U8, p: I64, lens: I64, all_lens: I64, blob: bytes, lo: int
) -> I64:
    """Write each record's keyLength/valueLength varint (``lens``: this batch's, -1 null)
    and its bytes (from ``blob``, which holds every record's from record 0: ``all_lens``)
    at positions ``p``; returns the positions after them."""
    size = varint_sizes(lens)
    encode_varints(out, p, lens, size)
    p = p + size
    n = np.maximum(lens, 0)
    if n.any():
        skip = int(np.maximum(all_lens[:lo], 0).sum()) if lo else 0
        chunk = np.frombuffer(blob, dtype=np.uint8)[skip : skip + int(n.sum())]
        scatter(out, p, chunk, n)
    return p + n


def _finish(buf: bytearray, ts: I64, lo: int, hi: int, total: int) -> bytes:
    """Write the batch header and CRC-32C of records ``[lo, hi)`` encoded in ``buf``."""
    first, last = int(ts[lo]), hi - lo - 1
    max_ts = int(ts[lo:hi].max())
    BATCH_HEADER.pack_into(
        buf, 0, 0, total - 12, 0, 2, 0, 0, last, first, max_ts, -1, -1, -1, hi - lo
    )
    _CRC.pack_into(buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _encode_uniform(  # noqa: PLR0917 (internal)
    out: U8,
    lo: int,
    hi: int,
    starts: I64,
    sizes: tuple[I64, I64, I64, I64, I64],
    klen: int,
    vlen: int,
    kblob: bytes,
    vblob: bytes,
) -> bool:
    """Encode records ``[lo, hi)`` whose keys all have length ``klen`` and values ``vlen``
    (-1: null), no headers, timestamp deltas of one varint size: records with the same
    offset delta varint size are identical in layout, so each such group is one 2-D block
    (rows = records) filled column by column. False (nothing written) when the timestamp
    deltas differ in size."""
    body, _, tsd, ts_size, _ = sizes
    t = int(ts_size[0])
    if int(ts_size.max()) != t or int(ts_size.min()) != t:
        return False
    m = hi - lo
    kn, vn = max(klen, 0), max(vlen, 0)
    keys = np.frombuffer(kblob, dtype=np.uint8)[lo * kn : hi * kn].reshape(m, kn)
    values = np.frombuffer(vblob, dtype=np.uint8)[lo * vn : hi * vn].reshape(m, vn)
    klen_bytes = np.frombuffer(varint_bytes(klen), dtype=np.uint8)
    vlen_bytes = np.frombuffer(varint_bytes(vlen), dtype=np.uint8)
    od = np.arange(m, dtype=np.int64)
    a = 0
    for g, limit in enumerate(OD_LIMITS, 1):
        b = min(m, limit)
        if b <= a:
            continue
        rows = b - a
        head = np.frombuffer(varint_bytes(int(body[a])), dtype=np.uint8)
        width = len(head) + int(body[a])
        start = int(starts[a])
        block = out[start : start + rows * width].reshape(rows, width)
        block[:, : len(head)] = head
        c = len(head) + 1  # attributes: 0
        if tsd[a:b].any():
            varint_columns(block, c, tsd[a:b], t)
        c += t
        varint_columns(block, c, od[a:b], g)
        c += g
        block[:, c : c + len(klen_bytes)] = klen_bytes
        c += len(klen_bytes)
        block[:, c : c + kn] = keys[a:b]
        c += kn
        block[:, c : c + len(vlen_bytes)] = vlen_bytes
        c += len(vlen_bytes)
        block[:, c : c + vn] = values[a:b]
        a = b  # headerCount: the zero byte already there
        if a == m:
            break
    return True
