"""``delete_offsets``: remove an arbitrary set of records by offset (klevdb's Delete),
rewriting the affected closed segments with the cleaner's crash-safe swap
(``retention/rewrite.py``). Offsets stay; the removed ones become gaps (``get`` raises
NotFoundError for them)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from seglog.storage.log import maint
from seglog.storage.log.keys import forget_removed
from seglog.storage.retention.rewrite import Removed, rewrite_segment

if TYPE_CHECKING:
    from seglog.storage.log.log import Log

__all__ = ["delete_offsets"]


def delete_offsets(log: Log, offsets: Iterable[int]) -> Removed:
    """Remove the records at ``offsets``; returns ``(offsets actually removed, bytes
    freed)``. Offsets not stored (below the log start, already gone, past the log end)
    are left out of the result: check it. When the active segment holds one of them it
    is rolled first (a normal roll under the write lock; the next append goes to the new
    segment) and fsynced, so it is rewritten like any closed segment. Segments rolled by
    appends but not yet fsynced (flush.ms / flush.messages: the background round has
    not reached them) are fsynced first by one group commit round the call waits for,
    then rewritten too. The log start and end offsets never move. Raises ReadOnlyError,
    LogClosedError (closed, or offline: also when that fsync round fails, nothing then
    removed), StorageError (the roll failed), OSError."""
    wanted = sorted(set(offsets))
    with maint.maintenance_lock(log):
        maint.roll_holding(log, wanted)
        removed: list[int] = []
        freed = 0
        start = log.log_start_offset
        for seg in maint.closed_segments(log):
            lo = bisect.bisect_left(wanted, max(seg.base_offset, start))
            hi = bisect.bisect_left(wanted, seg.next_offset)
            if lo < hi:
                gone, size = rewrite_segment(log, seg, wanted[lo:hi])
                removed.extend(gone)
                freed += size
        forget_removed(log, removed, rescan=True)  # a key's older record becomes its last
        maint.close_retired(log)
        return Removed(removed, freed)
