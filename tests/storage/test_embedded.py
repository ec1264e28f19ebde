"""The embedded API: open_log, publish, consume, get, sentinels, errors."""

from __future__ import annotations

import pathlib
import threading
import time
from collections.abc import Callable

import pytest
from tests._wait import wait_until

import seglog
import seglog.storage
from seglog import OFFSET_NEWEST, OFFSET_OLDEST, Log, Message, open_log
from seglog.errors import (
    InvalidOffsetError,
    InvalidRecordError,
    LogClosedError,
    NoIndexError,
    ReadOnlyError,
)

from ._batches import make_batch

MakeLog = Callable[..., Log]


def test_public_names() -> None:
    for name in ("open_log", "Log", "Message", "OFFSET_OLDEST", "OFFSET_NEWEST", "LogConfig"):
        assert name in seglog.__all__
        assert hasattr(seglog, name)
    assert OFFSET_OLDEST == -2
    assert OFFSET_NEWEST == -1


def test_publish_consume_get(make_log: MakeLog) -> None:
    with make_log() as log:
        assert isinstance(log, seglog.Log)
        assert log.next_offset() == 0
        assert log.consume(OFFSET_OLDEST, 10) == (0, [])
        msgs = [
            Message(key=b"user-1", value=b"{}", headers=[("h", b"1"), ("n", None)]),
            Message(value=None, timestamp=1234),
            Message(key=None, value=b""),
        ]
        assert log.publish(msgs) == 3
        assert log.publish([Message(value=b"%d" % i) for i in range(10)]) == 13
        nxt, got = log.consume(OFFSET_OLDEST, 2)
        assert nxt == 2
        assert got[0].offset == 0
        assert got[0].key == b"user-1"
        assert got[0].headers == (("h", b"1"), ("n", None))
        assert got[1].timestamp == 1234
        assert got[1].value is None
        nxt, got = log.consume(nxt, 100)
        assert nxt == 13
        assert [m.offset for m in got] == list(range(2, 13))
        # an offset inside a batch skips the earlier records of that batch
        nxt, got = log.consume(7, 2)
        assert (nxt, [m.value for m in got]) == (9, [b"4", b"5"])
        assert log.consume(OFFSET_NEWEST, 10) == (13, [])
        assert log.consume(13, 10) == (13, [])
        with pytest.raises(InvalidOffsetError):
            log.consume(14, 10)
        assert log.get(5).value == b"2"
        for bad in (-5, 13, 100):
            with pytest.raises(InvalidOffsetError):
                log.get(bad)
        assert log.offset_by_time(1234)[0] == 0
        with pytest.raises(NoIndexError):
            log.get_by_key(b"user-1")  # opened without key_index
        assert log.stat()["log_end_offset"] == 13
        assert log.sync() == 13
    with pytest.raises(LogClosedError):
        log.publish([Message(value=b"x")])


def test_publish_splits_large_batches(make_log: MakeLog) -> None:
    with make_log(max_message_bytes=2000) as log:
        assert log.publish([Message(value=b"x" * 300) for _ in range(20)]) == 20
        assert len(list(log.batches())) > 3
        assert [m.offset for m in log.consume(0, 100)[1]] == list(range(20))
        with pytest.raises(seglog.RecordTooLargeError):
            log.publish([Message(value=b"x" * 5000)])
        assert log.next_offset() == 20


def test_open_log_options(tmp_path: pathlib.Path) -> None:
    # disk only: open_log's directory options, a reopen
    with pytest.raises(TypeError):
        open_log(tmp_path / "p", create=True, no_such_setting=1)
    with pytest.raises(seglog.DirectoryNotFoundError):
        open_log(tmp_path / "p")
    with open_log(tmp_path / "p", create=True, key_index=True) as log:
        assert log.config.key_index
        log.append(make_batch(2))
    with open_log(tmp_path / "p", read_only=True) as ro:
        with pytest.raises(ReadOnlyError):
            ro.publish([Message(value=b"x")])
        assert [m.key for m in ro.consume(OFFSET_OLDEST, 5)[1]] == [b"k0", b"k1"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_consume_compressed(make_log: MakeLog, codec: str) -> None:
    with make_log() as log:
        log.append(make_batch(4, codec=codec, tag=b"c"))
        log.sync()
        _, got = log.consume(OFFSET_OLDEST, 10)
        assert [m.value[:4] for m in got if m.value] == [b"c-0-", b"c-1-", b"c-2-", b"c-3-"]


def test_key_index(tmp_path: pathlib.Path) -> None:
    # disk only: the key index rebuilt at a reopen
    p = tmp_path / "p"
    with open_log(p, create=True, key_index=True, segment_bytes=300) as log:
        log.publish([Message(key=b"a", value=b"1"), Message(key=b"b", value=b"1")])
        log.publish([Message(key=b"a", value=b"2"), Message(value=b"no key")])
        log.publish([Message(key=b"b", value=None)])  # a tombstone
        assert log.get_by_key(b"a").value == b"2"
        assert log.offset_by_key(b"a") == 2
        assert log.get_by_key(b"b").value is None
        with pytest.raises(seglog.NotFoundError):
            log.get_by_key(b"zz")
        # appended batches (not only publish) are indexed too
        log.append(make_batch(2))
        assert log.get_by_key(b"k1").offset == 6
    with open_log(p, key_index=True) as log:  # rebuilt at open
        assert log.offset_by_key(b"a") == 2
        assert log.offset_by_key(b"k1") == 6
        with open_log(p, read_only=True, key_index=True) as ro:
            log.publish([Message(key=b"a", value=b"3")])
            assert ro.offset_by_key(b"a") == 2
            ro.refresh()
            assert ro.get_by_key(b"a").value == b"3"
    with open_log(p) as log, pytest.raises(NoIndexError):
        log.get_by_key(b"a")


def test_storage_public_names_pinned() -> None:
    assert sorted(seglog.storage.__all__) == sorted(
        [
            "AppendInfo",
            "FLUSH_NEVER",
            "LogAPI",
            "CheckReport",
            "DataDir",
            "MAX_PARTITIONS",
            "FileSlice",
            "Log",
            "LogConfig",
            "Message",
            "OFFSET_NEWEST",
            "OFFSET_OLDEST",
            "TopicInfo",
            "check",
            "open_log",
            "recover",
            "stat",
            "validate_topic_name",
            # the one atomic, fsynced file writer (broker state files use it too), and
            # its streaming form (snapshots, Parquet mirrors)
            "atomic_write",
            "atomic_file",
            # building blocks of the upper layers (spark, columnar, aio, cli, bench)
            "BATCH_HEADER",
            "BatchHeader",
            "parse_header",
            "whole_batches",
            "DEFAULT_DELETE_RETENTION_MS",
            "I64",
            "POLL_S",
            "encode_record_columns",
            "encode_record_columns_into",
            "encode_records",
            "fsync_dir",
            "log_directories",
            "new_batch_builder",
            "start_offset",
            # issue 3, API: indexes, blocking, typed logs, format, backup, stats
            "BYTES",
            "BackupReport",
            "CancelToken",
            "Codec",
            # durable subscriptions (NATS Streaming's durable subscribers)
            "Delivery",
            "Subscription",
            "FORMAT_VERSION",
            "FileCounters",
            "JSON",
            "LogStats",
            "RestoreReport",
            "STR",
            "SegmentInfo",
            "SegmentStats",
            "SnapshotError",
            "TypedLog",
            "TypedMessage",
            "VARINT",
            "backup",
            "migrate",
            "open_typed_log",
            "rebuild_key_index",
            "restore",
            "snapshot",
            # issue 3, PERF: columnar records
            "RangeMap",
            "RecordColumns",
            "decode_columns",
            "decode_varints",  # typed Spark columns decode Avro varints vectorised
            # issue 3, CLEANER: retention, compaction, delete by offsets
            "ArchiveHook",
            "Removed",
            "TrimResult",
            "compact",
            "compact_deletes",
            "compact_updates",
            "delete_offsets",
            "trim_by_age",
            "trim_by_count",
            "trim_by_offset",
            "trim_by_size",
            # retention below what every named reader has passed
            "trim_consumed",
            "trim_segments_below",
            # logs in RAM (a private tmpfs directory removed at close)
            "MemoryLog",
            "NoMemoryFilesystemError",
            "memory_log",
            # transaction markers, isolation levels
            "IsolationLevel",
            "control_marker",
            "encode_control_batch",
            "is_control_batch",
            "is_transactional_batch",
            # tiered storage (KIP-405)
            "Manifest",
            "RemoteCorruptionError",
            "RemotePartition",
            "RemoteSegment",
            "RemoteSlice",
            "RemoteStorage",
            "RemoteStorageError",
            "RemoteTier",
            "TierCounters",
            "TierReport",
            "check_tiered_cleanup_policy",  # no compact beside remote.storage.enable
            "purge_partition",
            "start_tiering",
            "tier_sync",
        ]
    )
    for name in seglog.storage.__all__:
        assert getattr(seglog.storage, name) is not None


def test_consume_blocking(make_log: MakeLog) -> None:
    with make_log() as log:
        log.publish([Message(value=b"old")])
        t0 = time.monotonic()
        assert log.consume_blocking(1, 10, 0.05) == (1, [])
        assert time.monotonic() - t0 >= 0.04

        def later(reader: Log = log) -> None:  # publish once the reader is parked
            wait_until(
                lambda: reader.waiting_readers >= 1,
                interval=0.001,
                message="the reader did not start waiting",
            )
            log.publish([Message(value=b"new")])

        t = threading.Thread(target=later)
        t.start()
        nxt, msgs = log.consume_blocking(OFFSET_NEWEST, 10, 10)
        t.join()
        assert (nxt, [m.value for m in msgs]) == (2, [b"new"])
        assert log.waiting_readers == 0  # woken: nothing left parked
        with open_log(log.directory, read_only=True) as ro:
            t = threading.Thread(target=later, args=(ro,))
            t.start()
            nxt, msgs = ro.consume_blocking(2, 10, 10)
            t.join()
            assert (nxt, [m.value for m in msgs]) == (3, [b"new"])


@pytest.mark.parametrize("stamps", [[2**63], [1, 2**63], [2**63, 2**63 + 1], [-(2**64), 5]])
def test_timestamp_outside_int64_is_an_invalid_record(
    tmp_path: pathlib.Path, stamps: list[int]
) -> None:
    """A timestamp no int64 holds is refused as a record (InvalidRecordError, nothing
    appended), not a struct.error / OverflowError from the encoder."""
    with open_log(tmp_path / "p", create=True) as log:
        with pytest.raises(InvalidRecordError, match="timestamp"):
            log.publish([Message(value=b"v", timestamp=t) for t in stamps])
        with pytest.raises(InvalidRecordError, match="timestamp"):
            log.publish_values([b"v"] * len(stamps), timestamp_ms=stamps)
        if len(stamps) == 1:
            with pytest.raises(InvalidRecordError, match="timestamp"):
                log.publish_values([b"v"], timestamp_ms=stamps[0])
        with pytest.raises(TypeError):
            log.publish([Message(value=b"v", timestamp=1.5)])  # type: ignore[arg-type]
        assert log.log_end_offset == 0
        edge = [0, 2**63 - 1]
        assert log.publish([Message(value=b"v", timestamp=t) for t in edge]) == 2
        assert log.publish_values([b"v", b"v"], timestamp_ms=edge) == 4
        assert [m.timestamp for m in log.consume(0, 4)[1]] == edge * 2
