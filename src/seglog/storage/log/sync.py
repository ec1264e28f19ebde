"""Group commit: one fsync thread per log; waiters whose offsets are covered share one fsync.

The log tells the thread how far it has appended (``request``); the thread repeatedly asks
the log for a sync point (what to fsync, and the log end offset those bytes reach), runs
the fsyncs outside every lock, then completes every waiting future whose offset is now
durable. Appends arriving during an fsync are covered by the next one: that is the
sharing. On any fsync error the thread stops for good and every waiter, present and
future, fails with LogClosedError: the error is never retried (a failed fsync may have
dropped the dirty pages, so a retry that succeeds proves nothing: PostgreSQL's
"fsyncgate", 2018).

A blocking caller (``sync``: ``Log.sync``, ``publish``) runs the round itself when none is
under way, so a lone writer pays one write + fdatasync and no thread hand-off; rounds are
serialised (one at a time, whoever runs them), a caller's failed round takes the log
offline as the thread's does, and callers arriving during a round wait for the thread's
next round like ``wait_for`` (group commit). ``wait_for`` (the broker's event loop) always
leaves the fsync to the thread.

Thread-safety: ``appended``, ``sync``, ``wait_for``, ``flush`` and ``close`` may be called
from any thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from seglog.errors import LogClosedError
from seglog.storage.fileio.counters import FileCounters

__all__ = ["GroupCommit", "SyncPoint"]

_logger = logging.getLogger(__name__)

SyncPoint = tuple[Callable[[], None], int]
"""(run the fsyncs, log end offset they make durable)."""


class GroupCommit:
    """The fsync thread of one log.

    ``point`` returns the current :data:`SyncPoint` (called under no lock of ours);
    ``on_durable(end)`` runs on the thread after each successful fsync; ``on_error(exc)``
    once after a failed one. ``interval_ms``: also sync on a timer when dirty
    (``flush.ms``); None: only when requested. ``counters``: the log's
    :class:`FileCounters`, whose ``syncs`` counts each successful round (here, the one
    place that runs them: the thread's rounds and callers' alike).
    """

    def __init__(
        self,
        name: str,
        durable: int,
        *,
        point: Callable[[], SyncPoint],
        on_durable: Callable[[int], None],
        on_error: Callable[[BaseException], None],
        interval_ms: int | None = None,
        counters: FileCounters | None = None,
    ) -> None:
        self.counters = counters if counters is not None else FileCounters()
        """``syncs``: number of successful fsync rounds run (each covers every waiter
        it reaches)."""
        self._point = point
        self._on_durable = on_durable
        self._on_error = on_error
        self._interval = None if interval_ms is None else interval_ms / 1000.0
        # ``with self._lock`` (C) rather than ``with self._cond`` (two Python-level calls):
        # the same lock, so notify/wait still work while holding it; a lone publisher
        # takes it four times per call
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._durable = durable
        self._requested = durable
        self._appended = durable
        self._waiters: list[tuple[int, int, Future[int]]] = []
        self._rounds: list[Future[int]] = []  # ``flush`` futures: want one more round
        self._seq = itertools.count()
        self._closing = False
        self._busy = False
        """A round runs (in the fsync thread or in a caller of ``sync``): one at a time."""
        self._leader = 0
        self._thread_waits = False
        """The fsync thread waits for the end of a caller's round (notify it then)."""
        """Thread id running the current round."""
        self.error: BaseException | None = None
        self.on_round: Callable[[float, int], None] | None = None
        """Called on the thread after each successful fsync round with (seconds the fsyncs
        took, offsets the round made durable: its group-commit size in records)."""
        self._thread = threading.Thread(target=self._run, name=f"seglog-sync-{name}", daemon=True)
        self._thread.start()

    @property
    def durable(self) -> int:
        """Log end offset known to be on stable storage."""
        return self._durable

    def appended(self, end: int, *, sync_now: bool) -> None:
        """Note that the log now ends at ``end``; ask for an fsync if ``sync_now``."""
        with self._lock:
            self._appended = max(self._appended, end)
            if sync_now and end > self._requested:
                self._requested = end
                self._cond.notify()

    def wait_for(self, offset: int) -> Future[int]:
        """A future completing with the durable end offset once it is >= ``offset``."""
        fut: Future[int] = Future()
        # Mark it running so a waiter giving up (asyncio.wrap_future cancelling on a client
        # disconnect) cannot cancel it: set_result() on a cancelled future would raise and
        # kill the fsync thread.
        fut.set_running_or_notify_cancel()
        with self._lock:
            if self.error is not None or (self._closing and offset > self._durable):
                fut.set_exception(LogClosedError(f"log offline or closed: {self.error}"))
            elif offset <= self._durable:
                fut.set_result(self._durable)
            else:
                heapq.heappush(self._waiters, (offset, next(self._seq), fut))
                self._requested = max(self._requested, offset)
                self._cond.notify()
        return fut

    def flush(self) -> Future[int]:
        """A future completing with the durable end offset after a whole fsync round
        that starts after this call, even when nothing new was appended (it covers
        rolled segments and directory changes made before the call)."""
        fut: Future[int] = Future()
        fut.set_running_or_notify_cancel()  # see wait_for
        with self._lock:
            if self.error is not None or self._closing:
                fut.set_exception(LogClosedError(f"log offline or closed: {self.error}"))
            else:
                self._rounds.append(fut)
                self._cond.notify()
        return fut

    def sync(self, offset: int) -> int:
        """Block until the durable end offset is >= ``offset``; return it. When no fsync
        round is running, the calling thread runs the round itself (no hand-off to the
        fsync thread and back: the one-writer case costs what a write + fdatasync does);
        otherwise it waits for the rounds under way and the next one, which the fsync
        thread runs for every waiter at once (group commit). For blocking callers only
        (``Log.sync``, ``publish``): an event loop uses ``wait_for``. LogClosedError as
        ``wait_for``'s future."""
        with self._lock:
            if self.error is not None or (self._closing and offset > self._durable):
                raise LogClosedError(f"log offline or closed: {self.error}")
            if offset <= self._durable:
                return self._durable
            lead = not self._busy and offset <= self._appended
            if lead:
                self._busy = True
                self._leader = threading.get_ident()
                rounds, self._rounds = self._rounds, []
        if not lead:
            return self.wait_for(offset).result()
        if self._round(rounds) is not None:
            raise LogClosedError(f"log offline after fsync error: {self.error}")
        if self._durable >= offset:
            return self._durable
        return self.wait_for(offset).result()  # pragma: no cover (the round reached it)

    def close(self) -> None:
        """Make everything appended durable, then stop the thread (idempotent)."""
        with self._lock:
            self._closing = True
            self._cond.notify()
            leader = self._busy and self._leader == threading.get_ident()
        if self._thread is not threading.current_thread() and not leader:
            self._thread.join()

    def _pending(self) -> bool:
        if self._rounds:
            return True
        return self._appended > self._durable and (self._requested > self._durable or self._closing)

    def _run(self) -> None:
        while True:
            with self._lock:
                deadline = None if self._interval is None else time.monotonic() + self._interval
                while True:
                    if self.error is not None:  # a caller's round failed: waiters failed
                        return
                    if self._busy:  # a caller runs a round: it notifies when done
                        self._thread_waits = True
                        self._cond.wait()
                        continue
                    if self._pending():
                        break
                    if self._closing:
                        self._fail_waiters(LogClosedError("log closed"))
                        return
                    timeout = None if deadline is None else deadline - time.monotonic()
                    if timeout is not None and timeout <= 0:
                        if self._appended > self._durable:
                            self._requested = max(self._requested, self._appended)
                            break
                        deadline = time.monotonic() + (self._interval or 0)
                        continue
                    self._cond.wait(timeout)
                self._busy = True
                self._leader = threading.get_ident()
                rounds, self._rounds = self._rounds, []
            if self._round(rounds) is not None:
                return

    def _round(self, rounds: list[Future[int]]) -> BaseException | None:
        """Run one fsync round (``_busy`` set by the caller, cleared here), complete the
        waiters it covers and ``rounds``; return the fsync error (the log is then offline)
        or None. An interruption that is no fsync error (KeyboardInterrupt in a caller
        running the round) leaves everything as it was, for the next round, and is raised."""
        try:
            run, end = self._point()
            started = time.perf_counter()
            run()
        except Exception as e:
            _logger.error("fsync failed, log taken offline: %s", e)
            with self._lock:
                self.error = e
                self._fail_waiters(LogClosedError(f"log offline after fsync error: {e}"))
                self._busy = False
                self._cond.notify()
            for fut in rounds:
                fut.set_exception(LogClosedError(f"log offline after fsync error: {e}"))
            self._on_error(e)
            return e
        except BaseException:
            with self._lock:
                self._rounds[:0] = rounds
                self._requested = max(self._requested, self._appended)
                self._busy = False
                self._cond.notify()
            raise
        took = time.perf_counter() - started
        ready: list[Future[int]] = []
        try:
            with self._lock:
                self.counters.syncs += 1
                covered = max(end - self._durable, 0)
                self._durable = max(self._durable, end)
                while self._waiters and self._waiters[0][0] <= self._durable:
                    ready.append(heapq.heappop(self._waiters)[2])
                ready.extend(rounds)
                durable = self._durable
            # Publish the new durable end (the log's high watermark) before answering any
            # waiter: a producer acknowledged by a completed future must see its own write
            # in the next ListOffsets or Fetch (read-your-writes).
            try:
                self._on_durable(durable)
            except Exception:
                _logger.exception("on_durable callback failed")
            finally:  # waiters of other threads are answered even if this one is interrupted
                for fut in ready:
                    fut.set_result(durable)
            observer = self.on_round
            if observer is not None:
                try:
                    observer(took, covered)
                except Exception:
                    _logger.exception("on_round observer failed")
        finally:
            with self._lock:
                self._busy = False
                # wake the fsync thread only when it has something to do: waking it for
                # nothing costs the lone writer a GIL hand-off per round
                if self._thread_waits or self._pending() or self._closing:
                    self._thread_waits = False
                    self._cond.notify()
        return None

    def _fail_waiters(self, exc: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        rounds, self._rounds = self._rounds, []
        for _, _, fut in waiters:
            fut.set_exception(exc)
        for fut in rounds:
            fut.set_exception(exc)
