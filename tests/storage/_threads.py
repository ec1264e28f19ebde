"""The threads a log starts (its fsync thread: ``seglog-sync-<directory name>``), to wait
for what they do instead of sleeping."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from seglog.storage import Log
from seglog.storage.log import append

T = TypeVar("T")


def with_sync_thread(start: Callable[[], T]) -> tuple[T, threading.Thread]:
    """``start()`` (opening a log) and the fsync thread it started: the one thread named
    ``seglog-sync-*`` alive afterwards that was not before."""
    before = set(threading.enumerate())
    result = start()
    [thread] = [
        t for t in threading.enumerate() if t not in before and t.name.startswith("seglog-sync-")
    ]
    return result, thread


def in_sync_point(log: Log) -> bool:
    """Whether a thread is inside ``log``'s sync point (``append.sync_point``: where an fsync
    round starts, under the log lock), e.g. blocked on the lock the test holds."""
    for frame in sys._current_frames().values():
        if frame.f_code is append.sync_point.__code__ and frame.f_locals.get("st") is log._state:
            return True
    return False
