"""What retention, the cleaner and delete-by-offsets need from a Log's internals, in one
place: the maintenance lock, the list of closed segments, moving the log start offset
(persisted in ``log-start-offset``), dropping and replacing segments, retiring the
replaced Segment objects.

Thread-safety: one maintenance operation at a time per log (``maintenance_lock``); the
segment list is swapped under the log's write lock (readers snapshot it, see
``reader.py``). A removed or replaced segment keeps its open file for
``RETIRE_DELAY_S`` seconds so readers that snapshotted it finish (the unlinked inode stays
readable); a reader reopening it by path after that gets InvalidOffsetError.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING

from seglog.storage.fileio import files
from seglog.storage.log import append
from seglog.storage.remote.tier import RemoteTier

if TYPE_CHECKING:
    from seglog.storage.index.txn_index import AbortedTxn
    from seglog.storage.log.log import Log
    from seglog.storage.log.state import LogState
    from seglog.storage.remote.store import RemoteStorage
    from seglog.storage.segment.segment import Segment

__all__ = [
    "RETIRE_DELAY_S",
    "aborted_entries",
    "attach_tier",
    "close_retired",
    "closed_segments",
    "drop_segments",
    "maintenance_lock",
    "replace_segment",
    "retire",
    "roll_holding",
    "segments",
    "set_log_start",
]

RETIRE_DELAY_S = 10.0
"""Seconds a removed segment's file stays open for in-flight readers (Kafka:
file.delete.delay.ms, 60 s)."""

_locks: weakref.WeakKeyDictionary[Log, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def maintenance_lock(log: Log) -> threading.Lock:
    """The lock serialising trims, compactions and deletes on ``log`` (not appends)."""
    with _locks_guard:
        lock = _locks.get(log)
        if lock is None:
            lock = _locks[log] = threading.Lock()
        return lock


def segments(log: Log) -> list[Segment]:
    """Every segment of ``log`` now, oldest first, the active one last: the list itself
    (replaced on change, never mutated: a consistent snapshot; do not modify it)."""
    return log._state.segments


def closed_segments(log: Log) -> list[Segment]:
    """Segments maintenance may remove or rewrite: every segment but the active one and
    those rolled but not yet fsynced by the group commit thread (next time)."""
    with log._state.lock:
        log._state.check_writable()
        unsynced = {id(s) for s in log._state.rolled_unsynced}
        return [s for s in log._state.segments[:-1] if id(s) not in unsynced]


def aborted_entries(log: Log, end: int) -> list[AbortedTxn]:
    """The aborted transactions (``.txnindex`` entries) overlapping ``[log start, end)``,
    by first offset: what the cleaner removes."""
    start = log.log_start_offset
    found = [
        e
        for seg in log._state.segments
        for e in seg.txn_index.entries
        if e.last_offset >= start and e.first_offset < end
    ]
    return sorted(found, key=lambda e: e.first_offset)


def roll_holding(log: Log, offsets: list[int]) -> bool:
    """Make every segment that holds one of ``offsets`` (sorted) below the log end one
    that ``closed_segments`` lists: roll the active segment if it holds one, as an append
    past segment.bytes would (under the write lock); then, when a rolled segment is not
    fsynced yet (this roll's, or one rolled by appends under flush.ms / flush.messages
    that the background round has not reached), wait for the fsync round that makes it
    durable. Offsets at or past the log end are not looked at. Returns whether it
    rolled. Raises LogClosedError (closed, or offline: also when the round fails),
    ReadOnlyError, StorageError (the roll failed)."""
    st = log._state
    with st.lock:
        st.check_writable()
        seg = st.segments[-1]
        i = bisect.bisect_left(offsets, max(seg.base_offset, st.log_start_offset))
        rolled = seg.size > 0 and i < len(offsets) and offsets[i] < st.log_end_offset
        if rolled:
            append.roll_checked(st, append.now_ms())
        if not st.rolled_unsynced:
            return rolled
        assert st.group_commit is not None  # writable
        done = st.group_commit.flush()
    done.result()
    return rolled


def set_log_start(log: Log, offset: int) -> None:
    """Persist ``offset`` as the log start offset (atomic file replace + directory
    fsync), then move it in memory. Never moves it backwards."""
    if offset <= log.log_start_offset:
        return
    files.write_small_file(log.directory / files.LOG_START_OFFSET, f"{offset}\n".encode())
    with log._state.lock:
        log._state.log_start_checkpoint = max(log._state.log_start_checkpoint, offset)
        if log._state.keys is not None:  # keys whose records all fell below it: NotFoundError
            log._state.keys.prune_below(log._state.log_start_checkpoint)


def retire(st: LogState, seg: Segment) -> None:
    """Keep ``seg`` (taken out of the segment list by the caller, under ``st.lock``) open
    for ``RETIRE_DELAY_S`` for the readers that snapshotted it; its paths are renamed in
    memory so nothing reaches a new file of the same base offset through it."""
    # a reader reopening it by path (after an idle-handle GC) must not find the new file
    seg.path = seg.path.with_name(seg.path.name + ".retired")
    # nor its index files (a cleaner swap put the new segment's there): its lookups find
    # no file and search the segment from its start (correct; only late readers pay)
    for index in (seg.index, seg.time_index):
        index.path = index.path.with_name(index.path.name + ".retired")
    st.retired.append((time.monotonic(), seg))


def drop_segments(log: Log, segments: list[Segment]) -> None:
    """Take ``segments`` out of the log's list (their files are handled by the caller)."""
    gone = {id(s) for s in segments}
    with log._state.lock:
        log._state.segments = [s for s in log._state.segments if id(s) not in gone]
        for seg in segments:
            retire(log._state, seg)


def replace_segment(log: Log, old: Segment, new: Segment) -> None:
    """Put ``new`` (same base offset, already loaded) in place of ``old``."""
    new.counters = log.counters
    with log._state.lock:
        log._state.segments = [new if s is old else s for s in log._state.segments]
        retire(log._state, old)


def close_retired(log: Log, *, force: bool = False) -> None:
    """Close retired segments older than ``RETIRE_DELAY_S`` (all when ``force``)."""
    now = time.monotonic()
    with log._state.lock:
        keep: list[tuple[float, Segment]] = []
        done: list[tuple[float, Segment]] = []
        for when, seg in log._state.retired:
            (done if force or now - when >= RETIRE_DELAY_S else keep).append((when, seg))
        log._state.retired = keep
    for _, seg in done:
        seg.close()


def segment_bytes(seg: Segment) -> int:
    """Bytes on disk of a segment's three files (missing ones count 0)."""
    total = 0
    for path in (seg.path, seg.index.path, seg.time_index.path):
        with contextlib.suppress(FileNotFoundError):
            total += os.stat(path).st_size
    return total


def attach_tier(log: Log, remote: RemoteStorage) -> None:
    """Give an open log without a tier its remote tier (``remote.storage.enable`` turned
    on by AlterConfigs after the log was opened)."""
    if log._state.remote is not None:
        return
    tier = RemoteTier.open(log.directory, remote, writer=not log.read_only)
    with log._state.lock:
        if log._state.remote is None:
            log._state.remote = tier
