"""``seglog.aio`` tailing: ``consume_blocking_async`` and ``tail`` woken by a writer in
another thread, timeouts, cancellation, close, many concurrent tailers, a read-only tailer
polling another writer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tests._logs import when_waiting
from tests._wait import async_wait_until

import seglog.aio
from seglog import OFFSET_NEWEST, Log, Message, open_log
from seglog.aio import consume_blocking_async
from seglog.errors import LogClosedError

MakeLog = Callable[..., Log]


async def _until_waiting(log: Log, waiters: int) -> None:
    await async_wait_until(
        lambda: log.waiting_readers >= waiters,
        interval=0.001,
        message="readers did not start waiting",
    )


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
        t = when_waiting(log, lambda: log.publish([Message(value=b"tail")]))
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
        t = when_waiting(ro, lambda: writer.publish([Message(value=b"x")]))
        nxt, msgs = await consume_blocking_async(ro, 0, 10, 30)
        t.join()
        assert (nxt, [m.value for m in msgs]) == (1, [b"x"])
