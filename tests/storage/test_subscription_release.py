"""Durable subscriptions' queue extensions (``Subscription.release`` and
``Log.subscribe(max_deliveries=...)``), the engine of the broker's KIP-932 share
partitions: a release makes deliveries due at once, the delivery limit archives a message
instead of delivering it once more, on disk and in memory, and across a restart."""

from __future__ import annotations

import threading

import pytest
from tests._wait import wait_until

from seglog import Message, open_log
from seglog.errors import LogClosedError
from seglog.storage import Delivery


def _publish(log, n: int) -> None:
    start = log.next_offset()
    log.publish([Message(key=b"k", value=b"v%d" % (start + i)) for i in range(n)])


def _offsets(deliveries: list[Delivery]) -> list[tuple[int, int]]:
    return [(d.offset, d.redelivery_count) for d in deliveries]


def test_release_redelivers_at_once_before_new_messages(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 5)
        sub = log.subscribe("w", ack_wait_ms=60_000)
        assert _offsets(sub.fetch(3, 0)) == [(0, 0), (1, 0), (2, 0)]
        assert sub.release([2, 0]) == 2
        assert sub.release(0) == 1  # still in flight (released, not yet redelivered)
        # no clock move: released offsets are due now, ahead of new messages
        assert _offsets(sub.fetch(10, 0)) == [(0, 1), (2, 1), (3, 0), (4, 0)]
        assert sub.pending() == {0: 1, 1: 0, 2: 1, 3: 0, 4: 0}


def test_release_ignores_settled_offsets_and_refuses_undelivered_ones(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 4)
        sub = log.subscribe("w")
        sub.fetch(2, 0)
        sub.ack(0)
        assert sub.release([0]) == 0  # already acknowledged: nothing to release
        with pytest.raises(ValueError, match="never delivered"):
            sub.release([1, 3])
        assert sub.pending() == {1: 0}  # nothing of the refused call happened
        assert _offsets(sub.fetch(10, 0)) == [(2, 0), (3, 0)]
        assert sub.pending() == {1: 0, 2: 0, 3: 0}


def test_release_wakes_a_waiting_fetch(make_log):
    with make_log() as log:
        _publish(log, 1)
        sub = log.subscribe("w", ack_wait_ms=600_000, max_in_flight=1)
        sub.fetch(1, 0)
        got: list[Delivery] = []
        waiter = threading.Thread(target=lambda: got.extend(sub.fetch(1, 60)))
        waiter.start()
        wait_until(lambda: sub.waiting >= 1)
        sub.release(0)
        waiter.join(30)
        assert _offsets(got) == [(0, 1)]


def test_max_deliveries_archives_after_the_last_delivery(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 3)
        sub = log.subscribe("w", ack_wait_ms=1000, max_deliveries=3)
        assert _offsets(sub.fetch(2, 0)) == [(0, 0), (1, 0)]
        fake_clock.advance_ms(1000)
        assert _offsets(sub.fetch(2, 0)) == [(0, 1), (1, 1)]
        sub.release(1)
        assert _offsets(sub.fetch(1, 0)) == [(1, 2)]  # the third and last delivery of 1
        sub.release(1)
        fake_clock.advance_ms(1000)
        # 1 (released) and 0 (expired) after their last delivery: archived, never again
        assert _offsets(sub.fetch(10, 0)) == [(0, 2), (2, 0)]
        assert 1 not in sub.pending()
        fake_clock.advance_ms(1000)
        assert _offsets(sub.fetch(10, 0)) == [(2, 1)]
        assert sub.pending() == {2: 1}


def test_max_deliveries_archive_survives_a_restart(tmp_path, fake_clock):
    path = tmp_path / "p"
    with open_log(path, create=True) as log:
        _publish(log, 2)
        sub = log.subscribe("w", ack_wait_ms=1000, max_deliveries=2)
        sub.fetch(2, 0)
        sub.release([0, 1])
        assert _offsets(sub.fetch(1, 0)) == [(0, 1)]
    with open_log(path) as log:
        sub = log.subscribe("w", ack_wait_ms=1000, max_deliveries=2)
        # 0: delivered twice: archived at once; 1: delivered once, due again after the
        # restart (every unacknowledged offset is)
        assert _offsets(sub.fetch(10, 0)) == [(1, 1)]
        sub.close()
    with open_log(path) as log:
        sub = log.subscribe("w", ack_wait_ms=1000, max_deliveries=2)
        assert sub.fetch(10, 0) == []
        assert sub.pending() == {}  # 1 archived too


def test_settings_must_match_an_open_subscription(make_log):
    with make_log() as log:
        sub = log.subscribe("w", max_deliveries=5)
        assert sub.max_deliveries == 5
        assert log.subscribe("w", max_deliveries=5) is sub
        with pytest.raises(ValueError, match="other settings"):
            log.subscribe("w", max_deliveries=4)
        with pytest.raises(ValueError, match=">= 1"):
            log.subscribe("x", max_deliveries=0)
        sub.close()
        with pytest.raises(LogClosedError):
            sub.release(0)
