"""CRC-32C checks on the read paths (Kafka's consumer check.crcs): a bit flipped in a
closed segment's stored batch, which a reopen does not rescan, is an error, not data.
Run on disk and in memory (the bit flipped in the open log's file); the reopen on disk."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from seglog.errors import CorruptRecordError
from seglog.storage import Log, LogConfig, Message, decode_columns, open_log
from seglog.storage.record.batch import check_batch_crcs

from ._batches import make_batch

MakeLog = Callable[..., Log]


def _batch_positions(data: bytes) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of each batch of a segment file."""
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, length + 12))
        pos += length + 12
    return out


def _corrupt_log(log: Log) -> int:
    """Fill ``log`` with 40 messages (one per batch, several segments), then flip one bit
    of a value in the first segment's third batch, in place in its file (the page cache
    both backends read through); returns that batch's offset."""
    for i in range(40):
        log.publish([Message(key=b"k%d" % (i % 4), value=b"value-%04d" % i, timestamp=i)])
    assert len(log.segments()) > 2
    seg = log.directory / f"{0:020d}.log"
    data = seg.read_bytes()
    pos, base, size = _batch_positions(data)[2]
    assert base == 2
    flip = pos + size - 3  # inside the value: "value-0002" -> "value-0012"
    with seg.open("r+b") as f:
        f.seek(flip)
        f.write(bytes([data[flip] ^ 0x01]))
    return base


def _reads_raise_naming(log: Log, bad: int) -> None:
    assert log.config.check_crcs
    with pytest.raises(CorruptRecordError, match=f"offset {bad}: CRC-32C"):
        log.consume(0, 100)
    with pytest.raises(CorruptRecordError, match=f"offset {bad}: CRC-32C"):
        log.consume_columns(0, 100)
    with pytest.raises(CorruptRecordError, match=f"offset {bad}: CRC-32C"):
        log.get(bad)
    with pytest.raises(CorruptRecordError, match=f"offset {bad}: CRC-32C"):
        log.consume_by_key(b"k2", 0, 10)
    # the batches around it are fine
    assert log.get(bad - 1).value == b"value-0001"
    assert log.get(bad + 1).value == b"value-0003"
    assert [m.offset for m in log.consume(bad + 1, 5)[1]] == [3, 4, 5, 6, 7]
    assert log.consume(0, 2)[1][-1].offset == 1  # stops before the damaged batch
    # raw reads (the broker's Fetch: the consumer checks) are unchanged
    with pytest.raises(CorruptRecordError):
        check_batch_crcs(log.read(bad, 1))


def _reads_return_the_flipped_bit(log: Log, bad: int) -> None:
    _, msgs = log.consume(0, 100)
    assert len(msgs) == 40
    assert msgs[bad].value == b"value-0012"  # the flipped bit, returned as data
    assert log.consume_columns(0, 100).values()[bad] == b"value-0012"
    assert log.get(bad).value == b"value-0012"
    assert log.consume_by_key(b"k2", 0, 10)[1][0].offset == bad


def test_reads_of_a_flipped_bit_raise_naming_the_offset(make_log: MakeLog, backend: str) -> None:
    with make_log(segment_bytes=1024, key_index=True) as log:
        path = log.directory
        bad = _corrupt_log(log)
        _reads_raise_naming(log, bad)
    if backend == "disk":
        with open_log(path, key_index=True) as log:  # clean shutdown: no CRC scan at open
            _reads_raise_naming(log, bad)


def test_check_crcs_false_returns_the_data(make_log: MakeLog, backend: str) -> None:
    with make_log(segment_bytes=1024, key_index=True, check_crcs=False) as log:
        path = log.directory
        bad = _corrupt_log(log)
        _reads_return_the_flipped_bit(log, bad)
    if backend == "disk":
        with open_log(path, key_index=True, check_crcs=False) as log:
            _reads_return_the_flipped_bit(log, bad)


def test_decode_columns_checks_by_default() -> None:
    batch = bytearray(make_batch(3))
    batch[-2] ^= 0x10
    with pytest.raises(CorruptRecordError, match="offset 0: CRC-32C"):
        decode_columns(bytes(batch))
    assert len(decode_columns(bytes(batch), check_crcs=False)) == 3
    assert len(decode_columns(make_batch(3))) == 3


def test_check_crcs_config() -> None:
    assert LogConfig().check_crcs
    cfg = LogConfig.from_kafka_configs({"seglog.check.crcs": "false"})
    assert not cfg.check_crcs
    assert LogConfig.from_kafka_configs(cfg.to_kafka_configs()) == cfg
