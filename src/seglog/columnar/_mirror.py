"""Columnar topic mirrors: one Parquet file per closed segment, beside the segment.

A mirror of segment ``B`` (``%020d.log``) holds every committed record of that segment (no
transaction marker, no record of an aborted transaction: what a read_committed reader sees;
a segment reaching past the last stable offset is not mirrored until it stops doing so) as the
columns of Spark's Kafka source plus ``headers`` (``arrow_schema(True)``), rows in offset
order. Its name says which segment state it mirrors::

    <partition dir>/%020d.mirror-<next offset>-<segment bytes>.parquet

(base offset, offset after the segment's last batch, bytes of its batches). A segment that
retention removed, or that the cleaner (compaction, delete by offsets) rewrote, no longer
matches any mirror name, so a stale mirror is never read: ``mirrors_of`` returns only mirrors
of the log's current closed segments, and ``sync_log_mirrors`` deletes the others and builds
the missing ones. The active (last) segment is never mirrored: it still grows.

Typed mirrors: when the topic has a schema — subject ``<topic>-value`` (Confluent's
TopicNameStrategy) in the registry's ``_schemas`` log of the same data directory
(``<data dir>/_schemas-0``, replayed by ``seglog.schemas.read_registry``) — each closed segment also
gets ``%020d.mirror-<next offset>-<segment bytes>.value-<schema id>.parquet``, the same
columns with ``value`` a struct decoded with the subject's latest schema (``TypedDecoder``,
PERMISSIVE: an undecodable value is null there, its bytes stay in the binary mirror). A new
latest version makes the typed mirrors of the older one stale: they are rebuilt.

A mirror is written to a temporary name (``.<name>.tmp``), fsynced, renamed into place and
the directory fsynced, so a crash leaves either no mirror or a whole one (leftover
temporary files are removed by the next sync). Storage itself ignores these files; deleting
a topic deletes its directory, mirrors included.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from seglog.columnar._decode import decode_batches
from seglog.columnar._schema import arrow_schema
from seglog.columnar._typed import TypedDecoder
from seglog.schemas import read_registry
from seglog.storage import BATCH_HEADER, DataDir, Log, atomic_file, fsync_dir

__all__ = [
    "MIRROR_CONFIG",
    "Mirror",
    "MirrorReport",
    "mirror_enabled",
    "mirrors_of",
    "sync_log_mirrors",
    "sync_mirrors",
]

log = logging.getLogger(__name__)

MIRROR_CONFIG = "seglog.parquet.mirror"
"""Topic config: ``true`` makes the broker keep a Parquet mirror of every closed segment."""

CHUNK_BYTES = 64 << 20
"""Bytes of stored record batches decoded into one Parquet row group."""

_NAME = re.compile(r"(\d{20})\.mirror-(\d+)-(\d+)(?:\.value-(\d+))?\.parquet")


@dataclass(frozen=True)
class Mirror:
    """The Parquet mirror of one closed segment: records ``base_offset <= offset <
    next_offset`` (with gaps where compaction removed records)."""

    base_offset: int
    next_offset: int
    segment_bytes: int
    path: Path
    value_schema_id: int | None = None
    """Typed mirror: ``value`` a struct decoded with this registered schema (None: binary)."""


@dataclass
class MirrorReport:
    """What ``sync_log_mirrors`` / ``sync_mirrors`` did."""

    built: list[Path] = field(default_factory=list)
    """Mirrors written."""
    removed: list[Path] = field(default_factory=list)
    """Stale mirrors (segment gone or rewritten) and leftover temporary files deleted."""
    kept: int = 0
    """Mirrors already up to date."""

    def merge(self, other: MirrorReport) -> None:
        """Add ``other``'s counts to this report."""
        self.built += other.built
        self.removed += other.removed
        self.kept += other.kept


def mirror_enabled(configs: Mapping[str, str]) -> bool:
    """Whether a topic's configs ask for mirrors (``seglog.parquet.mirror=true``)."""
    return configs.get(MIRROR_CONFIG, "false").strip().lower() == "true"


_Key = tuple[int, int, int, int | None]  # base, next offset, segment bytes, schema id


def _name(base: int, next_offset: int, size: int, schema_id: int | None = None) -> str:
    typed = "" if schema_id is None else f".value-{schema_id}"
    return f"{base:020d}.mirror-{next_offset}-{size}{typed}.parquet"


def value_decoder(data_dir: str | os.PathLike[str], topic: str) -> TypedDecoder | None:
    """The decoder typed mirrors of ``topic`` use: the latest schema of subject
    ``<topic>-value`` (Confluent's TopicNameStrategy) in the data directory's ``_schemas``
    (``seglog.schemas.read_registry``), Avro or JSON Schema; None when the topic has none.
    PERMISSIVE: an undecodable value is a null struct in the mirror (the binary mirror keeps
    its bytes)."""
    store = read_registry(data_dir)
    latest = store.latest(f"{topic}-value")
    if latest is None or latest.schema_type not in ("AVRO", "JSON"):
        return None

    def writer(schema_id: int) -> str | None:
        found = store.schema_of(schema_id)
        return None if found is None else found.schema

    fmt = "avro" if latest.schema_type == "AVRO" else "json"
    return TypedDecoder(fmt, latest.schema, writer, reader_id=latest.id)


def _closed_segments(plog: Log) -> list[tuple[int, int, int]]:
    """``(base offset, next offset, bytes)`` of the closed segments holding records, below
    the last stable offset (an ongoing transaction may still abort)."""
    segments = plog.stats().segments[:-1]  # the last one is the active segment
    lso = plog.last_stable_offset
    return [
        (s.base_offset, s.next_offset, s.bytes)
        for s in segments
        if s.messages > 0 and s.next_offset <= lso
    ]


def _existing(directory: Path) -> Iterator[tuple[str, _Key | None]]:
    for name in os.listdir(directory):
        match = _NAME.fullmatch(name)
        if match is not None:
            typed = None if match[4] is None else int(match[4])
            yield name, (int(match[1]), int(match[2]), int(match[3]), typed)
        elif name.startswith(".") and name.endswith(".parquet.tmp"):
            yield name, None


def mirrors_of(plog: Log, value_schema_id: int | None = None) -> list[Mirror]:
    """The up-to-date mirrors of ``plog``'s closed segments, by base offset (segments
    without a mirror are simply absent): binary ones, or with ``value_schema_id`` the typed
    ones decoded with that schema. Reads every batch header once (``Log.stats``)."""
    directory = Path(plog.directory)
    current = {(*seg, value_schema_id) for seg in _closed_segments(plog)}
    found = [
        Mirror(key[0], key[1], key[2], directory / name, key[3])
        for name, key in _existing(directory)
        if key is not None and key in current
    ]
    return sorted(found, key=lambda m: m.base_offset)


def _write_mirror(
    plog: Log, topic: str, partition: int, seg: _Key, typed: TypedDecoder | None
) -> Path:
    """Write one mirror atomically with ``seglog.storage.atomic_file`` (its streaming
    form: a Parquet file of up to a segment, 1 GiB by default, written a chunk at a time
    by ``pq.ParquetWriter``): a temporary file, fsynced, renamed into place, the directory
    fsynced; on any error the temporary file is removed. Its name is fixed
    (``.<name>.tmp``, not random) so a sync after a crash finds and deletes it."""
    base, next_offset, size, schema_id = seg
    directory = Path(plog.directory)
    final = directory / _name(base, next_offset, size, schema_id)
    tmp = directory / f".{final.name}.tmp"
    schema = arrow_schema(include_headers=True)
    if typed is not None:
        schema = schema.set(1, pa.field("value", typed.arrow_type))

    def decode(pending: list[bytes]) -> pa.RecordBatch:
        # committed records only: the aborted transactions whose marker is not behind them
        first = BATCH_HEADER.unpack_from(pending[0])[0]  # base offset of the first batch
        batch = decode_batches(
            pending, topic=topic, partition=partition, start=base, end=next_offset,
            include_headers=True, aborted=plog.aborted_transactions(first, next_offset),
        )  # fmt: skip
        if typed is None:
            return batch
        columns = list(batch.columns)
        columns[1] = typed.decode(columns[1])[0]
        return pa.RecordBatch.from_arrays(columns, schema=schema)

    with (
        atomic_file(final, tmp=tmp) as f,
        pq.ParquetWriter(f, schema, compression="snappy") as writer,
    ):
        pending: list[bytes] = []
        pending_bytes = 0
        for batch in plog.batches(base, next_offset):
            pending.append(bytes(batch))
            pending_bytes += len(batch)
            if pending_bytes >= CHUNK_BYTES:
                writer.write_batch(decode(pending))
                pending, pending_bytes = [], 0
        if pending:
            writer.write_batch(decode(pending))
    return final


def sync_log_mirrors(plog: Log, topic: str, partition: int) -> MirrorReport:
    """Bring one partition's mirrors up to date: write a mirror for every closed segment
    without one (and a typed one when the topic has a schema, ``value_decoder``), delete
    mirrors of segments that are gone or rewritten, typed mirrors of an older schema and
    leftover temporary files. Raises OSError (disk full...) and ``CorruptRecordError``; what was
    done before the error stays done."""
    report = MirrorReport()
    directory = Path(plog.directory)
    typed = value_decoder(directory.parent, topic)
    current: list[_Key] = [(*seg, None) for seg in _closed_segments(plog)]
    if typed is not None:
        current += [(*seg[:3], typed.reader_id) for seg in current]
    wanted = set(current)
    present = set()
    for name, key in list(_existing(directory)):
        if key is not None and key in wanted:
            present.add(key)
            continue
        (directory / name).unlink(missing_ok=True)
        report.removed.append(directory / name)
    if report.removed:
        fsync_dir(directory)
    report.kept = len(present)
    for seg in current:
        if seg not in present:
            decoder = None if seg[3] is None else typed
            report.built.append(_write_mirror(plog, topic, partition, seg, decoder))
    return report


def sync_mirrors(
    path: str | os.PathLike[str], topic: str | None = None, *, data_dir: DataDir | None = None
) -> MirrorReport:
    """Sync the mirrors of every topic with ``seglog.parquet.mirror=true`` (or of ``topic``
    alone, whatever its config) in a data directory. Opens ``path`` read-only (safe beside a
    running broker: only mirror files are written) unless an open ``data_dir`` is given.
    Raises ``UnknownTopicError`` for an unknown ``topic``."""
    own = data_dir is None
    dd = DataDir(path, create=False, read_only=True) if data_dir is None else data_dir
    report = MirrorReport()
    try:
        topics = dd.topics()
        if topic is not None:
            names = [dd.topic(topic).name]
        else:
            names = sorted(n for n, info in topics.items() if mirror_enabled(info.configs))
        for name in names:
            for partition in range(topics[name].partitions):
                part = sync_log_mirrors(dd.log(name, partition), name, partition)
                for built in part.built:
                    log.info("mirror %s-%d: wrote %s", name, partition, built.name)
                report.merge(part)
    finally:
        if own:
            dd.close()
    return report
