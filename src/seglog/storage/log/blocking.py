"""Blocking consume: wait for new data with a timeout and cancellation (klevdb's
``log_blocking.go``; InfluxDB's streaming readers).

The writer wakes waiters through the log's notifier (``Log.wait_for_offset``): no busy
polling in the process that appends. A read-only log opened beside a writer in *another*
process has no one to wake it, so it polls (``refresh``) every 50 ms. Any number of tailers
may wait on one log at once (one future each). The asyncio variant is
``seglog.aio.consume_blocking_async``: storage
itself never imports asyncio.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import TYPE_CHECKING

from seglog.storage.log.message_ops import consume
from seglog.storage.record.message import OFFSET_NEWEST, OFFSET_OLDEST, Message

if TYPE_CHECKING:
    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.log import Log

__all__ = ["POLL_S", "CancelToken", "consume_blocking", "start_offset"]

POLL_S = 0.05
"""Seconds between polls of a read-only log (another process writes it)."""


class CancelToken:
    """Cancels blocking consumes from another thread (Go's context cancellation).

    Pass it as ``cancel=`` to ``Log.consume_blocking``; ``cancel()`` wakes every consume
    using it at once, which then raises ``concurrent.futures.CancelledError``.
    A token stays cancelled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._callbacks: dict[int, Callable[[], object]] = {}
        self._ids = iter(range(1 << 62))

    @property
    def cancelled(self) -> bool:
        """True once ``cancel`` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Cancel: wake every consume waiting with this token (idempotent)."""
        with self._lock:
            self._cancelled = True
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for cb in callbacks:
            cb()

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run ``callback`` on cancel (at once if already cancelled); returns an
        unregister function."""
        with self._lock:
            if not self._cancelled:
                key = next(self._ids)
                self._callbacks[key] = callback

                def unregister() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return unregister
        callback()
        return lambda: None


def start_offset(
    log: Log, offset: int, isolation_level: IsolationLevel = "read_uncommitted"
) -> int:
    """Resolve the sentinels: OFFSET_OLDEST → log start, OFFSET_NEWEST → high watermark
    (read_committed: the last stable offset)."""
    if offset == OFFSET_NEWEST:
        return consume(log, OFFSET_NEWEST, 0, isolation_level)[0]
    if offset == OFFSET_OLDEST:
        return log.log_start_offset
    return offset


def consume_blocking(
    log: Log,
    offset: int,
    max_count: int,
    timeout_s: float,
    *,
    cancel: CancelToken | None = None,
    isolation_level: IsolationLevel = "read_uncommitted",
) -> tuple[int, list[Message]]:
    """See ``Log.consume_blocking``."""
    offset = start_offset(log, offset, isolation_level)
    deadline = time.monotonic() + timeout_s
    committed = isolation_level == "read_committed"
    while True:
        nxt, msgs = consume(log, offset, max_count, isolation_level)
        if msgs:
            return nxt, msgs
        offset = nxt  # past control batches or compacted gaps
        if cancel is not None and cancel.cancelled:
            raise CancelledError("consume cancelled")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return nxt, []
        # read_committed, held at the LSO by an ongoing transaction: wait for the next
        # append (its marker moves the high watermark too)
        fut = log.wait_for_offset(max(offset, log.high_watermark) if committed else offset)
        unregister = cancel.on_cancel(fut.cancel) if cancel is not None else None
        try:
            fut.result(timeout=min(remaining, POLL_S) if log.read_only else remaining)
        except TimeoutError:
            pass
        except CancelledError:
            if cancel is not None and cancel.cancelled:
                raise
        finally:
            fut.cancel()
            if unregister is not None:
                unregister()
