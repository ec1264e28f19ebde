"""Rewrite one closed segment without some of its records (the cleaner's mechanism, shared
by compaction and delete-by-offsets; the policies are in ``compact.py`` / ``delete.py``).

Records keep their offsets (Kafka's cleaner): a batch whose records all stay is copied
byte for byte; a batch that loses every record is dropped (an offset gap between
batches); a batch that loses some is rebuilt with kafka-python's
``DefaultRecordBatchBuilder`` keeping baseOffset, each record's offset delta, timestamp,
key, value and headers, and the batch's compression codec, transactional flag, producer
id / epoch / base sequence, partition leader epoch and timestamp type (LogAppendTime
batches keep their maxTimestamp); lastOffsetDelta becomes the last kept record's delta.
Control batches are kept unless the cleaner names them (``markers``: Kafka removes a
transaction marker once its transaction's batches are gone and its delete horizon
passed); ``B.txnindex`` is rewritten with the ABORT markers kept. Segments below the
``cleaner-offset-checkpoint`` may thus hold gaps; readers, indexes, ``get``
(NotFoundError) and ``consume`` skip them.

Crash safety: the new files are written as ``.cleaned`` and swapped in through ``.swap``
(see ``swap.py``); the cleaner checkpoint is raised before the commit. A segment that
loses every record stays as an empty ``.log`` (its base offset keeps the log start and
the offsets after it in place) until retention removes it.
"""

from __future__ import annotations

import bisect
import os
import pathlib
import struct
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import crc32c
import numpy as np
import numpy.typing as npt

from seglog.storage.fileio import files
from seglog.storage.index.offset_time import OffsetIndex, TimeIndex
from seglog.storage.index.txn_index import TxnIndex
from seglog.storage.log import maint
from seglog.storage.log.keys import drop_key_index_file
from seglog.storage.record.batch import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    BatchHeader,
    parse_header,
    patch_base_offset,
    patch_log_append_time,
)
from seglog.storage.record.columns import RecordColumns, decode_columns
from seglog.storage.segment import checkpoints, swap
from seglog.storage.segment.segment import Segment

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

if TYPE_CHECKING:
    from seglog.storage.fileio.counters import FileCounters
    from seglog.storage.log.log import Log

__all__ = ["Removed", "iter_batches", "iter_chunks", "rewrite_segment"]

_CHUNK = 4 << 20
_U32_AT = struct.Struct(">i")
_I64_AT = struct.Struct(">q")
_CRC_AT = struct.Struct(">I")


class Removed(NamedTuple):
    """What a compaction or delete by offsets removed (klevdb returns the same pair)."""

    offsets: list[int]
    """Offsets of the removed records, ascending."""
    bytes_freed: int
    """Bytes the rewritten segments' files (.log + indexes) shrank by."""


_ATTR_TRANSACTIONAL = 0x10
_LEADER_EPOCH = struct.Struct(">i")


def iter_chunks(seg: Segment) -> Iterator[bytes]:
    """The batches of a segment as chunks of whole batches (about 4 MiB each, or one
    larger batch); no CRC check (the segment was validated when loaded)."""
    size = seg.size
    pos = 0
    while size - pos >= HEADER_SIZE:
        buf = os.pread(seg.fd, min(_CHUNK, size - pos), pos)
        p = 0
        while len(buf) - p >= HEADER_SIZE:
            n = parse_header(buf, p).size
            if n > len(buf) - p:
                break
            p += n
        if p == 0:  # one batch larger than the chunk
            buf = os.pread(seg.fd, parse_header(buf, 0).size, pos)
            p = len(buf)
        yield buf if p == len(buf) else buf[:p]
        pos += p


def iter_batches(seg: Segment) -> Iterator[tuple[BatchHeader, memoryview]]:
    """``(header, whole batch)`` of every batch of a closed segment (see
    ``iter_chunks``)."""
    size = seg.size
    pos = 0
    while size - pos >= HEADER_SIZE:
        buf = os.pread(seg.fd, min(_CHUNK, size - pos), pos)
        view = memoryview(buf)
        p = 0
        while len(buf) - p >= HEADER_SIZE:
            h = parse_header(buf, p)
            if h.size > len(buf) - p:
                break
            yield h, view[p : p + h.size]
            p += h.size
        if p == 0:  # one batch larger than the chunk
            h = parse_header(buf, 0)
            yield h, memoryview(os.pread(seg.fd, h.size, pos))
            p = h.size
        pos += p


def _splice(
    h: BatchHeader, data: bytes, cols: RecordColumns, keep: npt.NDArray[np.bool_]
) -> bytearray:
    """An uncompressed batch holding only the ``keep`` records of ``data``, their bytes
    copied unchanged (offset and timestamp deltas stay valid: baseOffset and
    baseTimestamp are kept); lastOffsetDelta, maxTimestamp (CreateTime), recordCount,
    batchLength and the CRC-32C are rewritten. ``cols``: ``decode_columns(data)``."""
    ends = cols.record_ends
    starts = np.empty_like(ends)
    starts[0] = HEADER_SIZE
    starts[1:] = ends[:-1]
    out = bytearray(data[:HEADER_SIZE])
    for a, b in zip(starts[keep].tolist(), ends[keep].tolist(), strict=True):
        out += data[a:b]
    last_delta = int(cols.offsets[keep][-1]) - h.base_offset
    max_ts = h.max_timestamp
    if not h.attributes & ATTR_LOG_APPEND_TIME:
        max_ts = int(cols.timestamps[keep].max())
    _U32_AT.pack_into(out, 8, len(out) - 12)
    _U32_AT.pack_into(out, 23, last_delta)
    _I64_AT.pack_into(out, 35, max_ts)
    _U32_AT.pack_into(out, 57, int(keep.sum()))
    _CRC_AT.pack_into(out, 17, crc32c.crc32c(memoryview(out)[21:]))
    return out


def _rebuild(h: BatchHeader, records: list[object]) -> bytearray:
    """One batch holding ``records`` (kafka-python DefaultRecord) with ``h``'s
    batch-level properties; see the module docstring."""
    log_append = bool(h.attributes & ATTR_LOG_APPEND_TIME)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=h.attributes & ATTR_CODEC_MASK,
        is_transactional=bool(h.attributes & _ATTR_TRANSACTIONAL),
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        batch_size=(1 << 31) - 1,
    )
    for r in records:
        builder.append(
            r.offset - h.base_offset,  # type: ignore[attr-defined]
            timestamp=h.max_timestamp if log_append else r.timestamp,  # type: ignore[attr-defined]
            key=r.key,  # type: ignore[attr-defined]
            value=r.value,  # type: ignore[attr-defined]
            headers=list(r.headers),  # type: ignore[attr-defined]
        )
    buf: bytearray = builder.build()
    patch_base_offset(buf, 0, h.base_offset)
    _LEADER_EPOCH.pack_into(buf, 12, h.leader_epoch)  # not covered by the CRC
    if log_append:
        patch_log_append_time(buf, 0, parse_header(buf), h.max_timestamp)
    return buf


class _Writer:
    """Appends batches to ``B.log.cleaned`` and builds its two indexes the way
    ``Segment`` does (an offset index entry every ``interval`` bytes, time index entries
    alongside when the max timestamp grows, a final time index entry). ``counters``: the
    log's (``index_writes`` of the two ``.cleaned`` indexes, ``deletions`` when
    abandoned)."""

    def __init__(
        self, directory: pathlib.Path, base: int, interval: int, counters: FileCounters
    ) -> None:
        self.base = base
        self.interval = interval
        self.counters = counters
        self.path = swap.cleaned_path(files.log_path(directory, base))
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.index = OffsetIndex(swap.cleaned_path(files.index_path(directory, base)))
        self.time_index = TimeIndex(swap.cleaned_path(files.timeindex_path(directory, base)))
        self.index.counters = self.time_index.counters = counters
        self.size = 0
        self.since = 0
        self.max_ts = -1
        self.max_ts_rel = 0

    def add(self, h: BatchHeader, data: bytes | bytearray | memoryview) -> None:
        rel = h.base_offset - self.base
        if h.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_rel = h.max_timestamp, rel
        if self.since >= self.interval:
            self.index.append(rel, self.size, write=False)
            self.time_index.maybe_append(self.max_ts, self.max_ts_rel, write=False)
            self.since = 0
        self.since += len(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)

    def finish(self) -> None:
        """fsync the ``.log.cleaned``, write and fsync both ``.cleaned`` indexes."""
        self.time_index.maybe_append(self.max_ts, self.max_ts_rel, write=False)
        os.fsync(self.fd)
        os.close(self.fd)
        self.index.reset(self.index.offsets, self.index.positions, write=True)
        self.time_index.reset(self.time_index.timestamps, self.time_index.offsets, write=True)
        for path in (self.index.path, self.time_index.path):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def abandon(self) -> None:
        """Close and unlink the ``.cleaned`` files."""
        os.close(self.fd)
        for path in (self.path, self.index.path, self.time_index.path):
            if files.remove_if_exists(path):
                self.counters.deletions += 1


def _intersects(drop: list[int], lo: int, hi: int) -> bool:
    i = bisect.bisect_left(drop, lo)
    return i < len(drop) and drop[i] <= hi


def rewrite_segment(
    log: Log, seg: Segment, drop: list[int], *, markers: frozenset[int] = frozenset()
) -> tuple[list[int], int]:
    """Rewrite closed segment ``seg`` of ``log`` without the records whose offsets are in
    ``drop`` (sorted) and swap it in; returns ``(offsets actually removed, bytes freed)``.
    Control batches (transaction markers) stay unless their offset is in ``markers``
    (the cleaner's, ``compact_txn.py``; removed markers are not in the result); the
    ``.txnindex`` keeps the entries of the ABORT markers that stay. Nothing is written
    when nothing of ``drop`` or ``markers`` is stored in ``seg``. Caller holds the
    maintenance lock. Steps: "cleaned", then those of ``swap.commit_rewrite``."""
    directory = log.directory
    writer = _Writer(directory, seg.base_offset, log.config.index_interval_bytes, log.counters)
    removed: list[int] = []
    dropped_markers: set[int] = set()
    drop_array = np.asarray(drop, dtype=np.int64)
    try:
        for h, data in iter_batches(seg):
            if h.attributes & ATTR_CONTROL:
                if h.base_offset in markers:
                    dropped_markers.add(h.base_offset)
                else:
                    writer.add(h, data)
                continue
            if not _intersects(drop, h.base_offset, h.last_offset):
                writer.add(h, data)
                continue
            if not h.attributes & ATTR_CODEC_MASK:  # uncompressed: splice the records
                raw = bytes(data)
                cols = decode_columns(raw)
                offsets = cols.offsets
                gone = np.isin(offsets, drop_array)
                if gone.any():
                    removed.extend(offsets[gone].tolist())
                    if not gone.all():
                        spliced = _splice(h, raw, cols, ~gone)
                        writer.add(parse_header(spliced), spliced)
                else:
                    writer.add(h, data)
                continue
            batch = DefaultRecordBatch(bytes(data))
            kept = []
            for r in batch:
                i = bisect.bisect_left(drop, r.offset)
                if i < len(drop) and drop[i] == r.offset:
                    removed.append(r.offset)
                else:
                    kept.append(r)
            if len(kept) == h.record_count:
                writer.add(h, data)
            elif kept:
                rebuilt = _rebuild(h, kept)
                writer.add(parse_header(rebuilt), rebuilt)
    except BaseException:
        writer.abandon()
        raise
    if not removed and not dropped_markers:
        writer.abandon()
        return [], 0
    before = maint.segment_bytes(seg)
    writer.finish()
    kept = [e for e in seg.txn_index.entries if e.last_offset not in dropped_markers]
    if kept:  # B.txnindex.cleaned, fsynced as the other .cleaned files
        cleaned_txn = TxnIndex(swap.cleaned_path(seg.txn_index.path))
        cleaned_txn.rewrite(kept)
        cleaned_txn.sync()
    drop_key_index_file(directory)  # describes the old data: rebuilt if we crash now
    files.fsync_dir(directory)
    swap.step("cleaned")
    checkpoints.write_cleaner_checkpoint(directory, seg.next_offset)
    swap.commit_rewrite(directory, seg.base_offset, log.counters)
    new = _load_rewritten(log, seg.base_offset)
    maint.replace_segment(log, seg, new)
    return removed, before - maint.segment_bytes(new)


def _load_rewritten(log: Log, base: int) -> Segment:
    new = Segment(log.directory, base, read_only=False)
    new.counters = log.counters  # a rebuild of its indexes below is counted
    new.allow_gaps = True
    interval, max_bytes = log.config.index_interval_bytes, (1 << 31) - 1
    if not new.load_trusted(interval, max_bytes):
        new.scan(interval, verify_crc=True, max_bytes=max_bytes)
        new.write_indexes()
    return new
