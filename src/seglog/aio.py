"""asyncio front end of the embedded log: wait for new data without blocking the loop.

``seglog.storage`` never imports asyncio (the layers rule); this module adapts its
loop-agnostic wake-up futures (``Log.wait_for_offset``) to asyncio::

    async for message in seglog.aio.tail(log, seglog.OFFSET_OLDEST):
        ...
    next_offset, messages = await seglog.aio.consume_blocking_async(log, offset, 100, 5)
    sub = log.subscribe("workers")
    deliveries = await seglog.aio.fetch(sub, 100, 5)
    await seglog.aio.ack(sub, [d.offset for d in deliveries])

Waiting costs no thread and no polling: the writer (in this process) completes the
future, and ``asyncio.wrap_future`` wakes the task on its own loop. A read-only log written
by another process is polled every 50 ms. Cancelling the task (``task.cancel()``,
``asyncio.timeout``) stops the wait at once. ``consume_blocking_async`` and ``tail`` read
on the loop thread (page-cache reads plus record decoding of at most ``max_count``
messages); a durable subscription's ``fetch`` and ``ack`` do their work (reads, journal
write, fsync) in the loop's default executor (``asyncio.to_thread``), so the loop keeps
running while the disk flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from seglog.storage import POLL_S, Message, TypedLog, TypedMessage, start_offset

if TYPE_CHECKING:
    from seglog.storage import Delivery, IsolationLevel, Log, Subscription

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["ack", "consume_blocking_async", "fetch", "tail"]


@overload
async def consume_blocking_async(
    log: Log,
    offset: int,
    max_count: int,
    timeout_s: float,
    *,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> tuple[int, list[Message]]: ...


@overload
async def consume_blocking_async(
    log: TypedLog[K, V],
    offset: int,
    max_count: int,
    timeout_s: float,
    *,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> tuple[int, list[TypedMessage[K, V]]]: ...


async def consume_blocking_async(
    log: Log | TypedLog[Any, Any],
    offset: int,
    max_count: int,
    timeout_s: float,
    *,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> tuple[int, list[Message]] | tuple[int, list[TypedMessage[Any, Any]]]:
    """As ``Log.consume_blocking``, awaiting instead of blocking: up to ``max_count``
    messages from ``offset`` (sentinels allowed), waiting up to ``timeout_s`` seconds for
    the first one (a ``TypedLog``'s messages come decoded). Returns ``(next offset,
    messages)``; ``(offset, [])`` on timeout. ``isolation_level`` as ``Log.consume``
    (read_committed: up to the last stable offset, aborted records skipped).
    Raises InvalidOffsetError (offset outside [log start, log end]), LogClosedError (also
    when the log closes while waiting), ``asyncio.CancelledError`` when cancelled."""
    if isinstance(log, TypedLog):
        return log.decode_all(
            await consume_blocking_async(
                log.log, offset, max_count, timeout_s, isolation_level=isolation_level
            )
        )
    loop = asyncio.get_running_loop()
    offset = start_offset(log, offset, isolation_level)
    deadline = loop.time() + timeout_s
    committed = isolation_level == "read_committed"
    while True:
        nxt, msgs = log.consume(offset, max_count, isolation_level=isolation_level)
        if msgs:
            return nxt, msgs
        offset = nxt
        remaining = deadline - loop.time()
        if remaining <= 0:
            return nxt, []
        # read_committed, held at the LSO by a transaction: wait for the next append
        fut = log.wait_for_offset(max(offset, log.high_watermark) if committed else offset)
        try:
            wait = min(remaining, POLL_S) if log.read_only else remaining
            await asyncio.wait_for(asyncio.wrap_future(fut), wait)
        except TimeoutError:
            pass
        finally:
            fut.cancel()


async def tail(
    log: Log,
    offset: int,
    *,
    max_count: int = 1000,
    idle_timeout_s: float = 3600.0,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> AsyncGenerator[Message, None]:
    """Yield every message from ``offset`` on, waiting for new ones forever (until the
    task is cancelled or the log closes: LogClosedError). ``max_count`` messages are read
    per step; ``idle_timeout_s`` only bounds each internal wait; ``isolation_level`` as
    ``Log.consume``."""
    offset = start_offset(log, offset, isolation_level)
    while True:
        offset, msgs = await consume_blocking_async(
            log, offset, max_count, idle_timeout_s, isolation_level=isolation_level
        )
        for m in msgs:
            yield m


async def fetch(subscription: Subscription, max_count: int, timeout_s: float) -> list[Delivery]:
    """As ``Subscription.fetch``, awaiting instead of blocking: up to ``max_count``
    deliveries (expired ones redelivered first, then new messages within
    ``max_in_flight``), waiting up to ``timeout_s`` seconds for new data, an ack or an
    expiry; ``[]`` on timeout. Raises LogClosedError (the subscription or its log
    closed, also while waiting), ValueError on ``max_count`` < 1,
    ``asyncio.CancelledError`` when cancelled.

    Each look (``Subscription.fetch_now``: the reads, the journal write and, under the
    default policy, its fsync) runs in a worker thread (``asyncio.to_thread``), never on
    the loop thread; the deliveries are durable when it returns. A task cancelled while
    a look is in that thread does not stop it: deliveries it made are lost to this caller
    and redelivered once their ``ack_wait_ms`` expires (at-least-once)."""
    if max_count < 1:
        raise ValueError("max_count must be >= 1")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        wake = subscription.wake_future()  # before looking: no wake-up lost in between
        try:
            out = await asyncio.to_thread(subscription.fetch_now, max_count)
            if out:
                return out
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            expiry = subscription.next_expiry_s()
            wait = remaining if expiry is None else min(remaining, expiry)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.wrap_future(wake), max(wait, 0.0))
        finally:
            wake.cancel()


async def ack(subscription: Subscription, offsets: int | Iterable[int]) -> int:
    """As ``Subscription.ack``, awaiting instead of blocking: acknowledge one offset or
    several; once it returns they are never delivered again (the journal fsynced under the
    default policy, the page cache under ``flush_messages`` / ``flush_ms``). Returns how
    many were in flight (now acknowledged); offsets below ``position`` not in flight are
    ignored. Raises as ``Subscription.ack``: ValueError (an offset at or above
    ``position``, never delivered: nothing of the call acknowledged), LogClosedError,
    StorageError (the state could not be written: nothing acknowledged).

    The journal write and its fsync run in a worker thread (``asyncio.to_thread``), never
    on the loop thread. ``offsets`` is read on the calling thread first. Cancelling the
    task while the ack is in that thread does not stop it: it completes there, and the
    caller cannot tell whether it did (an ack is idempotent: repeat it)."""
    if isinstance(offsets, Iterable):
        offsets = list(offsets)
    return await asyncio.to_thread(subscription.ack, offsets)
