"""The state of one open partition log, in one object the log's modules receive.

``Log`` (``log.py``) is the public face; it owns one :class:`LogState` and hands it to the
modules that do the work: ``reader.py`` (reads), ``append.py`` (appends, rolls, the
group-commit hooks), ``keys.py`` (key index), ``maint.py`` (what retention and the
cleaner change), ``fastpath.py``, ``message_ops.py``, ``gc.py``, ``stats.py``,
``backup.py``, ``subscription.py``. Nothing outside ``seglog.storage.log`` uses it
(``Log._state`` is private: retention, the tools, the broker and tests use the public
members of ``Log``, the contract in ``seglog.storage.api``; retention reaches segments
only through ``maint.py``).

Concurrency: ``lock`` (re-entrant) is the write lock: appends, rolls and segment list
swaps take it. Readers never take it: they snapshot ``segments`` (a list replaced, never
mutated), then ``high_watermark``, then a segment's ``size``, and only look below them.
"""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from seglog.errors import LogClosedError, ReadOnlyError
from seglog.storage.fileio.counters import FileCounters
from seglog.storage.log.notify import Notifier
from seglog.storage.segment import checkpoints
from seglog.storage.segment.transactions import Transactions

if TYPE_CHECKING:
    from seglog.storage.config import LogConfig
    from seglog.storage.index.key_index import KeyIndex
    from seglog.storage.log.subscription import Subscriptions
    from seglog.storage.log.sync import GroupCommit
    from seglog.storage.remote.tier import RemoteTier
    from seglog.storage.segment.segment import Segment

__all__ = ["LogState"]


class LogState:
    """Everything an open log knows (offsets, segments, locks, indexes, counters)."""

    def __init__(
        self,
        directory: pathlib.Path,
        config: LogConfig,
        segments: list[Segment],
        *,
        read_only: bool,
    ) -> None:
        self.directory = directory
        self.config = config
        self.read_only = read_only
        self.segments = segments
        """Oldest first; replaced (never mutated) on roll, retention, compaction, delete."""
        self.lock = threading.RLock()
        self.closed = False
        self.clean_start = False
        """Opened (writer) after a clean shutdown: everything before this open is durable."""
        self.offline: BaseException | None = None
        """The fsync error that took the log offline (every later call: LogClosedError)."""
        end = segments[-1].next_offset if segments else 0
        self.log_end_offset = end
        """Next offset to be assigned."""
        self.high_watermark = end
        """Offsets below it are visible to readers."""
        self.log_start_checkpoint = min(checkpoints.read_log_start_checkpoint(directory), end)
        """Persisted floor of the log start offset (retention, DeleteRecords)."""
        self.unflushed = 0
        """Records appended since the last fsync under flush.messages."""
        self.rolled_unsynced: list[Segment] = []
        """Rolled segments the group commit has not fsynced yet."""
        self.dir_dirty = not read_only
        """Directory entries changed since the last fsync (the first fsync covers them)."""
        self.callbacks: dict[int, Callable[[int], None]] = {}
        """``on_append`` callbacks by registration id."""
        self.callback_ids = iter(range(1 << 62))
        self.append_count = 0
        """Successful ``append`` calls."""
        self.lock_fd: int | None = None
        """flock on the directory (writers)."""
        self.retired: list[tuple[float, Segment]] = []
        """Removed segments (time removed, segment): closed after ``maint.RETIRE_DELAY_S``."""
        self.counters = FileCounters(opens=len(segments))
        for seg in segments:
            seg.counters = self.counters
        self.keys: KeyIndex | None = None
        """The key index (``LogConfig.key_index``), else None."""
        self.notifier = Notifier(lambda: self.high_watermark)
        """Waiters for offsets not yet visible."""
        self.group_commit: GroupCommit | None = None
        """The fsync thread of a writer (None when read-only)."""
        self.stop_gc: Callable[[], None] | None = None
        self.subscriptions: Subscriptions | None = None
        """The durable subscriptions' registry (``Log.subscribe``), made on first use."""
        self.txns = Transactions()
        """Ongoing transactions (set from ``recover_transactions`` at open)."""
        self.txn_at_roll: tuple[int, dict[int, int]] | None = None
        """(offset, ongoing) at the last roll: the transaction snapshot the next fsync
        round writes beside the recovery point."""
        self.remote: RemoteTier | None = None
        """The remote tier (KIP-405) when the log is tiered, else None."""
        self.read_hint: tuple[int, list[Segment], Segment, int] | None = None
        """(offset, segment list, segment, position): the batch at ``position`` of
        ``segment`` holds ``offset``; valid while ``segments`` is that very list. Set by
        consume, checked before use."""

    @property
    def log_start_offset(self) -> int:
        """First offset still readable: the base offset of the first segment (remote when
        tiered), or higher once retention or DeleteRecords moved it (``log-start-offset``
        checkpoint)."""
        segs = self.segments
        if not segs:
            return self.log_end_offset
        first = segs[0].base_offset
        if self.remote is not None:  # the tier holds the offsets below the first local one
            first = self.remote.start_offset(first)
        return min(max(first, self.log_start_checkpoint), self.log_end_offset)

    @property
    def local_log_start_offset(self) -> int:
        """First offset on local disk (Kafka's local log start offset, KIP-1005)."""
        segs = self.segments
        if not segs:
            return self.log_end_offset
        return min(max(segs[0].base_offset, self.log_start_checkpoint), self.log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the oldest ongoing transaction when
        lower (never below the log start offset)."""
        hw = self.high_watermark
        first = self.txns.first_unstable()
        if first is None or first >= hw:
            return hw
        return min(max(first, self.log_start_offset), hw)

    def check_open(self) -> None:
        """LogClosedError when closed or offline after an fsync error."""
        if self.closed:
            raise LogClosedError(f"log {self.directory} is closed")
        if self.offline is not None:
            raise LogClosedError(f"log {self.directory} is offline: {self.offline}")

    def check_writable(self) -> None:
        """As ``check_open``, plus ReadOnlyError on a read-only log."""
        self.check_open()
        if self.read_only:
            raise ReadOnlyError(f"log {self.directory} is open read-only")
