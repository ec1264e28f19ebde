"""The vectorised publish/consume paths against kafka-python's record builder and decoder.

Correctness only (speed lives in ``python -m seglog.bench.storage``): the fast encoder must
produce the bytes of kafka-python's ``DefaultRecordBatchBuilder``, the columnar decoder
must give what ``MemoryRecords`` gives, and the Log entry points must round-trip (those
tests take ``make_log``: on disk and in memory).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError, RecordTooLargeError
from seglog.storage import (
    OFFSET_OLDEST,
    Log,
    Message,
    RecordColumns,
    decode_columns,
    encode_record_columns,
    encode_record_columns_into,
    encode_records,
    open_log,
)
from seglog.storage.record.message import encode_messages, encode_messages_reference

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords
    from kafka.record.util import calc_crc32c

MakeLog = Callable[..., Log]

HYPO = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

header = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=40))
message = st.builds(
    Message,
    timestamp=st.integers(0, 1 << 45) | st.sampled_from([0, 1, 1_700_000_000_000]),
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(header, max_size=3).map(tuple),
)


def _reference_batches(data: bytes) -> list[object]:
    records = MemoryRecords(data)
    batches = []
    while (batch := records.next_batch()) is not None:
        batches.append(batch)
    return batches


def _reference(data: bytes, start: int = 0, end: int = 1 << 62) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        if batch.is_control_batch:
            continue
        for r in batch:
            if start <= r.offset < end:
                out.append(
                    (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple(r.headers))
                )
    return out


def _decoded(cols: RecordColumns) -> list[tuple[object, ...]]:
    return list(
        zip(
            cols.offsets.tolist(),
            cols.timestamps.tolist(),
            cols.timestamp_types.tolist(),
            cols.keys(),
            cols.values(),
            cols.headers(),
            strict=True,
        )
    )


def _at(batch: bytes, base_offset: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def _log_append_time(batch: bytes, now: int) -> bytes:
    buf = bytearray(batch)
    (attrs,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attrs | 0x08)
    struct.pack_into(">q", buf, 35, now)
    struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _control(base_offset: int) -> bytes:
    buf = bytearray(encode_messages([Message(timestamp=5, key=b"\0\0\0\1", value=b"\0" * 6)], 1000))
    (attrs,) = struct.unpack_from(">h", buf, 21)
    struct.pack_into(">h", buf, 21, attrs | 0x30)
    struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    return _at(bytes(buf), base_offset)


# -- encoding ---------------------------------------------------------------------------


@HYPO
@given(st.lists(message, min_size=1, max_size=90), st.sampled_from([1 << 20, 2000, 400]))
def test_encoder_bytes_equal_kafka_python(messages: list[Message], max_bytes: int) -> None:
    try:
        want: bytes | type[Exception] = encode_messages_reference(messages, max_bytes)
    except RecordTooLargeError:
        want = RecordTooLargeError
    try:
        got: bytes | type[Exception] = encode_messages(messages, max_bytes)
    except RecordTooLargeError:
        got = RecordTooLargeError
    assert got == want


@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000, 9000])
def test_encoder_varint_boundaries(n: int) -> None:
    # offset deltas cross 1->2->3 byte varints at 64 and 8192; timestamps spread widely
    msgs = [
        Message(
            timestamp=(1 << 41) + i * 977, key=None if i % 3 else b"k%d" % i, value=b"v" * (i % 200)
        )
        for i in range(n)
    ]
    data = encode_messages(msgs, 1 << 24)
    assert data == encode_messages_reference(msgs, 1 << 24)
    got = [(r[0], r[1], r[3], r[4]) for r in _reference(data)]
    assert got == [(i, m.timestamp, m.key, m.value) for i, m in enumerate(msgs)]


@pytest.mark.parametrize(
    ("n", "key_len", "value_len", "spread", "max_bytes"),
    [
        (9000, 8, 100, 0, 1 << 24),  # offset deltas of 1, 2 and 3 bytes, one timestamp
        (300, None, 0, 1, 1 << 20),  # null keys, empty values, 1-byte timestamp deltas
        (200, 3, None, 10**9, 1 << 20),  # null values, timestamp deltas of mixed sizes
        (5000, 8, 100, 0, 100_000),  # split into several batches
    ],
)
def test_encoder_uniform_records(
    n: int, key_len: int | None, value_len: int | None, spread: int, max_bytes: int
) -> None:
    msgs = [
        Message(
            timestamp=1_700_000_000_000 + (i * spread) % 997_000,
            key=None if key_len is None else (b"%08d" % i)[-key_len:],
            value=None if value_len is None else bytes([i % 256]) * value_len,
        )
        for i in range(n)
    ]
    assert encode_messages(msgs, max_bytes) == encode_messages_reference(msgs, max_bytes)


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 200, 8191, 8193, 8300])
@pytest.mark.parametrize("key_len", [None, 0, 8, 130])
@pytest.mark.parametrize("value_len", [0, 100, 300])
@pytest.mark.parametrize("max_bytes", [1 << 24, 70_000, 2_000, 400, 150])
def test_encoder_same_size_records_one_timestamp(
    n: int, key_len: int | None, value_len: int, max_bytes: int
) -> None:
    """The arithmetic batch split of ``_encode_same`` (one timestamp, every key and value
    one length: what publish gets most) against kafka-python's builder, including batch
    splits inside each offset delta varint size and records too large for any batch."""
    if n > 300 and max_bytes < 2_000:
        n = 300  # thousands of tiny batches through kafka-python's builder: slow
    msgs = [
        Message(
            timestamp=1_700_000_000_123,
            key=None if key_len is None else bytes([i % 251]) * key_len,
            value=bytes([i % 256]) * value_len,
        )
        for i in range(n)
    ]
    try:
        want: bytes | type[Exception] = encode_messages_reference(msgs, max_bytes)
    except RecordTooLargeError:
        want = RecordTooLargeError
    try:
        got: bytes | type[Exception] = encode_messages(msgs, max_bytes)
    except RecordTooLargeError:
        got = RecordTooLargeError
    assert got == want


def test_encoder_record_too_large() -> None:
    with pytest.raises(RecordTooLargeError):
        encode_messages([Message(value=b"x" * 500)], 300)


def test_encoder_negative_timestamp_is_now() -> None:
    data = encode_messages([Message(value=b"a"), Message(value=b"b", timestamp=7)], 1000)
    (first,) = struct.unpack_from(">q", data, 27)
    assert first > 1_600_000_000_000
    assert [r[1] for r in _reference(data)] == [first, 7]


# -- decoding ---------------------------------------------------------------------------


@HYPO
@given(
    st.lists(st.lists(message, min_size=1, max_size=80), min_size=1, max_size=4),
    st.lists(st.sampled_from([0, 0, 1, 2, 3, 4]), min_size=4, max_size=4),
    st.integers(0, 120),
    st.integers(0, 400),
    st.booleans(),
)
def test_decoder_equals_memory_records(
    groups: list[list[Message]], codecs: list[int], start: int, span: int, control: bool
) -> None:
    parts, offset = [], 0
    for i, group in enumerate(groups):
        batch = encode_messages_reference(group, 1 << 24, codecs[i])
        if i == 1:
            batch = _log_append_time(batch, 1_234_567)
        parts.append(_at(batch, offset))
        offset += len(group)
        if control and i == 0:
            parts.append(_control(offset))
            offset += 1
    data = b"".join(parts)
    cols = decode_columns(data, start, start + span)
    assert _decoded(cols) == _reference(data, start, start + span)
    # positions ascend with the rows (Arrow's zero-copy cutting relies on it)
    assert (np.diff(cols.value_positions) > 0).all()
    assert (cols.key_positions < cols.value_positions).all()
    assert _decoded(decode_columns(parts)) == _reference(data)


def test_decoder_uniform_runs_and_mixed_sizes() -> None:
    uniform = [Message(timestamp=10, key=b"key-%04d" % i, value=b"x" * 100) for i in range(3000)]
    mixed = [Message(timestamp=10 + i, value=b"y" * (i % 37)) for i in range(500)]
    data = _at(encode_messages(uniform, 1 << 24), 0) + _at(encode_messages(mixed, 1 << 24), 3000)
    cols = decode_columns(data)
    assert _decoded(cols) == _reference(data)
    assert cols.next_offset == 3500


def test_decoder_max_count_and_next_offset() -> None:
    data = _at(
        encode_messages([Message(timestamp=1, value=b"%d" % i) for i in range(50)], 10000), 100
    )
    cols = decode_columns(data, start=110, max_count=5)
    assert cols.offsets.tolist() == [110, 111, 112, 113, 114]
    assert cols.next_offset == 115
    assert decode_columns(data, start=110).next_offset == 150
    assert len(decode_columns(data, start=0, end=100)) == 0


def test_packed_columns_layout() -> None:
    msgs = [
        Message(timestamp=1, key=None if i % 4 == 0 else b"k%d" % i, value=b"v" * i)
        for i in range(200)
    ]
    cols = decode_columns(encode_messages(msgs, 1 << 20))
    offsets, data = cols.packed_values()
    got = [bytes(data[offsets[i] : offsets[i + 1]]) for i in range(len(cols))]
    assert got == [m.value for m in msgs]
    koffsets, kdata = cols.packed_keys()
    keys = [bytes(kdata[koffsets[i] : koffsets[i + 1]]) for i in range(len(cols))]
    assert keys == [m.key or b"" for m in msgs]
    assert (cols.key_lengths < 0).tolist() == [m.key is None for m in msgs]


def test_decoder_corrupt_input_raises() -> None:
    good = encode_messages(
        [Message(timestamp=1, key=b"k", value=b"v" * 20) for _ in range(30)], 10000
    )
    with pytest.raises(CorruptRecordError):
        decode_columns(good[:-3])
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 31)
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(wrong_count))
    fewer = bytearray(good)
    struct.pack_into(">i", fewer, 57, 29)
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(fewer))
    magic = bytearray(good)
    magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_columns(bytes(magic))
    grown = bytearray(good)
    grown[61] += 2
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(grown))
    overlong = bytearray(good)
    overlong[61 + 3 : 61 + 14] = b"\xff" * 11  # a varint that never ends
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(overlong))


# -- the Log entry points -----------------------------------------------------------------


def test_publish_values_and_consume_columns(make_log: MakeLog) -> None:
    with make_log() as log:
        assert (
            log.publish_values([b"a", b"bb", None], keys=[b"x", None, b"z"], timestamp_ms=42) == 3
        )
        assert log.publish_values([b"c" * 100] * 2000, timestamp_ms=np.arange(2000) + 1000) == 2003
        assert log.publish([Message(value=b"m", headers=(("h", b"1"),))]) == 2004
        first = log.consume(OFFSET_OLDEST, 3)[1]
        assert [(m.offset, m.timestamp, m.key, m.value) for m in first] == [
            (0, 42, b"x", b"a"),
            (1, 42, None, b"bb"),
            (2, 42, b"z", None),
        ]
        cols = log.consume_columns(1, 5000)
        assert cols.offsets.tolist() == list(range(1, 2004))
        assert cols.timestamps[2:].tolist()[:-1] == list(range(1000, 3000))
        assert cols.next_offset == 2004
        nxt, msgs = log.consume(2000, 10)
        assert nxt == 2004
        assert msgs[-1].headers == (("h", b"1"),)
        assert [m.value for m in msgs[:-1]] == [b"c" * 100] * 3
        assert len(log.consume_columns(2004, 10)) == 0
        assert log.consume_columns(2004, 10).next_offset == 2004


def test_consume_columns_across_many_chunks(make_log: MakeLog) -> None:
    with make_log(segment_bytes=300_000) as log:
        for i in range(30):
            log.publish_values([b"%d-%d" % (i, j) * 10 for j in range(1000)], timestamp_ms=i)
        cols = log.consume_columns(OFFSET_OLDEST, 30_000)
        assert cols.offsets.tolist() == list(range(30_000))
        assert cols.values()[12_345] == b"12-345" * 10
        offset, seen = 500, 0
        while offset < 30_000:
            offset, msgs = log.consume(offset, 7000)
            seen += len(msgs)
        assert seen == 29_500


def _kafka_python_reads(seg: Path) -> None:
    """Read the segment file ``seg`` with kafka-python in a separate interpreter."""
    code = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "from kafka.record.memory_records import MemoryRecords\n"
        "r = MemoryRecords(open(sys.argv[1], 'rb').read()); b = r.next_batch()\n"
        "ok = b.validate_crc(); print(sum(1 for _ in b), ok)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(seg)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["100", "True"]


def test_messages_written_fast_read_by_kafka_python(make_log: MakeLog, backend: str) -> None:
    with make_log() as log:
        log.publish([Message(timestamp=9, key=b"k%d" % i, value=b"v%d" % i) for i in range(100)])
        seg = log.directory / ("0" * 20 + ".log")
        _kafka_python_reads(seg)  # the open log's file
    if backend == "disk":
        _kafka_python_reads(seg)  # and as close left it


def test_read_only_consume_past_known_end_refreshes(make_log: MakeLog) -> None:
    with make_log() as writer:
        writer.publish_values([b"a"] * 10)
        with open_log(writer.directory, read_only=True) as reader:
            writer.publish_values([b"b"] * 10)
            nxt, msgs = reader.consume(15, 10)  # beyond what the reader had seen
            assert (nxt, [m.value for m in msgs]) == (20, [b"b"] * 5)
            assert reader.consume_columns(8, 4).offsets.tolist() == [8, 9, 10, 11]


_blob = st.one_of(st.none(), st.binary(max_size=40))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(_blob, _blob), min_size=1, max_size=300),
    st.booleans(),
    st.sampled_from([1 << 20, 2000, 400]),
)
def test_column_encoder_bytes_equal_the_list_encoder(
    rows: list[tuple[bytes | None, bytes | None]], uniform: bool, max_bytes: int
) -> None:
    """encode_record_columns (Arrow's layout: lengths, -1 for null, and the non-null bytes
    back to back) gives the bytes of encode_records on the same records, batch by batch."""
    if uniform:  # the _encode_same path: one key length, one value length
        rows = [(b"k%04d" % i, b"v" * 30) for i in range(len(rows) * 20)]
    keys, values = [k for k, _ in rows], [v for _, v in rows]

    def lengths(items: list[bytes | None]) -> np.ndarray:
        return np.array([-1 if x is None else len(x) for x in items], dtype=np.int64)

    def joined(items: list[bytes | None]) -> memoryview:
        return memoryview(b"".join(x for x in items if x is not None))

    try:
        expected = encode_records(values, keys, 1_700_000_000_000, None, max_bytes)
    except RecordTooLargeError:
        with pytest.raises(RecordTooLargeError):
            encode_record_columns(
                lengths(values), joined(values), lengths(keys), joined(keys),
                1_700_000_000_000, max_bytes,
            )  # fmt: skip
        return
    got = encode_record_columns(
        lengths(values), joined(values), lengths(keys), joined(keys), 1_700_000_000_000, max_bytes
    )
    assert bytes(got) == expected
    # in pieces, one batch at a time in a buffer given (reused: dirty, longer than needed)
    into = bytearray(b"\xff" * 7)
    for _ in range(2):
        pieces = encode_record_columns_into(
            into, lengths(values), joined(values), lengths(keys), joined(keys),
            1_700_000_000_000, max_bytes,
        )  # fmt: skip
        got_pieces = []
        for piece in pieces:
            if uniform:  # each batch a view of the buffer, not a copy
                assert isinstance(piece, memoryview)
                assert piece.obj is into
            got_pieces.append(bytes(piece))
            del piece  # the view exports the buffer: it cannot grow while the view lives
        assert b"".join(got_pieces) == expected
        if uniform:
            assert len(got_pieces) == len(_reference_batches(expected))
        into.extend(b"\xee" * 100)
    with pytest.raises(ValueError, match="values"):
        encode_record_columns(lengths(values), memoryview(b"x" * 10_000), None, b"", 0, max_bytes)


@pytest.mark.parametrize("n", [1, 3, 64, 1000, 5000])
@pytest.mark.parametrize("value_len", [100, 253, 254, 300])
def test_encoder_same_size_proof(n: int, value_len: int) -> None:
    """Same-size keys and values are packed by a cached ``struct.Struct`` of ``"p"`` codes
    and proven one size by the length bytes it writes (``encode_same.same_size``), with no
    ``len()`` per item: any other length anywhere (first and last alike, the total the
    same, NULs where padding would be), bytearrays, memoryviews, lengths above 253 and
    counts above the packer cache's limit must all give kafka-python's bytes."""
    ts = 1_700_000_000_000
    keys: list[bytes | bytearray | memoryview | None] = [b"k%07d" % i for i in range(n)]
    values: list[bytes | bytearray | memoryview | None] = [
        bytes([i % 256]) * value_len for i in range(n)
    ]

    def check() -> None:
        msgs = [
            Message(timestamp=ts, key=None if k is None else bytes(k), value=bytes(v or b""))
            for k, v in zip(keys, values, strict=True)
        ]
        want = encode_messages_reference(msgs, 1 << 24)
        assert encode_records(values, keys, ts, None, 1 << 24) == want
        assert encode_messages(msgs, 1 << 24) == want

    check()
    values[0], keys[-1] = bytearray(values[0] or b""), bytearray(keys[-1] or b"")
    check()  # bytes and bytearray: packed
    if n >= 3:  # first and last of one length; the total still n x value_len bytes
        values[1] = b"\0" * (value_len - 1)  # the NUL padding "p" would write...
        values[2] = b"\0" + b"x" * value_len  # ...and the next one's NUL after it
        check()
        values[1], values[2] = b"x" * (value_len + 1), b"y" * (value_len - 1)
        check()
        values[1] = values[2] = b"z" * value_len
        keys[1], keys[2] = b"k" * 9, b"k" * 7
        check()
        keys[1] = None
        check()
        keys[1] = b"k" * 8
    values[n // 2] = memoryview(bytes(values[n // 2] or b""))
    check()  # a memoryview: joined instead
    with pytest.raises(TypeError):
        encode_records(["x" * 100] * n, None, ts, None, 1 << 24)  # type: ignore[list-item]


def test_encode_messages_columns_complete() -> None:
    """Messages are transposed by a non-strict zip (a Message always has five fields):
    every column must still hold every message, and a malformed (tuple.__new__) Message
    of fewer fields is a ValueError, not a short batch."""
    msgs = [Message(timestamp=5, key=b"k%03d" % i, value=b"v" * (i % 7)) for i in range(300)]
    assert encode_messages(msgs, 1 << 20) == encode_messages_reference(msgs, 1 << 20)
    short = tuple.__new__(Message, (-1, 5, b"k", b"v"))
    with pytest.raises(ValueError, match="4 fields"):
        encode_messages([*msgs, short], 1 << 20)
