"""seglog's embedded log contract in one file: what ``seglog.storage`` promises.

A log is one partition: a directory of segments of record batches v2 in Kafka's on-disk
format (``%020d.log`` + ``.index`` + ``.timeindex``). Open one with
``open_log(path, create=True, **LogConfig fields)`` (or ``Log.open``); it is a context
manager. :class:`LogAPI` below lists every method of the ``Log`` it returns, with its edge
cases and errors; ``seglog.storage`` exports the names (``from seglog.storage import ...``).

**Offsets** (Kafka's terms). The *log start offset* is the first readable offset (moved by
retention, DeleteRecords and ``delete_offsets``); the *log end offset* is the offset the
next record gets; readers see offsets below the *high watermark* (the durable end under
the default policy, fsync before acknowledge; the log end offset under ``flush_messages``
/ ``flush_ms``). ``OFFSET_OLDEST`` (-2) and ``OFFSET_NEWEST`` (-1) are sentinels for the
log start and the high watermark wherever an offset is taken.

**Records**: ``Message(key, value, timestamp=ms, headers=[(name, bytes | None)])``
(``value=None`` is a tombstone); ``publish`` encodes them, ``append`` takes record batches
as received on the wire (validated: length, magic 2, CRC-32C, offsets, size).

**Configuration** ``LogConfig`` (Kafka's topic config names): ``segment_bytes``,
``segment_messages`` (roll by record count), ``segment_ms``, ``index_interval_bytes``,
``max_message_bytes``, ``flush_messages``, ``flush_ms``, ``message_timestamp_type``,
``key_index``, ``check_crcs`` (verify CRC-32C on the decoding read paths, default True);
``AppendInfo`` is what ``append`` returns (first and last offset, log append time, record
count, max timestamp).

**Durability**: ``publish``/``publish_values`` return once the records are durable (group
commit: one fsync thread per log, concurrent writers share fsyncs; a blocking ``publish``
or ``sync`` with no fsync round under way runs the round in the calling thread instead of
handing it to the fsync thread and back — ``sync_future`` never does); ``append`` returns
once written to the page cache, ``sync``/``sync_future`` make it durable. Under
``flush_messages`` / ``flush_ms`` everything is acknowledged and visible at once;
``flush_messages >= FLUSH_NEVER`` (2**62, Kafka's default Long.MAX_VALUE) never fsyncs on a
count (rolled segments, ``sync`` and ``close`` still do). ``close`` marks a
clean shutdown; a crash is recovered at the next open (torn tail cut, indexes rebuilt).

**Threads and processes**: one writer per directory (an flock: DataDirLockedError in any
other process), any number of readers in any thread; ``read_only=True`` opens beside a
writer in another process (``refresh`` picks up its appends).

**Errors** (all under ``seglog.errors.SeglogError``): InvalidOffsetError (outside [log
start, log end]), NotFoundError (no such record, key or offset stored; never a directory),
DirectoryNotFoundError (no such log or data directory; also a FileNotFoundError),
NoIndexError (by-key without ``key_index``), CorruptRecordError / InvalidRecordError /
RecordTooLargeError (a batch refused by ``append``), LogCorruptedError (damage below the
tail at open: use ``recover``), LogClosedError (closed, or offline after an fsync error),
ReadOnlyError, DataDirLockedError, StorageError (I/O: disk full...; nothing already stored
is damaged). CorruptRecordError also comes from the decoding reads (``consume``, ``get``...) when a
stored batch fails its CRC-32C (``check_crcs``, on by default; Kafka's ``check.crcs``).

**Functions over a log or a directory** (each documented where it is defined):

- retention: ``trim_by_age(log, max_age_ms)``, ``trim_by_size(log, max_bytes)``,
  ``trim_by_count(log, max_records)``, ``trim_by_offset(log, offset)`` → ``TrimResult``
  (whole segments removed; Kafka's retention.ms / retention.bytes / DeleteRecords);
  ``trim_consumed(log, subscription_names)`` (the closed segments every named durable
  subscription has passed: below its lowest unacknowledged offset, else its position;
  nothing while one of them does not exist yet) and ``trim_segments_below(log, floor)``
  (the same rule for a given floor; the log start moves to a segment boundary);
- the cleaner: ``compact(log, ...)`` (keep each key's last record, tombstones after
  ``delete.retention.ms``), ``compact_updates``, ``compact_deletes``, and
  ``delete_offsets(log, offsets)`` → ``Removed`` (rolls the active segment first when it
  holds one of the offsets);
- tools: ``check(dir)`` / ``recover(dir)`` → ``CheckReport`` per partition (klevdb's
  Check / Recover), ``stat(dir)``, ``backup(log | dir, dest)`` → ``BackupReport``,
  ``snapshot(src, file)`` / ``restore(file, dest)``, ``migrate(dir)``;
- ``DataDir(path)``: a broker's topics as ``<topic>-<partition>`` directories.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Literal, Protocol

from seglog.storage.record.message import OFFSET_OLDEST

if TYPE_CHECKING:  # names for the signatures only (api.py sits below the log package)
    import numpy as np
    import numpy.typing as npt

    from seglog.storage.config import AppendInfo, LogConfig
    from seglog.storage.fileio.counters import FileCounters
    from seglog.storage.log.append import AppendOrigin
    from seglog.storage.log.backup import BackupReport
    from seglog.storage.log.blocking import CancelToken
    from seglog.storage.log.reader import FileSlice
    from seglog.storage.log.stats import LogStats, SegmentInfo
    from seglog.storage.log.subscription import Subscription
    from seglog.storage.record.columns import RecordColumns
    from seglog.storage.record.message import Message
    from seglog.storage.remote.tier import RemoteTier

__all__ = ["IsolationLevel", "LogAPI"]

IsolationLevel = Literal["read_uncommitted", "read_committed"]
"""Kafka's isolation.level: ``read_committed`` reads stop at the last stable offset and
skip the records of aborted transactions; ``read_uncommitted`` reads up to the high
watermark, aborted records included. Control records (markers) are never returned."""


class LogAPI(Protocol):
    """Every public method of ``seglog.storage.Log`` (one partition log), with its contract.

    ``Log`` implements this class; its methods take their documentation from here.
    """

    @property
    def fsync_count(self) -> int:
        """fsync rounds run so far, by the group commit thread or by a blocking
        ``publish``/``sync`` caller (0 when read-only)."""
        ...

    @property
    def directory(self) -> pathlib.Path:
        """The partition directory."""
        ...

    @property
    def config(self) -> LogConfig:
        """The configuration the log was opened with (topic configs may replace it)."""
        ...

    @property
    def read_only(self) -> bool:
        """Opened read-only (no writes, no lock; ``refresh`` picks up new data)."""
        ...

    @property
    def counters(self) -> FileCounters:
        """File operation counters (``Log.stats().counters``, broker metrics)."""
        ...

    @property
    def append_count(self) -> int:
        """Number of successful ``append`` calls (with ``fsync_count``: group commit)."""
        ...

    @property
    def closed(self) -> bool:
        """``close`` was called."""
        ...

    @property
    def clean_start(self) -> bool:
        """A writer opened after a clean shutdown (``close`` had fsynced everything and
        left its marker): nothing appended before this open can have been lost. False
        after a crash (kill -9, power loss) and for read-only opens."""
        ...

    @property
    def log_start_offset(self) -> int:
        """First offset still readable: the base offset of the first segment, or higher
        once retention or DeleteRecords moved it (``log-start-offset`` checkpoint). On a
        tiered log, the first offset of the remote tier (Kafka: earliest, timestamp -2)."""
        ...

    @property
    def local_log_start_offset(self) -> int:
        """First offset on local disk (Kafka's earliest-local, ListOffsets timestamp -4,
        KIP-1005); equal to ``log_start_offset`` on a log that is not tiered."""
        ...

    @property
    def remote_tier(self) -> RemoteTier | None:
        """The remote tier (KIP-405) when the log is tiered (``Log.open(remote=...)`` with
        ``remote.storage.enable``, or a directory tiered before), else None. Reads below
        the first local segment go through it transparently."""
        ...

    @property
    def log_end_offset(self) -> int:
        """Next offset to be assigned (klevdb's NextOffset)."""
        ...

    @property
    def high_watermark(self) -> int:
        """Offsets below it are visible to readers (durable end under fsync-before-ack)."""
        ...

    @property
    def waiting_readers(self) -> int:
        """Readers parked waiting for new data on this log right now: the pending futures
        of ``wait_for_offset``, one per blocked ``consume_blocking``, ``seglog.aio``
        tailer or durable-subscription ``fetch`` waiting for data (a read-only log's
        pollers re-register every 50 ms). Read-only observability (a gauge; tests wait on
        it instead of sleeping): 0 once every waiter was woken, timed out, was cancelled
        or the log closed."""
        ...

    @property
    def last_stable_offset(self) -> int:
        """The last stable offset (LSO, Kafka's): the first offset of the oldest ongoing
        transaction (never below the log start offset), else the high watermark; what a
        ``read_committed`` reader may read up to (not including)."""
        ...

    def ongoing_transactions(self) -> dict[int, int]:
        """``{producer id: first offset}`` of the transactions open on this log: a
        transactional batch was appended, its COMMIT/ABORT marker not yet."""
        ...

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """``[(producer id, first offset)]`` of the aborted transactions whose offsets
        overlap ``[start, end)`` (first offset < ``end``, ABORT marker >= ``start``),
        ordered by first offset: Fetch's ``aborted_transactions`` for a read_committed
        fetch of ``[start, end)``, from the segments' ``.txnindex`` (below the local log
        start, those of the remote tier's segments: a remote read on first use, then
        kept in memory; RemoteCorruptionError, RemoteStorageError)."""
        ...

    def append(
        self, records: bytes | bytearray | memoryview, *, origin: AppendOrigin = "client"
    ) -> AppendInfo:
        """Append one or more record batches v2 exactly as received on the wire.

        Each batch is validated (length, magic 2, CRC-32C, lastOffsetDelta + 1 ==
        recordCount when uncompressed, size <= max.message.bytes) before anything is
        written; offsets are assigned by patching baseOffset; LogAppendTime topics get
        attribute bit 3, maxTimestamp = now and a new CRC. All or nothing: on a write
        error (ENOSPC...) the segment is cut back and StorageError raised. Writes reach
        the page cache only; durability comes from ``sync``/``sync_future``. Raises
        CorruptRecordError, InvalidRecordError, RecordTooLargeError, LogClosedError,
        ReadOnlyError.

        Transactions (Kafka's): a transactional batch (attribute bit 4) starts or extends
        its producer's ongoing transaction; a control batch (bit 5,
        ``encode_control_batch``) ends it, and an ABORT marker is recorded in the
        segment's ``.txnindex``. Control batches are refused (InvalidRecordError) unless
        ``origin="coordinator"`` (a transaction coordinator's markers; Kafka's
        AppendOrigin), and must hold a decodable marker (CorruptRecordError).
        """
        ...

    def adopt(self, path: str | os.PathLike[str]) -> AppendInfo:
        """Append the record batches v2 of the file at ``path`` by moving the file into
        the log as its new active segment (rename, no copy): validated as ``append``
        validates, offsets patched in the file, the file fdatasync'ed first, the previous
        active segment rolled (or replaced when empty). For large staged writes (the Spark
        sink): every call makes a segment, so small files are better ``append``ed. A file
        on another filesystem, over ``segment_bytes``, over ``segment_messages`` records
        or holding more offsets than a segment can index is copied through ``append``
        instead, in groups of whole batches that roll as appends do. The file is gone
        afterwards (left in place when validation refuses it). ``sync`` makes the new
        directory entry durable. Raises as ``append``, FileNotFoundError, StorageError
        (the log unchanged; when copied in groups, those before the failed one stay and
        the file is left in place)."""
        ...

    def refresh(self) -> int:
        """Read-only logs: pick up batches and segments another process appended since;
        returns the new log end offset (a no-op on a writer)."""
        ...

    def read(self, offset: int, max_bytes: int, *, upper: int | None = None) -> bytes:
        """Whole record batches starting with the batch containing ``offset``: up to
        ``max_bytes`` bytes but at least one whole batch (Kafka's "first batch even if
        larger"), only batches whose base offset is below ``upper`` (default: the high
        watermark). ``b""`` at the end. Raises InvalidOffsetError if ``offset`` is below
        the log start offset or above the log end offset, LogClosedError."""
        ...

    def read_slice(
        self, offset: int, max_bytes: int, *, upper: int | None = None
    ) -> FileSlice | None:
        """As ``read``, as a :class:`FileSlice` for ``os.sendfile``; None at the end."""
        ...

    def batches(self, start: int = OFFSET_OLDEST, end: int | None = None) -> Iterator[memoryview]:
        """Iterate whole stored record batches from the one holding ``start``
        (OFFSET_OLDEST: log start) up to (not including) batches at or past ``end``
        (default: the high watermark at the call). InvalidOffsetError as ``read``."""
        ...

    def offset_for_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> tuple[int, int] | None:
        """Alias of :meth:`offset_by_time` answering None instead of NotFoundError (the form
        Kafka's ListOffsets by timestamp needs: the broker answers offset -1 then)."""
        ...

    def publish(self, messages: Sequence[Message]) -> int:
        """Append ``messages`` as record batches v2 and wait until they are durable (default
        policy); returns the next offset. Errors as ``append``."""
        ...

    def publish_values(
        self,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None = None,
        timestamp_ms: int | Sequence[int] | npt.NDArray[np.int64] | None = None,
    ) -> int:
        """Columnar ``publish``: one record per value (None = null), ``keys`` one per value
        or None (all null), ``timestamp_ms`` one int for all, one per value, or None (now).
        No headers. Encoded vectorised into record batches v2 (split at
        max.message.bytes); waits until durable under the default policy; returns the
        next offset. ValueError on mismatched lengths; errors otherwise as ``append``."""
        ...

    def consume_columns(
        self,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> RecordColumns:
        """Columnar ``consume``: up to ``max_count`` records from ``offset`` as numpy
        columns (``RecordColumns``: offsets, timestamps ms, key/value positions and
        lengths in one buffer, ``packed_values()`` for Arrow, ``messages()``); its
        ``next_offset`` is where to continue. Decoded vectorised (control batches skipped,
        compressed batches through kafka-python's codecs). OFFSET_OLDEST / OFFSET_NEWEST
        as ``consume``; InvalidOffsetError outside [log start, log end];
        CorruptRecordError on undecodable records or, under ``check_crcs`` (default), a
        batch whose CRC-32C does not match (the message names its offset).
        ``isolation_level`` as ``consume``."""
        ...

    def consume(
        self,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[Message]]:
        """Up to ``max_count`` messages from ``offset``; returns ``(next offset, messages)``.
        OFFSET_OLDEST starts at the log start; OFFSET_NEWEST returns ``(next offset, [])``.
        InvalidOffsetError outside [log start, log end]; CorruptRecordError as
        ``consume_columns`` (a damaged batch: its CRC-32C checked unless ``check_crcs`` is
        False). Control records (transaction markers) are never returned; the next offset
        moves past them. ``isolation_level="read_committed"`` (Kafka's): reads stop at the
        last stable offset (OFFSET_NEWEST is the LSO) and the records of aborted
        transactions are skipped; ValueError on any other level."""
        ...

    def consume_blocking(
        self,
        offset: int,
        max_count: int,
        timeout_s: float,
        *,
        cancel: CancelToken | None = None,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[Message]]:
        """As ``consume`` (``isolation_level`` too: read_committed waits for the LSO to
        move), but when no message is available yet waits up to ``timeout_s``
        seconds for one (woken by the writer in this process, no polling; a read-only log
        polls every 50 ms). Returns ``(next offset, [])`` on timeout; OFFSET_NEWEST waits
        for the next message published. ``cancel`` (a ``CancelToken``) stops the wait from
        another thread: ``concurrent.futures.CancelledError``. Raises InvalidOffsetError
        (outside [log start, log end]), LogClosedError (also when the log closes while
        waiting)."""
        ...

    def wait_for_offset(self, offset: int) -> Future[int]:
        """A future completing with the high watermark once the message at ``offset`` is
        visible (high watermark > ``offset``), failing with LogClosedError when the log
        closes or goes offline; cancel it to stop waiting. Woken by this process's writer;
        a read-only log completes it only from ``refresh`` (poll). Any number of waiters."""
        ...

    def consume_by_key(
        self,
        key: bytes,
        offset: int,
        max_count: int,
        *,
        isolation_level: IsolationLevel = "read_uncommitted",
    ) -> tuple[int, list[Message]]:
        """Up to ``max_count`` messages with ``key`` from ``offset`` on (sentinels
        allowed): ``(next offset, messages)``; ``isolation_level`` as ``consume``.
        Returns at once (next offset = high watermark) when the key index shows no later
        message with that key; else scans and decodes the batches in between.
        NoIndexError without ``key_index``, InvalidOffsetError outside [log start, log
        end], CorruptRecordError as ``consume``."""
        ...

    def get(self, offset: int, *, isolation_level: IsolationLevel = "read_uncommitted") -> Message:
        """The message at ``offset``: InvalidOffsetError outside [log start, high
        watermark), NotFoundError if that offset is not stored (compacted away) or holds a
        control record (a transaction marker: never returned; the message says so),
        CorruptRecordError if its batch fails the CRC-32C check (``check_crcs``).
        ``isolation_level="read_committed"``: InvalidOffsetError at or past the last
        stable offset instead of the high watermark, NotFoundError (saying so) for a
        record of an aborted transaction; ValueError on an unknown level."""
        ...

    def get_by_key(
        self, key: bytes, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> Message:
        """The last message published with ``key`` (a tombstone has ``value=None``).
        NoIndexError if the log was opened without ``key_index``, NotFoundError if no
        message with that key is stored (never published, or every record of the key
        removed by retention, compaction or ``delete_offsets``; after compaction or a
        delete of its latest record, the latest surviving record is returned). Waits
        for that message to be durable if it is not yet.

        ``isolation_level``: ``read_uncommitted`` (default) returns the latest record
        stored with the key, whatever its transaction became (ongoing or aborted), as a
        read_uncommitted ``consume`` would see it; ``read_committed`` the last record of
        the key below the last stable offset that is not in an aborted transaction
        (NotFoundError when there is none: the key only in aborted or ongoing
        transactions). The key index keeps only a key's last offset: when that record is
        aborted or past the LSO, the log is decoded backwards from it in doubling windows
        (1024 offsets first) until one holds a committed record of the key, a cost
        proportional to the distance back to it (the whole log for a key with none).
        ValueError on an unknown level."""
        ...

    def offset_by_key(
        self, key: bytes, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> int:
        """Offset of the last message with ``key``; ``isolation_level`` and errors as
        ``get_by_key``."""
        ...

    def offset_by_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> tuple[int, int]:
        """``(offset, timestamp)`` of the first record whose timestamp is >= ``timestamp_ms``
        (ms since the epoch), found through the time index and the first batch whose max
        timestamp is >= it (Kafka's ListOffsets semantics, klevdb's OffsetByTime); records
        below the log start offset and control records do not count. NotFoundError if no
        visible record qualifies, LogClosedError. ``isolation_level="read_committed"``:
        the first such record below the last stable offset that is not in an aborted
        transaction (when the first record found is aborted, the batches after it are
        decoded up to the LSO); ValueError on an unknown level."""
        ...

    def get_by_time(
        self, timestamp_ms: int, *, isolation_level: IsolationLevel = "read_uncommitted"
    ) -> Message:
        """The message at ``offset_by_time(timestamp_ms, isolation_level=...)`` (klevdb's
        GetByTime). NotFoundError if none is visible, LogClosedError, ValueError on an
        unknown level."""
        ...

    def next_offset(self) -> int:
        """Alias of :attr:`log_end_offset` (klevdb's NextOffset): the offset the next
        published message gets. LogClosedError when closed."""
        ...

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
        """A durable subscription (NATS Streaming's durable subscriber): ``fetch`` returns
        ``Delivery`` objects (message + ``redelivery_count``): first those unacknowledged
        for ``ack_wait_ms``, then new messages from its position, at most
        ``max_in_flight`` unacknowledged; ``ack(offset | offsets)`` settles them. Its
        state (position, unacknowledged offsets and their redelivery counts) lives in
        ``subscriptions/<name>.sub`` under the log's fsync policy: after a restart or a
        kill -9 every unacknowledged message is redelivered, none whose ack returned is.
        ``start`` (OFFSET_OLDEST, OFFSET_NEWEST or an offset) applies when the name is
        new; an existing name resumes (the open one is returned when still open, with the
        same settings). ``max_deliveries`` (None: no limit) caps the deliveries of one
        message: past it an expired or released message is archived (never delivered
        again); ``Subscription.release`` hands deliveries back at once;
        ``Subscription.fetch_offsets_now(max_count)`` delivers as ``fetch_now`` (no wait)
        but returns ``[(offset, redelivery_count), ...]``, decoding no message. ``name``
        must match ``[A-Za-z0-9._-]{1,200}`` (else ValueError). ``isolation_level`` as
        ``consume`` (read_committed: new deliveries stop at the last stable offset and skip
        aborted records; OFFSET_NEWEST is the LSO); a setting of the open, not stored.
        Raises ReadOnlyError, LogClosedError, InvalidOffsetError (``start`` outside [log
        start, log end]), ValueError (settings < 1, or open with other settings)."""
        ...

    def unsubscribe(self, name: str) -> None:
        """Delete a subscription's state (closing it if open: its calls then raise
        LogClosedError). NotFoundError when there is no such subscription, ValueError on
        an invalid name, ReadOnlyError."""
        ...

    def subscriptions(self) -> list[str]:
        """The names of the log's durable subscriptions (open or not), sorted."""
        ...

    def sync(self) -> int:
        """Block until everything appended so far is fsynced; return the durable end
        offset. With no fsync round under way the round runs in the calling thread (on
        the fsync thread otherwise); concurrent callers share one fsync. LogClosedError
        after an fsync error."""
        ...

    def sync_future(self, offset: int) -> Future[int]:
        """Future completing with the durable end offset once it is >= ``offset`` (group
        commit; wrap with ``asyncio.wrap_future``). Fails with LogClosedError when the log
        is closed or offline after an fsync error."""
        ...

    def on_append(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(new_high_watermark)`` whenever new data becomes visible (from
        the appending or the fsync thread: keep it short, e.g. ``loop.call_soon_threadsafe``).
        Returns a function that unregisters it."""
        ...

    def set_sync_observer(self, observer: Callable[[float, int], None] | None) -> None:
        """Call ``observer(seconds, records)`` on the fsync thread after each group-commit
        round: how long its fsyncs took and how many offsets it made durable (metrics; keep
        it short). None removes it; a read-only log has no fsync thread (no calls)."""
        ...

    def stat(self) -> dict[str, int]:
        """The cheap summary of :meth:`stats` (no batch header read): ``{"segments",
        "bytes", "log_start_offset", "log_end_offset", "high_watermark"}`` (bytes of whole
        valid batches); the same dict per partition as ``seglog.storage.stat(dir)``. A tiered
        log adds ``local_log_start_offset``, ``remote_segments`` and ``remote_bytes``
        (``bytes`` and ``segments`` count local disk only)."""
        ...

    def segments(self) -> list[SegmentInfo]:
        """Its segments, oldest first, the active one (where appends go) last: one
        ``SegmentInfo`` each (base offset, next offset, size in bytes, largest timestamp in
        ms, whether its read handle is open), taken from memory without any file read
        (O(segments)); a snapshot (a roll, retention or the cleaner change the list after).
        Never empty on a writer. Sizes and next offsets count appended batches, visible or
        not yet (``stat``'s ``bytes`` is their sum). LogClosedError when closed (or offline)."""
        ...

    def stats(self) -> LogStats:
        """Per log and per segment statistics (records, batches, bytes, first/last offsets
        and times, index sizes) and the file operation counters; reads each visible
        batch header once. LogClosedError when closed."""
        ...

    def gc(self, unused_for_s: float) -> int:
        """Close the read handles of segments unused for ``unused_for_s`` seconds
        (klevdb's GC; never the active segment); reopened on the next read. Returns how
        many were closed."""
        ...

    def start_gc(self, every_s: float = 60.0, unused_for_s: float = 300.0) -> None:
        """Run ``gc(unused_for_s)`` every ``every_s`` seconds on a daemon thread until
        ``close`` (replaces a previous schedule)."""
        ...

    def backup(self, dest: str | os.PathLike[str]) -> BackupReport:
        """Online, consistent backup of this log to the new directory ``dest`` (see
        ``seglog.storage.backup``)."""
        ...

    def close(self) -> None:
        """Make everything durable, mark a clean shutdown (reopen skips the CRC scan) and
        release files. Idempotent; later calls on the log raise LogClosedError."""
        ...
