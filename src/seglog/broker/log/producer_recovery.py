"""Idempotent-producer state that survives a restart: a snapshot at clean shutdown (and
every minute), plus the record batches appended after it, read back from the logs on start
(Kafka's producer-state snapshots + log tail).

The snapshot ``<data-dir>/producer-state.json`` holds the table (last 5 batches per
producer id and partition) and, per partition, the log end offset it covers; it is written
with the atomic-write helper (temp file, fsync, rename, directory fsync). On start the table
is loaded from it and every partition is scanned from that offset to its end: each record
batch v2 header (storage's ``whole_batches``, Kafka's DefaultRecordBatch) gives producer id,
epoch, base sequence, record count and last offset delta, exactly what the table
remembers. A partition whose snapshot offset is beyond its log end (data lost under the
relaxed fsync policy) or missing from the snapshot is scanned from its log start. So a
retry sent after a restart, even a kill -9, is answered with its original offsets instead
of being stored twice.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from seglog.broker.log.internal_topics import INTERNAL_TOPICS
from seglog.broker.log.producers import BatchIdentity, ProducerStateTable
from seglog.broker.log.topics import TopicManager
from seglog.errors import SeglogError
from seglog.storage import atomic_write, whole_batches

__all__ = ["SNAPSHOT_FILE", "observe_batches", "rebuild", "write_snapshot"]

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "producer-state.json"
_CONTROL = 0x20  # attributes bit 5: control batch (transaction markers)
_READ_BYTES = 8 << 20
_INT32_MAX = 2**31 - 1


def observe_batches(
    table: ProducerStateTable, topic: str, partition: int, data: bytes
) -> tuple[int, int]:
    """Record the producer batches of ``data`` (whole record batches v2) in ``table``;
    returns (next offset after the last whole batch, producer batches seen). The next
    offset is -1 when ``data`` holds no whole batch."""
    nxt, seen = -1, 0
    for _pos, h in whole_batches(data):
        nxt = h.next_offset
        producer = h.producer_id >= 0 and h.base_sequence >= 0
        if producer and h.magic == 2 and not h.attributes & _CONTROL:
            first = h.base_sequence
            last = (first + max(h.record_count, 1) - 1) % (_INT32_MAX + 1)
            ident = BatchIdentity(h.producer_id, h.producer_epoch, first, last)
            table.record(topic, partition, ident, h.base_offset, h.last_offset)
            seen += 1
    return nxt, seen


def _scan(table: ProducerStateTable, topics: TopicManager, topic: str, p: int, start: int) -> int:
    plog = topics.log(topic, p)
    offset, end, seen = max(start, plog.log_start_offset), plog.high_watermark, 0
    while offset < end:
        data = plog.read(offset, _READ_BYTES, upper=end)
        nxt, count = observe_batches(table, topic, p, data)
        seen += count
        if nxt <= offset:
            break
        offset = nxt
    return seen


def rebuild(table: ProducerStateTable, topics: TopicManager, data_dir: Path) -> None:
    """Load the snapshot (if any) and scan every partition's tail into ``table``."""
    started = time.perf_counter()
    path = data_dir / SNAPSHOT_FILE
    covered: dict[tuple[str, int], int] = {}
    rows: list[list[object]] = []
    if path.exists():
        try:
            doc = json.loads(path.read_text())
            covered = {(t, int(p)): int(o) for t, p, o in doc["partitions"]}
            rows = doc["producers"]
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring %s: %s (scanning whole logs)", SNAPSHOT_FILE, exc)
            covered, rows = {}, []
    starts: dict[tuple[str, int], int] = {}
    for name, info in topics.all().items():
        if name in INTERNAL_TOPICS:
            continue
        for p in range(info.partitions):
            try:
                plog = topics.log(name, p)
            except SeglogError as exc:
                log.warning("producer state of %s-%d not rebuilt: %s", name, p, exc)
                continue
            upto = covered.get((name, p))
            valid = upto is not None and plog.log_start_offset <= upto <= plog.log_end_offset
            starts[(name, p)] = upto if valid and upto is not None else plog.log_start_offset
    stale = {key for key in starts if key not in covered or starts[key] != covered[key]}
    table.restore(rows, stale)
    seen = sum(_scan(table, topics, t, p, start) for (t, p), start in starts.items())
    log.info(
        "producer state rebuilt: %d batch(es) read after the snapshot in %.3f s",
        seen,
        time.perf_counter() - started,
    )


def write_snapshot(table: ProducerStateTable, topics: TopicManager, data_dir: Path) -> None:
    """Write the snapshot (on the event loop: the table and the log ends agree)."""
    partitions = []
    for name, info in topics.all().items():
        if name in INTERNAL_TOPICS:
            continue
        for p in range(info.partitions):
            plog = topics.cached_log(name, p)
            if plog is not None:
                partitions.append([name, p, plog.log_end_offset])
    doc = {"version": 1, "partitions": partitions, "producers": table.to_json()}
    atomic_write(data_dir / SNAPSHOT_FILE, json.dumps(doc).encode())
