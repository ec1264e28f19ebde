"""``adopt``: append the record batches of a file by moving the file into the log as a
new segment, instead of copying its bytes (the Spark sink's staged files, issue 9).

The file (whole record batches v2, as ``append`` takes them, on the log's filesystem) is
validated like an ``append`` (length, magic 2, CRC-32C, record counts, max.message.bytes),
then, under the log's write lock:

1. its batches get their offsets (baseOffset patched in place, partitionLeaderEpoch
   stamped; LogAppendTime topics also get maxTimestamp and a new CRC), and the file is
   fdatasync'ed, so the header patches are durable before the file is in the log;
2. a non-empty active segment (and any rolled one not yet fsynced) is fdatasync'ed, and
   the active one rolled (as an append past
   segment.bytes would, without creating a new file); an empty active segment at the log
   end is replaced instead (its base offset is the file's);
3. the file is renamed to ``%020d.log`` (the log end offset) and becomes the active
   segment, its offset and time index entries built from the headers read in the
   validation pass (no second read).

Crash safety: until the rename the log is untouched (the file keeps its patched headers,
harmless: a later ``adopt`` or ``append`` patches them again). After it, the segment is
above the recovery point, so the next open after a crash CRC-scans it and rebuilds its
indexes (``segment/recovery.py``); the directory entry is made durable by the next fsync
round (``sync``), like a roll's. Because the previous segment is fdatasync'ed before the
rename, a durable adopted segment never follows a torn one.

A file that cannot be moved (another filesystem, e.g. a memory log on tmpfs; bigger than
segment.bytes; more records than seglog.segment.messages; more offsets than a segment's
u32 relative offsets hold) is appended by copy through ``append`` instead and then
removed: the outcome is the same. The copy goes in groups of whole batches, cut where
appending the batches one by one would roll (segment.bytes, seglog.segment.messages, u32
offsets; the first group fills the active segment), so every segment keeps to the
limits appends keep to. Each group is one ``append`` (all or nothing); a group failing
leaves the groups before it in the log and the file in place (whole batches: the log end
offset says how many of its records made it).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pathlib
import time
from typing import TYPE_CHECKING

from seglog.errors import StorageError
from seglog.storage.config import AppendInfo
from seglog.storage.fileio import files
from seglog.storage.log import append, maint
from seglog.storage.record.batch import (
    BatchHeader,
    validate_for_append,
)
from seglog.storage.segment.segment import Placed, Segment

if TYPE_CHECKING:
    from seglog.storage.log.state import LogState

__all__ = ["adopt"]

_U32 = (1 << 32) - 1


def adopt(st: LogState, path: str | os.PathLike[str]) -> AppendInfo:
    """Append the record batches of the file at ``path`` (module doc); the file is gone
    afterwards (moved into the log, or copied and removed). Writes reach the page cache
    and the file's own bytes are fdatasync'ed; ``sync`` makes the new directory entry
    durable. Returns what ``append`` returns. Raises as ``append`` does
    (CorruptRecordError, InvalidRecordError, RecordTooLargeError: the file is then left
    where it was), FileNotFoundError, StorageError (rename or index files failed: the
    log is unchanged; or, copied in groups, a group's write failed: the groups before it
    stay in the log, the file in place)."""
    st.check_writable()
    source = pathlib.Path(path)
    fd = os.open(source, os.O_RDWR)
    try:
        stat = os.fstat(fd)
        size = stat.st_size
        if size == 0:
            validate_for_append(b"", st.config.max_message_bytes)  # InvalidRecordError
        with mmap.mmap(fd, size) as mm:
            view = memoryview(mm)
            try:
                batches = validate_for_append(view, st.config.max_message_bytes)
                span = sum(h.last_offset_delta + 1 for _, h in batches)
                limit = st.config.segment_messages
                movable = (
                    size <= st.config.segment_bytes
                    and (limit is None or span <= limit)
                    and span - 1 <= _U32
                    and stat.st_dev == os.stat(st.directory).st_dev
                )
                if movable:
                    info = _move(st, source, fd, view, batches)
                else:  # a copy, as appends; then the file goes
                    info = _copy(st, view, batches)
                    source.unlink()
            finally:
                view.release()  # before the mapping closes
    finally:
        os.close(fd)
    return info


def _move(
    st: LogState,
    source: pathlib.Path,
    fd: int,
    mm: memoryview,
    batches: list[tuple[int, BatchHeader]],
) -> AppendInfo:
    log_append = st.config.message_timestamp_type == "LogAppendTime"
    count = sum(h.record_count for _, h in batches)
    with st.lock:
        st.check_writable()
        now = append.now_ms()
        active = st.segments[-1]
        base = st.log_end_offset
        placed, offset, max_ts = append.place_batches(st, mm, batches, now, log_append)
        replace = active.size == 0 and active.base_offset == base
        target = files.log_path(st.directory, base)
        try:
            os.fdatasync(fd)  # the headers patched through the (shared) mapping
            # a durable adopted segment never follows a torn one
            for earlier in [*st.rolled_unsynced, *(() if replace else (active,))]:
                earlier.sync()
            os.replace(source, target)
            st.counters.renames += 1
        except OSError as e:
            st.counters.errors += 1
            raise StorageError(f"cannot adopt {source} into {st.directory}: {e}") from e
        try:
            seg = _open_adopted(st, base, placed, offset)
        except (OSError, StorageError) as e:
            st.counters.errors += 1
            with contextlib.suppress(OSError):  # leave the log as it was
                os.replace(target, source)
                st.counters.renames += 1
            raise StorageError(f"cannot adopt {source} into {st.directory}: {e}") from e
        seg.first_append_ms = now
        st.counters.opens += 1
        if replace:
            st.segments = [*st.segments[:-1], seg]
            maint.retire(st, active)  # readers holding the empty segment finish on it
        else:
            active.finish_time_index()
            st.rolled_unsynced.append(active)
            st.txn_at_roll = (base, st.txns.ongoing)
            st.counters.rolls += 1
            st.segments = [*st.segments, seg]
        st.dir_dirty = True
        st.counters.appends += 1
        st.counters.appended_bytes += len(mm)
        st.counters.appended_records += count
        st.log_end_offset = offset
        append.observe(st, seg, mm, batches, placed)  # transactional batches (no markers)
        append.index_keys(st, mm, base)
        st.append_count += 1
        relaxed = not st.config.fsync_before_ack
        if relaxed:
            st.high_watermark = offset
            st.unflushed = 0  # the file is durable; the round covers the roll and rename
    assert st.group_commit is not None  # writable
    st.group_commit.appended(offset, sync_now=True)
    if relaxed:
        append.fire(st, st.high_watermark)
    return AppendInfo(base, offset - 1, now if log_append else -1, count, max_ts)


def _copy(st: LogState, view: memoryview, batches: list[tuple[int, BatchHeader]]) -> AppendInfo:
    """Append ``batches`` (validated, whole ``view``) through ``append``, one call per
    group of ``_groups``; the AppendInfo of them all (log append time: the first's)."""
    with st.lock:
        active = st.segments[-1]
        used = (active.size, st.log_end_offset - active.base_offset)
    infos: list[AppendInfo] = []
    for a, b in _groups(st, batches, len(view), used):
        # released even when append raises (its traceback holds the slice): the mapping
        # must close with no slice of it alive
        with view[a:b] as part:
            infos.append(append.append(st, part))
    first, last = infos[0], infos[-1]
    return AppendInfo(
        first.base_offset,
        last.last_offset,
        first.log_append_time_ms,
        sum(i.record_count for i in infos),
        max(i.max_timestamp_ms for i in infos),
    )


def _groups(
    st: LogState, batches: list[tuple[int, BatchHeader]], end: int, used: tuple[int, int]
) -> list[tuple[int, int]]:
    """``[start, end)`` byte ranges of ``batches`` (contiguous up to ``end``), cut before
    each batch that would roll the segment it goes to (``append._must_roll`` without
    segment.ms: bytes, records, u32 relative offsets); ``used``: (bytes, offsets) of the
    active segment, which the first range fills. A batch alone over a limit is a range
    of its own (``append`` puts it in a new segment, as it does any such batch)."""
    cfg = st.config
    limit = cfg.segment_messages
    nbytes, offsets = used
    groups: list[tuple[int, int]] = []
    start = batches[0][0]
    for pos, h in batches:
        span = h.last_offset_delta + 1
        if nbytes > 0 and (
            nbytes + h.size > cfg.segment_bytes
            or (limit is not None and offsets + span > limit)
            or offsets + span - 1 > _U32
        ):
            if pos > start:
                groups.append((start, pos))
                start = pos
            nbytes = offsets = 0
        nbytes += h.size
        offsets += span
    groups.append((start, end))
    return groups


def _open_adopted(st: LogState, base: int, placed: list[Placed], end: int) -> Segment:
    """The Segment of the renamed file, its index files written from ``placed`` (counted
    in the log's counters, as the removal of an empty active segment's index files)."""
    for index_path in (
        files.index_path(st.directory, base),
        files.timeindex_path(st.directory, base),
    ):
        # an empty active segment's: not shared with it
        if files.remove_if_exists(index_path):
            st.counters.deletions += 1
        os.close(os.open(index_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    seg = Segment(st.directory, base, read_only=False)
    seg.counters = st.counters
    try:
        seg.record_written(0, placed, end, st.config.index_interval_bytes)
        seg.index.flush()
        seg.time_index.flush()
    except BaseException:
        seg.close()
        raise
    seg.last_used = time.monotonic()
    return seg
