"""Statistics of a log and its segments, and the file-operation counters a log keeps.

``log_stats(log)`` walks the record batch headers of every visible batch (61 bytes read
per batch, no record decoding) to count records; everything else comes from memory and
``os.stat``. The counters (:class:`FileCounters`) are monotonic per open ``Log`` (aof's
counters): the broker exports them as metrics labelled by topic and partition.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from seglog.storage.record.batch import HEADER_SIZE, parse_header

if TYPE_CHECKING:
    from seglog.storage.log.log import Log
    from seglog.storage.segment.segment import Segment

from seglog.storage.fileio.counters import FileCounters

__all__ = [
    "FileCounters",
    "LogStats",
    "SegmentInfo",
    "SegmentStats",
    "log_stats",
    "segment_info",
    "segment_stats",
]


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment as ``Log.segments()`` lists it: what the log keeps in memory, no file
    read (``SegmentStats`` counts records by reading batch headers)."""

    base_offset: int
    """Its first offset (the file name, ``%020d.log``)."""
    next_offset: int
    """Offset after its last batch (appended ones, visible or not yet); equal to
    ``base_offset`` when it is empty. The next segment's base offset may be higher (gaps
    left by the cleaner) but never lower."""
    size: int
    """Bytes of whole batches in its ``.log`` file (appended ones, visible or not yet)."""
    max_timestamp_ms: int
    """Largest record timestamp it holds (ms, batch maxTimestamp), -1 when it holds none
    (empty, or only records without timestamps)."""
    fd_open: bool
    """Whether its read handle is open now (False once ``Log.gc`` closed it idle)."""


def segment_info(seg: Segment) -> SegmentInfo:
    """The :class:`SegmentInfo` of ``seg`` now."""
    return SegmentInfo(
        base_offset=seg.base_offset,
        next_offset=seg.next_offset,
        size=seg.size,
        max_timestamp_ms=seg.max_timestamp,
        fd_open=seg.fd_is_open,
    )


@dataclass(frozen=True)
class SegmentStats:
    """One segment (``%020d.log`` and its indexes), visible data only."""

    base_offset: int
    """Base offset (the file name)."""
    next_offset: int
    """Offset after its last visible batch; last offset = next_offset - 1."""
    messages: int
    """Records in its visible batches (sum of recordCount)."""
    batches: int
    """Record batches."""
    bytes: int
    """Bytes of whole visible batches."""
    first_timestamp_ms: int
    """baseTimestamp of its first batch (ms), -1 when empty."""
    max_timestamp_ms: int
    """Largest batch maxTimestamp (ms), -1 when empty."""
    index_bytes: int
    """Size of ``.index`` on disk (bytes; 0 when missing)."""
    time_index_bytes: int
    """Size of ``.timeindex`` on disk (bytes)."""
    fd_open: bool
    """Whether its read handle is open (False after ``Log.gc`` closed it)."""
    idle_s: float
    """Seconds since its file handle was last used."""


@dataclass(frozen=True)
class LogStats:
    """A log as a whole (``Log.stats()``); offsets and times of visible data."""

    directory: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    messages: int
    """Records stored (visible); below ``log_end - log_start`` after compaction."""
    batches: int
    bytes: int
    """Bytes of whole batches in the ``.log`` files."""
    first_timestamp_ms: int
    """baseTimestamp of the first batch (ms), -1 when empty."""
    last_timestamp_ms: int
    """Largest maxTimestamp (ms), -1 when empty."""
    index_bytes: int
    """Offset + time index files, bytes on disk."""
    key_index_keys: int
    """Keys in the key index (0 without ``key_index``)."""
    key_index_bytes: int
    """Approximate persisted size of the key index (bytes)."""
    open_fds: int
    """Segment read handles currently open."""
    read_only: bool
    segments: list[SegmentStats] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    """:class:`FileCounters` as a dict."""


def _file_size(path: os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def segment_stats(seg: Segment, upper: int) -> SegmentStats:
    """Stats of ``seg`` counting only batches with a base offset below ``upper``."""
    size, pos = seg.size, 0
    messages = batches = 0
    first_ts = max_ts = -1
    nxt = seg.base_offset
    fd = seg.fd if size else -1
    while size - pos >= HEADER_SIZE:
        h = parse_header(os.pread(fd, HEADER_SIZE, pos))
        if h.base_offset >= upper or h.size < HEADER_SIZE:
            break
        if batches == 0:
            first_ts = h.base_timestamp
        batches += 1
        messages += h.record_count
        max_ts = max(max_ts, h.max_timestamp)
        nxt = h.next_offset
        pos += h.size
    return SegmentStats(
        base_offset=seg.base_offset,
        next_offset=nxt,
        messages=messages,
        batches=batches,
        bytes=pos,
        first_timestamp_ms=first_ts,
        max_timestamp_ms=max_ts,
        index_bytes=_file_size(seg.index.path),
        time_index_bytes=_file_size(seg.time_index.path),
        fd_open=seg.fd_is_open,
        idle_s=max(0.0, time.monotonic() - seg.last_used),
    )


def log_stats(log: Log) -> LogStats:
    """See ``Log.stats``."""
    log._state.check_open()
    hw = log.high_watermark
    segs = [segment_stats(s, hw) for s in list(log._state.segments)]
    keys = log._state.keys
    counters = log.counters.as_dict()
    firsts = [s.first_timestamp_ms for s in segs if s.batches]
    return LogStats(
        directory=str(log.directory),
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=hw,
        messages=sum(s.messages for s in segs),
        batches=sum(s.batches for s in segs),
        bytes=sum(s.bytes for s in segs),
        first_timestamp_ms=firsts[0] if firsts else -1,
        last_timestamp_ms=max((s.max_timestamp_ms for s in segs), default=-1),
        index_bytes=sum(s.index_bytes + s.time_index_bytes for s in segs),
        key_index_keys=len(keys) if keys is not None else 0,
        key_index_bytes=keys.size_bytes() if keys is not None else 0,
        open_fds=sum(1 for s in segs if s.fd_open),
        read_only=log.read_only,
        segments=segs,
        counters=counters,
    )
