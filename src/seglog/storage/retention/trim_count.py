"""``trim_by_count``: keep at most N records (NATS Streaming's MaxMsgs per channel)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from seglog.storage.log import maint
from seglog.storage.record.batch import HEADER_SIZE, parse_header
from seglog.storage.record.message import decode_batches
from seglog.storage.retention import policy
from seglog.storage.retention.policy import ArchiveHook, TrimResult

if TYPE_CHECKING:
    from seglog.storage.log.log import Log
    from seglog.storage.segment.segment import Segment

__all__ = ["trim_by_count"]

_Batch = tuple[int, int, int, int]  # position, base offset, record count, last offset


def _batches(seg: Segment, size: int) -> list[_Batch]:
    out: list[_Batch] = []
    for pos, _base, _size, _mts, _nxt in seg.walk(
        0, size, seg.base_offset, verify_crc=False, max_bytes=(1 << 31) - 1
    ):
        h = parse_header(os.pread(seg.fd, HEADER_SIZE, pos))
        out.append((pos, h.base_offset, h.record_count, h.last_offset))
    return out


def _first_kept(log: Log, max_messages: int) -> int | None:
    """Offset of the oldest of the newest ``max_messages`` records, None if the log holds
    no more than that."""
    need = max_messages
    start = log.log_start_offset
    for seg in reversed(maint.segments(log)):
        batches = _batches(seg, seg.size)
        for pos, base, count, last in reversed(batches):
            if last < start:
                return None
            if count < need:
                need -= count
                continue
            if count == last - base + 1:  # no gaps in the batch: offsets are base..last
                return last - need + 1 if need else last + 1
            data = os.pread(seg.fd, parse_header(os.pread(seg.fd, HEADER_SIZE, pos)).size, pos)
            offsets = [m.offset for m in decode_batches(data)]
            return offsets[-need] if need else last + 1
    return None


def trim_by_count(
    log: Log,
    max_messages: int,
    *,
    archive: ArchiveHook | None = None,
) -> TrimResult:
    """Keep at most the newest ``max_messages`` records: the log start offset moves to
    the oldest of them (inside a segment if need be, as DeleteRecords) and the closed
    segments wholly below it are removed; never the active segment. Records are counted
    from the batch headers (recordCount), so compacted logs count what they hold.
    Raises ValueError (negative count), ReadOnlyError, LogClosedError, OSError."""
    if max_messages < 0:
        raise ValueError("max_messages must be >= 0")
    with maint.maintenance_lock(log):
        closed = maint.closed_segments(log)
        first = _first_kept(log, max_messages)
        if first is None:
            return policy.trim_prefix(log, closed, policy.leftovers(log, closed))
        first = min(first, log.high_watermark)
        n = policy.below(log, closed, first)
        return policy.trim_prefix(log, closed, n, new_start=first, archive=archive)
