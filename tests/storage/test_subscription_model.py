"""Durable subscriptions against an in-memory model (hypothesis): random sequences of
publish, fetch, ack, clock moves, clean restarts, kill -9 restarts (a copy of the
directory taken while the log is open: what the page cache holds) and retention, on a
fake clock. After every step the subscription's position and pending set (offset ->
redelivery count) equal the model's; every fetch returns exactly the model's deliveries.

The machine runs on both backends: ``open_log`` in a temporary directory and
``memory_log``; on the memory backend the restarts (a reopen of the directory, a kill -9
copy) are disabled, a memory log being gone at close, and ``resubscribe`` (close the
subscription, subscribe again: the state reloaded from its journal) runs on both.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog import Log, Message, memory_log, open_log
from seglog.storage import trim_by_offset
from seglog.storage.log import subscription as subscription_module

from .conftest import no_ram_filesystem

ACK_WAIT_MS = 100
MAX_IN_FLIGHT = 6
NAME = "model"


def _value(offset: int) -> bytes:
    return b"value-%d" % offset


class SubscriptionMachine(RuleBasedStateMachine):
    memory = False
    """True: the log is a ``memory_log`` (no restarts)."""

    def __init__(self) -> None:
        super().__init__()
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="seglog-subs-", dir=base))
        self.generation = 0
        self.now_ms = 1_000_000
        self.saved_clock = subscription_module.clock
        subscription_module.clock = self.clock  # the fake clock (restored in teardown)
        self.log: Log = memory_log() if self.memory else open_log(self.root / "p0", create=True)
        self.sub = self.log.subscribe(NAME, ack_wait_ms=ACK_WAIT_MS, max_in_flight=MAX_IN_FLIGHT)
        # the model
        self.end = 0
        self.log_start = 0
        self.position = 0
        self.pending: dict[int, tuple[int, float]] = {}  # offset -> (count, deadline)
        self.acked: set[int] = set()

    def clock(self) -> float:
        return self.now_ms / 1000.0

    def teardown(self) -> None:
        self.log.close()
        subscription_module.clock = self.saved_clock
        shutil.rmtree(self.root, ignore_errors=True)

    def _reopen(self, directory: pathlib.Path) -> None:
        self.log = open_log(directory)
        self.sub = self.log.subscribe(NAME, ack_wait_ms=ACK_WAIT_MS, max_in_flight=MAX_IN_FLIGHT)
        # after a restart every unacknowledged message is due at once
        self.pending = {o: (c, float("-inf")) for o, (c, _) in self.pending.items()}

    @rule(n=st.integers(1, 5))
    def publish(self, n: int) -> None:
        msgs = [Message(value=_value(o)) for o in range(self.end, self.end + n)]
        self.end = self.log.publish(msgs)

    @rule(max_count=st.integers(1, 8))
    def fetch(self, max_count: int) -> None:
        now = self.clock()
        due = now + ACK_WAIT_MS / 1000.0
        expired = sorted((d, o) for o, (_, d) in self.pending.items() if d <= now)[:max_count]
        expected = []
        for _, o in expired:
            count = self.pending[o][0] + 1
            self.pending[o] = (count, due)
            expected.append((o, count))
        room = min(max_count - len(expected), MAX_IN_FLIGHT - len(self.pending))
        for o in range(self.position, min(self.position + max(room, 0), self.end)):
            self.pending[o] = (0, due)
            expected.append((o, 0))
            self.position = o + 1
        got = self.sub.fetch(max_count, 0)
        assert [(d.offset, d.redelivery_count) for d in got] == expected
        assert [d.message.value for d in got] == [_value(o) for o, _ in expected]
        assert not self.acked & {d.offset for d in got}, "an acknowledged offset came back"

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        choices = sorted(self.pending) + sorted(self.acked)[-3:]
        offsets = data.draw(st.lists(st.sampled_from(choices), max_size=4)) if choices else []
        if data.draw(st.booleans(), label="never delivered") and self.position < self.end + 2:
            bad = data.draw(st.integers(self.position, self.end + 2))
            before = self.sub.pending()
            try:
                self.sub.ack([*offsets, bad])
            except ValueError:
                assert self.sub.pending() == before  # nothing of the call applied
                return
            raise AssertionError("acking a never delivered offset did not raise")
        acked = self.sub.ack(offsets)
        really = {o for o in offsets if o in self.pending}
        assert acked == len(really)
        for o in really:
            del self.pending[o]
        self.acked |= really

    @rule(ms=st.sampled_from([0, 1, 50, 99, 100, 150, 1000]))
    def advance_clock(self, ms: int) -> None:
        self.now_ms += ms

    @rule()
    def resubscribe(self) -> None:
        self.sub.close()
        self.sub = self.log.subscribe(NAME, ack_wait_ms=ACK_WAIT_MS, max_in_flight=MAX_IN_FLIGHT)
        # deadlines are in memory only: reloaded from the journal, every one is due at once
        self.pending = {o: (c, float("-inf")) for o, (c, _) in self.pending.items()}

    @precondition(lambda self: not self.memory)
    @rule()
    def clean_restart(self) -> None:
        directory = self.log.directory
        self.log.close()
        self._reopen(directory)

    @precondition(lambda self: not self.memory)
    @rule()
    def kill_9_restart(self) -> None:
        self.generation += 1
        copy = self.root / f"p{self.generation}"
        shutil.copytree(self.log.directory, copy)  # as a kill -9 leaves it
        self.log.close()
        shutil.rmtree(self.log.directory)
        self._reopen(copy)

    @rule(k=st.integers(1, 4))
    def retention(self, k: int) -> None:
        before = min(self.log_start + k, self.log.high_watermark)
        trim_by_offset(self.log, before)
        assert self.log.log_start_offset == max(before, self.log_start)
        self.log_start = self.log.log_start_offset
        self.position = max(self.position, self.log_start)
        self.pending = {o: v for o, v in self.pending.items() if o >= self.log_start}

    @invariant()
    def same_state(self) -> None:
        assert self.sub.pending() == {o: c for o, (c, _) in self.pending.items()}
        assert self.sub.position == self.position


class MemorySubscriptionMachine(SubscriptionMachine):
    memory = True


SubscriptionMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestSubscriptionModel = SubscriptionMachine.TestCase

MemorySubscriptionMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestSubscriptionModelMemory = pytest.mark.skipif(
    no_ram_filesystem() is not None, reason="no tmpfs or ramfs"
)(MemorySubscriptionMachine.TestCase)
