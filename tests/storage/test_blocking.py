"""Blocking consume: sync and asyncio, woken by the writer, timeouts, cancellation,
close, many concurrent tailers, a read-only tailer beside a writer."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError

import pytest
from tests._wait import async_wait_until, wait_until

import seglog.aio
from seglog import OFFSET_NEWEST, OFFSET_OLDEST, Log, Message, open_log
from seglog.aio import consume_blocking_async
from seglog.errors import LogClosedError
from seglog.storage import CancelToken

MakeLog = Callable[..., Log]


def _when_waiting(log: Log, fn: Callable[[], object], waiters: int = 1) -> threading.Thread:
    """Run ``fn`` in a thread once ``waiters`` readers are parked on ``log``
    (``Log.waiting_readers``): the wake-up is then what the test exercises, not a race."""

    def run() -> None:
        wait_until(
            lambda: log.waiting_readers >= waiters,
            interval=0.001,
            message="no reader started waiting",
        )
        fn()

    t = threading.Thread(target=run)
    t.start()
    return t


async def _until_waiting(log: Log, waiters: int) -> None:
    await async_wait_until(
        lambda: log.waiting_readers >= waiters,
        interval=0.001,
        message="readers did not start waiting",
    )


def test_sync_woken_by_writer_and_timeout(make_log: MakeLog) -> None:
    with make_log() as log:
        t0 = time.monotonic()
        assert log.consume_blocking(OFFSET_OLDEST, 10, 0.05) == (0, [])
        assert time.monotonic() - t0 >= 0.04
        t = _when_waiting(log, lambda: log.publish([Message(value=b"a")]))
        nxt, got = log.consume_blocking(OFFSET_NEWEST, 10, 30)
        t.join()
        assert (nxt, [m.value for m in got]) == (1, [b"a"])
        assert log.waiting_readers == 0  # no waiter left behind


def test_sync_cancel_and_close(make_log: MakeLog) -> None:
    with make_log() as log:
        token = CancelToken()
        t = _when_waiting(log, token.cancel)
        with pytest.raises(CancelledError):
            log.consume_blocking(0, 10, 30, cancel=token)
        t.join()
        with pytest.raises(CancelledError):  # a cancelled token stays cancelled
            log.consume_blocking(0, 10, 30, cancel=token)
        t = _when_waiting(log, log.close)
        with pytest.raises(LogClosedError):
            log.consume_blocking(0, 10, 30)
        t.join()


def test_fifty_thread_tailers(make_log: MakeLog) -> None:
    n_tailers, n_msgs = 50, 30
    got: dict[int, list[bytes | None]] = {}
    with make_log() as log:

        def tail(i: int) -> None:
            offset, seen = 0, list[bytes | None]()
            while len(seen) < n_msgs:
                offset, msgs = log.consume_blocking(offset, 7, 30)
                seen += [m.value for m in msgs]
            got[i] = seen

        threads = [threading.Thread(target=tail, args=(i,)) for i in range(n_tailers)]
        for t in threads:
            t.start()
        for j in range(n_msgs):
            log.publish([Message(value=b"%d" % j)])
        for t in threads:
            t.join(60)
        assert len(got) == n_tailers
        assert all(v == [b"%d" % j for j in range(n_msgs)] for v in got.values())
        assert log.waiting_readers == 0


async def test_fifty_async_tailers_and_cancel(make_log: MakeLog) -> None:
    n_tailers, n_msgs = 50, 20
    with make_log() as log:

        async def tail() -> list[bytes | None]:
            offset, seen = 0, list[bytes | None]()
            while len(seen) < n_msgs:
                offset, msgs = await consume_blocking_async(log, offset, 5, 30)
                seen += [m.value for m in msgs]
            return seen

        tasks = [asyncio.create_task(tail()) for _ in range(n_tailers)]
        await _until_waiting(log, n_tailers)
        for j in range(n_msgs):
            await asyncio.to_thread(log.publish, [Message(value=b"%d" % j)])
        results = await asyncio.wait_for(asyncio.gather(*tasks), 60)
        assert all(r == [b"%d" % j for j in range(n_msgs)] for r in results)
        # timeout returns empty; cancellation stops the wait and leaves no waiter
        assert await consume_blocking_async(log, OFFSET_NEWEST, 10, 0.05) == (n_msgs, [])
        task = asyncio.create_task(consume_blocking_async(log, n_msgs, 10, 30))
        await _until_waiting(log, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert log.waiting_readers == 0
        # the async iterator, woken by a publish from another thread
        t = _when_waiting(log, lambda: log.publish([Message(value=b"tail")]))
        agen = seglog.aio.tail(log, OFFSET_NEWEST)
        first = await asyncio.wait_for(anext(agen), 30)
        await agen.aclose()
        t.join()
        assert first.value == b"tail"
        # closing the log fails the waiters
        waiter = asyncio.create_task(consume_blocking_async(log, n_msgs + 1, 10, 30))
        await _until_waiting(log, 1)
        await asyncio.to_thread(log.close)
        with pytest.raises(LogClosedError):
            await waiter


async def test_async_read_only_tailer_polls_other_writer(make_log: MakeLog) -> None:
    with make_log() as writer, open_log(writer.directory, read_only=True) as ro:
        t = _when_waiting(ro, lambda: writer.publish([Message(value=b"x")]))
        nxt, msgs = await consume_blocking_async(ro, 0, 10, 30)
        t.join()
        assert (nxt, [m.value for m in msgs]) == (1, [b"x"])
