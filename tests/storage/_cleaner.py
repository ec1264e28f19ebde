"""Helpers for the retention / compaction / delete tests: logs with many small segments,
and crashes simulated at a named step of an operation."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import seglog
from seglog.storage import Log, Message


class Crash(Exception):
    """Raised by a step hook: the operation stops there, as if the process died."""


def crash_at(step: str, nth: int = 1) -> Callable[[str], None]:
    """A step hook raising Crash at the ``nth`` occurrence of ``step``."""
    seen = 0

    def hook(name: str) -> None:
        nonlocal seen
        if name == step:
            seen += 1
            if seen == nth:
                raise Crash(step)

    return hook


def abandon(log: Log) -> None:
    """Drop a log as a crash would: no clean-shutdown marker, nothing finished."""
    log._state.offline = Crash("simulated crash")  # internals: no public way to crash
    log.close()


def keyed_log(
    where: Path | Callable[..., Log],
    n: int = 120,
    keys: int = 10,
    *,
    ts0: int = 1_000,
    segment_bytes: int = 1024,
) -> Log:
    """A log of ``n`` messages with keys k0..k{keys-1} in turn, timestamps ts0 + i,
    one publish each (many small segments); ``where``: a new directory on disk, or the
    ``make_log`` fixture (disk and memory)."""
    if isinstance(where, Path):
        log = seglog.open_log(where, create=True, segment_bytes=segment_bytes)
    else:
        log = where(segment_bytes=segment_bytes)
    for i in range(n):
        log.publish([Message(key=b"k%d" % (i % keys), value=b"v%d" % i, timestamp=ts0 + i)])
    return log


def all_messages(log: Log) -> list[Message]:
    """Every visible message from the log start."""
    out: list[Message] = []
    offset = seglog.OFFSET_OLDEST
    while True:
        offset, msgs = log.consume(offset, 1000)
        if not msgs:
            return out
        out.extend(msgs)


def leftover_files(path: Path) -> list[str]:
    """Files of unfinished operations in a partition directory."""
    return sorted(
        f for f in os.listdir(path) if f.endswith((".deleted", ".cleaned", ".swap", ".retired"))
    )
