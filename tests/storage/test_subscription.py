"""Durable subscriptions (``Log.subscribe``): fetch, ack, ack-wait expiry, max in flight,
restarts and torn journals, retention, unsubscribe, names, the asyncio form.

Tests taking ``make_log`` run on disk and in memory (``memory_log``); restarts (a reopen
of the directory) and kill -9 copies are disk-only, a memory log being gone at close."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest
from tests._wait import wait_until

from seglog import OFFSET_NEWEST, Log, Message, open_log
from seglog.errors import (
    InvalidOffsetError,
    LogClosedError,
    LogCorruptedError,
    NotFoundError,
    ReadOnlyError,
    StorageError,
)
from seglog.storage import Delivery, Subscription, delete_offsets, trim_by_offset
from seglog.storage.log import subscription as subscription_module


def _publish(log, n: int) -> int:
    start = log.next_offset()
    return log.publish([Message(key=b"k", value=b"v%d" % (start + i)) for i in range(n)])


def _offsets(deliveries: list[Delivery]) -> list[tuple[int, int]]:
    return [(d.offset, d.redelivery_count) for d in deliveries]


def _crash_copy(log, dest):
    """The partition directory as a kill -9 would leave it (every write is in the page
    cache): a copy made while the log is open."""
    shutil.copytree(log.directory, dest)
    return dest


def test_fetch_delivers_in_order_then_ack_settles(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 5)
        sub = log.subscribe("w")
        assert isinstance(sub, Subscription)
        got = sub.fetch(3, 0)
        assert _offsets(got) == [(0, 0), (1, 0), (2, 0)]
        assert got[1].message.value == b"v1"
        assert got[1].message.key == b"k"
        assert sub.position == 3
        assert sub.pending() == {0: 0, 1: 0, 2: 0}
        assert sub.ack(1) == 1
        assert sub.ack([0, 2]) == 2
        assert _offsets(sub.fetch(10, 0)) == [(3, 0), (4, 0)]
        assert sub.fetch(10, 0) == []
        fake_clock.advance_ms(60_000)  # nothing acked is delivered again
        assert _offsets(sub.fetch(10, 0)) == [(3, 1), (4, 1)]


def test_ack_not_in_flight_is_a_no_op_never_delivered_is_a_value_error(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 5)
        sub = log.subscribe("w")
        sub.fetch(2, 0)
        assert sub.ack(0) == 1
        assert sub.ack(0) == 0  # already acknowledged: no-op
        with pytest.raises(ValueError, match="never delivered"):
            sub.ack([1, 2])  # 2 was never delivered: nothing of the call applies
        assert sub.pending() == {1: 0}
        with pytest.raises(ValueError, match="never delivered"):
            sub.ack(99)
        assert sub.ack(iter([1])) == 1


def test_ack_wait_expiry_redelivers_oldest_deadline_first(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 6)
        sub = log.subscribe("w", ack_wait_ms=1000)
        assert _offsets(sub.fetch(2, 0)) == [(0, 0), (1, 0)]
        fake_clock.advance_ms(500)
        assert _offsets(sub.fetch(2, 0)) == [(2, 0), (3, 0)]
        fake_clock.advance_ms(499)
        assert _offsets(sub.fetch(1, 0)) == [(4, 0)]  # nothing expired yet
        fake_clock.advance_ms(1)
        # 0 and 1 expired (deadline 1000 ms); redelivered before new messages
        assert _offsets(sub.fetch(10, 0)) == [(0, 1), (1, 1), (5, 0)]
        fake_clock.advance_ms(600)  # 2, 3 (deadline at 1500 ms) and 4 (1999 ms)
        assert _offsets(sub.fetch(2, 0)) == [(2, 1), (3, 1)]
        sub.ack([0, 1, 2, 3, 5])
        fake_clock.advance_ms(10_000)
        assert _offsets(sub.fetch(10, 0)) == [(4, 1)]
        fake_clock.advance_ms(10_000)
        assert _offsets(sub.fetch(10, 0)) == [(4, 2)]


def test_ack_wait_expiry_in_real_time_wakes_a_waiting_fetch(make_log):
    with make_log() as log:
        _publish(log, 2)
        sub = log.subscribe("w", ack_wait_ms=30)
        assert _offsets(sub.fetch(10, 0)) == [(0, 0), (1, 0)]
        # nothing new: the fetch waits for the expiry, not for its whole timeout
        start = time.monotonic()
        assert _offsets(sub.fetch(10, 30)) == [(0, 1), (1, 1)]
        assert time.monotonic() - start < 20


def test_max_in_flight_limits_new_deliveries(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 10)
        sub = log.subscribe("w", max_in_flight=3)
        assert _offsets(sub.fetch(10, 0)) == [(0, 0), (1, 0), (2, 0)]
        assert sub.fetch(10, 0) == []
        sub.ack(1)
        assert _offsets(sub.fetch(10, 0)) == [(3, 0)]
        fake_clock.advance_ms(30_000)  # expired ones are redelivered, still 3 in flight
        assert _offsets(sub.fetch(10, 0)) == [(0, 1), (2, 1), (3, 1)]
        assert len(sub.pending()) == 3


def test_fetch_waits_for_new_data(make_log):
    with make_log() as log:
        sub = log.subscribe("w")

        def publish_when_waiting() -> None:
            wait_until(lambda: sub.waiting >= 1, interval=0.001, message="fetch did not wait")
            _publish(log, 2)

        t = threading.Thread(target=publish_when_waiting)
        t.start()
        got = sub.fetch(10, 30)
        t.join()
        assert _offsets(got) == [(0, 0), (1, 0)]  # one publish: one batch, visible at once


def test_fetch_at_max_in_flight_waits_for_an_ack(make_log):
    with make_log() as log:
        _publish(log, 3)
        sub = log.subscribe("w", max_in_flight=2)
        sub.fetch(10, 0)

        def ack_when_waiting() -> None:
            wait_until(lambda: sub.waiting >= 1, interval=0.001, message="fetch did not wait")
            assert len(sub.pending()) == sub.max_in_flight  # full: only an ack makes room
            sub.ack(0)

        t = threading.Thread(target=ack_when_waiting)
        t.start()
        start = time.monotonic()
        got = sub.fetch(10, 30)
        t.join()
        assert _offsets(got) == [(2, 0)]
        assert time.monotonic() - start < 20


def test_fetch_times_out_empty(make_log):
    with make_log() as log:
        sub = log.subscribe("w")
        assert sub.fetch(10, 0.02) == []
        with pytest.raises(ValueError, match="max_count"):
            sub.fetch(0, 0)


def test_restart_redelivers_every_unacked_and_no_acked(tmp_path, fake_clock):
    path = tmp_path / "p"
    with open_log(path, create=True) as log:
        _publish(log, 6)
        sub = log.subscribe("w", ack_wait_ms=60_000)
        sub.fetch(4, 0)
        sub.ack([0, 2])
        fake_clock.advance_ms(60_000)
        assert _offsets(sub.fetch(1, 0)) == [(1, 1)]
    with open_log(path) as log:
        assert log.subscriptions() == ["w"]
        sub = log.subscribe("w", ack_wait_ms=60_000, start=OFFSET_NEWEST)  # start: ignored
        assert sub.position == 4
        assert sub.pending() == {1: 1, 3: 0}
        # due at once after a restart, counted as a redelivery; then new ones
        assert _offsets(sub.fetch(10, 0)) == [(1, 2), (3, 1), (4, 0), (5, 0)]


def test_kill_9_state_is_the_journal_prefix_and_a_torn_tail_is_dropped(tmp_path, fake_clock):
    path = tmp_path / "p"
    with open_log(path, create=True) as log:
        _publish(log, 5)
        sub = log.subscribe("w")
        sub.fetch(3, 0)
        sub.ack(1)
        crashed = _crash_copy(log, tmp_path / "crashed")
    journal = crashed / "subscriptions" / "w.sub"
    lines = journal.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3  # snapshot, delivery, ack: appended, not rewritten
    with journal.open("ab") as f:
        f.write(b'0badc0de {"a":[0,2]}\n12345678 {"a"')  # a torn, unacknowledged append
    with open_log(crashed) as log:
        sub = log.subscribe("w")
        assert sub.pending() == {0: 0, 2: 0}
        assert _offsets(sub.fetch(10, 0)) == [(0, 1), (2, 1), (3, 0), (4, 0)]
    # the torn tail is gone (compacted at open), the state went on
    assert b"0badc0de" not in journal.read_bytes()


def test_journal_is_compacted(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 3000)
        sub = log.subscribe("w", max_in_flight=10)
        for _ in range(300):
            for d in sub.fetch(10, 0):
                sub.ack(d.offset)
        journal = log.directory / "subscriptions" / "w.sub"
        assert journal.stat().st_size < 2 * (64 << 10) + 4096
        assert sub.position == 3000
        assert sub.pending() == {}
        sub.close()  # as Log.close does for every subscription
        assert len(journal.read_bytes().splitlines()) == 1  # close leaves one snapshot line


def test_retention_drops_pending_below_the_log_start(make_log, backend, fake_clock):
    with make_log(segment_bytes=200) as log:
        path = log.directory
        _publish(log, 10)
        sub = log.subscribe("w")
        sub.fetch(4, 0)
        trim_by_offset(log, 6)
        assert log.log_start_offset == 6
        fake_clock.advance_ms(60_000)
        assert _offsets(sub.fetch(10, 0)) == [(6, 0), (7, 0), (8, 0), (9, 0)]
        assert sub.pending() == {6: 0, 7: 0, 8: 0, 9: 0}
        sub.ack(3)  # below the position: a no-op
        sub.close()
        assert log.subscribe("w").pending() == {6: 0, 7: 0, 8: 0, 9: 0}  # from the journal
    if backend == "disk":  # a restart: the disk backend only
        with open_log(path) as log:
            assert log.subscribe("w").pending() == {6: 0, 7: 0, 8: 0, 9: 0}


def test_a_pending_message_deleted_since_is_dropped(make_log, fake_clock):
    with make_log(segment_bytes=100) as log:
        for _ in range(5):
            _publish(log, 1)  # a batch per segment: 1 and 2 sit in closed segments
        sub = log.subscribe("w", max_in_flight=4)
        sub.fetch(4, 0)
        delete_offsets(log, [1, 2])
        for gone in (1, 2):
            with pytest.raises(NotFoundError):
                log.get(gone)
        fake_clock.advance_ms(60_000)
        # 1 and 2 leave the pending set, which makes room for 4
        assert _offsets(sub.fetch(10, 0)) == [(0, 1), (3, 1), (4, 0)]
        assert sub.pending() == {0: 1, 3: 1, 4: 0}


def test_unsubscribe_and_list(make_log, fake_clock):
    with make_log() as log:
        assert log.subscriptions() == []
        _publish(log, 3)
        a = log.subscribe("a")
        log.subscribe("b.2_x-y")
        assert log.subscriptions() == ["a", "b.2_x-y"]
        a.fetch(2, 0)
        assert log.subscribe("a") is a  # open: the same object
        with pytest.raises(ValueError, match="other settings"):
            log.subscribe("a", max_in_flight=5)
        log.unsubscribe("a")
        assert log.subscriptions() == ["b.2_x-y"]
        assert not (log.directory / "subscriptions" / "a.sub").exists()
        with pytest.raises(LogClosedError):
            a.fetch(1, 0)
        with pytest.raises(LogClosedError):
            a.ack(0)
        with pytest.raises(NotFoundError):
            log.unsubscribe("a")
        fresh = log.subscribe("a")
        assert fresh is not a
        assert fresh.position == 0
        assert fresh.pending() == {}


def test_close_then_resubscribe_resumes(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 3)
        sub = log.subscribe("a")
        sub.fetch(2, 0)
        sub.close()
        with pytest.raises(LogClosedError):
            sub.fetch(1, 0)
        again = log.subscribe("a")
        assert again is not sub
        assert again.pending() == {0: 0, 1: 0}


@pytest.mark.parametrize(
    "name", ["", "../x", "a/b", "/abs", "x" * 201, "a\n", "é", "a b", ".", "..", "a\x00"]
)
def test_unsafe_names_are_refused(make_log, name):
    with make_log() as log:
        with pytest.raises(ValueError, match="invalid subscription name"):
            log.subscribe(name)
        with pytest.raises(ValueError, match="invalid subscription name"):
            log.unsubscribe(name)
        for outside in (log.directory, log.directory.parent):
            assert not (outside / "x.sub").exists()
            assert "x" * 200 not in os.listdir(outside)


def test_start_positions_and_settings(make_log):
    with make_log() as log:
        _publish(log, 5)
        assert log.subscribe("new", start=OFFSET_NEWEST).position == 5
        assert log.subscribe("mid", start=3).position == 3
        assert log.subscribe("x" * 200).position == 0
        with pytest.raises(InvalidOffsetError):
            log.subscribe("bad", start=9)
        with pytest.raises(ValueError, match="must be >= 1"):
            log.subscribe("bad", ack_wait_ms=0)
        assert "bad" not in log.subscriptions()


def test_read_only_log_refuses_subscriptions(make_log):
    with make_log() as log:
        _publish(log, 1)
        with open_log(log.directory, read_only=True) as ro, pytest.raises(ReadOnlyError):
            ro.subscribe("w")


def test_log_close_fails_a_waiting_fetch_and_keeps_the_state(make_log, backend):
    log = make_log()
    path = log.directory
    _publish(log, 1)
    sub = log.subscribe("w")
    sub.fetch(1, 0)
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            sub.fetch(1, 30)
        except LogClosedError as e:
            errors.append(e)

    t = threading.Thread(target=fetch)
    t.start()
    wait_until(lambda: sub.waiting >= 1, interval=0.001, message="fetch did not wait")
    log.close()
    t.join()
    assert len(errors) == 1
    assert sub.closed
    assert sub.waiting == 0
    if backend == "disk":  # the state outlives the log on disk (a memory log is gone)
        with open_log(path) as log:
            assert log.subscribe("w").pending() == {0: 0}


def test_relaxed_policy_state_survives_a_kill(tmp_path, fake_clock):
    with open_log(tmp_path / "p", create=True, flush_messages=1000) as log:
        _publish(log, 4)
        sub = log.subscribe("w")
        sub.fetch(3, 0)
        sub.ack(0)
        crashed = _crash_copy(log, tmp_path / "crashed")
    with open_log(crashed) as log:
        assert _offsets(log.subscribe("w").fetch(10, 0)) == [(1, 1), (2, 1), (3, 0)]


def test_a_damaged_snapshot_line_is_an_error_not_a_silent_restart(tmp_path):
    with open_log(tmp_path / "p", create=True) as log:
        _publish(log, 3)
        log.subscribe("w").fetch(2, 0)
    journal = tmp_path / "p" / "subscriptions" / "w.sub"
    journal.write_bytes(b"00000000 " + journal.read_bytes()[9:])  # a bad CRC
    with open_log(tmp_path / "p") as log:
        with pytest.raises(LogCorruptedError, match="damaged"):
            log.subscribe("w")
        log.unsubscribe("w")  # the way out: start over
        assert log.subscribe("w").position == 0


def test_a_failed_journal_write_is_cut_back(make_log, tmp_path, monkeypatch, fake_clock):
    with make_log() as log:
        _publish(log, 4)
        sub = log.subscribe("w")
        sub.fetch(4, 0)
        real_write = os.write

        def half_then_enospc(fd: int, data) -> int:
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(subscription_module.os, "write", half_then_enospc)
        with pytest.raises(StorageError, match="cannot write"):
            sub.ack(0)
        monkeypatch.setattr(subscription_module.os, "write", real_write)
        assert sub.pending() == {0: 0, 1: 0, 2: 0, 3: 0}  # the failed ack changed nothing
        assert sub.ack([1, 2]) == 2  # appended after the cut, not after a torn line
        crashed = _crash_copy(log, tmp_path / "crashed")
    with open_log(crashed) as log:
        # 0's ack never returned: delivered again
        assert log.subscribe("w").pending() == {0: 0, 3: 0}


def test_concurrent_fetchers_get_disjoint_deliveries(make_log):
    with make_log() as log:
        _publish(log, 400)
        sub = log.subscribe("w", max_in_flight=50)
        seen: list[list[int]] = [[] for _ in range(4)]

        def work(i: int) -> None:
            while True:
                got = sub.fetch(7, 0.05)
                if not got and sub.position == 400 and not sub.pending():
                    return
                seen[i].extend(d.offset for d in got)
                assert all(d.redelivery_count == 0 for d in got)
                sub.ack([d.offset for d in got])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        everything = sorted(o for part in seen for o in part)
        assert everything == list(range(400))  # each exactly once (ack wait: 30 s)


@pytest.mark.parametrize("offsets_only", [False, True], ids=["fetch", "fetch_offsets_now"])
def test_a_failed_redelivery_read_leaves_the_offsets_due(
    make_log, monkeypatch, fake_clock, offsets_only
):
    with make_log() as log:
        _publish(log, 2)
        sub = log.subscribe("w", max_in_flight=2)
        sub.fetch(2, 0)
        fake_clock.advance_ms(60_000)
        real_read = Log.consume_columns  # what a subscription reads the log with

        def broken(*args, **kwargs):
            raise StorageError("EIO")

        monkeypatch.setattr(Log, "consume_columns", broken)
        with pytest.raises(StorageError, match="EIO"):
            sub.fetch_offsets_now(10) if offsets_only else sub.fetch(10, 0)
        monkeypatch.setattr(Log, "consume_columns", real_read)
        assert _offsets(sub.fetch(10, 0)) == [(0, 1), (1, 1)]
