"""The read side of a log, as functions of its :class:`~seglog.storage.log.state.LogState`:
read, read_slice, batches, offset_for_time, refresh (read-only logs), and the locate /
resume helpers consume uses. Readers never take the write lock
(except ``refresh`` on read-only logs): they snapshot the segment list (replaced, never
mutated, on roll), the high watermark, then a segment's ``size``, and only look below them.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from seglog.errors import InvalidOffsetError
from seglog.storage.fileio import files
from seglog.storage.log import maint
from seglog.storage.record.batch import HEADER_SIZE, parse_header
from seglog.storage.record.message import OFFSET_NEWEST, OFFSET_OLDEST, decode_batches
from seglog.storage.remote.tier import RemoteTier
from seglog.storage.segment import checkpoints
from seglog.storage.segment.segment import Segment

if TYPE_CHECKING:
    from seglog.storage.index.txn_index import AbortedTxn
    from seglog.storage.log.state import LogState

__all__ = [
    "FileSlice",
    "aborted_entries",
    "aborted_transactions",
    "batches",
    "count_read",
    "find_next",
    "first_at_or_after",
    "locate",
    "offset_for_time",
    "read",
    "read_next",
    "read_slice",
    "refresh",
    "remember",
    "resolve_read",
]

_BASE_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")


class FileSlice(NamedTuple):
    """Bytes of a segment file for ``os.sendfile(out, fd, position, size)``."""

    fd: int
    """Open fd of the segment's .log (owned by the Log: do not close)."""
    position: int
    """Byte position in the file."""
    size: int
    """Number of bytes (whole record batches)."""


# -- reading ---------------------------------------------------------------------------


def refresh(st: LogState) -> int:
    """Read-only logs: pick up batches and segments another process appended since;
    returns the new log end offset (a no-op on a writer)."""
    if not st.read_only:
        return st.log_end_offset
    with st.lock:
        st.check_open()
        bases = files.list_segment_bases(st.directory)
        st.log_start_checkpoint = checkpoints.read_log_start_checkpoint(st.directory)
        cleaned_end = checkpoints.read_cleaner_checkpoint(st.directory)
        segs = st.segments
        if segs and segs[-1].base_offset in bases:
            tail = segs[-1]
            tail.extend(st.config.index_interval_bytes)
            new = [b for b in bases if b > tail.base_offset]
        else:
            # the tail is gone (retention removed it after the writer rolled past it, so
            # every segment before it went too): reload the segments the directory holds
            for seg in segs:
                maint.retire(st, seg)
            segs, new = [], bases
        for b in new:
            if segs and segs[-1].next_offset < b and segs[-1].size != os.fstat(segs[-1].fd).st_size:
                break  # the previous segment still ends in a torn/incomplete batch
            seg = Segment(st.directory, b, read_only=True)
            seg.allow_gaps = b < cleaned_end
            seg.counters = st.counters
            st.counters.opens += 1
            seg.scan(st.config.index_interval_bytes, verify_crc=True, max_bytes=1 << 31)
            segs = [*segs, seg]
        # leading segments the writer removed (retention, or local copies of a tiered log)
        while len(segs) > 1 and not segs[0].path.exists():
            maint.retire(st, segs[0])
            segs = segs[1:]
        old_tail = st.segments[-1] if st.segments else None
        old_first = st.segments[0].base_offset if st.segments else -1
        st.segments = segs
        if segs and segs[0].base_offset != old_first:
            _refresh_tier(st)
        if old_tail is not None and segs and segs[-1] is not old_tail and old_tail in segs:
            old_tail.seal_indexes()  # complete now: its indexes can live in their files
        end = segs[-1].next_offset if segs else 0
        old_end = st.log_end_offset
        st.log_end_offset = st.high_watermark = max(old_end, end)
        if st.log_end_offset > old_end:  # the writer's transactions since (in memory)
            for seg in segs:
                if seg.next_offset > old_end:
                    seg.txn_index.truncate_from(old_end)
            st.txns.replay(segs, old_end)
        if st.keys is not None and st.log_end_offset > old_end:
            for batch in batches(st, max(old_end, st.log_start_offset), st.log_end_offset):
                st.keys.add(batch)
        if st.log_end_offset > old_end:
            st.notifier.notify(st.log_end_offset)  # tailers waiting on this reader
        return st.log_end_offset


def _refresh_tier(st: LogState) -> None:
    """A read-only log saw its first local segment change: the writer may have tiered (or
    tiered more of) the log; re-read its manifest."""
    if st.remote is None:
        st.remote = RemoteTier.open(st.directory, None, writer=False)
    else:
        st.remote.reload()


def locate(st: LogState, offset: int, upper: int) -> tuple[Segment, int, int] | None:
    """(segment, position, visible size) of the batch holding ``offset`` (or the first
    batch after it), None if that is at or past ``upper``. Offsets below the first local
    segment are looked up in the remote tier (a cached, CRC-checked copy)."""
    segs = st.segments
    remote = st.remote
    if remote is not None and segs and offset < segs[0].base_offset:
        interval = st.config.index_interval_bytes
        hit = remote.locate(offset, upper, segs[0].base_offset, interval)
        if hit is None and st.read_only and remote.manifest.end_offset <= offset:
            remote.reload()  # uploaded by the writer since this reader read the manifest
            hit = remote.locate(offset, upper, segs[0].base_offset, interval)
        if hit is not None:
            return hit
    i = max(0, bisect.bisect_right(segs, offset, key=_base_offset) - 1)
    while i < len(segs):
        seg = segs[i]
        size = seg.size
        found = seg.find(offset, size)
        if found is not None:
            pos, h = found
            return (seg, pos, size) if h.base_offset < upper else None
        i += 1
    return None


def resolve_read(st: LogState, offset: int, upper: int | None) -> tuple[int, int]:
    st.check_open()
    if st.read_only and (offset >= st.log_end_offset or (upper or 0) > st.log_end_offset):
        refresh(st)
    hw = st.high_watermark
    up = hw if upper is None else min(upper, st.log_end_offset)
    if offset == OFFSET_OLDEST:
        offset = st.log_start_offset
    elif offset == OFFSET_NEWEST:
        offset = hw
    start = st.log_start_offset
    if offset < start:
        raise InvalidOffsetError(
            f"offset {offset} is below the log start offset {start} "
            f"(removed by retention or DeleteRecords); valid: [{start}, {st.log_end_offset}]"
        )
    if offset > st.log_end_offset:
        raise InvalidOffsetError(
            f"offset {offset} outside [{start}, {st.log_end_offset}] (past the log end)"
        )
    return offset, up


def read(st: LogState, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes:
    """Whole record batches starting with the batch containing ``offset``: up to
    ``max_bytes`` bytes but at least one whole batch (Kafka's "first batch even if
    larger"), only batches whose base offset is below ``upper`` (default: the high
    watermark). ``b""`` at the end. Raises InvalidOffsetError if ``offset`` is below
    the log start offset or above the log end offset, LogClosedError."""
    offset, up = resolve_read(st, offset, upper)
    if offset >= up:
        return b""
    loc = locate(st, offset, up)
    if loc is None:
        return b""
    seg, pos, size = loc
    data = seg.read_at(pos, max_bytes, size, up)
    count_read(st, len(data))
    return data


def count_read(st: LogState, nbytes: int) -> None:
    if nbytes:
        counters = st.counters
        counters.reads += 1
        counters.read_bytes += nbytes


def read_next(
    st: LogState, offset: int, max_bytes: int, up: int
) -> tuple[bytes, Segment | None, int]:
    """``_find_next``, counted in ``counters.reads`` / ``read_bytes``."""
    found = find_next(st, offset, max_bytes, up)
    count_read(st, len(found[0]))
    return found


def find_next(
    st: LogState, offset: int, max_bytes: int, up: int
) -> tuple[bytes, Segment | None, int]:
    """``read`` for an ``offset`` already resolved (``_resolve_read``), ``up`` the bound:
    ``(data, segment, position of data)`` (``b""`` at the end). Starts at the remembered
    position (``_read_hint``) when ``offset`` is where the last consume stopped and the
    batch there holds it, else locates the batch through the offset index."""
    if offset >= up:
        return b"", None, 0
    segs = st.segments
    hint = st.read_hint
    if hint is not None and hint[0] == offset and hint[1] is segs:
        seg, pos = hint[2], hint[3]
        size = seg.size
        if size - pos >= HEADER_SIZE:
            head = os.pread(seg.fd, HEADER_SIZE, pos)
            base, length = _BASE_LENGTH.unpack_from(head, 0)
            bsize = length + 12
            if (
                base <= offset <= base + _LAST_OFFSET_DELTA.unpack_from(head, 23)[0]
                and base < up
                and HEADER_SIZE <= bsize <= size - pos
            ):
                # a batch over half of max_bytes: read exactly it (no trimming copy)
                if 2 * bsize > max_bytes:
                    data = os.pread(seg.fd, bsize, pos)
                else:
                    data = seg.read_at(pos, max_bytes, size, up)
                if len(data) >= bsize:
                    return data, seg, pos
    loc = locate(st, offset, up)
    if loc is None:
        return b"", None, 0
    seg, pos, size = loc
    return seg.read_at(pos, max_bytes, size, up), seg, pos


def remember(  # noqa: PLR0917 (internal: where a consume stopped)
    st: LogState, offset: int, segs: list[Segment], seg: Segment, pos: int, data: bytes
) -> None:
    """Set ``_read_hint`` for a consume continuing at ``offset``: the batch of ``data``
    (read from ``pos`` of ``seg`` while ``_segments`` was ``segs``) holding it, or the
    position after ``data``. Not for a remote segment (its cached copy may be evicted)."""
    if seg.directory != st.directory:
        st.read_hint = None
        return
    p, n = 0, len(data)
    while p < n:
        base, length = _BASE_LENGTH.unpack_from(data, p)
        if base + _LAST_OFFSET_DELTA.unpack_from(data, p + 23)[0] >= offset:
            break
        p += length + 12
    st.read_hint = (offset, segs, seg, pos + p)


def read_slice(
    st: LogState, offset: int, max_bytes: int, *, upper: int | None = None
) -> FileSlice | None:
    """As ``read``, as a :class:`FileSlice` for ``os.sendfile``; None at the end."""
    offset, up = resolve_read(st, offset, upper)
    if offset >= up:
        return None
    loc = locate(st, offset, up)
    if loc is None:
        return None
    seg, pos, size = loc
    end = pos
    while size - end >= HEADER_SIZE:
        h = parse_header(os.pread(seg.fd, HEADER_SIZE, end))
        if h.base_offset >= up or (end > pos and end + h.size - pos > max_bytes):
            break
        end += h.size
    if end <= pos:
        return None
    count_read(st, end - pos)
    return FileSlice(seg.fd, pos, end - pos)


def batches(
    st: LogState, start: int = OFFSET_OLDEST, end: int | None = None
) -> Iterator[memoryview]:
    """Iterate whole stored record batches from the one holding ``start``
    (OFFSET_OLDEST: log start) up to (not including) batches at or past ``end``
    (default: the high watermark at the call). InvalidOffsetError as ``read``."""
    offset, up = resolve_read(st, start, end)
    while offset < up:
        data = read(st, offset, 1 << 20, upper=up)
        if not data:
            return
        mv = memoryview(data)
        pos, n = 0, len(data)
        while pos < n:
            base, length = _BASE_LENGTH.unpack_from(data, pos)
            size = length + 12
            yield mv[pos : pos + size]
            offset = base + _LAST_OFFSET_DELTA.unpack_from(data, pos + 23)[0] + 1
            pos += size


def first_at_or_after(
    batch: bytes, timestamp_ms: int, min_offset: int = 0
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of ``batch`` at or after ``timestamp_ms``
    whose offset is at least ``min_offset`` (the log start offset)."""
    for m in decode_batches(batch):
        if m.timestamp >= timestamp_ms and m.offset >= min_offset:
            return m.offset, m.timestamp
    return None


def offset_for_time(st: LogState, timestamp_ms: int) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record whose timestamp is >=
    ``timestamp_ms``, found through the first batch whose max timestamp is >= it
    (Kafka ListOffsets semantics); None if no visible batch qualifies."""
    st.check_open()
    hw, start = st.high_watermark, st.log_start_offset
    local = list(st.segments)
    remote: Iterator[Segment] = iter(())
    if st.remote is not None and local:
        remote = st.remote.segments_for_time(
            timestamp_ms, local[0].base_offset, st.config.index_interval_bytes
        )
    for seg in itertools.chain(remote, local):
        size = seg.size
        found = seg.find_time(timestamp_ms, size)
        while found is not None:
            pos, h = found
            if h.base_offset >= hw:
                return None
            if h.max_timestamp >= timestamp_ms and h.last_offset >= start:
                batch = os.pread(seg.fd, h.size, pos)
                hit = first_at_or_after(batch, timestamp_ms, start)
                if hit is not None:
                    return hit
            # records below the log start offset (trimmed inside a batch) don't count:
            # try the next batch (Kafka searches from the log start offset)
            pos += h.size
            if size - pos < HEADER_SIZE:
                break
            found = pos, parse_header(os.pread(seg.fd, HEADER_SIZE, pos))
    return None


def aborted_entries(st: LogState, start: int, end: int) -> list[AbortedTxn]:
    """The ``.txnindex`` entries of the segments from the one holding ``start`` on whose
    marker is >= ``start`` and first offset < ``end``, by first offset; below the first
    local segment, those of the remote tier's segments (``RemoteTier.aborted_entries``:
    RemoteCorruptionError, RemoteStorageError)."""
    st.check_open()
    segs = st.segments
    found: list[AbortedTxn] = []
    if st.remote is not None and segs and start < segs[0].base_offset:
        found = st.remote.aborted_entries(start, end, segs[0].base_offset)
    i = max(0, bisect.bisect_right(segs, start, key=_base_offset) - 1)
    found += [
        e
        for seg in segs[i:]
        for e in seg.txn_index.entries
        if e.last_offset >= start and e.first_offset < end
    ]
    found.sort(key=_first_offset)
    return found


def aborted_transactions(st: LogState, start: int, end: int) -> list[tuple[int, int]]:
    """See ``Log.aborted_transactions``."""
    return [(e.producer_id, e.first_offset) for e in aborted_entries(st, start, end)]


def _first_offset(e: AbortedTxn) -> int:
    return e.first_offset


def _base_offset(seg: Segment) -> int:
    return seg.base_offset
