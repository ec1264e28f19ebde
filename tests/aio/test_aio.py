"""``seglog.aio`` and durable subscriptions: ``ack`` is awaitable, durable when it returns,
errs as the sync ``ack``; ``fetch`` and ``ack`` fsync the journal in a worker thread while
the event loop keeps running; ``fetch`` waits for new data or an ack-wait expiry."""

from __future__ import annotations

import asyncio
import inspect
import os
import pathlib
import shutil
import threading
from collections.abc import Callable

import pytest
from tests._wait import async_wait_until
from tests.storage._batches import txn_batch

import seglog.aio
from seglog import Log, Message, open_log
from seglog.errors import LogClosedError
from seglog.storage import Delivery, encode_control_batch

MakeLog = Callable[..., Log]


def _publish(log: Log, n: int) -> int:
    start = log.next_offset()
    return log.publish([Message(value=b"v%d" % (start + i)) for i in range(n)])


def _offsets(deliveries: list[Delivery]) -> list[tuple[int, int]]:
    return [(d.offset, d.redelivery_count) for d in deliveries]


class JournalSyncGate:
    """Replaces ``os.fdatasync``: the calls on a subscription's journal (the file at
    ``journal``, matched by inode) are recorded with their thread and, while ``hold`` is
    set, held until ``release``; the first held call sets ``entered`` (an asyncio.Event,
    through the loop). Every other fdatasync (the log's group commit) passes through. A
    call on the loop thread is never held (it would freeze the loop): it is recorded and
    fails the test through ``threads``."""

    def __init__(self, journal: pathlib.Path, loop: asyncio.AbstractEventLoop) -> None:
        self.journal = journal
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.real: Callable[[int], None] = os.fdatasync
        self.threads: list[int] = []
        """Thread id of each journal fdatasync that completed."""
        self.hold = False
        self.entered = asyncio.Event()
        self._released = threading.Event()

    def release(self) -> None:
        """Let the held fdatasync go on."""
        self._released.set()

    def rearm(self) -> None:
        """Hold the next journal fdatasync again (after a ``release``)."""
        self.entered.clear()
        self._released.clear()

    def __call__(self, fd: int) -> None:
        st = os.fstat(fd)
        try:
            target = self.journal.stat()
        except FileNotFoundError:
            target = None
        if target is None or (st.st_dev, st.st_ino) != (target.st_dev, target.st_ino):
            self.real(fd)
            return
        me = threading.get_ident()
        if self.hold and me != self.loop_thread:
            self.loop.call_soon_threadsafe(self.entered.set)
            assert self._released.wait(30), "the test never released the journal fsync"
        self.real(fd)
        self.threads.append(me)
        if me == self.loop_thread:
            self.loop.call_soon_threadsafe(self.entered.set)  # let the test fail, not hang


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Callable[[], JournalSyncGate]:
    """``gate()`` (inside the test's loop): install a :class:`JournalSyncGate` for the
    subscription ``w`` of the log at ``tmp_path / "p"``."""

    def install() -> JournalSyncGate:
        g = JournalSyncGate(tmp_path / "p" / "subscriptions" / "w.sub", asyncio.get_running_loop())
        monkeypatch.setattr(os, "fdatasync", g)
        return g

    return install


async def test_ack_is_awaitable_and_durable_when_it_returns(
    tmp_path: pathlib.Path, gate: Callable[[], JournalSyncGate]
) -> None:
    with open_log(tmp_path / "p", create=True) as log:
        _publish(log, 4)
        sub = log.subscribe("w")
        assert _offsets(await seglog.aio.fetch(sub, 3, 0)) == [(0, 0), (1, 0), (2, 0)]
        g = gate()
        pending = seglog.aio.ack(sub, [0, 2])
        assert inspect.isawaitable(pending)
        assert await pending == 2
        # the journal was fsynced before the ack returned, in a worker thread
        assert len(g.threads) == 1
        assert g.threads[0] != g.loop_thread
        assert sub.pending() == {1: 0}
        # a kill -9 now: the copy holds what the files hold, the ack among it
        crashed = tmp_path / "crashed"
        shutil.copytree(log.directory, crashed)
        # errors and edge cases as the sync ack
        assert await seglog.aio.ack(sub, 0) == 0  # already acknowledged: ignored
        assert await seglog.aio.ack(sub, iter([1])) == 1  # any iterable
        with pytest.raises(ValueError, match="never delivered"):
            await seglog.aio.ack(sub, [3])  # at the position: never delivered
        assert sub.pending() == {}
        sub.close()
        with pytest.raises(LogClosedError):
            await seglog.aio.ack(sub, 1)
    with open_log(crashed) as log:
        sub = log.subscribe("w")
        assert (sub.position, sub.pending()) == (3, {1: 0})
        assert _offsets(await seglog.aio.fetch(sub, 10, 0)) == [(1, 1), (3, 0)]
    with open_log(tmp_path / "p") as log:  # reopened after the clean close
        sub = log.subscribe("w")
        assert (sub.position, sub.pending()) == (3, {})


async def test_fetch_fsyncs_off_the_loop_while_the_loop_runs(
    tmp_path: pathlib.Path, gate: Callable[[], JournalSyncGate]
) -> None:
    with open_log(tmp_path / "p", create=True) as log:
        _publish(log, 2)
        sub = log.subscribe("w")
        g = gate()
        g.hold = True
        task = asyncio.create_task(seglog.aio.fetch(sub, 10, 30))
        # this coroutine runs while the fetch's journal fsync is held in its thread
        await asyncio.wait_for(g.entered.wait(), 30)
        assert g.threads == []  # not finished: the fetch is still inside its fsync
        assert not task.done()
        g.release()
        assert _offsets(await task) == [(0, 0), (1, 0)]
        assert len(g.threads) == 1
        assert g.threads[0] != g.loop_thread
        # an ack held the same way: the loop keeps running meanwhile too
        g.rearm()
        acking = asyncio.create_task(seglog.aio.ack(sub, [0, 1]))
        await asyncio.wait_for(g.entered.wait(), 30)
        assert not acking.done()
        assert len(g.threads) == 1
        g.release()
        assert await acking == 2
        assert len(g.threads) == 2
        assert g.threads[1] != g.loop_thread


def test_aio_fetch_waits_for_data_and_times_out(make_log: MakeLog) -> None:
    async def main(log: Log) -> None:
        sub = log.subscribe("w")
        assert await seglog.aio.fetch(sub, 10, 0.01) == []
        task = asyncio.create_task(seglog.aio.fetch(sub, 10, 30))
        await async_wait_until(
            lambda: sub.waiting >= 1, interval=0.001, message="fetch did not wait"
        )
        await asyncio.to_thread(_publish, log, 1)
        got = await task
        assert _offsets(got) == [(0, 0)]
        sub.ack(0)

    with make_log() as log:
        asyncio.run(main(log))


def test_aio_fetch_waits_for_an_expiry(make_log: MakeLog) -> None:
    async def main(log: Log) -> None:
        sub = log.subscribe("w", ack_wait_ms=30)
        assert _offsets(await seglog.aio.fetch(sub, 10, 0)) == [(0, 0)]
        assert _offsets(await seglog.aio.fetch(sub, 10, 30)) == [(0, 1)]

    with make_log() as log:
        _publish(log, 1)
        asyncio.run(main(log))


async def test_consume_blocking_async_read_committed(tmp_path: pathlib.Path) -> None:
    with open_log(tmp_path / "p", create=True, flush_messages=1) as log:
        log.append(txn_batch(7, 2))
        got = await seglog.aio.consume_blocking_async(
            log, 0, 10, 0.05, isolation_level="read_committed"
        )
        assert got == (0, [])
        waiting = asyncio.ensure_future(
            seglog.aio.consume_blocking_async(log, 0, 10, 10, isolation_level="read_committed")
        )
        await asyncio.sleep(0)
        marker = encode_control_batch(7, 0, commit=True, coordinator_epoch=0, timestamp_ms=1)
        log.append(marker, origin="coordinator")
        nxt, msgs = await asyncio.wait_for(waiting, 10)
        assert [m.offset for m in msgs] == [0, 1]
        assert nxt == 3
