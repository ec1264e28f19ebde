"""Append/read round trips, offsets, roll, reopen.

Tests taking ``make_log`` run on disk and in memory (``memory_log``); the reopen, lock and
closed-log tests are about a directory on disk and stay disk-only (``tmp_path``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from kafka.record.memory_records import MemoryRecords
from tests._wait import wait_until

from seglog.errors import DataDirLockedError, InvalidOffsetError, LogClosedError, ReadOnlyError
from seglog.storage import Log, LogConfig
from seglog.storage.record.batch import parse_header

from ._batches import make_batch
from ._threads import in_sync_point


def _records(data: bytes) -> list[tuple[int, bytes | None]]:
    mr = MemoryRecords(data)
    out = []
    while (b := mr.next_batch()) is not None:
        out.extend((r.offset, r.value) for r in b)
    return out


def test_append_assigns_offsets_and_reads_back(make_log):
    with make_log() as log:
        infos = [log.append(make_batch(3, tag=b"%d" % i)) for i in range(5)]
        assert [i.base_offset for i in infos] == [0, 3, 6, 9, 12]
        assert infos[-1].last_offset == 14
        assert infos[0].record_count == 3
        assert log.log_end_offset == 15
        assert log.sync() == 15
        assert log.high_watermark == 15
        data = log.read(0, 1 << 20)
        recs = _records(data)
        assert [o for o, _ in recs] == list(range(15))
        assert recs[4][1] is not None
        assert recs[4][1].startswith(b"1-1-")
        # read from inside a batch starts with that batch
        assert parse_header(log.read(7, 1)).base_offset == 6
        # at least one batch even when max_bytes is tiny, only one
        one = log.read(7, 1)
        assert len(one) == parse_header(one).size
        assert log.read(15, 100) == b""
        with pytest.raises(InvalidOffsetError):
            log.read(16, 100)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_stored_unchanged_except_base_offset(make_log, codec):
    batch = make_batch(10, codec=codec, value_size=200)
    with make_log() as log:
        log.append(make_batch(2))
        info = log.append(batch)
        log.sync()
        assert info.base_offset == 2
        stored = log.read(2, 1 << 20)
        assert stored[8:] == batch[8:]
        assert parse_header(stored).base_offset == 2
        assert [o for o, _ in _records(stored)] == list(range(2, 12))


def test_multi_batch_append_is_one_unit(make_log):
    with make_log() as log:
        info = log.append(make_batch(2) + make_batch(3) + make_batch(1))
        assert (info.base_offset, info.last_offset, info.record_count) == (0, 5, 6)
        log.sync()
        assert [o for o, _ in _records(log.read(0, 1 << 20))] == list(range(6))


def test_roll_by_segment_bytes(make_log, backend):
    cfg = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    with make_log(segment_bytes=1000, index_interval_bytes=100) as log:
        for _ in range(30):
            log.append(make_batch(2, value_size=50))
        log.sync()
        assert log.stat()["segments"] > 3
        for name in os.listdir(log.directory):
            if name.endswith(".log"):
                assert os.path.getsize(log.directory / name) <= 1000
        assert [o for b in log.batches() for o, _ in _records(bytes(b))] == list(range(60))
    if backend == "memory":
        return  # gone with the close; on disk, a reopen finds every offset
    with Log.open(log.directory, cfg) as log:
        assert log.log_end_offset == 60
        for off in range(60):
            assert parse_header(log.read(off, 1)).base_offset == off - off % 2


def test_roll_by_segment_ms(make_log):
    with make_log(segment_ms=30) as log:
        log.append(make_batch(1))
        log.append(make_batch(1))
        time.sleep(0.05)
        log.append(make_batch(1))
        assert log.stat()["segments"] == 2
        assert (log.directory / "00000000000000000002.log").exists()


def test_reopen_after_clean_close(tmp_path):
    with Log.open(tmp_path / "p", create=True) as log:
        log.append(make_batch(4))
        assert log.read(0, 1 << 20) == b"" or log.high_watermark > 0  # not yet durable
        log.sync()
        before = log.read(0, 1 << 20)
        assert not log.clean_start  # a new directory
    assert (tmp_path / "p" / ".clean_shutdown").exists()
    with Log.open(tmp_path / "p", read_only=True) as reader:
        assert not reader.clean_start  # a reader never consumes the marker
    with Log.open(tmp_path / "p") as log:
        assert log.clean_start
        assert not (tmp_path / "p" / ".clean_shutdown").exists()
        assert log.log_end_offset == 4
        assert log.read(0, 1 << 20) == before
        assert log.append(make_batch(1)).base_offset == 4


def test_clean_start_false_after_a_crash(tmp_path):
    """A writer that never closed (the process died) leaves no marker: the next writer's
    ``clean_start`` is False, so callers know unsynced appends may be gone."""
    code = (
        "import os, sys\n"
        "from seglog.storage import Log\n"
        "from tests.storage._batches import make_batch\n"
        "log = Log.open(sys.argv[1])\n"
        "log.append(make_batch(2))\n"
        "os._exit(0)\n"
    )
    with Log.open(tmp_path / "p", create=True) as log:
        log.append(make_batch(1))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "p")], check=True, env=env)
    with Log.open(tmp_path / "p") as log:
        assert not log.clean_start
        assert log.log_end_offset == 3  # kill -9 keeps the page cache


def test_closed_and_read_only_errors(tmp_path):
    log = Log.open(tmp_path / "p", create=True)
    log.append(make_batch(1))
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(make_batch(1))
    with pytest.raises(LogClosedError):
        log.read(0, 10)
    with Log.open(tmp_path / "p", read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.append(make_batch(1))
        assert ro.log_end_offset == 1


def test_offset_for_time(make_log, backend):
    with make_log(index_interval_bytes=64) as log:
        for i in range(20):
            log.append(make_batch(3, timestamp=1000 * (i + 1)))
        log.sync()
        assert log.offset_for_time(0) == (0, 1000)
        assert log.offset_for_time(1000) == (0, 1000)
        assert log.offset_for_time(1001) == (1, 1001)
        assert log.offset_for_time(5000) == (12, 5000)
        assert log.offset_for_time(5002) == (14, 5002)
        assert log.offset_for_time(5003) == (15, 6000)
        assert log.offset_for_time(20002) == (59, 20002)
        assert log.offset_for_time(20003) is None
    if backend == "memory":
        return  # gone with the close; on disk, the time index survives a reopen
    with Log.open(log.directory) as log:
        assert log.offset_for_time(5003) == (15, 6000)


def test_log_append_time(make_log):
    with make_log(message_timestamp_type="LogAppendTime") as log:
        before = time.time_ns() // 1_000_000
        info = log.append(make_batch(2, timestamp=5))
        assert info.log_append_time_ms >= before
        log.sync()
        stored = log.read(0, 1 << 20)
        h = parse_header(stored)
        assert h.attributes & 0x08
        assert h.max_timestamp == info.log_append_time_ms
        mr = MemoryRecords(stored)
        b = mr.next_batch()
        assert b.validate_crc()
        assert [r.timestamp for r in b] == [info.log_append_time_ms] * 2


def test_one_writer_per_log_directory(tmp_path):
    with Log.open(tmp_path / "p", create=True) as log:
        with pytest.raises(DataDirLockedError):
            Log.open(tmp_path / "p")
        with Log.open(tmp_path / "p", read_only=True) as ro:  # readers take no lock
            assert ro.log_end_offset == log.log_end_offset
    with Log.open(tmp_path / "p") as again:  # released by close
        assert again.log_end_offset == 0


def test_readers_see_only_durable_data(make_log):
    """Hold back the fsync thread (it needs the log lock for its sync point): appended
    data stays invisible to readers until it is fsynced (a memory log relaxes flush by
    default; ``flush_ms=None`` asks for the default policy on both)."""
    with make_log(flush_ms=None) as log:
        log.append(make_batch(2))
        log.sync()
        with log._state.lock:  # internals: holding the write lock stalls the fsync round
            log.append(make_batch(3))
            # the fsync thread's round has started and waits for the lock we hold
            wait_until(lambda: in_sync_point(log), timeout=10, message="no fsync round began")
            assert log.log_end_offset == 5
            assert log.high_watermark == 2
            assert [parse_header(b).base_offset for b in log.batches()] == [0]
            assert log.read(2, 1000) == b""
            assert log.consume(0, 10)[0] == 2
        assert log.sync() == 5
        assert log.high_watermark == 5
        assert log.read(2, 1000) != b""


def test_batch_larger_than_segment_bytes_gets_its_own_segment(make_log):
    with make_log(segment_bytes=500) as log:
        log.append(make_batch(1))
        big = make_batch(10, value_size=100)
        assert len(big) > 500
        assert log.append(big).base_offset == 1
        log.append(make_batch(1))
        log.sync()
        assert [n for n in sorted(os.listdir(log.directory)) if n.endswith(".log")] == [
            f"{0:020d}.log",
            f"{1:020d}.log",
            f"{11:020d}.log",
        ]
        assert log.read(5, 10)[8:] == big[8:]
