"""asyncio front end of the embedded log: wait for new data without blocking the loop.

``seglog.storage`` never imports asyncio (the layers rule); this module adapts its
loop-agnostic wake-up futures (``Log.wait_for_offset``) to asyncio::

    async for message in seglog.aio.tail(log, seglog.OFFSET_OLDEST):
        ...
    next_offset, messages = await seglog.aio.consume_blocking_async(log, offset, 100, 5)
    deliveries = await seglog.aio.fetch(log.subscribe("workers"), 100, 5)

Waiting costs no thread and no polling: the writer (in this process) completes the
future, and ``asyncio.wrap_future`` wakes the task on its own loop. A read-only log written
by another process is polled every 50 ms. Cancelling the task (``task.cancel()``,
``asyncio.timeout``) stops the wait at once. Reads run on the loop thread (page-cache
reads plus record decoding of at most ``max_count`` messages).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar, overload

from seglog.storage import POLL_S, Message, TypedLog, TypedMessage, start_offset

if TYPE_CHECKING:
    from seglog.storage import Delivery, Log, Subscription

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["consume_blocking_async", "fetch", "tail"]


@overload
async def consume_blocking_async(
    log: Log, offset: int, max_count: int, timeout_s: float
) -> tuple[int, list[Message]]: ...


@overload
async def consume_blocking_async(
    log: TypedLog[K, V], offset: int, max_count: int, timeout_s: float
) -> tuple[int, list[TypedMessage[K, V]]]: ...


async def consume_blocking_async(
    log: Log | TypedLog[Any, Any], offset: int, max_count: int, timeout_s: float
) -> tuple[int, list[Message]] | tuple[int, list[TypedMessage[Any, Any]]]:
    """As ``Log.consume_blocking``, awaiting instead of blocking: up to ``max_count``
    messages from ``offset`` (sentinels allowed), waiting up to ``timeout_s`` seconds for
    the first one (a ``TypedLog``'s messages come decoded). Returns ``(next offset,
    messages)``; ``(offset, [])`` on timeout.
    Raises InvalidOffsetError (offset outside [log start, log end]), LogClosedError (also
    when the log closes while waiting), ``asyncio.CancelledError`` when cancelled."""
    if isinstance(log, TypedLog):
        return log.decode_all(await consume_blocking_async(log.log, offset, max_count, timeout_s))
    loop = asyncio.get_running_loop()
    offset = start_offset(log, offset)
    deadline = loop.time() + timeout_s
    while True:
        nxt, msgs = log.consume(offset, max_count)
        if msgs:
            return nxt, msgs
        offset = nxt
        remaining = deadline - loop.time()
        if remaining <= 0:
            return nxt, []
        fut = log.wait_for_offset(offset)
        try:
            wait = min(remaining, POLL_S) if log.read_only else remaining
            await asyncio.wait_for(asyncio.wrap_future(fut), wait)
        except TimeoutError:
            pass
        finally:
            fut.cancel()


async def tail(
    log: Log, offset: int, *, max_count: int = 1000, idle_timeout_s: float = 3600.0
) -> AsyncIterator[Message]:
    """Yield every message from ``offset`` on, waiting for new ones forever (until the
    task is cancelled or the log closes: LogClosedError). ``max_count`` messages are read
    per step; ``idle_timeout_s`` only bounds each internal wait."""
    offset = start_offset(log, offset)
    while True:
        offset, msgs = await consume_blocking_async(log, offset, max_count, idle_timeout_s)
        for m in msgs:
            yield m


async def fetch(subscription: Subscription, max_count: int, timeout_s: float) -> list[Delivery]:
    """As ``Subscription.fetch``, awaiting instead of blocking: up to ``max_count``
    deliveries (expired ones redelivered first, then new messages within
    ``max_in_flight``), waiting up to ``timeout_s`` seconds for new data, an ack or an
    expiry; ``[]`` on timeout. Raises LogClosedError (the subscription or its log
    closed, also while waiting), ``asyncio.CancelledError`` when cancelled. The journal
    write (and its fsync under the default policy) runs on the loop thread."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        wake = subscription.wake_future()  # before looking: no wake-up lost in between
        try:
            out = subscription.fetch_now(max_count)
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
