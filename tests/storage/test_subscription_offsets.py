"""``Subscription.fetch_offsets_now`` (the broker's share partitions acquire through it)
against ``fetch_now``: two subscriptions of one log see the same history (publishes,
fetches of the same size, acks, releases, clock moves, resubscribes, restarts,
retention, records deleted out of the middle: compacted gaps, inside batches too), one
fetched with ``fetch_now``, the other with ``fetch_offsets_now``. Every fetch gives the
same ``(offset, redelivery_count)`` pairs in the same order, and after every step both
have the same position, pending set and journal (the lines replayed, the name aside).
Plus the cases spelled out: a gap, the delivery limit, a restart, no decoding, errors.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog import Log, Message, open_log
from seglog.errors import LogClosedError
from seglog.storage import Delivery, Subscription, delete_offsets, trim_by_offset
from seglog.storage.log import subscription as subscription_module
from seglog.storage.log import subscription_state
from seglog.storage.record.columns import RecordColumns

ACK_WAIT_MS = 100
MAX_IN_FLIGHT = 6


def _value(offset: int) -> bytes:
    return b"value-%d" % offset


def _pairs(deliveries: list[Delivery]) -> list[tuple[int, int]]:
    return [(d.offset, d.redelivery_count) for d in deliveries]


def _journal(sub: Subscription) -> list[dict[str, Any]]:
    """The subscription's journal lines as records, the snapshot's name left out."""
    path = sub._owner.directory / (sub.name + subscription_state.SUFFIX)
    records, _ = subscription_state.parse(path.read_bytes())
    return [{k: v for k, v in r.items() if k != "name"} for r in records]


class OffsetsMachine(RuleBasedStateMachine):
    max_deliveries: int | None = 3

    def __init__(self) -> None:
        super().__init__()
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="seglog-suboffs-", dir=base))
        self.now_ms = 1_000_000
        self.saved_clock = subscription_module.clock
        subscription_module.clock = self.clock  # the fake clock (restored in teardown)
        self.log: Log = open_log(self.root / "p0", create=True, segment_bytes=400)
        self._subscribe()
        self.end = 0
        self.stored: set[int] = set()

    def clock(self) -> float:
        return self.now_ms / 1000.0

    def _subscribe(self) -> None:
        kw: dict[str, Any] = {
            "ack_wait_ms": ACK_WAIT_MS,
            "max_in_flight": MAX_IN_FLIGHT,
            "max_deliveries": self.max_deliveries,
        }
        self.full = self.log.subscribe("a", **kw)  # fetch_now
        self.bare = self.log.subscribe("b", **kw)  # fetch_offsets_now

    def teardown(self) -> None:
        self.log.close()
        subscription_module.clock = self.saved_clock
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(n=st.integers(1, 5))
    def publish(self, n: int) -> None:  # one batch of n records
        msgs = [Message(key=b"k", value=_value(o)) for o in range(self.end, self.end + n)]
        new_end = self.log.publish(msgs)
        self.stored |= set(range(self.end, new_end))
        self.end = new_end

    @rule(max_count=st.integers(1, 8))
    def fetch(self, max_count: int) -> None:
        full = self.full.fetch_now(max_count)
        bare = self.bare.fetch_offsets_now(max_count)
        assert bare == _pairs(full)
        assert [d.message.value for d in full] == [_value(o) for o, _ in bare]
        assert all(o in self.stored for o, _ in bare)

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        choices = sorted(self.full.pending())
        offsets = data.draw(st.lists(st.sampled_from(choices), max_size=4)) if choices else []
        assert self.full.ack(offsets) == self.bare.ack(offsets)

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        choices = sorted(self.full.pending())
        offsets = data.draw(st.lists(st.sampled_from(choices), max_size=4)) if choices else []
        assert self.full.release(offsets) == self.bare.release(offsets)

    @rule(ms=st.sampled_from([0, 1, 50, 100, 150]))
    def advance_clock(self, ms: int) -> None:
        self.now_ms += ms

    @rule()
    def resubscribe(self) -> None:
        self.full.close()
        self.bare.close()
        self._subscribe()

    @rule()
    def restart(self) -> None:
        directory = self.log.directory
        self.log.close()
        self.log = open_log(directory)
        self._subscribe()

    @rule(k=st.integers(1, 3))
    def retention(self, k: int) -> None:
        trim_by_offset(self.log, min(self.log.log_start_offset + k, self.log.high_watermark))
        self.stored = {o for o in self.stored if o >= self.log.log_start_offset}

    @precondition(lambda self: self.stored)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:  # a compacted gap
        in_flight = sorted(set(self.full.pending()) & self.stored)
        if in_flight and data.draw(st.booleans(), label="in flight"):
            choices = in_flight  # gone when its redelivery looks it up
        else:
            choices = sorted(self.stored)
        offsets = data.draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3))
        removed, _ = delete_offsets(self.log, offsets)
        self.stored -= set(removed)

    @invariant()
    def same_state(self) -> None:
        assert self.bare.pending() == self.full.pending()
        assert self.bare.position == self.full.position
        assert _journal(self.bare) == _journal(self.full)


class UnlimitedOffsetsMachine(OffsetsMachine):
    max_deliveries = None


OffsetsMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestOffsetsAgainstFetchNow = OffsetsMachine.TestCase

UnlimitedOffsetsMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None
)
TestOffsetsAgainstFetchNowUnlimited = UnlimitedOffsetsMachine.TestCase


# -- the cases spelled out -----------------------------------------------------------------


def _publish(log: Log, n: int) -> None:
    start = log.next_offset()
    log.publish([Message(key=b"k", value=b"v%d" % (start + i)) for i in range(n)])


def test_gaps_are_skipped_and_deleted_pending_offsets_archived(tmp_path, fake_clock):
    with open_log(tmp_path / "p", create=True, segment_bytes=100) as log:
        for _ in range(4):
            _publish(log, 1)  # a batch per segment
        _publish(log, 4)  # offsets 4-7 in one batch
        sub = log.subscribe("w", ack_wait_ms=1000, max_in_flight=4)
        assert sub.fetch_offsets_now(3) == [(0, 0), (1, 0), (2, 0)]
        delete_offsets(log, [1, 4, 6])  # 1 in flight; 4 and 6 inside a batch, not yet
        fake_clock.advance_ms(1000)
        # 1 is gone: archived (journaled as acked), which makes room for 5 and 7
        assert sub.fetch_offsets_now(10) == [(0, 1), (2, 1), (3, 0), (5, 0)]
        assert sub.pending() == {0: 1, 2: 1, 3: 0, 5: 0}
        sub.ack([0, 2])
        assert sub.fetch_offsets_now(10) == [(7, 0)]
        assert sub.position == 8
        sub.close()
    with open_log(tmp_path / "p") as log:  # the journal has it all
        sub = log.subscribe("w", ack_wait_ms=1000, max_in_flight=4)
        assert sub.pending() == {3: 0, 5: 0, 7: 0}
        assert sub.fetch_offsets_now(10) == [(3, 1), (5, 1), (7, 1)]  # due after a restart


def test_max_deliveries_archives_as_fetch_now_does(make_log, fake_clock):
    with make_log() as log:
        _publish(log, 3)
        sub = log.subscribe("w", ack_wait_ms=1000, max_deliveries=2)
        assert sub.fetch_offsets_now(2) == [(0, 0), (1, 0)]
        sub.release(1)
        assert sub.fetch_offsets_now(1) == [(1, 1)]  # its second and last delivery
        fake_clock.advance_ms(1000)
        assert sub.fetch_offsets_now(10) == [(0, 1), (2, 0)]  # 1 archived
        assert sub.pending() == {0: 1, 2: 0}


def test_no_message_is_decoded(make_log, fake_clock, monkeypatch):
    with make_log() as log:
        _publish(log, 5)
        sub = log.subscribe("w", ack_wait_ms=1000, max_in_flight=10)
        assert sub.fetch_offsets_now(2) == [(0, 0), (1, 0)]
        fake_clock.advance_ms(1000)

        def refuse(self: RecordColumns) -> list[Message]:
            raise AssertionError("decoded")

        monkeypatch.setattr(RecordColumns, "messages", refuse)
        assert sub.fetch_offsets_now(10) == [(0, 1), (1, 1), (2, 0), (3, 0), (4, 0)]
        _publish(log, 1)
        with pytest.raises(AssertionError, match="decoded"):
            sub.fetch_now(1)  # the patch holds: fetch_now decodes offset 5


def test_errors(make_log):
    with make_log() as log:
        _publish(log, 1)
        sub = log.subscribe("w")
        with pytest.raises(ValueError, match="max_count"):
            sub.fetch_offsets_now(0)
        assert sub.pending() == {}
        sub.close()
        with pytest.raises(LogClosedError):
            sub.fetch_offsets_now(1)


@pytest.mark.parametrize("fetch", ["fetch_now", "fetch_offsets_now"])
def test_a_redelivery_at_the_clock_of_its_delivery_is_delivered_once(make_log, fake_clock, fetch):
    # released and redelivered without the clock moving: the heap entry of the first
    # delivery has the redelivery's deadline; it was redelivered twice in one fetch
    # (counts 2 and 3), and under max_deliveries the second one raised KeyError
    with make_log() as log:
        _publish(log, 3)
        sub = log.subscribe("w", ack_wait_ms=1000, max_deliveries=5)

        def take(n: int) -> list[tuple[int, int]]:
            got = getattr(sub, fetch)(n)
            return _pairs(got) if fetch == "fetch_now" else got

        assert take(2) == [(0, 0), (1, 0)]
        sub.release(1)
        assert take(1) == [(1, 1)]
        fake_clock.advance_ms(1000)
        assert take(10) == [(0, 1), (1, 2), (2, 0)]
        assert sub.pending() == {0: 1, 1: 2, 2: 0}
