"""``seglog.columnar.decode_batches``, the numpy record-batch decoder, against kafka-python's
MemoryRecords (no Spark needed)."""

from __future__ import annotations

import struct
import warnings

import pyarrow as pa
import pytest

from seglog.columnar import arrow_schema, decode_batches
from seglog.errors import CorruptRecordError
from seglog.storage import DataDir

from ._data import Row, control_batch, record_batch
from ._transactional import TOPIC as TX_TOPIC
from ._transactional import fill_transactions

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords


def _at(batch: bytes, base_offset: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def _reference(batches: list[bytes], start: int, end: int) -> list[tuple[object, ...]]:
    out = []
    for raw in batches:
        for batch in MemoryRecords(raw):
            if batch.is_control_batch:
                continue
            for r in batch:
                if start <= r.offset < end:
                    headers = [{"key": k, "value": v} for k, v in r.headers]
                    out.append((r.key, r.value, r.offset, r.timestamp, r.timestamp_type, headers))
    return out


def _decoded(batch: pa.RecordBatch) -> list[tuple[object, ...]]:
    d = batch.to_pydict()
    stamps = [round(t.timestamp() * 1000) for t in d["timestamp"]]
    return list(
        zip(
            d["key"], d["value"], d["offset"], stamps, d["timestampType"], d["headers"], strict=True
        )
    )


def _rows(n: int, big: bool = False) -> list[Row]:
    return [
        (
            None if i % 5 == 0 else b"k" * (i if big else 1) + bytes([i % 256]),
            None if i % 7 == 0 else bytes(range(i % 256)) * (40 if big else 1),
            [("h\u00e9", b"v" * i), ("none", None)] if i % 3 == 0 else [],
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_every_codec_equals_memory_records(codec: int) -> None:
    batches = [
        _at(record_batch(_rows(30), codec), 0),
        _at(control_batch(), 30),
        _at(record_batch(_rows(200, big=True), codec), 31),  # multi-byte varints
    ]
    for start, end in ((0, 1 << 62), (5, 29), (29, 32), (100, 150), (231, 300)):
        got = decode_batches(
            batches, topic="t", partition=7, start=start, end=end, include_headers=True
        )
        assert got.schema == arrow_schema(True)
        assert _decoded(got) == _reference(batches, start, end)
        assert set(got.column("topic").to_pylist()) <= {"t"}
        assert set(got.column("partition").to_pylist()) <= {7}


def test_without_headers_and_empty() -> None:
    batches = [record_batch(_rows(10))]
    got = decode_batches(batches, topic="t", partition=0, start=0, end=10)
    assert got.schema == arrow_schema(False)
    assert got.num_rows == 10
    assert decode_batches([], topic="t", partition=0, start=0, end=5).num_rows == 0
    only_control = decode_batches([control_batch()], topic="t", partition=0, start=0, end=5)
    assert only_control.num_rows == 0


def test_corrupt_batches_raise() -> None:
    good = record_batch(_rows(10))
    truncated = good[:-3]
    with pytest.raises(CorruptRecordError):
        decode_batches([truncated], topic="t", partition=0, start=0, end=10)
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 11)  # recordCount one too many
    with pytest.raises(CorruptRecordError):
        decode_batches([bytes(wrong_count)], topic="t", partition=0, start=0, end=20)
    magic = bytearray(good)
    magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_batches([bytes(magic)], topic="t", partition=0, start=0, end=10)
    grown = bytearray(good)
    grown[61] += 2  # first record claims one more byte than it has
    with pytest.raises(CorruptRecordError):
        decode_batches([bytes(grown)], topic="t", partition=0, start=0, end=10)


def test_read_committed_drops_aborted_records_and_markers(tmp_path) -> None:
    """The ``aborted`` input is a Fetch response's ``aborted_transactions``: given for
    all the batches at once or per chunk, only committed records come out."""
    written = fill_transactions(tmp_path)
    with DataDir(tmp_path, create=False, read_only=True) as data_dir:
        log = data_dir.log(TX_TOPIC, 0)
        batches = [bytes(b) for b in log.batches(0, written.lso)]
        aborted = log.aborted_transactions(0, written.lso)
        assert len(aborted) == 12
        whole = decode_batches(
            batches, topic="t", partition=0, start=0, end=written.lso, aborted=aborted
        )
        assert whole.column("offset").to_pylist() == written.committed
        uncommitted = decode_batches(batches, topic="t", partition=0, start=0, end=written.end)
        assert uncommitted.column("offset").to_pylist() == [
            o for o in written.records if o < written.lso
        ]
        got: list[int] = []
        for i in range(0, len(batches), 4):  # fetches of 4 batches
            chunk = batches[i : i + 4]
            first = struct.unpack_from(">q", chunk[0])[0]
            part = decode_batches(
                chunk,
                topic="t",
                partition=0,
                start=first,
                end=written.lso,
                aborted=log.aborted_transactions(first, written.lso),
            )
            got += part.column("offset").to_pylist()
        assert got == written.committed
