"""Roll by message count (seglog.segment.messages) and flush.messages "never" (>= 2**62).

Tests taking ``make_log`` run on disk and in memory (``memory_log``); the reopens are
disk-only."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from seglog.storage import FLUSH_NEVER, Log, LogConfig, Message

from ._batches import make_batch

MakeLog = Callable[..., Log]


def _segment_bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments()]


def test_roll_by_segment_messages(make_log: MakeLog, backend: str) -> None:
    cfg = LogConfig(segment_messages=5)
    with make_log(segment_messages=5) as log:
        path = log.directory
        for _ in range(6):
            log.append(make_batch(2))  # 2 + 2 fit, a third batch would make 6 > 5
        log.sync()
        assert _segment_bases(log) == [0, 4, 8]
        counts = [s.next_offset - s.base_offset for s in log.segments()]
        assert counts == [4, 4, 4]
        assert all(c <= 5 for c in counts)
        log.append(make_batch(1))  # 4 + 1 = 5: still fits
        assert _segment_bases(log) == [0, 4, 8]
        log.append(make_batch(1))
        assert _segment_bases(log) == [0, 4, 8, 13]
    if backend != "disk":
        return
    with Log.open(path, cfg) as log:  # counted from the offsets after a reopen
        log.append(make_batch(4))  # 1 + 4 = 5
        log.append(make_batch(1))
        assert _segment_bases(log) == [0, 4, 8, 13, 18]
        assert log.log_end_offset == 19


def test_segment_messages_never_refuses_a_big_append(make_log: MakeLog) -> None:
    with make_log(segment_messages=3) as log:
        log.append(make_batch(10))  # an empty segment takes any append
        log.append(make_batch(1))
        log.append(make_batch(2))
        log.append(make_batch(1))
        assert _segment_bases(log) == [0, 10, 13]
        log.sync()
        assert [m.offset for m in log.consume(0, 100)[1]] == list(range(14))


def test_segment_messages_unlimited_by_default(make_log: MakeLog) -> None:
    assert LogConfig().segment_messages is None
    with make_log() as log:
        for _ in range(50):
            log.append(make_batch(3))
        assert _segment_bases(log) == [0]


def test_segment_messages_kafka_name_and_validation() -> None:
    cfg = LogConfig.from_kafka_configs({"seglog.segment.messages": "1000"})
    assert cfg.segment_messages == 1000
    assert cfg.to_kafka_configs()["seglog.segment.messages"] == "1000"
    assert "seglog.segment.messages" not in LogConfig().to_kafka_configs()
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"segment\.messages"):
            LogConfig(segment_messages=bad)


def test_flush_messages_never_does_not_fsync_per_append(make_log: MakeLog, backend: str) -> None:
    never = 2**63 - 1  # Kafka's default flush.messages, Long.MAX_VALUE
    cfg = LogConfig.from_kafka_configs({"flush.messages": str(never)})
    assert cfg.flush_messages == never
    assert not cfg.fsync_before_ack
    assert cfg.flush_every is None
    with make_log(flush_messages=never) as log:
        path = log.directory
        assert log.config == cfg
        for i in range(100):
            log.publish([Message(key=None, value=b"v%d" % i)])  # acknowledged before fsync
            assert log.high_watermark == i + 1  # visible at once
        assert log.fsync_count == 0
        assert log.stats().counters["syncs"] == 0
        assert log.get(99).value == b"v99"
        assert log.sync() == 100  # an explicit sync still works: one round
        assert log.fsync_count == 1
    if backend != "disk":
        return
    with Log.open(path, cfg) as log:
        assert log.log_end_offset == 100  # close made it durable


def test_flush_messages_never_still_fsyncs_rolled_segments(make_log: MakeLog) -> None:
    with make_log(flush_messages=FLUSH_NEVER, segment_messages=4) as log:
        for _ in range(2):
            log.append(make_batch(2))
        assert log.fsync_count == 0
        synced = threading.Event()
        log.set_sync_observer(lambda _s, _n: synced.set())
        log.append(make_batch(2))  # rolls: the rolled segment is fsynced in the background
        assert synced.wait(10)
        assert log._state.rolled_unsynced == []  # internals: nothing left to fsync
        assert log.fsync_count == 1


def test_flush_messages_count_still_fsyncs_every_n(make_log: MakeLog) -> None:
    cfg = LogConfig(flush_messages=10)
    assert cfg.flush_every == 10
    with make_log(flush_messages=10) as log:
        for _ in range(9):
            log.append(make_batch(1))
        assert log.fsync_count == 0
        log.append(make_batch(1))  # the 10th message asks for an fsync
        log.sync_future(10).result(timeout=30)
        assert log.fsync_count >= 1
