"""Log: one partition, a directory of segments; the public face of the log package. It
owns one :class:`~seglog.storage.log.state.LogState` and hands it to the modules that do
the work (``append.py``, ``reader.py``, ``message_ops.py``, ``fastpath.py``, ``keys.py``,
``blocking.py``...); each method's contract is documented in ``seglog.storage.api``.

Thread-safety: one writer at a time (``append`` takes the write lock; the broker calls it
from its asyncio loop thread), any number of concurrent readers (``read``, ``batches``,
``offset_for_time``) in any thread, plus the log's own fsync thread (``sync.py``) which runs
``on_append`` callbacks under the default durability policy. Offsets:

- log start offset: base offset of the first segment;
- log end offset: the next offset to assign (moves on append);
- high watermark: readers see offsets below it; the durable end offset under the default
  policy (fsync before acknowledge), the log end offset under flush.messages/flush.ms.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pathlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import fields
from types import TracebackType
from typing import TYPE_CHECKING, Any

from seglog.errors import (
    DirectoryNotFoundError,
    InvalidOffsetError,
    LogClosedError,
    NotFoundError,
    StorageError,
)
from seglog.storage.api import LogAPI
from seglog.storage.config import AppendInfo, LogConfig
from seglog.storage.fileio import files
from seglog.storage.fileio.counters import FileCounters
from seglog.storage.log import (
    adopt,
    append,
    blocking,
    fastpath,
    gc,
    isolation,
    keys,
    maint,
    message_ops,
    reader,
    stats,
    subscription,
)
from seglog.storage.log.append import AppendOrigin
from seglog.storage.log.backup import BackupReport, backup_log
from seglog.storage.log.keys import load_key_index
from seglog.storage.log.reader import FileSlice
from seglog.storage.log.state import LogState
from seglog.storage.log.sync import GroupCommit
from seglog.storage.record.message import OFFSET_OLDEST
from seglog.storage.remote.store import RemoteStorage
from seglog.storage.remote.tier import RemoteTier
from seglog.storage.segment import format_version
from seglog.storage.segment.recovery import LoadReport, load_segments
from seglog.storage.segment.segment import Segment, create_segment
from seglog.storage.segment.transactions import recover_transactions, write_snapshot

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from seglog.storage.api import IsolationLevel
    from seglog.storage.log.blocking import CancelToken
    from seglog.storage.log.stats import LogStats, SegmentInfo
    from seglog.storage.log.subscription import Subscription
    from seglog.storage.record.columns import RecordColumns
    from seglog.storage.record.message import Message

__all__ = ["FileSlice", "Log", "open_log"]  # FileSlice re-exported from reader.py

_logger = logging.getLogger(__name__)


class Log(LogAPI):
    """One partition: a directory of segments (the contract, method by method, is
    :class:`seglog.storage.api.LogAPI`; each method's documentation is there).

    Open with :meth:`open` (or ``seglog.open_log``); a context manager closing on exit.
    """

    def __init__(
        self,
        directory: pathlib.Path,
        config: LogConfig,
        segments: list[Segment],
        *,
        read_only: bool,
        replay_all: bool = False,
    ) -> None:
        """``replay_all``: rebuild the transaction state and every ``.txnindex`` from the
        whole log, not from the ``transaction-state`` snapshot (``segment/transactions.py``)."""
        st = self._state = LogState(directory, config, segments, read_only=read_only)
        """The log's internal state, shared with the modules of ``seglog.storage.log``
        only (private: not part of the embedded contract, ``seglog.storage.api``)."""
        st.txns = recover_transactions(directory, segments, full=replay_all)
        self.on_append(st.notifier.notify)
        if config.key_index:
            st.keys = load_key_index(st, st.log_end_offset)
        if not read_only:
            st.group_commit = GroupCommit(
                directory.name,
                st.log_end_offset,
                # partial (C) rather than lambdas: one Python frame less per hook, two
                # hooks per fsync round
                point=functools.partial(append.sync_point, st),
                on_durable=functools.partial(append.on_durable, st),
                on_error=functools.partial(append.on_sync_error, st),
                interval_ms=config.flush_ms,
                counters=st.counters,
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
        remote: RemoteStorage | None = None,
    ) -> Log:
        """Open the partition log in ``directory``.

        ``create``: make the directory when missing (else DirectoryNotFoundError, also with
        ``read_only``). A writer takes an exclusive flock on the directory
        (DataDirLockedError if another writer has it, in any process). ``read_only``:
        never write, take no lock; may run beside a writer in another process and sees
        whole valid batches only (``refresh`` picks up new data). ``recover`` (writers):
        True truncates a torn tail (crash recovery) and rebuilds indexes; False raises
        LogCorruptedError instead. Corruption before the tail always raises
        LogCorruptedError: use ``seglog.storage.recover(dir)`` to keep the valid prefix.
        """
        path = pathlib.Path(directory)
        config = config or LogConfig()
        if not path.is_dir():
            if not create or read_only:
                raise DirectoryNotFoundError(f"no log directory {path}")
            path.mkdir(parents=True, exist_ok=True)
            files.fsync_dir(path.parent)
        lock_fd = None if read_only else files.lock_log_dir(path)
        try:
            format_version.ensure_format(path, write=not read_only)
            mode = "read_only" if read_only else ("open" if recover else "strict")
            report = LoadReport()
            segments = load_segments(path, config, mode, report)  # type: ignore[arg-type]
            clean_start = False
            if not read_only:
                if not segments:
                    segments.append(create_segment(path, 0))
                clean = path / files.CLEAN_SHUTDOWN
                clean_start = clean.exists()
                if clean_start:
                    clean.unlink()
                    files.fsync_dir(path)
                segments[-1].first_append_ms = append.now_ms()
                segments[-1].sync()  # what recovery kept is durable before anyone reads it
            # an interrupted cleaner swap: the swapped segment's .txnindex is gone
            log = cls(
                path, config, segments, read_only=read_only, replay_all=bool(report.interrupted)
            )
            log._state.remote = RemoteTier.open(
                path, remote if config.remote_storage_enable else None, writer=not read_only
            )
            log._state.counters.truncations += 1 if report.truncated_bytes else 0
            log._state.clean_start = clean_start
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        log._state.lock_fd = lock_fd
        return log

    @property
    def fsync_count(self) -> int:
        return self._state.counters.syncs

    # -- state -----------------------------------------------------------------------------

    @property
    def directory(self) -> pathlib.Path:
        return self._state.directory

    @property
    def config(self) -> LogConfig:
        return self._state.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._state.config = config

    @property
    def read_only(self) -> bool:
        return self._state.read_only

    @property
    def counters(self) -> FileCounters:
        return self._state.counters

    @property
    def append_count(self) -> int:
        return self._state.append_count

    @property
    def closed(self) -> bool:
        return self._state.closed

    @property
    def clean_start(self) -> bool:
        return self._state.clean_start

    # -- offsets ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._state.log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        return self._state.local_log_start_offset

    @property
    def remote_tier(self) -> RemoteTier | None:
        return self._state.remote

    @property
    def log_end_offset(self) -> int:
        return self._state.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._state.high_watermark

    @property
    def waiting_readers(self) -> int:
        return len(self._state.notifier)

    # -- transactions (segment/transactions.py) ----------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        return self._state.last_stable_offset

    def ongoing_transactions(self) -> dict[int, int]:
        return dict(self._state.txns.ongoing)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        return reader.aborted_transactions(self._state, start, end)

    # -- appending and reading -------------------------------------------------------------

    def append(
        self, records: bytes | bytearray | memoryview, *, origin: AppendOrigin = "client"
    ) -> AppendInfo:
        return append.append(self._state, records, origin=origin)

    def adopt(self, path: str | os.PathLike[str]) -> AppendInfo:
        return adopt.adopt(self._state, path)

    def refresh(self) -> int:
        return reader.refresh(self._state)

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes:
        return reader.read(self._state, offset, max_bytes, upper=upper)

    def read_slice(
        self, offset: int, max_bytes: int, *, upper: int | None = None
    ) -> FileSlice | None:
        return reader.read_slice(self._state, offset, max_bytes, upper=upper)

    def batches(self, start: int = OFFSET_OLDEST, end: int | None = None) -> Iterator[memoryview]:
        return reader.batches(self._state, start, end)

    def offset_for_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> tuple[int, int] | None:
        committed = isolation.check_level(isolation_level)
        found = reader.offset_for_time(self._state, timestamp_ms)
        if not committed:
            return found
        return isolation.committed_offset_for_time(self._state, timestamp_ms, found)

    # -- the embedded API (publish, consume, get...) ---------------------------------------

    def publish(self, messages: Sequence[Message]) -> int:
        return message_ops.publish(self, messages)

    def publish_values(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        timestamp_ms: int | Sequence[int] | npt.NDArray[np.int64] | None = None,
    ) -> int:
        return fastpath.publish_values(self, values, keys, timestamp_ms)

    def consume_columns(
        self,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> RecordColumns:
        return fastpath.consume_columns(self, offset, max_count, isolation_level)

    def consume(
        self,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[Message]]:
        return message_ops.consume(self, offset, max_count, isolation_level)

    def consume_blocking(
        self,
        offset: int,
        max_count: int,
        timeout_s: float,
        *,
        cancel: CancelToken | None = None,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[Message]]:
        return blocking.consume_blocking(
            self, offset, max_count, timeout_s, cancel=cancel, isolation_level=isolation_level
        )

    def wait_for_offset(self, offset: int) -> Future[int]:
        return self._state.notifier.wait(offset)

    def consume_by_key(
        self,
        key: bytes,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[Message]]:
        self._state.check_open()
        return keys.consume_by_key(self._state, key, offset, max_count, isolation_level)

    def get(self, offset: int, *, isolation_level: IsolationLevel = "read_uncommitted") -> Message:
        return message_ops.get(self, offset, isolation_level)

    def get_by_key(
        self, key: bytes, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> Message:
        offset = self.offset_by_key(key, isolation_level=isolation_level)
        try:
            return message_ops.get(self, offset, isolation_level)
        except InvalidOffsetError as e:  # a trim moved the log start past it meanwhile
            raise NotFoundError(f"the last message with key {key!r} was removed") from e

    def offset_by_key(
        self, key: bytes, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> int:
        committed = isolation.check_level(isolation_level)
        self._state.check_open()
        offset = keys.get_offset(self._state, key)
        if offset >= self._state.high_watermark and self._state.group_commit is not None:
            self.sync_future(offset + 1).result()
        if not committed:
            return offset
        try:
            return isolation.committed_offset_by_key(self._state, key, offset)
        except InvalidOffsetError as e:  # a trim moved the log start past it meanwhile
            raise NotFoundError(f"the last message with key {key!r} was removed") from e

    def offset_by_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> tuple[int, int]:
        found = self.offset_for_time(timestamp_ms, isolation_level=isolation_level)
        if found is None:
            raise NotFoundError(f"no message at or after {timestamp_ms} ms")
        return found

    def get_by_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> Message:
        offset = self.offset_by_time(timestamp_ms, isolation_level=isolation_level)[0]
        return message_ops.get(self, offset, isolation_level)

    def next_offset(self) -> int:
        self._state.check_open()
        return self._state.log_end_offset

    # -- durable subscriptions (subscription.py) --------------------------------------------

    def subscribe(
        self,
        name: str,
        *,
        ack_wait_ms: int = 30_000,
        max_in_flight: int = 1024,
        start: int = OFFSET_OLDEST,
        max_deliveries: int | None = None,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> Subscription:
        return self._registry().subscribe(
            name,
            ack_wait_ms=ack_wait_ms,
            max_in_flight=max_in_flight,
            start=start,
            max_deliveries=max_deliveries,
            isolation_level=isolation_level,
        )

    def unsubscribe(self, name: str) -> None:
        self._registry().unsubscribe(name)

    def subscriptions(self) -> list[str]:
        return self._registry().names()

    def _registry(self) -> subscription.Subscriptions:
        """The log's durable subscriptions, made on first use (kept in the state, so a
        close through the state alone closes them too)."""
        st = self._state
        with st.lock:
            if st.subscriptions is None:
                st.subscriptions = subscription.Subscriptions(self)
            return st.subscriptions

    # -- durability ------------------------------------------------------------------------

    def sync(self) -> int:
        self._state.check_open()
        if self._state.group_commit is None:
            return self._state.log_end_offset
        # blocking: the fsync runs in this thread when no round is under way
        return self._state.group_commit.sync(self._state.log_end_offset)

    def sync_future(self, offset: int) -> Future[int]:
        if self._state.group_commit is None:
            fut: Future[int] = Future()
            if self._state.closed:
                fut.set_exception(LogClosedError("log closed"))
            else:
                fut.set_result(self._state.log_end_offset)
            return fut
        return self._state.group_commit.wait_for(offset)

    def on_append(self, callback: Callable[[int], None]) -> Callable[[], None]:
        key = next(self._state.callback_ids)
        self._state.callbacks[key] = callback

        def unregister() -> None:
            self._state.callbacks.pop(key, None)

        return unregister

    def set_sync_observer(self, observer: Callable[[float, int], None] | None) -> None:
        if self._state.group_commit is not None:
            self._state.group_commit.on_round = observer

    def stat(self) -> dict[str, int]:
        segs = self._state.segments
        out = {
            "segments": len(segs),
            "bytes": sum(s.size for s in segs),
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self._state.log_end_offset,
            "high_watermark": self._state.high_watermark,
        }
        tier = self._state.remote
        if tier is not None:
            manifest = tier.manifest
            out["local_log_start_offset"] = self._state.local_log_start_offset
            out["remote_segments"] = len(manifest.segments)
            out["remote_bytes"] = manifest.size
        return out

    def segments(self) -> list[SegmentInfo]:
        st = self._state
        st.check_open()
        return [stats.segment_info(seg) for seg in st.segments]

    def stats(self) -> LogStats:
        return stats.log_stats(self)

    def gc(self, unused_for_s: float) -> int:
        return gc.gc(self, unused_for_s)

    def start_gc(self, every_s: float = 60.0, unused_for_s: float = 300.0) -> None:
        self._state.check_open()
        if self._state.stop_gc is not None:
            self._state.stop_gc()
        self._state.stop_gc = gc.start_gc(self, every_s, unused_for_s)

    def backup(self, dest: str | os.PathLike[str]) -> BackupReport:
        return backup_log(self, dest)

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._state.lock:
            if self._state.closed:
                return
            self._state.closed = True
        if self._state.subscriptions is not None:
            self._state.subscriptions.close_all()
        if self._state.stop_gc is not None:
            self._state.stop_gc()
        if self._state.group_commit is not None:
            self._state.group_commit.close()
        self._state.notifier.close("closed")
        clean = self._state.offline is None and not self.read_only
        if clean and self._state.keys is not None:
            try:
                keys.save_key_index(
                    self.directory, self._state.keys, self._state, self._state.log_end_offset
                )
            except (OSError, StorageError) as e:  # derived data: rebuilt at the next open
                _logger.warning("cannot write the key index of %s: %s", self.directory, e)
        for seg in self._state.segments:
            if clean and seg is self._state.segments[-1]:
                try:
                    seg.finish_time_index()
                    seg.sync_all()
                except OSError as e:
                    _logger.error("final fsync of %s failed: %s", seg.path, e)
                    clean = False
            seg.close()
        maint.close_retired(self, force=True)
        if clean:
            try:  # the next open replays nothing
                write_snapshot(self.directory, self._state.log_end_offset, self._state.txns.ongoing)
            except OSError as e:  # the next open replays from the last roll's snapshot
                _logger.warning("cannot write the transaction state of %s: %s", self.directory, e)
            marker = {"log_end_offset": self._state.log_end_offset, "time_ms": append.now_ms()}
            files.write_small_file(
                self.directory / files.CLEAN_SHUTDOWN, json.dumps(marker).encode()
            )
        if self._state.lock_fd is not None:
            os.close(self._state.lock_fd)  # releases the flock
            self._state.lock_fd = None

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
            f"end={self._state.log_end_offset}, hw={self._state.high_watermark})"
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
    Raises DirectoryNotFoundError (missing and not ``create``), LogCorruptedError,
    TypeError on an unknown setting. See ``Log.open`` for ``read_only`` and ``recover``.
    """
    known = {f.name for f in fields(LogConfig)}
    unknown = set(config) - known
    if unknown:
        raise TypeError(f"unknown log settings: {sorted(unknown)}")
    cfg = LogConfig(key_index=key_index, **config)
    return Log.open(path, cfg, create=create, read_only=read_only, recover=recover)
