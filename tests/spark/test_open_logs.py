"""Planning and executor reads keep read-only logs open and refresh them: new records,
new segments and a topic deleted and created again are all seen without a reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.errors import CorruptRecordError
from seglog.spark._options import ReadOptions
from seglog.spark._reader import OffsetRangePartition, _open_logs, log_bounds, read_range
from seglog.storage import DataDir, Message


def _publish(path: Path, count: int, start: int = 0) -> None:
    with DataDir(path) as data_dir:
        if "t" not in data_dir.topics():
            data_dir.create_topic("t", 1, {"segment.bytes": "2048"})
        log = data_dir.log("t", 0)
        for i in range(start, start + count, 5):
            log.publish([Message(value=b"v%06d" % j * 8) for j in range(i, i + 5)])
        log.sync()


def _values(path: Path, start: int, end: int) -> list[bytes]:
    part = OffsetRangePartition(str(path), "t", 0, start, end, False)
    return [v for batch in read_range(part) for v in batch.column("value").to_pylist()]


def test_open_logs_follow_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "data"
    options = ReadOptions.parse({"path": str(path), "subscribe": "t"}, streaming=True)
    _publish(path, 20)
    assert log_bounds(str(path), options) == {("t", 0): (0, 20)}
    first = _open_logs.log(str(path), "t", 0)
    _publish(path, 200, start=20)  # many more segments (2 KiB each)
    assert log_bounds(str(path), options) == {("t", 0): (0, 220)}
    assert _open_logs.log(str(path), "t", 0) is first  # the same Log, refreshed
    assert _values(path, 215, 220) == [b"v%06d" % j * 8 for j in range(215, 220)]
    # deleted and created again: a new topic id, so the directory is reopened
    with DataDir(path) as data_dir:
        data_dir.delete_topic("t")
    _publish(path, 10, start=1000)
    assert log_bounds(str(path), options) == {("t", 0): (0, 10)}
    assert _open_logs.log(str(path), "t", 0) is not first
    assert _values(path, 0, 10) == [b"v%06d" % j * 8 for j in range(1000, 1010)]


def test_path_reads_check_crcs_unless_told_not_to(tmp_path: Path) -> None:
    path = tmp_path / "data"
    _publish(path, 100)  # 5 records per batch, segments of 2 KiB
    seg = path / "t-0" / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    length = int.from_bytes(data[8:12], "big", signed=True)
    data[length + 12 - 2] ^= 0x04  # the first batch's last value byte (offsets 0-4)
    seg.write_bytes(bytes(data))
    options = ReadOptions.parse({"path": str(path), "subscribe": "t"}, streaming=False)
    assert options.check_crcs
    with pytest.raises(CorruptRecordError, match="offset 0: CRC-32C"):
        _values(path, 0, 10)
    assert _values(path, 5, 10) == [b"v%06d" % j * 8 for j in range(5, 10)]
    off = ReadOptions.parse(
        {"path": str(path), "subscribe": "t", "checkCrcs": "false"}, streaming=False
    )
    assert not off.check_crcs
    part = OffsetRangePartition(str(path), "t", 0, 0, 10, False, off.check_crcs)
    values = [v for batch in read_range(part) for v in batch.column("value").to_pylist()]
    assert len(values) == 10
    assert values[4] != b"v%06d" % 4 * 8  # the flipped bit, returned as data
    with pytest.raises(ValueError, match="checkCrcs"):
        ReadOptions.parse({"path": str(path), "subscribe": "t", "checkCrcs": "no"}, streaming=False)
