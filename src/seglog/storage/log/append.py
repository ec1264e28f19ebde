"""The write side of a log, as functions of its :class:`~seglog.storage.log.state.LogState`:
``append`` (validate, assign offsets, write, index), ``roll`` (a new active segment), and
the group commit's hooks (``sync_point``: what one fsync round covers; ``on_durable``;
``on_sync_error``: the log goes offline). Called by ``Log`` under the rules in ``log.py``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Literal

from seglog.errors import StorageError
from seglog.storage.config import AppendInfo
from seglog.storage.fileio import files
from seglog.storage.record.batch import (
    BatchHeader,
    encoded_batches,
    patch_log_append_time,
    place_batch,
    validate_for_append,
)
from seglog.storage.record.control import ATTR_CONTROL, ATTR_TRANSACTIONAL, control_marker
from seglog.storage.segment import transactions
from seglog.storage.segment.segment import Placed, Segment, create_segment

if TYPE_CHECKING:
    from seglog.storage.log.state import LogState
    from seglog.storage.log.sync import SyncPoint

__all__ = [
    "AppendOrigin",
    "append",
    "fire",
    "index_keys",
    "now_ms",
    "observe",
    "on_durable",
    "on_sync_error",
    "place_batches",
    "roll",
    "roll_checked",
    "sync_point",
]

_logger = logging.getLogger("seglog.storage.log.log")
_U32 = (1 << 32) - 1
_TUPLE_NEW = tuple.__new__
_TXN = ATTR_TRANSACTIONAL | ATTR_CONTROL

AppendOrigin = Literal["client", "coordinator"]
"""Who writes (Kafka's AppendOrigin): only a transaction coordinator writes control batches."""


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (record and segment timestamps)."""
    return time.time_ns() // 1_000_000


def append(
    st: LogState,
    records: bytes | bytearray | memoryview,
    *,
    caller_syncs: bool = False,
    take: bool = False,
    trusted: bool = False,
    origin: AppendOrigin = "client",
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

    ``caller_syncs`` (the blocking ``publish``): under the default policy the fsync
    thread is not asked for a round; the caller calls ``GroupCommit.sync`` next, which
    runs the fsync in the calling thread when no round is under way. ``take``: a
    bytearray ``records`` is the caller's to give (patched in place, not copied).
    ``trusted``: ``records`` come from this process's encoder (``publish``,
    ``publish_values``): their headers are read, not validated, and their CRCs not
    checked again (``encoded_batches``); never for bytes from a client or a file.
    ``origin="coordinator"``: control batches (transaction markers) are accepted, each
    with a decodable marker record (CorruptRecordError); a client's are refused
    (InvalidRecordError), as Kafka's AppendOrigin.CLIENT.

    Transactions (``segment/transactions.py``): a transactional batch starts or extends
    its producer's ongoing transaction, a control batch ends it, an ABORT marker adds an
    entry to the active segment's ``.txnindex``.
    """
    if trusted:  # checked again under the lock: no need to fail fast
        batches = encoded_batches(records)
    else:
        st.check_writable()
        batches = validate_for_append(
            records, st.config.max_message_bytes, allow_control=origin == "coordinator"
        )
    data = records if take and isinstance(records, bytearray) else bytearray(records)
    log_append = st.config.message_timestamp_type == "LogAppendTime"
    count = span = attrs = 0
    for pos, h in batches:
        count += h.record_count
        span += h.last_offset_delta + 1
        attrs |= h.attributes
        if h.attributes & ATTR_CONTROL:
            control_marker(memoryview(data)[pos : pos + h.size])  # CorruptRecordError
    with st.lock:
        st.check_writable()
        now = time.time_ns() // 1_000_000  # now_ms(), inline (a call per append)
        seg = st.segments[-1]
        rolled = seg.size > 0 and _must_roll(st, seg, len(data), span, now)
        if rolled:
            seg = roll_checked(st, now)
        placed, offset, max_ts = place_batches(st, data, batches, now, log_append)
        try:
            seg.append(data, placed, offset, st.config.index_interval_bytes)
        except StorageError:
            st.counters.errors += 1
            raise
        st.counters.appends += 1
        st.counters.appended_bytes += len(data)
        st.counters.appended_records += count
        if seg.first_append_ms < 0:
            seg.first_append_ms = now
        base = st.log_end_offset
        st.log_end_offset = offset
        if attrs & _TXN:
            observe(st, seg, data, batches, placed)
        index_keys(st, data, base)
        st.append_count += 1
        relaxed = not st.config.fsync_before_ack
        sync_now = not caller_syncs
        if relaxed:
            st.high_watermark = offset
            st.unflushed += count
            fm = st.config.flush_every  # None under flush.messages >= FLUSH_NEVER
            # a roll fsyncs the rolled segment in the background (as Kafka does), so
            # maintenance (closed_segments) gets it even when no count ever triggers
            sync_now = rolled or (fm is not None and st.unflushed >= fm)
            if sync_now:
                st.unflushed = 0
    assert st.group_commit is not None
    st.group_commit.appended(offset, sync_now=sync_now)
    if relaxed:
        fire(st, st.high_watermark)
    # tuple.__new__: the NamedTuple's __new__ is a Python-level call
    return _TUPLE_NEW(AppendInfo, (base, offset - 1, now if log_append else -1, count, max_ts))


def place_batches(
    st: LogState,
    data: bytearray | memoryview,
    batches: list[tuple[int, BatchHeader]],
    now: int,
    log_append: bool,
) -> tuple[list[Placed], int, int]:
    """Give ``batches`` (validated, at their positions in ``data``) their offsets from
    the log end offset on (under ``st.lock``): baseOffset and partitionLeaderEpoch patched
    in place, LogAppendTime stamped (with a new CRC) when ``log_append``. Returns the
    placed batches, the offset after the last one and the highest max timestamp."""
    offset = st.log_end_offset
    placed: list[Placed] = []
    max_ts = -1
    for pos, h in batches:
        place_batch(data, pos, offset, h.size)  # baseOffset, partitionLeaderEpoch
        ts = h.max_timestamp
        if log_append:
            patch_log_append_time(data, pos, h, now)
            ts = now
        max_ts = max(max_ts, ts)
        placed.append((pos, offset, h.size, ts))
        offset += h.last_offset_delta + 1
    return placed, offset, max_ts


def observe(
    st: LogState,
    seg: Segment,
    data: bytearray | memoryview,
    batches: list[tuple[int, BatchHeader]],
    placed: list[Placed],
) -> None:
    """Account for appended transactional and control batches (under ``st.lock``); the
    others cost nothing but the attribute test."""
    view = memoryview(data)
    for (pos, h), (_, base, size, _) in zip(batches, placed, strict=True):
        if h.attributes & _TXN:
            st.txns.observe(seg, base, h.attributes, h.producer_id, view[pos : pos + size])


def index_keys(st: LogState, data: bytearray | memoryview, base: int) -> None:
    """Add the records of ``data`` (whole batches from offset ``base``, already in the
    log) to the key index, if the log keeps one; an undecodable record is logged, not
    raised (the batch is stored: the index only lacks its keys)."""
    if st.keys is not None:
        try:
            st.keys.add(data)
        except Exception:  # a CRC-valid batch with undecodable records
            _logger.exception("key index: cannot decode batch at offset %d", base)


def _must_roll(st: LogState, seg: Segment, nbytes: int, span: int, now: int) -> bool:
    """Whether ``nbytes`` holding ``span`` offsets go to a new segment rather than the
    non-empty active ``seg``: segment.bytes, segment.ms, seglog.segment.messages, and
    offsets relative to the base that must fit the index's u32."""
    cfg = st.config
    in_segment = st.log_end_offset - seg.base_offset  # offsets (records) already there
    return (
        seg.size + nbytes > cfg.segment_bytes
        or now - seg.first_append_ms >= cfg.segment_ms
        or (cfg.segment_messages is not None and in_segment + span > cfg.segment_messages)
        or in_segment + span - 1 > _U32
    )


def roll_checked(st: LogState, now: int) -> Segment:
    """``roll`` (under ``st.lock``), its failures counted and raised as StorageError."""
    try:
        return roll(st, now)
    except (OSError, StorageError) as e:
        st.counters.errors += 1
        raise StorageError(f"cannot roll {st.directory}: {e}") from e


def roll(st: LogState, now: int) -> Segment:
    old = st.segments[-1]
    old.finish_time_index()
    seg = create_segment(st.directory, st.log_end_offset)
    seg.first_append_ms = now
    seg.counters = st.counters
    st.counters.rolls += 1
    st.counters.opens += 1
    st.rolled_unsynced.append(old)
    st.txn_at_roll = (seg.base_offset, st.txns.ongoing)
    st.dir_dirty = True
    st.segments = [*st.segments, seg]
    return seg


def sync_point(st: LogState) -> SyncPoint:
    with st.lock:
        rolled, st.rolled_unsynced = st.rolled_unsynced, []
        txn_snapshot, st.txn_at_roll = st.txn_at_roll, None
        dir_dirty, st.dir_dirty = st.dir_dirty, False
        active, end = st.segments[-1], st.log_end_offset
    if not rolled and not dir_dirty:  # the usual round (every publish): the fdatasync
        return active.sync, end  # alone, no closure to build and run

    def run() -> None:
        done = 0
        try:
            for seg in rolled:
                seg.sync_all()
                seg.index.close()
                seg.time_index.close()
                done += 1
            if dir_dirty:
                files.fsync_dir(st.directory)
            active.sync()
        except Exception:  # an fsync error: the log goes offline (sync.py)
            raise
        except BaseException:  # interrupted (KeyboardInterrupt in a caller running the
            # round): no fsync error; what is left goes to the next round
            with st.lock:
                st.rolled_unsynced = [*rolled[done:], *st.rolled_unsynced]
                st.txn_at_roll = st.txn_at_roll or txn_snapshot
                st.dir_dirty = st.dir_dirty or dir_dirty
            raise
        if rolled:
            try:
                files.write_small_file(
                    st.directory / files.RECOVERY_POINT,
                    f"{active.base_offset}\n".encode(),
                )
            except OSError as e:  # e.g. ENOSPC: the data is durable; a stale recovery
                # point only makes the next crash recovery scan more (never offline)
                _logger.warning("cannot write the recovery point of %s: %s", st.directory, e)
        if txn_snapshot is not None:
            try:
                transactions.write_snapshot(st.directory, *txn_snapshot)
            except OSError as e:  # as the recovery point: the next recovery replays more
                _logger.warning("cannot write the transaction state of %s: %s", st.directory, e)

    return run, end


def on_durable(st: LogState, durable: int) -> None:
    if st.config.fsync_before_ack and durable > st.high_watermark:
        st.high_watermark = durable
        fire(st, durable)


def on_sync_error(st: LogState, exc: BaseException) -> None:
    st.offline = exc
    st.counters.errors += 1
    st.notifier.close(f"offline after fsync error: {exc}")


def fire(st: LogState, hwm: int) -> None:
    for cb in list(st.callbacks.values()):
        try:
            cb(hwm)
        except Exception:
            _logger.exception("on_append callback failed")
