"""``trim_by_size``: Kafka's ``retention.bytes`` (klevdb's TrimBySize)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seglog.storage.log import maint
from seglog.storage.retention import policy
from seglog.storage.retention.policy import ArchiveHook, TrimResult

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = ["trim_by_size"]


def trim_by_size(
    log: Log,
    max_bytes: int,
    *,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Remove the oldest closed segments while what remains (record batch bytes of
    every segment, the active one included) is still at least ``max_bytes`` without them
    (Kafka's retention.bytes rule: the log keeps at least ``max_bytes``, exceeding it by
    less than a segment). Never the active segment. Raises ValueError (negative size),
    ReadOnlyError, LogClosedError, OSError."""
    if max_bytes < 0:
        raise ValueError("max_bytes must be >= 0")
    with maint.maintenance_lock(log):
        closed = maint.closed_segments(log)
        n = policy.leftovers(log, closed)
        excess = sum(s.size for s in log.segments()[n:]) - max_bytes
        while n < len(closed) and excess - closed[n].size >= 0:
            excess -= closed[n].size
            n += 1
        return policy.trim_prefix(log, closed, n, archive=archive)
