"""Wait for new data: futures completed when the high watermark passes an offset.

klevdb's ``notify`` package, with ``concurrent.futures.Future`` so one mechanism serves
threads (``future.result(timeout)``) and asyncio (``asyncio.wrap_future``) without storage
importing asyncio. The Log calls :meth:`Notifier.notify` from its ``on_append`` path
(the fsync thread under the default policy, the appending thread when relaxed) and
:meth:`Notifier.close` when it closes.

Thread-safety: every method may be called from any thread. A waiter giving up cancels its
future; cancelled futures are dropped at once (no leak with many short timeouts).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError

from seglog.errors import LogClosedError

__all__ = ["Notifier"]


class Notifier:
    """Futures waiting for the high watermark to pass an offset.

    ``high_watermark``: returns the current high watermark (read when a waiter registers,
    so data that became visible just before is never missed).
    """

    def __init__(self, high_watermark: Callable[[], int]) -> None:
        self._hwm = high_watermark
        self._lock = threading.Lock()
        self._waiters: dict[int, tuple[int, Future[int]]] = {}
        self._seq = itertools.count()
        self._closed: BaseException | None = None

    def __len__(self) -> int:
        """Number of waiting futures (``Log.waiting_readers``): registered, not yet
        completed, cancelled or failed by ``close``."""
        return len(self._waiters)

    def wait(self, offset: int) -> Future[int]:
        """A future completing with the high watermark once it is > ``offset`` (the message
        at ``offset`` is visible), or failing with LogClosedError when the log closes.
        Cancel it to stop waiting."""
        fut: Future[int] = Future()
        with self._lock:
            if self._closed is not None:
                fut.set_exception(LogClosedError(f"log closed: {self._closed}"))
                return fut
            key = next(self._seq)
            self._waiters[key] = (offset, fut)
        hwm = self._hwm()
        if hwm > offset:
            self._complete(key, fut, hwm)
        else:
            fut.add_done_callback(lambda f: self._forget(key, f))
        return fut

    def _forget(self, key: int, fut: Future[int]) -> None:
        if fut.cancelled():
            with self._lock:
                self._waiters.pop(key, None)

    def _complete(self, key: int, fut: Future[int], hwm: int) -> None:
        with self._lock:
            self._waiters.pop(key, None)
        with contextlib.suppress(InvalidStateError):  # cancelled meanwhile by its waiter
            fut.set_result(hwm)

    def notify(self, high_watermark: int) -> None:
        """Complete every future waiting for an offset below ``high_watermark``."""
        if not self._waiters:
            return
        with self._lock:
            ready = [(k, f) for k, (o, f) in self._waiters.items() if o < high_watermark]
        for key, fut in ready:
            self._complete(key, fut, high_watermark)

    def close(self, reason: str = "closed") -> None:
        """Fail every waiter, present and future, with LogClosedError (idempotent)."""
        with self._lock:
            if self._closed is None:
                self._closed = LogClosedError(reason)
            waiters, self._waiters = list(self._waiters.values()), {}
        for _, fut in waiters:
            with contextlib.suppress(InvalidStateError):
                fut.set_exception(LogClosedError(f"log {reason}"))
