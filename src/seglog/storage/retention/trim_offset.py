"""``trim_by_offset``: delete the records before an offset (Kafka's DeleteRecords)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from seglog.errors import InvalidOffsetError
from seglog.storage.log import maint
from seglog.storage.retention import policy
from seglog.storage.retention.policy import ArchiveHook, TrimResult

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = ["trim_by_offset"]


def trim_by_offset(
    log: Log,
    before: int,
    *,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Make ``before`` the log start offset (Kafka's DeleteRecords; it may fall inside a
    segment): offsets below it are unreadable at once (InvalidOffsetError), the closed
    segments wholly below it are removed. The new log start is persisted
    (``log-start-offset``) and survives a restart. ``before`` at or below the current
    log start changes nothing. Raises InvalidOffsetError when ``before`` is above the
    high watermark (Kafka: OFFSET_OUT_OF_RANGE) or negative, ReadOnlyError,
    LogClosedError, OSError."""
    with maint.maintenance_lock(log):
        closed = maint.closed_segments(log)
        hw = log.high_watermark
        if before < 0 or before > hw:
            raise InvalidOffsetError(
                f"cannot delete records before offset {before}: outside [0, high watermark {hw}]"
            )
        n = policy.below(log, closed, before)
        return policy.trim_prefix(log, closed, n, new_start=before, archive=archive)
