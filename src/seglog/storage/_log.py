"""Log: one partition, a directory of segments (append, read, offsets, roll, recovery).

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

import bisect
import fcntl
import json
import logging
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import fields
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from seglog.errors import (
    DataDirLockedError,
    InvalidOffsetError,
    LogClosedError,
    NoIndexError,
    NotFoundError,
    ReadOnlyError,
    StorageError,
)
from seglog.storage import _embedded, _files
from seglog.storage._batch import (
    HEADER_SIZE,
    parse_header,
    patch_base_offset,
    patch_log_append_time,
    validate_for_append,
)
from seglog.storage._config import AppendInfo, LogConfig
from seglog.storage._keyindex import KeyIndex
from seglog.storage._load import LoadReport, load_segments
from seglog.storage._message import OFFSET_NEWEST, OFFSET_OLDEST
from seglog.storage._segment import Placed, Segment
from seglog.storage._sync import GroupCommit, SyncPoint

if TYPE_CHECKING:
    from seglog.storage._message import Message

__all__ = ["FileSlice", "Log", "open_log"]

_logger = logging.getLogger(__name__)
_U32 = (1 << 32) - 1


class FileSlice(NamedTuple):
    """Bytes of a segment file for ``os.sendfile(out, fd, position, size)``."""

    fd: int
    """Open fd of the segment's .log (owned by the Log: do not close)."""
    position: int
    """Byte position in the file."""
    size: int
    """Number of bytes (whole record batches)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Log:
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
        self._keys: KeyIndex | None = None
        if config.key_index:
            self._keys = KeyIndex()
            for batch in self.batches(OFFSET_OLDEST, end):
                self._keys.add(batch)
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
            _files.fsync_dir(path.parent)
        lock_fd = None if read_only else lock_log_dir(path)
        try:
            mode = "read_only" if read_only else ("open" if recover else "strict")
            segments = load_segments(path, config, mode, LoadReport())  # type: ignore[arg-type]
            if not read_only:
                if not segments:
                    segments.append(_new_segment(path, 0))
                clean = path / _files.CLEAN_SHUTDOWN
                if clean.exists():
                    clean.unlink()
                    _files.fsync_dir(path)
                segments[-1].first_append_ms = _now_ms()
                segments[-1].sync()  # what recovery kept is durable before anyone reads it
            log = cls(path, config, segments, read_only=read_only)
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        log._lock_fd = lock_fd
        return log

    # -- offsets ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """First offset still stored (base offset of the first segment)."""
        segs = self._segments
        return segs[0].base_offset if segs else self._log_end

    @property
    def log_end_offset(self) -> int:
        """Next offset to be assigned (klevdb's NextOffset)."""
        return self._log_end

    @property
    def high_watermark(self) -> int:
        """Offsets below it are visible to readers (durable end under fsync-before-ack)."""
        return self._hwm

    @property
    def fsync_count(self) -> int:
        """fsync rounds run so far by the group commit thread (0 when read-only)."""
        return self._sync.fsync_count if self._sync is not None else 0

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")
        if self._offline is not None:
            raise LogClosedError(f"log {self.directory} is offline: {self._offline}")

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
                except OSError as e:
                    raise StorageError(f"cannot roll {self.directory}: {e}") from e
            offset = self._log_end
            placed: list[Placed] = []
            max_ts = -1
            for pos, h in batches:
                patch_base_offset(data, pos, offset)
                ts = h.max_timestamp
                if log_append:
                    patch_log_append_time(data, pos, h, now)
                    ts = now
                max_ts = max(max_ts, ts)
                placed.append((pos, offset, h.size, ts))
                offset += h.last_offset_delta + 1
            seg.append(data, placed, offset, self.config.index_interval_bytes)
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
        seg = _new_segment(self.directory, self._log_end)
        seg.first_append_ms = now
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
                _files.fsync_dir(self.directory)
            active.sync()
            if rolled:
                _files.write_small_file(
                    self.directory / _files.RECOVERY_POINT, f"{active.base_offset}\n".encode()
                )

        return run, end

    def _on_durable(self, durable: int) -> None:
        if self.config.fsync_before_ack and durable > self._hwm:
            self._hwm = durable
            self._fire(durable)

    def _on_sync_error(self, exc: BaseException) -> None:
        self._offline = exc

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

    # -- reading ---------------------------------------------------------------------------

    def refresh(self) -> int:
        """Read-only logs: pick up batches and segments another process appended since;
        returns the new log end offset (a no-op on a writer)."""
        if not self.read_only:
            return self._log_end
        with self._lock:
            self._check_open()
            bases = _files.list_segment_bases(self.directory)
            segs = self._segments
            if segs and segs[-1].base_offset in bases:
                tail = segs[-1]
                tail.extend(self.config.index_interval_bytes)
                new = [b for b in bases if b > tail.base_offset]
            else:
                new = bases
            for b in new:
                if (
                    segs
                    and segs[-1].next_offset < b
                    and segs[-1].size != os.fstat(segs[-1].fd).st_size
                ):
                    break  # the previous segment still ends in a torn/incomplete batch
                seg = Segment(self.directory, b, read_only=True)
                seg.scan(self.config.index_interval_bytes, verify_crc=True, max_bytes=1 << 31)
                segs = [*segs, seg]
            self._segments = segs
            end = segs[-1].next_offset if segs else 0
            old_end = self._log_end
            self._log_end = self._hwm = max(old_end, end)
            if self._keys is not None and self._log_end > old_end:
                for batch in self.batches(old_end, self._log_end):
                    self._keys.add(batch)
            return self._log_end

    def _locate(self, offset: int, upper: int) -> tuple[Segment, int, int] | None:
        """(segment, position, visible size) of the batch holding ``offset`` (or the first
        batch after it), None if that is at or past ``upper``."""
        segs = self._segments
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

    def _resolve_read(self, offset: int, upper: int | None) -> tuple[int, int]:
        self._check_open()
        if self.read_only and (offset >= self._log_end or (upper or 0) > self._log_end):
            self.refresh()
        hw = self._hwm
        up = hw if upper is None else min(upper, self._log_end)
        if offset == OFFSET_OLDEST:
            offset = self.log_start_offset
        elif offset == OFFSET_NEWEST:
            offset = hw
        if offset < self.log_start_offset or offset > self._log_end:
            raise InvalidOffsetError(
                f"offset {offset} outside [{self.log_start_offset}, {self._log_end}]"
            )
        return offset, up

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes:
        """Whole record batches starting with the batch containing ``offset``: up to
        ``max_bytes`` bytes but at least one whole batch (Kafka's "first batch even if
        larger"), only batches whose base offset is below ``upper`` (default: the high
        watermark). ``b""`` at the end. Raises InvalidOffsetError if ``offset`` is below
        the log start offset or above the log end offset, LogClosedError."""
        offset, up = self._resolve_read(offset, upper)
        if offset >= up:
            return b""
        loc = self._locate(offset, up)
        if loc is None:
            return b""
        seg, pos, size = loc
        return seg.read_at(pos, max_bytes, size, up)

    def read_slice(
        self, offset: int, max_bytes: int, *, upper: int | None = None
    ) -> FileSlice | None:
        """As ``read``, as a :class:`FileSlice` for ``os.sendfile``; None at the end."""
        offset, up = self._resolve_read(offset, upper)
        if offset >= up:
            return None
        loc = self._locate(offset, up)
        if loc is None:
            return None
        seg, pos, size = loc
        end = pos
        while size - end >= HEADER_SIZE:
            h = parse_header(os.pread(seg.fd, HEADER_SIZE, end))
            if h.base_offset >= up or (end > pos and end + h.size - pos > max_bytes):
                break
            end += h.size
        return FileSlice(seg.fd, pos, end - pos) if end > pos else None

    def batches(self, start: int = OFFSET_OLDEST, end: int | None = None) -> Iterator[memoryview]:
        """Iterate whole stored record batches from the one holding ``start``
        (OFFSET_OLDEST: log start) up to (not including) batches at or past ``end``
        (default: the high watermark at the call). InvalidOffsetError as ``read``."""
        offset, up = self._resolve_read(start, end)
        while offset < up:
            data = self.read(offset, 1 << 20, upper=up)
            if not data:
                return
            mv = memoryview(data)
            pos = 0
            while pos < len(mv):
                h = parse_header(mv, pos)
                yield mv[pos : pos + h.size]
                offset = h.next_offset
                pos += h.size

    def offset_for_time(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record whose timestamp is >=
        ``timestamp_ms``, found through the first batch whose max timestamp is >= it
        (Kafka ListOffsets semantics); None if no visible batch qualifies."""
        self._check_open()
        hw = self._hwm
        for seg in list(self._segments):
            found = seg.find_time(timestamp_ms, seg.size)
            if found is None:
                continue
            pos, h = found
            if h.base_offset >= hw:
                return None
            batch = os.pread(seg.fd, h.size, pos)
            return _embedded.first_at_or_after(batch, timestamp_ms)
        return None

    # -- embedded API (klevdb style; implemented in _embedded) -----------------------------

    def publish(self, messages: Sequence[Message]) -> int:
        """Append ``messages`` as record batches v2 and wait until they are durable (default
        policy); returns the next offset. Errors as ``append``."""
        return _embedded.publish(self, messages)

    def consume(self, offset: int, max_count: int) -> tuple[int, list[Message]]:
        """Up to ``max_count`` messages from ``offset``; returns ``(next offset, messages)``.
        OFFSET_OLDEST starts at the log start; OFFSET_NEWEST returns ``(next offset, [])``.
        InvalidOffsetError outside [log start, log end]."""
        return _embedded.consume(self, offset, max_count)

    def get(self, offset: int) -> Message:
        """The message at ``offset``: InvalidOffsetError outside [log start, high
        watermark), NotFoundError if that offset is not stored (compacted away)."""
        return _embedded.get(self, offset)

    def get_by_key(self, key: bytes) -> Message:
        """The last message published with ``key`` (a tombstone has ``value=None``).
        NoIndexError if the log was opened without ``key_index``, NotFoundError if no
        message has that key. Waits for that message to be durable if it is not yet."""
        return _embedded.get(self, self.offset_by_key(key))

    def offset_by_key(self, key: bytes) -> int:
        """Offset of the last message with ``key``; errors as ``get_by_key``."""
        self._check_open()
        if self._keys is None:
            raise NoIndexError(f"log {self.directory} was opened without key_index")
        offset = self._keys.get(key)
        if offset is None:
            raise NotFoundError(f"no message with key {key!r}")
        if offset >= self._hwm and self._sync is not None:
            self.sync_future(offset + 1).result()
        return offset

    def offset_by_time(self, timestamp_ms: int) -> tuple[int, int]:
        """As ``offset_for_time``, NotFoundError instead of None (klevdb's OffsetByTime)."""
        found = self.offset_for_time(timestamp_ms)
        if found is None:
            raise NotFoundError(f"no message at or after {timestamp_ms} ms")
        return found

    def next_offset(self) -> int:
        """The log end offset: the offset the next published message gets."""
        self._check_open()
        return self._log_end

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

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Make everything durable, mark a clean shutdown (reopen skips the CRC scan) and
        release files. Idempotent; later calls on the log raise LogClosedError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._sync is not None:
            self._sync.close()
        clean = self._offline is None and not self.read_only
        for seg in self._segments:
            if clean and seg is self._segments[-1]:
                try:
                    seg.finish_time_index()
                    seg.sync_all()
                except OSError as e:
                    _logger.error("final fsync of %s failed: %s", seg.path, e)
                    clean = False
            seg.close()
        if clean:
            marker = {"log_end_offset": self._log_end, "time_ms": _now_ms()}
            _files.write_small_file(
                self.directory / _files.CLEAN_SHUTDOWN, json.dumps(marker).encode()
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


def lock_log_dir(path: pathlib.Path) -> int:
    """Take the exclusive writer flock on a partition directory (on the directory itself:
    no extra file); returns the fd holding it. DataDirLockedError if another writer,
    in this process or another, has the log open."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as e:
        os.close(fd)
        raise DataDirLockedError(f"log {path} is open by another writer") from e
    return fd


def _base_offset(seg: Segment) -> int:
    return seg.base_offset


def _new_segment(directory: pathlib.Path, base: int) -> Segment:
    """Create the three files of a new segment (StorageError on failure, e.g. ENOSPC)."""
    try:
        seg = Segment(directory, base, read_only=False)
        for p in (seg.index.path, seg.time_index.path):
            os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError as e:
        raise StorageError(f"cannot create segment {base:020d} in {directory}: {e}") from e
    return seg


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
