"""``trim_consumed``: remove what every named reader has passed (InfluxDB's topic max
index; an opt-in retention, Kafka has none built in).

The floor is the minimum over the named durable subscriptions of their lowest
unacknowledged offset, else their position (``subscription.floor``: read from the state
file, never opening or creating a subscription). A named subscription without state
(never subscribed) means no floor: nothing is trimmed below a reader that has not
started. Only whole closed segments wholly below the floor go (``trim_segments_below``);
the log start offset moves to the first kept segment's base offset, never inside a
segment, so every offset a reader still needs stays readable. Removal is
``policy.trim_prefix``'s: the new log start is persisted first (crash-safe).

The floor only rises while the readers run (acks remove pending offsets, fetches move
positions forward), so reading it before the maintenance lock is safe; a subscription
created meanwhile at an explicit old ``start`` is not protected (name it before).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from seglog.storage.log import maint, subscription
from seglog.storage.retention import policy
from seglog.storage.retention.policy import ArchiveHook, TrimResult

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = ["consumed_floor", "trim_consumed", "trim_segments_below"]


def consumed_floor(log: Log, subscriptions: Iterable[str]) -> int | None:
    """The lowest offset any of the named durable subscriptions still needs (see the
    module docstring); None when one of them has no state yet or none is named. Read-only.
    Raises TypeError (a plain string instead of names), ValueError (a bad name),
    LogCorruptedError (a damaged state file)."""
    if isinstance(subscriptions, (str, bytes)):
        raise TypeError("subscriptions: an iterable of names, not one string")
    lowest: int | None = None
    for name in list(subscriptions):
        mark = subscription.floor(log, name)
        if mark is None:
            return None
        lowest = mark if lowest is None else min(lowest, mark)
    return lowest


def trim_segments_below(
    log: Log,
    floor: int,
    *,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Remove the closed segments wholly below ``floor`` (capped at the high watermark):
    a segment goes when the next segment's base offset is at or below it. The log start
    offset moves to the first kept segment's base offset, never inside a segment (unlike
    ``trim_by_offset``). Never the active segment. Segments already below the log start
    (an interrupted trim) go whatever the floor. Raises ReadOnlyError, LogClosedError,
    OSError."""
    with maint.maintenance_lock(log):
        closed = maint.closed_segments(log)
        n = max(
            policy.leftovers(log, closed),
            policy.below(log, closed, min(floor, log.high_watermark)),
        )
        return policy.trim_prefix(log, closed, n, archive=archive)


def trim_consumed(
    log: Log,
    subscriptions: Iterable[str],
    *,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Remove the closed segments every named durable subscription has passed: those
    wholly below the lowest of their lowest unacknowledged offset (else their position).
    Nothing (but leftovers of an interrupted trim) when a named subscription does not
    exist yet or none is named. Subscriptions are read, never opened or changed.
    ``archive``: see ``ArchiveHook``. Raises TypeError, ValueError (bad names),
    LogCorruptedError (a damaged subscription state file), ReadOnlyError,
    LogClosedError, OSError."""
    floor = consumed_floor(log, subscriptions)
    return trim_segments_below(log, -1 if floor is None else floor, archive=archive)
