"""Batch and streaming readers of the ``seglog`` data source (data directory mode).

Planning (``partitions``, ``latestOffset``) runs in a Spark Python worker on the driver; it
reads the data directory read-only (no lock, nothing modified: the directory may be a live
broker's) to learn partitions, log start offsets and high watermarks. Each process keeps the
read-only logs open and refreshes them (``Log.refresh``) instead of reopening them per
trigger and per task. Each
``OffsetRangePartition`` carries everything ``read()`` needs — ``read()`` runs on a pickled
reader instance on an executor, where state set while planning is invisible.

``read()`` reads whole stored record batches of one partition between two offsets ~8 MiB
at a time (``Log.read_slice`` locates them, one ``preadv`` into a buffer kept per process
reads them), decodes them where they lie with the numpy decoder (``decode_columns(...,
borrow=True)``, ``columns_batch``), the next chunk in a helper thread while Spark takes the
last, and yields ``pyarrow.RecordBatch``es of exactly ``arrow_schema(include_headers)``.

With ``kafka.bootstrap.servers`` instead of ``path``, the same readers plan from a broker's
offsets and fetch through it (``_wire``).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from seglog._malloc import tune_malloc
from seglog.columnar import columns_batch
from seglog.errors import DataLossError, SeglogError
from seglog.spark._options import (
    EARLIEST,
    LATEST,
    ReadOptions,
    TopicPartition,
    offsets_to_json,
)
from seglog.spark._typed import TypedRead, typed_batch, typed_batches
from seglog.spark._wire import (
    WireRangePartition,
    read_wire_range,
    wire_bounds,
    wire_offsets_for_times,
)
from seglog.storage import DataDir, Log, RemoteStorage, RemoteTier, decode_columns

__all__ = [
    "DataLossError",
    "OffsetRangePartition",
    "SeglogBatchReader",
    "SeglogStreamReader",
    "log_bounds",
]

CHUNK_BYTES = 8 << 20
"""Bytes of stored record batches decoded into one Arrow batch (~75 k rows of 100 B values:
Spark's per-batch work counts; 4 MiB -> 8 MiB moved count() 0.78-0.80x -> 0.82-0.84x and
groupBy 0.80x -> 0.85-0.87x of the no-op source's 65,536-row batches, interleaved A/B)."""


@dataclass(frozen=True)
class OffsetRangePartition(InputPartition):
    """One Spark task: records ``start <= offset < end`` of ``topic``-``partition``."""

    path: str
    topic: str
    partition: int
    start: int
    end: int
    include_headers: bool
    check_crcs: bool = True
    """Verify each stored batch's CRC-32C (option ``checkCrcs``, default true)."""
    read_committed: bool = False
    """Option ``kafka.isolation.level=read_committed``: records of aborted transactions
    dropped (``end`` is then at most the last stable offset)."""
    remote: RemoteRef | None = None
    """Tiered storage: where the offsets below ``remote.local_start`` are read from (the
    object store, directly: the executor needs no access to the partition directory
    for them)."""


@dataclass(frozen=True)
class RemoteRef:
    """A tiered partition's store, as planned on the driver (no credentials: executors
    take theirs from their environment, AWS_ACCESS_KEY_ID...)."""

    url: str
    endpoint_url: str | None
    key: str
    """The partition's key prefix in the store."""
    local_start: int
    """The local log start offset at planning: offsets below it are read remotely."""
    local_aborted: tuple[tuple[int, int], ...] = ()
    """(producer id, first offset) of the aborted transactions starting below
    ``local_start`` whose ABORT marker is in a local segment only (its ``.txnindex`` is
    not in the store), from the driver's log at planning."""


class _OpenLogs:
    """Read-only data directories kept open in this process (the driver's planning worker,
    each executor's reused Python worker), their logs refreshed on each use instead of
    reopened — a reopen CRC-scans the active segment's tail, ~1 s per GiB, every trigger.

    A topic deleted and created again (a new topic id) makes the directory reopen; a log
    that fails to refresh is reopened once. Thread-safe."""

    def __init__(self) -> None:
        self._dirs: dict[str, DataDir] = {}
        self._ids: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()

    def _dir(self, path: str) -> DataDir:
        data_dir = self._dirs.get(path)
        if data_dir is None:
            data_dir = DataDir(path, create=False, read_only=True)
            self._dirs[path] = data_dir
        return data_dir

    def _reopen(self, path: str) -> DataDir:
        stale = self._dirs.pop(path, None)
        if stale is not None:
            stale.close()
        self._ids = {k: v for k, v in self._ids.items() if k[0] != path}
        return self._dir(path)

    def topics(self, path: str) -> dict[str, int]:
        """``{topic: partitions}`` of the directory now (metadata re-read each call)."""
        with self._lock:
            return {name: info.partitions for name, info in self._dir(path).topics().items()}

    def log(self, path: str, topic: str, partition: int) -> Log:
        """The partition's read-only Log, refreshed to what the writer has appended."""
        with self._lock:
            data_dir = self._dir(path)
            topic_id = data_dir.topic(topic).topic_id
            if self._ids.setdefault((path, topic), topic_id) != topic_id:
                data_dir = self._reopen(path)  # deleted and created again
                self._ids[(path, topic)] = topic_id
            log = data_dir.log(topic, partition)
            try:
                log.refresh()
            except (SeglogError, OSError):
                log = self._reopen(path).log(topic, partition)
                self._ids[(path, topic)] = topic_id
            return log


_open_logs = _OpenLogs()


def log_bounds(path: str, options: ReadOptions) -> dict[TopicPartition, tuple[int, int]]:
    """``{(topic, partition): (log start offset, high watermark)}`` of the selected
    partitions; the last stable offset instead of the high watermark under
    ``kafka.isolation.level=read_committed`` (Kafka's read_committed "latest").

    Reads ``path`` read-only (no lock, nothing written), through logs kept open in this
    process and refreshed. Raises ``FileNotFoundError`` when ``path`` is not a directory.
    """
    bounds: dict[TopicPartition, tuple[int, int]] = {}
    for topic, partition in options.select(_open_logs.topics(path)):
        log = _open_logs.log(path, topic, partition)
        committed = options.isolation_level == "read_committed"
        high = log.last_stable_offset if committed else log.high_watermark
        bounds[(topic, partition)] = (log.log_start_offset, high)
    return bounds


def log_offsets_for_times(
    path: str, stamps: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """``{(topic, partition): offset}`` of the first record at or after each timestamp (ms),
    None where no record qualifies (Kafka's ListOffsets by timestamp), from the data directory
    opened read-only."""
    result: dict[TopicPartition, int | None] = {}
    for (topic, partition), stamp in stamps.items():
        found = _open_logs.log(path, topic, partition).offset_for_time(stamp)
        result[(topic, partition)] = None if found is None else found[0]
    return result


def offsets_for_times(
    options: ReadOptions, stamps: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """Offsets by timestamp: from the data directory, or the broker."""
    if not stamps:
        return {}
    if options.path is not None:
        return log_offsets_for_times(options.path, stamps)
    return wire_offsets_for_times(options, stamps)


def _timestamps(
    every: int | None,
    each: dict[TopicPartition, int] | None,
    tps: Sequence[TopicPartition],
    name: str,
) -> dict[TopicPartition, int]:
    """Per-partition timestamps of a ``*Timestamp`` (all partitions) or ``*ByTimestamp`` option.

    As Spark's Kafka source, a ``*ByTimestamp`` map must name every selected partition."""
    if every is not None:
        return dict.fromkeys(tps, every)
    assert each is not None
    missing = sorted(set(tps) - set(each))
    if missing:
        raise ValueError(
            f"option {name} must name every partition read: {missing[0][0]}-{missing[0][1]} "
            "is missing (Spark's Kafka source requires all TopicPartitions)"
        )
    return {tp: each[tp] for tp in tps}


def starting_offsets(
    options: ReadOptions, bounds: Mapping[TopicPartition, tuple[int, int]], default: int
) -> dict[TopicPartition, int]:
    """Start offset per partition from startingTimestamp, startingOffsetsByTimestamp or
    startingOffsets (that precedence, as Spark's). A timestamp no record reaches raises
    ValueError with strategy "error" and starts at the high watermark with "latest"."""
    if not options.starts_by_time:
        return {tp: resolve_offset(options.starting, tp, b, default) for tp, b in bounds.items()}
    name = (
        "startingTimestamp"
        if options.starting_timestamp is not None
        else ("startingOffsetsByTimestamp")
    )
    stamps = _timestamps(
        options.starting_timestamp, options.starting_by_timestamp, list(bounds), name
    )
    found = offsets_for_times(options, stamps)
    result = {}
    for tp, (low, high) in bounds.items():
        offset = found.get(tp)
        if offset is None:
            if options.starting_timestamp_strategy == "error":
                raise ValueError(
                    f"no record of {tp[0]}-{tp[1]} has a timestamp >= {stamps[tp]} ms "
                    f"({name}); set startingOffsetsByTimestampStrategy=latest to start at "
                    "the latest offset instead"
                )
            offset = high
        result[tp] = min(max(offset, low), high)
    return result


def ending_offsets(
    options: ReadOptions, bounds: Mapping[TopicPartition, tuple[int, int]]
) -> dict[TopicPartition, int]:
    """End offset (exclusive) per partition from endingTimestamp, endingOffsetsByTimestamp
    or endingOffsets; the high watermark where no record reaches the timestamp."""
    if not options.ends_by_time:
        return {tp: resolve_offset(options.ending, tp, b, LATEST) for tp, b in bounds.items()}
    name = "endingTimestamp" if options.ending_timestamp is not None else "endingOffsetsByTimestamp"
    stamps = _timestamps(options.ending_timestamp, options.ending_by_timestamp, list(bounds), name)
    found = offsets_for_times(options, stamps)
    result = {}
    for tp, (_, high) in bounds.items():
        offset = found.get(tp)
        result[tp] = high if offset is None else min(offset, high)
    return result


def bounds_of(options: ReadOptions) -> dict[TopicPartition, tuple[int, int]]:
    """Log start offsets and high watermarks: from the data directory, or the broker."""
    if options.path is not None:
        return log_bounds(options.path, options)
    return wire_bounds(options)


def range_of(options: ReadOptions, tp: TopicPartition, start: int, end: int) -> InputPartition:
    """The input partition reading ``start <= offset < end`` of ``tp``."""
    if options.path is not None:
        return OffsetRangePartition(
            options.path,
            tp[0],
            tp[1],
            start,
            end,
            options.include_headers,
            options.check_crcs,
            options.isolation_level == "read_committed",
            _remote_ref(
                options.path, tp, start, read_committed=options.isolation_level == "read_committed"
            ),
        )
    return WireRangePartition(
        tp[0], tp[1], start, end, options.include_headers, options.kafka, options.check_crcs,
        options.isolation_level,
    )  # fmt: skip


def _remote_ref(
    path: str, tp: TopicPartition, start: int, *, read_committed: bool = False
) -> RemoteRef | None:
    """The store of a tiered partition whose range starts below its local log start;
    ``read_committed``: with the aborted transactions spanning the local log start."""
    log = _open_logs.log(path, tp[0], tp[1])
    tier = log.remote_tier
    local_start = log.local_log_start_offset
    if tier is None or start >= local_start:
        return None
    local_only: tuple[tuple[int, int], ...] = ()
    if read_committed:  # markers at or after the local start are local: no remote read
        spanning = log.aborted_transactions(local_start, local_start + 1)
        local_only = tuple(a for a in spanning if a[1] < local_start)
    return RemoteRef(
        tier.settings.url, tier.settings.endpoint_url, tier.partition, local_start, local_only
    )


class _RemoteSource:
    """A tiered partition's remote segments as ``read_slice`` (what ``_read_chunk`` calls
    on a Log), from the store alone; the manifest re-read when an offset is not in it."""

    def __init__(self, ref: RemoteRef) -> None:
        self.ref = ref
        self._tier = self._open()

    def _open(self) -> RemoteTier:
        return RemoteTier.open_remote(
            RemoteStorage(self.ref.url, self.ref.endpoint_url), self.ref.key
        )

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions of the remote
        segments overlapping ``[start, end)`` and those whose marker is local
        (``RemoteRef.local_aborted``), by first offset: ``Log.aborted_transactions``
        below the local log start."""
        found = set(self._tier.aborted_transactions(start, end))
        found.update(a for a in self.ref.local_aborted if a[1] < end)
        return sorted(found, key=_first_offset)

    def read_slice(self, offset: int, max_bytes: int, *, upper: int) -> Any:
        found = self._tier.read_slice(offset, max_bytes, upper)
        if found is None:  # uploaded since the manifest was read (or deleted: then none)
            self._tier = self._open()
            found = self._tier.read_slice(offset, max_bytes, upper)
        return found


def read_any(part: InputPartition, typed: TypedRead | None = None) -> Iterator[pa.RecordBatch]:
    """Arrow batches of an input partition made by ``range_of`` (runs on an executor),
    with ``typed`` columns decoded (``_typed``)."""
    if isinstance(part, WireRangePartition):
        if part.start < part.end:
            yield from typed_batches(read_wire_range(part), typed)
    elif isinstance(part, OffsetRangePartition):
        yield from read_range(part, typed)
    # else: pyspark passes one plain InputPartition when partitions() returned none


def read_range(
    part: OffsetRangePartition, typed: TypedRead | None = None
) -> Iterator[pa.RecordBatch]:
    """Yield the records of one offset range of a data directory as Arrow batches.

    The next chunk is read and decoded in a helper thread while Spark consumes the one
    just yielded: the worker's send of a batch (a blocking socket write, GIL released)
    and the decoding of the next overlap, where one after the other left a core idle.
    ``typed`` columns are decoded there too, in the helper thread."""
    if part.start >= part.end:
        return
    tune_malloc(WORKER_MMAP_THRESHOLD, WORKER_TRIM_THRESHOLD)
    offset = part.start
    if part.remote is not None and offset < part.remote.local_start:
        # tiered history: straight from the object store (through the local cache)
        split = min(part.end, part.remote.local_start)
        remote = _RemoteSource(part.remote)
        for batch, after in _read_source(remote, part, offset, split, typed):
            yield batch
            offset = after
        if split >= part.end:
            return
    log = _open_logs.log(part.path, part.topic, part.partition)
    for batch, _ in _read_source(log, part, offset, part.end, typed):
        yield batch


def _read_source(
    source: Any, part: OffsetRangePartition, start: int, end: int, typed: TypedRead | None
) -> Iterator[tuple[pa.RecordBatch, int]]:
    """(batch, offset after it) of ``[start, end)`` read through ``source.read_slice``."""
    buffer = _buffers.take()
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="seglog-read") as pool:
            ahead = pool.submit(_read_chunk, source, part, start, end, buffer, typed)
            while True:
                batch, offset = ahead.result()
                if batch is None:
                    return
                if offset < end:
                    ahead = pool.submit(_read_chunk, source, part, offset, end, buffer, typed)
                yield batch, offset
                if offset >= end:
                    return
    finally:
        _buffers.give(buffer)


WORKER_MMAP_THRESHOLD = 32 << 20
WORKER_TRIM_THRESHOLD = 64 << 20
"""glibc's malloc thresholds (bytes) fixed in a Python worker that reads a range, as the
broker fixes its own (``broker/_malloc.py``; at most this much free heap stays mapped).
Measured (``seglog bench --skip-storage --repeat 3``, medians of alternated runs against
glibc's dynamic thresholds): count() 0.79x -> 0.83x of the no-op source (4 runs); the
broker's 4/16 MiB gave 0.84x (8 runs) but slowed wire-mode reads in the same workers
0.70x -> 0.56x of path mode, 32/64 MiB 0.70x; groupBy and the sinks unchanged."""


class _Buffers:
    """Read buffers kept for the next task of this process: a fresh 8 MiB ``bytes`` per
    chunk cost ~1,500 page faults each (4.5 ms per chunk, a third of decoding it)."""

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def take(self) -> bytearray:
        with self._lock:
            return self._free.pop() if self._free else bytearray(CHUNK_BYTES)

    def give(self, buffer: bytearray) -> None:
        with self._lock:
            if len(self._free) < 2 and len(buffer) <= 2 * CHUNK_BYTES:  # not one grown huge
                self._free.append(buffer)


_buffers = _Buffers()


def _read_chunk(  # noqa: PLR0917 (internal: the read-ahead thread's call)
    log: Any,
    part: OffsetRangePartition,
    offset: int,
    end: int,
    buffer: bytearray,
    typed: TypedRead | None = None,
) -> tuple[pa.RecordBatch | None, int]:
    """The records of ~CHUNK_BYTES of whole batches from ``offset`` (None at the end) and
    the offset after them, read into ``buffer`` (grown when one batch is larger)."""
    while True:
        # the batches located (headers only), read with one preadv into the reused buffer
        # and decoded where they lie: Log.batches copied every batch twice more (and
        # joined them); a fresh bytes per read page-faults its 8 MiB in
        where = log.read_slice(offset, CHUNK_BYTES, upper=end)
        if where is None:
            return None, offset
        if where.size > len(buffer):
            buffer.extend(bytes(where.size - len(buffer)))
        view = memoryview(buffer)[: where.size]
        if os.preadv(where.fd, [view], where.position) != where.size:
            raise SeglogError(
                f"{part.topic}-{part.partition}: short read at offset {offset} (file truncated?)"
            )
        # read_committed: the aborted transactions whose marker is not behind this read
        aborted = log.aborted_transactions(offset, end) if part.read_committed else None
        cols = decode_columns(
            view, offset, end, check_crcs=part.check_crcs, borrow=True, aborted=aborted
        )
        if cols.next_offset <= offset:  # cannot happen: the read starts at offset's batch
            raise SeglogError(f"no progress reading {part.topic}-{part.partition} at {offset}")
        offset = cols.next_offset
        if len(cols):
            # columns_batch copies keys and values out (take) and builds the other columns
            # from numpy: the batch keeps no reference to the buffer read next
            batch = columns_batch(
                cols,
                topic=part.topic,
                partition=part.partition,
                include_headers=part.include_headers,
            )
            return (batch if typed is None else typed_batch(batch, typed)), offset
        if offset >= end:  # only control batches (or compacted gaps) left
            return None, offset


def _check_start(
    tp: TopicPartition, start: int, bounds: tuple[int, int], fail_on_data_loss: bool
) -> int:
    """Clamp a start offset below the log start offset (or raise, with failOnDataLoss)."""
    low, high = bounds
    if low <= start <= high:
        return start
    if fail_on_data_loss:
        raise DataLossError(
            f"offset {start} of {tp[0]}-{tp[1]} is outside [log start {low}, high watermark "
            f"{high}]: records were deleted or the topic recreated (set failOnDataLoss=false "
            "to skip to the log start offset)"
        )
    return low if start < low else high


def _split(
    ranges: list[tuple[TopicPartition, int, int]], min_partitions: int | None
) -> list[tuple[TopicPartition, int, int]]:
    """Split the largest ranges in halves until there are ``min_partitions`` of them."""
    ranges = [r for r in ranges if r[2] > r[1]]
    while min_partitions and len(ranges) < min_partitions:
        widest = max(range(len(ranges)), key=lambda i: ranges[i][2] - ranges[i][1], default=-1)
        if widest < 0 or ranges[widest][2] - ranges[widest][1] < 2:
            break
        tp, start, end = ranges.pop(widest)
        middle = start + (end - start) // 2
        ranges[widest:widest] = [(tp, start, middle), (tp, middle, end)]
    return ranges


class SeglogBatchReader(DataSourceReader):
    """Batch read between ``startingOffsets`` and ``endingOffsets`` (resolved at planning);
    ``typed``: key/value decoded into structs (``valueFormat``, ``seglog.spark._typed``)."""

    def __init__(self, options: ReadOptions, typed: TypedRead | None = None) -> None:
        self.options = options
        self.typed = typed

    def partitions(self) -> Sequence[InputPartition]:
        """One ``OffsetRangePartition`` per partition with records (more with minPartitions)."""
        options = self.options
        ranges = []
        all_bounds = bounds_of(options)
        starts = starting_offsets(options, all_bounds, EARLIEST)
        ends = ending_offsets(options, all_bounds)
        for tp, bounds in all_bounds.items():
            start = _check_start(tp, starts[tp], bounds, options.fail_on_data_loss)
            end = ends[tp]
            ranges.append((tp, start, min(max(end, start), bounds[1])))
        return [range_of(options, tp, s, e) for tp, s, e in _split(ranges, options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's offset range (runs on an executor)."""
        return read_any(partition, self.typed)


def resolve_offset(
    spec: str | dict[TopicPartition, int], tp: TopicPartition, bounds: tuple[int, int], default: int
) -> int:
    """The offset ``spec`` names for ``tp`` ("earliest"/"latest" or a JSON map, -2/-1 and
    partitions it omits meaning ``default``), given ``(log start, high watermark)``."""
    value = {"earliest": EARLIEST, "latest": LATEST}[spec] if isinstance(spec, str) else None
    if value is None:
        assert isinstance(spec, dict)
        value = spec.get(tp, default)
    if value == EARLIEST:
        return bounds[0]
    if value == LATEST:
        return bounds[1]
    return value


def _from_json(offsets: Mapping[str, Any]) -> dict[TopicPartition, int]:
    return {(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Offsets: ``{"topic": {"partition": next offset}}``, sorted.

    New partitions (or topics matching the subscription) start at their log start offset.
    ``minOffsetsPerTrigger`` holds a micro-batch back until enough offsets are new or
    ``maxTriggerDelay`` has passed. ``maxOffsetsPerTrigger`` spreads the limit over
    partitions in proportion to their lag (Spark's Kafka rate limit).
    ``trigger(availableNow=True)`` reads up to the high watermarks seen when the query
    starts, in ``maxOffsetsPerTrigger`` steps.
    """

    clock: Callable[[], float] = staticmethod(time.monotonic)
    """Seconds, for ``maxTriggerDelay`` (a class attribute so a test can substitute it)."""

    def __init__(self, options: ReadOptions, typed: TypedRead | None = None) -> None:
        self.options = options
        self.typed = typed
        self._target: dict[TopicPartition, int] | None = None
        self._last_trigger: float | None = None

    def initialOffset(self) -> dict[str, dict[str, int]]:  # noqa: N802  (pyspark API name)
        """Offsets of ``startingOffsets`` (default latest) resolved against the logs now;
        a partition a JSON map omits starts at earliest (as in batch reads)."""
        return offsets_to_json(starting_offsets(self.options, bounds_of(self.options), EARLIEST))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        """``ReadMaxRows(maxOffsetsPerTrigger)`` if that option is set, else read all."""
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """Fix the high watermarks of now as the end of an ``availableNow`` query."""
        bounds = bounds_of(self.options)
        self._target = {tp: high for tp, (_, high) in bounds.items()}

    def latestOffset(  # noqa: N802
        self, start: dict[str, Any], limit: ReadLimit
    ) -> dict[str, dict[str, int]]:
        """End offsets of the next micro-batch: high watermarks, capped by ``limit``."""
        begin = _from_json(start)
        bounds = bounds_of(self.options)
        ends = dict(begin)
        lags: dict[TopicPartition, tuple[int, int]] = {}
        for tp, (low, visible) in bounds.items():
            high = visible
            if self._target is not None:
                if tp not in self._target:
                    continue
                high = min(visible, self._target[tp])
            # beyond the high watermark (topic recreated, startingOffsets past the end): end
            # at the high watermark, as Spark's Kafka source; partitions() reports the data
            # loss (or skips it) and the next micro-batch reads on from there
            first = min(begin.get(tp, low), visible)
            ends[tp] = first
            if high > first:
                lags[tp] = (first, high)
        if self._delay_batch(lags):
            return offsets_to_json(ends)
        if isinstance(limit, ReadMaxRows):
            ends.update(_rate_limit(lags, limit.max_rows))
        else:
            ends.update({tp: high for tp, (_, high) in lags.items()})
        return offsets_to_json(ends)

    def _delay_batch(self, lags: Mapping[TopicPartition, tuple[int, int]]) -> bool:
        """minOffsetsPerTrigger: hold the micro-batch back while fewer new offsets than the
        minimum are available, unless ``maxTriggerDelay`` has passed since the last
        micro-batch (Spark's Kafka source; the first trigger and availableNow never wait)."""
        minimum = self.options.min_offsets_per_trigger
        if not minimum or self._target is not None or not lags:
            return False
        now = self.clock()
        waited_ms = (now - self._last_trigger) * 1000 if self._last_trigger is not None else None
        available = sum(high - first for first, high in lags.values())
        if (
            available < minimum
            and waited_ms is not None
            and waited_ms < self.options.max_trigger_delay_ms
        ):
            return True
        self._last_trigger = now
        return False

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """One ``OffsetRangePartition`` per partition that moved between the two offsets."""
        begin, finish = _from_json(start), _from_json(end)
        bounds = bounds_of(self.options) if finish != begin else {}
        parts = []
        for tp, stop in finish.items():
            first = begin.get(tp)
            if tp not in bounds:
                if first is not None and stop > first and self.options.fail_on_data_loss:
                    raise DataLossError(f"partition {tp[0]}-{tp[1]} no longer exists")
                continue
            first = _check_start(
                tp,
                bounds[tp][0] if first is None else first,
                bounds[tp],
                self.options.fail_on_data_loss,
            )
            if stop > first:
                parts.append(range_of(self.options, tp, first, stop))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's offset range (runs on an executor)."""
        return read_any(partition, self.typed)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the checkpoint holds the offsets (the data dir is read-only)."""


def _rate_limit(
    lags: Mapping[TopicPartition, tuple[int, int]], max_rows: int
) -> dict[TopicPartition, int]:
    """End offsets reading at most ``max_rows`` records in all, shared in proportion to lag."""
    total = sum(high - first for first, high in lags.values())
    if total <= max_rows:
        return {tp: high for tp, (_, high) in lags.items()}
    shares = {tp: (high - first) * max_rows // total for tp, (first, high) in lags.items()}
    spare = max_rows - sum(shares.values())
    for tp, (first, high) in sorted(lags.items()):
        if spare <= 0:
            break
        extra = min(spare, high - first - shares[tp])
        shares[tp] += extra
        spare -= extra
    return {tp: lags[tp][0] + share for tp, share in shares.items()}


def _first_offset(aborted: tuple[int, int]) -> int:
    return aborted[1]
