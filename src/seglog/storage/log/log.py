"""Log: one partition, a directory of segments (open, append, roll, durability, close;
the read side is in ``_reader.py``, the embedded API — publish, consume, get... — in
``_embedded_log.py``).

Thread-safety: one writer at a time (``append`` takes the write lock; the broker calls it
from its asyncio loop thread), any number of concurrent readers (``read``, ``batches``,
``offset_for_time``) in any thread, plus the log's own fsync thread (``_sync``) which runs
``on_append`` callbacks under the default durability policy. Offsets:

- log start offset: base offset of the first segment;
- log end offset: the next offset to assign (moves on append);
- high watermark: readers see offsets below it; the durable end offset under the default
  policy (fsync before acknowledge), the log end offset under flush.messages/flush.ms.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import fields
from types import TracebackType
from typing import TYPE_CHECKING, Any

from seglog.errors import (
    LogClosedError,
    NotFoundError,
    ReadOnlyError,
    StorageError,
)
from seglog.storage.config import AppendInfo, LogConfig
from seglog.storage.fileio import files
from seglog.storage.index.key_index import KeyIndex
from seglog.storage.log import gc, keys, maint, stats
from seglog.storage.log.backup import BackupReport, backup_log
from seglog.storage.log.embedded import EmbeddedLog
from seglog.storage.log.keys import load_key_index
from seglog.storage.log.notify import Notifier
from seglog.storage.log.reader import FileSlice
from seglog.storage.log.sync import GroupCommit, SyncPoint
from seglog.storage.record.batch import (
    patch_base_offset,
    patch_log_append_time,
    stamp_leader_epoch,
    validate_for_append,
)
from seglog.storage.segment import checkpoints, format_version
from seglog.storage.segment.recovery import LoadReport, load_segments
from seglog.storage.segment.segment import Placed, Segment, create_segment

if TYPE_CHECKING:
    from seglog.storage.log.stats import LogStats

__all__ = ["FileSlice", "Log", "open_log"]  # FileSlice re-exported from _reader

_logger = logging.getLogger(__name__)
_U32 = (1 << 32) - 1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log(EmbeddedLog):
    """One partition: a directory of segments. Thread-safe: one writer lock, many readers.

    Open with :meth:`open` (or ``seglog.open_log``); a context manager closing on exit.
    """

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
        self._segments = segments  # replaced (never mutated) on roll: readers snapshot it
        self._lock = threading.RLock()
        self._closed = False
        self._offline: BaseException | None = None
        end = segments[-1].next_offset if segments else 0
        self._log_end = end
        self._hwm = end
        self._unflushed = 0
        self._rolled_unsynced: list[Segment] = []
        self._dir_dirty = not read_only  # the first fsync also covers the directory entries
        self._callbacks: dict[int, Callable[[int], None]] = {}
        self._callback_ids = iter(range(1 << 62))
        self.append_count = 0
        """Number of successful ``append`` calls (with the fsync counter: group commit)."""
        self._lock_fd: int | None = None  # flock on the directory (writers opened by open)
        # log start offset moved by retention / DeleteRecords (persisted; see maint.py)
        self._log_start = min(checkpoints.read_log_start_checkpoint(directory), end)
        self._retired: list[tuple[float, Segment]] = []  # removed segments, closed later
        self.counters = stats.FileCounters(opens=len(segments))
        """File operation counters (``Log.stats().counters``, broker metrics)."""
        for seg in segments:
            seg.counters = self.counters
        self._notifier = Notifier(lambda: self._hwm)
        self.on_append(self._notifier.notify)
        self._stop_gc: Callable[[], None] | None = None
        self._keys: KeyIndex | None = None
        if config.key_index:
            self._keys = load_key_index(self, end)
        self._sync: GroupCommit | None = None
        if not read_only:
            self._sync = GroupCommit(
                directory.name,
                end,
                point=self._sync_point,
                on_durable=self._on_durable,
                on_error=self._on_sync_error,
                interval_ms=config.flush_ms,
            )

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        create: bool = False,
        read_only: bool = False,
        recover: bool = True,
    ) -> Log:
        """Open the partition log in ``directory``.

        ``create``: make the directory when missing (else NotFoundError). A writer takes
        an exclusive flock on the directory (DataDirLockedError if another writer has
        it, in any process). ``read_only``: never write, take no lock; may run beside a
        writer in another process and sees whole valid batches only (``refresh`` picks up
        new data). ``recover`` (writers):
        True truncates a torn tail (crash recovery) and rebuilds indexes; False raises
        LogCorruptedError instead. Corruption before the tail always raises
        LogCorruptedError: use ``seglog.storage.recover(dir)`` to keep the valid prefix.
        """
        path = pathlib.Path(directory)
        config = config or LogConfig()
        if not path.is_dir():
            if not create or read_only:
                raise NotFoundError(f"no log directory {path}")
            path.mkdir(parents=True, exist_ok=True)
            files.fsync_dir(path.parent)
        lock_fd = None if read_only else files.lock_log_dir(path)
        try:
            format_version.ensure_format(path, write=not read_only)
            mode = "read_only" if read_only else ("open" if recover else "strict")
            report = LoadReport()
            segments = load_segments(path, config, mode, report)  # type: ignore[arg-type]
            if not read_only:
                if not segments:
                    segments.append(create_segment(path, 0))
                clean = path / files.CLEAN_SHUTDOWN
                if clean.exists():
                    clean.unlink()
                    files.fsync_dir(path)
                segments[-1].first_append_ms = _now_ms()
                segments[-1].sync()  # what recovery kept is durable before anyone reads it
            log = cls(path, config, segments, read_only=read_only)
            log.counters.truncations += 1 if report.truncated_bytes else 0
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        log._lock_fd = lock_fd
        return log

    @property
    def fsync_count(self) -> int:
        """fsync rounds run so far by the group commit thread (0 when read-only)."""
        return self._sync.fsync_count if self._sync is not None else 0

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"log {self.directory} is open read-only")

    # -- appending -------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append one or more record batches v2 exactly as received on the wire.

        Each batch is validated (length, magic 2, CRC-32C, lastOffsetDelta + 1 ==
        recordCount when uncompressed, size <= max.message.bytes) before anything is
        written; offsets are assigned by patching baseOffset; LogAppendTime topics get
        attribute bit 3, maxTimestamp = now and a new CRC. All or nothing: on a write
        error (ENOSPC...) the segment is cut back and StorageError raised. Writes reach
        the page cache only; durability comes from ``sync``/``sync_future``. Raises
        CorruptRecordError, InvalidRecordError, RecordTooLargeError, LogClosedError,
        ReadOnlyError.
        """
        self._check_writable()
        batches = validate_for_append(records, self.config.max_message_bytes)
        data = bytearray(records)
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        count = span = 0
        for _, h in batches:
            count += h.record_count
            span += h.last_offset_delta + 1
        with self._lock:
            self._check_writable()
            now = _now_ms()
            seg = self._segments[-1]
            if seg.size > 0 and (
                seg.size + len(data) > self.config.segment_bytes
                or now - seg.first_append_ms >= self.config.segment_ms
                or self._log_end + span - 1 - seg.base_offset > _U32
            ):
                try:
                    seg = self._roll(now)
                except (OSError, StorageError) as e:
                    self.counters.errors += 1
                    raise StorageError(f"cannot roll {self.directory}: {e}") from e
            offset = self._log_end
            placed: list[Placed] = []
            max_ts = -1
            for pos, h in batches:
                patch_base_offset(data, pos, offset)
                stamp_leader_epoch(data, pos)
                ts = h.max_timestamp
                if log_append:
                    patch_log_append_time(data, pos, h, now)
                    ts = now
                max_ts = max(max_ts, ts)
                placed.append((pos, offset, h.size, ts))
                offset += h.last_offset_delta + 1
            try:
                seg.append(data, placed, offset, self.config.index_interval_bytes)
            except StorageError:
                self.counters.errors += 1
                raise
            self.counters.appends += 1
            self.counters.appended_bytes += len(data)
            self.counters.appended_records += count
            if seg.first_append_ms < 0:
                seg.first_append_ms = now
            base = self._log_end
            self._log_end = offset
            if self._keys is not None:
                try:
                    self._keys.add(data)
                except Exception:  # a CRC-valid batch with undecodable records
                    _logger.exception("key index: cannot decode batch at offset %d", base)
            self.append_count += 1
            relaxed = not self.config.fsync_before_ack
            sync_now = True
            if relaxed:
                self._hwm = offset
                self._unflushed += count
                fm = self.config.flush_messages
                sync_now = fm is not None and self._unflushed >= fm
                if sync_now:
                    self._unflushed = 0
        assert self._sync is not None
        self._sync.appended(offset, sync_now=sync_now)
        if relaxed:
            self._fire(self._hwm)
        return AppendInfo(base, offset - 1, now if log_append else -1, count, max_ts)

    def _roll(self, now: int) -> Segment:
        old = self._segments[-1]
        old.finish_time_index()
        seg = create_segment(self.directory, self._log_end)
        seg.first_append_ms = now
        seg.counters = self.counters
        self.counters.rolls += 1
        self.counters.opens += 1
        self._rolled_unsynced.append(old)
        self._dir_dirty = True
        self._segments = [*self._segments, seg]
        return seg

    # -- durability ------------------------------------------------------------------------

    def _sync_point(self) -> SyncPoint:
        with self._lock:
            rolled, self._rolled_unsynced = self._rolled_unsynced, []
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            active, end = self._segments[-1], self._log_end

        def run() -> None:
            for seg in rolled:
                seg.sync_all()
                seg.index.close()
                seg.time_index.close()
            if dir_dirty:
                files.fsync_dir(self.directory)
            active.sync()
            if rolled:
                try:
                    files.write_small_file(
                        self.directory / files.RECOVERY_POINT,
                        f"{active.base_offset}\n".encode(),
                    )
                except OSError as e:  # e.g. ENOSPC: the data is durable; a stale recovery
                    # point only makes the next crash recovery scan more (never offline)
                    _logger.warning("cannot write the recovery point of %s: %s", self.directory, e)

        return run, end

    def _on_durable(self, durable: int) -> None:
        if self.config.fsync_before_ack and durable > self._hwm:
            self._hwm = durable
            self._fire(durable)

    def _on_sync_error(self, exc: BaseException) -> None:
        self._offline = exc
        self.counters.errors += 1
        self._notifier.close(f"offline after fsync error: {exc}")

    def _fire(self, hwm: int) -> None:
        for cb in list(self._callbacks.values()):
            try:
                cb(hwm)
            except Exception:
                _logger.exception("on_append callback failed")

    def sync(self) -> int:
        """Block until everything appended so far is fsynced; return the durable end
        offset. Concurrent callers share one fsync. LogClosedError after an fsync error."""
        self._check_open()
        if self._sync is None:
            return self._log_end
        return self.sync_future(self._log_end).result()

    def sync_future(self, offset: int) -> Future[int]:
        """Future completing with the durable end offset once it is >= ``offset`` (group
        commit; wrap with ``asyncio.wrap_future``). Fails with LogClosedError when the log
        is closed or offline after an fsync error."""
        if self._sync is None:
            fut: Future[int] = Future()
            if self._closed:
                fut.set_exception(LogClosedError("log closed"))
            else:
                fut.set_result(self._log_end)
            return fut
        return self._sync.wait_for(offset)

    def on_append(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(new_high_watermark)`` whenever new data becomes visible (from
        the appending or the fsync thread: keep it short, e.g. ``loop.call_soon_threadsafe``).
        Returns a function that unregisters it."""
        key = next(self._callback_ids)
        self._callbacks[key] = callback

        def unregister() -> None:
            self._callbacks.pop(key, None)

        return unregister

    def set_sync_observer(self, observer: Callable[[float, int], None] | None) -> None:
        """Call ``observer(seconds, records)`` on the fsync thread after each group-commit
        round: how long its fsyncs took and how many offsets it made durable (metrics; keep
        it short). None removes it; a read-only log has no fsync thread (no calls)."""
        if self._sync is not None:
            self._sync.on_round = observer

    def stat(self) -> dict[str, int]:
        """``{"segments", "bytes", "log_start_offset", "log_end_offset",
        "high_watermark"}`` (bytes of whole valid batches)."""
        segs = self._segments
        return {
            "segments": len(segs),
            "bytes": sum(s.size for s in segs),
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self._log_end,
            "high_watermark": self._hwm,
        }

    def stats(self) -> LogStats:
        """Per log and per segment statistics (records, batches, bytes, first/last offsets
        and times, index sizes) and the file operation counters; reads each visible
        batch header once. LogClosedError when closed."""
        return stats.log_stats(self)

    def gc(self, unused_for_s: float) -> int:
        """Close the read handles of segments unused for ``unused_for_s`` seconds
        (klevdb's GC; never the active segment); reopened on the next read. Returns how
        many were closed."""
        return gc.gc(self, unused_for_s)

    def start_gc(self, every_s: float = 60.0, unused_for_s: float = 300.0) -> None:
        """Run ``gc(unused_for_s)`` every ``every_s`` seconds on a daemon thread until
        ``close`` (replaces a previous schedule)."""
        self._check_open()
        if self._stop_gc is not None:
            self._stop_gc()
        self._stop_gc = gc.start_gc(self, every_s, unused_for_s)

    def backup(self, dest: str | os.PathLike[str]) -> BackupReport:
        """Online, consistent backup of this log to the new directory ``dest`` (see
        ``seglog.storage.backup``)."""
        return backup_log(self, dest)

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Make everything durable, mark a clean shutdown (reopen skips the CRC scan) and
        release files. Idempotent; later calls on the log raise LogClosedError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._stop_gc is not None:
            self._stop_gc()
        if self._sync is not None:
            self._sync.close()
        self._notifier.close("closed")
        clean = self._offline is None and not self.read_only
        if clean and self._keys is not None:
            try:
                keys.save_key_index(self.directory, self._keys, self, self._log_end)
            except (OSError, StorageError) as e:  # derived data: rebuilt at the next open
                _logger.warning("cannot write the key index of %s: %s", self.directory, e)
        for seg in self._segments:
            if clean and seg is self._segments[-1]:
                try:
                    seg.finish_time_index()
                    seg.sync_all()
                except OSError as e:
                    _logger.error("final fsync of %s failed: %s", seg.path, e)
                    clean = False
            seg.close()
        maint.close_retired(self, force=True)
        if clean:
            marker = {"log_end_offset": self._log_end, "time_ms": _now_ms()}
            files.write_small_file(
                self.directory / files.CLEAN_SHUTDOWN, json.dumps(marker).encode()
            )
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def __enter__(self) -> Log:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Log({str(self.directory)!r}, start={self.log_start_offset}, "
            f"end={self._log_end}, hw={self._hwm})"
        )


def open_log(
    path: str | os.PathLike[str],
    *,
    create: bool = False,
    read_only: bool = False,
    key_index: bool = False,
    recover: bool = True,
    **config: Any,
) -> Log:
    """Open the log (one partition) in directory ``path``; usable as a context manager.

    ``config``: LogConfig fields by name (``segment_bytes=1 << 20``, ``flush_ms=1000``...).
    Raises NotFoundError (missing and not ``create``), LogCorruptedError, TypeError on an
    unknown setting. See ``Log.open`` for ``read_only`` and ``recover``.
    """
    known = {f.name for f in fields(LogConfig)}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown log settings: {sorted(unknown)}")
    cfg = LogConfig(key_index=key_index, **config)
    return Log.open(path, cfg, create=create, read_only=read_only, recover=recover)
