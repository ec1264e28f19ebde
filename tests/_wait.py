"""Wait for a condition another thread or process brings about, with a deadline.

``wait_until(predicate)`` polls ``predicate()`` until it returns a truthy value and returns
that value; past ``timeout`` seconds it raises AssertionError with ``message`` and the last
value seen (or the last exception the predicate raised, when it never returned). The sleep
between polls only spaces the checks: it never decides an outcome. A predicate may do one
step of the work itself (poll a consumer once, collect what came) and say whether it is
done; it then blocks on its own and ``interval=0`` is usual. ``message`` may be a callable,
called at the timeout (to show what was collected). ``async_wait_until`` is the same for a
coroutine (``await asyncio.sleep`` between polls, so the loop keeps running); its predicate
may be a coroutine function.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["async_wait_until", "wait_until"]

_NOTHING = object()


Message = str | Callable[[], str]


def _timed_out(message: Message, timeout: float, last: object, error: BaseException | None) -> str:
    text = message() if callable(message) else message
    seen = f"last error {error!r}" if last is _NOTHING else f"last value {last!r}"
    return f"{text or 'condition not met'} (within {timeout} s; {seen})"


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.01,
    message: Message = "",
    *,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value, and
    return that value. Exceptions of the types in ``ignore`` count as "not yet". Raises
    AssertionError (``message``, the last value or error) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except ignore as e:
            error = e
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(message, timeout, last, error)) from error
        if interval:
            time.sleep(interval)


async def async_wait_until(
    predicate: Callable[[], T | Awaitable[T]],
    timeout: float = 30.0,
    interval: float = 0.01,
    message: Message = "",
) -> T:
    """``wait_until`` for asyncio tests: ``predicate`` may be sync or return an awaitable;
    the loop runs (``await asyncio.sleep(interval)``) between polls."""
    deadline = time.monotonic() + timeout
    last: object = _NOTHING
    while True:
        value = predicate()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        last = value
        if time.monotonic() >= deadline:
            raise AssertionError(_timed_out(message, timeout, last, None))
        await asyncio.sleep(interval)  # also with 0: the loop runs the other tasks
