"""Idle file handle GC (klevdb's ``GC(unusedFor)``): close the read handles of segments
nobody read recently; the next read reopens them (``Segment.fd``).

A log with thousands of segments otherwise keeps one open file per segment for as long as
it is open. The writer's active segment is never closed. Contract for readers: a file
descriptor obtained from the log (``Log.read_slice``'s ``FileSlice.fd``) must be used
within :data:`MIN_IDLE_S` seconds: a handle used more recently is never closed, whatever
``unused_for_s`` says (the broker's sendfile runs at once).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = ["MIN_IDLE_S", "gc", "start_gc"]

MIN_IDLE_S = 0.5
"""Handles used within this many seconds are never closed (readers' grace period)."""


def gc(log: Log, unused_for_s: float) -> int:
    """Close the ``.log`` handles of ``log``'s segments unused for ``unused_for_s``
    seconds (>= 0; at least :data:`MIN_IDLE_S`), except the writer's active segment;
    returns how many were closed.
    Safe beside readers and the writer (any thread); LogClosedError on a closed log."""
    if unused_for_s < 0:
        raise ValueError("unused_for_s must be >= 0")
    log._state.check_open()
    cutoff = time.monotonic() - max(unused_for_s, MIN_IDLE_S)
    segs = list(log._state.segments)
    if not log.read_only:
        segs = segs[:-1]
    closed = sum(1 for seg in segs if seg.release_fd(cutoff))
    log.counters.gc_closes += closed
    return closed


def start_gc(log: Log, every_s: float, unused_for_s: float) -> Callable[[], None]:
    """Run ``gc(log, unused_for_s)`` every ``every_s`` seconds on a daemon thread until
    the returned stop function is called or the log closes (``Log.close`` stops it)."""
    if every_s <= 0:
        raise ValueError("every_s must be > 0")
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every_s):
            if log._state.closed:
                return
            try:
                gc(log, unused_for_s)
            except Exception:  # closed meanwhile: the next round exits
                if log._state.closed:
                    return

    thread = threading.Thread(target=run, name=f"seglog-gc-{log.directory.name}", daemon=True)
    thread.start()

    def stop_gc() -> None:
        stop.set()
        if thread is not threading.current_thread():
            thread.join()

    return stop_gc
