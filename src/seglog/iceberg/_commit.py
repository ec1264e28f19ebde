"""Commit offset ranges of a topic's partitions to its Iceberg table: one append, one
snapshot, whose summary carries every partition's next offset (``seglog.offsets.<p>``)
and the topic id (``_table``'s exactly-once record)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import pyarrow as pa
from pyiceberg.table import Table

from seglog.columnar import decode_batches
from seglog.iceberg._names import OFFSETS_PREFIX, TOPIC_ID_KEY
from seglog.iceberg._schema import key_value_rows
from seglog.storage import Log

__all__ = ["CHUNK_BYTES", "CommitReport", "OffsetRange", "commit_ranges", "read_rows"]

CHUNK_BYTES = 16 << 20
"""Bytes of stored record batches decoded at a time."""


class OffsetRange(NamedTuple):
    """Offsets ``start <= offset < end`` of one partition, to commit."""

    partition: int
    start: int
    end: int


class CommitReport(NamedTuple):
    """What :func:`commit_ranges` committed."""

    rows: int
    """Rows appended to the table."""
    offsets: dict[int, int]
    """partition → next offset the table holds now (every partition it ever held)."""
    seconds: float
    """Wall time of the read, decode, write and catalog commit."""


def read_rows(plog: Log, topic: str, part: OffsetRange) -> list[pa.RecordBatch]:
    """The records of ``part`` as Arrow batches of ``seglog.columnar.arrow_schema(True)``
    (the batches holding them read ``CHUNK_BYTES`` at a time; control batches and the
    records of aborted transactions skipped, as a read_committed consumer does: callers
    bound ``part.end`` by the last stable offset).
    Raises ``CorruptRecordError`` (a CRC-32C mismatch...), ``InvalidOffsetError`` when
    ``part.start`` is below the log start offset."""
    out: list[pa.RecordBatch] = []
    pending: list[bytes] = []
    size = 0
    aborted = plog.aborted_transactions(part.start, part.end)

    def flush() -> None:
        decoded = decode_batches(
            pending, topic=topic, partition=part.partition, start=part.start, end=part.end,
            include_headers=True, aborted=aborted,
        )  # fmt: skip
        out.append(decoded)
        pending.clear()

    for batch in plog.batches(part.start, part.end):
        pending.append(bytes(batch))
        size += len(batch)
        if size >= CHUNK_BYTES:
            flush()
            size = 0
    if pending:
        flush()
    return [b for b in out if b.num_rows]


def summary(offsets: Mapping[int, int], topic_id: uuid.UUID) -> dict[str, str]:
    """The snapshot summary properties recording ``offsets`` of topic ``topic_id``."""
    props = {f"{OFFSETS_PREFIX}{p}": str(o) for p, o in sorted(offsets.items())}
    props[TOPIC_ID_KEY] = str(topic_id)
    return props


def commit_ranges(
    table: Table,
    *,
    topic: str,
    topic_id: uuid.UUID,
    logs: Mapping[int, Log],
    ranges: Sequence[OffsetRange],
    committed: Mapping[int, int],
) -> CommitReport:
    """Append the records of ``ranges`` (read from ``logs``, partition → Log) to ``table``
    in one snapshot whose summary is ``committed`` moved to each range's end. A range
    must start at its partition's committed offset (or at the log start offset when
    retention removed records never committed) and end at or below the high watermark.
    Raises what pyiceberg raises (``CommitFailedException`` when another writer committed
    meanwhile: reload the table and its offsets, then retry) and ``read_rows``' errors;
    nothing is committed then."""
    began = time.perf_counter()
    batches: list[pa.RecordBatch] = []
    for part in ranges:
        batches += read_rows(logs[part.partition], topic, part)
    offsets = dict(committed)
    offsets.update({part.partition: part.end for part in ranges})
    schema = table.schema().as_arrow()
    rows = key_value_rows(batches, schema) if batches else schema.empty_table()
    table.append(rows, snapshot_properties=summary(offsets, topic_id))
    return CommitReport(rows.num_rows, offsets, time.perf_counter() - began)
