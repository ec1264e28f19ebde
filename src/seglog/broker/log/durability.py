"""Waiting for group-commit fsyncs without blocking the event loop, at one cross-thread
wake-up per fsync round instead of one per produce request.

Storage's ``Log.append`` already asks its fsync thread to sync (``sync_now``); the broker
only needs to learn when the durable end offset passes each request's end. Per log, the
loop keeps a heap of (end offset, callback) and at most one outstanding
``Log.sync_future`` for the highest end offset waited for; its completion hands one
``call_soon_threadsafe`` to the loop, which runs every callback now covered and, if any
remain, asks again. Callbacks get ``None`` (durable) or the exception that took the log
offline (``LogClosedError`` after an fsync error, or at close).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable

from seglog.storage import Log

__all__ = ["DurabilityWaiters"]

log = logging.getLogger(__name__)

Callback = Callable[[BaseException | None], None]


class _LogWaiters:
    __slots__ = ("heap", "log", "outstanding")

    def __init__(self, log: Log) -> None:
        self.log = log
        self.heap: list[tuple[int, int, Callback]] = []
        self.outstanding = -1  # end offset of the sync_future in flight, -1 if none


class DurabilityWaiters:
    """Loop-side group-commit waiters for every log. Loop thread only."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._logs: dict[int, _LogWaiters] = {}
        self._seq = itertools.count()

    def wait(self, log: Log, end_offset: int, callback: Callback) -> None:
        """Call ``callback(None)`` on the loop once ``log``'s durable end offset reaches
        ``end_offset`` (``callback(exc)`` if the log goes offline or closes first). Runs
        the callback at once when the high watermark is already there."""
        if log.high_watermark >= end_offset:
            callback(None)
            return
        waiters = self._logs.get(id(log))
        if waiters is None:
            waiters = self._logs[id(log)] = _LogWaiters(log)
        heapq.heappush(waiters.heap, (end_offset, next(self._seq), callback))
        if waiters.outstanding < 0:
            self._request(waiters, end_offset)

    def _request(self, waiters: _LogWaiters, end_offset: int) -> None:
        waiters.outstanding = end_offset
        future = waiters.log.sync_future(end_offset)
        loop = self._loop

        def done(fut: concurrent.futures.Future[int]) -> None:
            exc = fut.exception()
            durable = -1 if exc is not None else fut.result()
            # RuntimeError: the loop closed (shutdown), nobody is waiting any more
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._settle, waiters, durable, exc)

        future.add_done_callback(done)

    def _settle(self, waiters: _LogWaiters, durable: int, exc: BaseException | None) -> None:
        waiters.outstanding = -1
        heap = waiters.heap
        if exc is not None:
            ready = [cb for _end, _seq, cb in heap]
            heap.clear()
        else:
            durable = max(durable, waiters.log.high_watermark)
            ready = []
            while heap and heap[0][0] <= durable:
                ready.append(heapq.heappop(heap)[2])
        for cb in ready:
            try:
                cb(exc)
            except Exception:
                log.exception("produce completion failed")
        if heap:
            self._request(waiters, max(end for end, _seq, _cb in heap))
        elif self._logs.get(id(waiters.log)) is waiters:
            del self._logs[id(waiters.log)]
