"""``trim_by_age``: Kafka's ``retention.ms`` (klevdb's TrimByAge)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from seglog.storage.log import maint
from seglog.storage.retention import policy
from seglog.storage.retention.policy import ArchiveHook, TrimResult

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = ["trim_by_age"]


def trim_by_age(
    log: Log,
    max_age_ms: int,
    *,
    now_ms: int | None = None,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Remove the oldest closed segments whose largest record timestamp (ms; the file's
    mtime when the segment has none) is older than ``now_ms - max_age_ms``, stopping at
    the first younger one (Kafka's retention.ms). Never the active segment. The log start
    offset moves to the first remaining segment. ``archive``: see ``ArchiveHook``.
    ``now_ms`` defaults to the wall clock.
    Raises ValueError (negative age), ReadOnlyError, LogClosedError, OSError."""
    if max_age_ms < 0:
        raise ValueError("max_age_ms must be >= 0")
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    with maint.maintenance_lock(log):
        closed = maint.closed_segments(log)
        n = policy.leftovers(log, closed)
        while n < len(closed) and policy.segment_time_ms(closed[n]) < now - max_age_ms:
            n += 1
        return policy.trim_prefix(log, closed, n, archive=archive)
