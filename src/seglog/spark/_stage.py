"""Staged writes into a data directory, appended by the driver exactly once.

Tasks never append to logs (several tasks, and the broker, would race for the writer lock).
Each task encodes its rows into record batches v2 and writes them, one file per partition,
under the sink directory ``<data-dir>/__spark_sink/<sink id>/staged/`` (fsynced), and returns
the list of files as its commit message. The driver-side commit then, holding the data
directory's writer lock:

1. reads ``<sink dir>/commit.json`` — ``{"batch": N, "done": true}`` after batch N was
   appended. A batch id <= N is a replay (Spark re-running a micro-batch after a crash):
   its staged files are dropped and nothing is appended.
2. writes the *intent* ``{"batch": N+1, "done": false, "plan": [...]}``: per partition, the
   log end offset before appending, the record count and the staged files, in task order;
3. appends each partition's staged files in plan order and ``sync()``s the log: a file of
   at least ``ADOPT_MIN_BYTES`` is moved into the log as a segment (``Log.adopt``: its
   offsets patched in place, no second write of its bytes), a smaller one is copied
   (``Log.append``);
4. writes ``{"batch": N+1, "done": true}`` and deletes the staged files left.

A commit that finds an unfinished intent (the driver died in step 3) finishes *that* plan:
per partition it skips the records already appended (log end offset - start, always whole
record batches since an append is batch-aligned; the plan keeps each file's record count,
so the files already adopted, gone from the staging directory, are skipped whole) and
appends the rest from the staged files, which are kept until step 4. So every record of a
committed micro-batch is appended once, as long as nothing else appends to those
partitions between the crash and the replay.
``commit.json`` is replaced atomically (write, fsync, rename, fsync directory).

Batch (non-streaming) writes use the same staging under ``__spark_sink/job-<uuid>/`` without
the replay record: Spark runs a batch job's commit once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from seglog.columnar import BATCH_HEADER
from seglog.errors import DataDirLockedError
from seglog.spark._encode import (
    CODECS,
    Gathered,
    Router,
    key_columns,
    records_of,
    split_columns,
)
from seglog.spark._writeback import EarlyWriteback
from seglog.storage import DataDir, atomic_write, fsync_dir

__all__ = [
    "SINK_ROOT",
    "StagedFile",
    "StagedFiles",
    "commit_batch",
    "commit_stream",
    "discard",
    "open_writer",
    "sink_dir",
    "stage",
]

SINK_ROOT = "__spark_sink"
"""Directory of the Spark sink's staging and commit records inside a data directory."""


@dataclass(frozen=True)
class StagedFile:
    """Record batches for one partition, staged by one task (``name`` under the sink dir)."""

    topic: str
    partition: int
    name: str
    records: int


@dataclass(frozen=True)
class StagedFiles(WriterCommitMessage):
    """Commit message of one task: the files it staged, in write order."""

    files: tuple[StagedFile, ...]


def sink_dir(path: str, options: dict[str, str], topic: str | None, streaming: bool) -> str:
    """The sink directory of a writer: one per streaming query, one per batch job.

    Streaming: named after the query's checkpoint location (Spark passes
    ``checkpointLocation`` to the sink), else the ``sinkId`` option, else the topic.
    """
    root = os.path.join(path, SINK_ROOT)
    if not streaming:
        return os.path.join(root, f"job-{uuid.uuid4().hex}")
    checkpoint = options.get("checkpointlocation") or options.get("checkpointLocation")
    if checkpoint:
        digest = hashlib.sha256(os.path.abspath(checkpoint).encode()).hexdigest()[:16]
        return os.path.join(root, f"query-{digest}")
    name = options.get("sinkid") or options.get("sinkId") or topic or "default"
    return os.path.join(root, f"sink-{name}")


STAGE_GATHER_BYTES = 4 << 20
"""Key and value bytes gathered per partition before they are encoded and written to its
staged file (so encoding and writing overlap Spark feeding the task, and a task holds at
most this much per partition besides Spark's own batch)."""


class _StagedWriter:
    """The staged file of one partition: rows gathered (``Gathered``) and written every
    ``STAGE_GATHER_BYTES`` of key/value columns, the rest when finished."""

    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        task: str,
        codec: int,
        *,
        writeback: EarlyWriteback,
    ) -> None:
        self.topic, self.partition = topic, partition
        self.writeback = writeback
        self.name = name = f"staged/{topic}-{partition}-{task}.batches"
        self.fd = os.open(
            os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644
        )
        self.records = 0
        self.rows = Gathered(codec)
        self.arena = bytearray()
        """Where each record batch is built, then written: one buffer reused, a batch
        long (``Gathered.take(into)``). Measured in the bench sink (Spark, 0.5 M rows per
        task): a fresh buffer per batch then a join per chunk cost page faults and a copy,
        encode CPU 70 -> 15 ms; a batch written while still in the CPU cache (not a
        4 MiB chunk at once), writev CPU 27-70 -> 15-16 ms."""

    def add_columns(self, keys: pa.Array, values: pa.Array) -> None:
        self.rows.add_columns(keys, values)
        if self.rows.size >= STAGE_GATHER_BYTES:
            self._write()

    def _write(self) -> None:
        for data, n in self.rows.take(self.arena):
            _write_all(self.fd, [data])
            self.records += n
            del data  # a view of the arena: it could not grow for the next chunk
        self.writeback.written(self.fd)

    def write_rest(self) -> None:
        """Write the rows gathered so far."""
        self._write()

    def close(self) -> None:
        """Close the file (idempotent)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def finish(self) -> StagedFile:
        """fsync and close (after ``write_rest``, the task's writeback stopped); the
        commit message's entry."""
        try:
            os.fsync(self.fd)
        finally:
            self.close()
        return StagedFile(self.topic, self.partition, self.name, self.records)


def _write_all(fd: int, buffers: list[bytes | bytearray | memoryview]) -> None:
    """``os.writev`` until every byte is written (it may write less than asked)."""
    views = [memoryview(b) for b in buffers if len(b)]
    while views:
        written = os.writev(fd, views[:_IOV_MAX])
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]


_IOV_MAX = 1024


def stage(
    batches: Iterator[pa.RecordBatch],
    directory: str,
    default_topic: str | None,
    router: Router,
    compression: str,
) -> StagedFiles:
    """Encode the task's rows and stage them (fsynced); returns the task's commit message.

    Key/value-only rows are encoded per partition as they come, every
    ``STAGE_GATHER_BYTES`` (from Arrow's buffers when uncompressed, ``encode_columns``);
    rows with topic, partition or headers columns are gathered per partition and encoded
    at the end (``build_batches``)."""
    staged = pathlib.Path(directory, "staged")
    staged.mkdir(parents=True, exist_ok=True)
    task = uuid.uuid4().hex
    writers: dict[tuple[str, int], _StagedWriter] = {}
    codec = CODECS[compression]
    writeback = EarlyWriteback()

    def writer(topic: str, partition: int) -> _StagedWriter:
        w = writers.get((topic, partition))
        if w is None:
            w = writers[(topic, partition)] = _StagedWriter(
                directory, topic, partition, task, codec, writeback=writeback
            )
        return w

    try:
        for batch in batches:
            columns = key_columns(batch) if default_topic else None
            if columns is not None and default_topic:  # key/value only: route column-wise
                keys, values = columns
                parts = router.partitions(default_topic, keys)
                for part, part_keys, part_values in split_columns(keys, values, parts):
                    writer(default_topic, part).add_columns(part_keys, part_values)
                continue
            for record in records_of(batch):
                topic = record.topic or default_topic
                if not topic:
                    raise ValueError(
                        "no topic: set option topic or give the DataFrame a topic column"
                    )
                writer(topic, router.partition(topic, record)).rows.pending.add(record)
        for w in writers.values():
            w.write_rest()
        writeback.stop()
        files = [writers[tp].finish() for tp in sorted(writers)]
    except BaseException:
        with contextlib.suppress(OSError):
            writeback.stop()  # before any descriptor closes
        for w in writers.values():
            with contextlib.suppress(OSError):
                w.close()
        raise
    if files:  # the new files' entries too: the driver's commit plan will name them
        fsync_dir(staged)
    return StagedFiles(tuple(files))


def _files(messages: Iterable[WriterCommitMessage | None]) -> list[StagedFile]:
    return [f for m in messages if isinstance(m, StagedFiles) for f in m.files]


def _skip_records(data: bytes, skip: int) -> bytes:
    """``data`` (record batches) without its first ``skip`` records (batch-aligned)."""
    pos = 0
    while skip > 0 and pos < len(data):
        header = BATCH_HEADER.unpack_from(data, pos)
        skip -= header[12]
        pos += 12 + header[1]
    if skip != 0:
        raise RuntimeError("a partial append is not aligned on a staged record batch")
    return data[pos:]


ADOPT_MIN_BYTES = 8 << 20
"""A staged file at least this big (or half of segment.bytes, if smaller) is moved into
the log as a segment (``Log.adopt``: no second write of its bytes); smaller ones are
copied, so small micro-batches do not make a segment each."""


def _append(data_dir: Any, directory: str, item: dict[str, Any]) -> None:
    """Append the item's staged files not yet in the log (all, or after a crash the rest:
    the log end offset says how many records made it, always whole staged batches)."""
    log = data_dir.log(item["topic"], item["partition"])
    done = log.log_end_offset - item["start"]
    if done >= item["records"]:
        return
    if done < 0:
        raise RuntimeError(
            f"log {item['topic']}-{item['partition']} ends at {log.log_end_offset}, before the "
            f"offset {item['start']} this commit started appending at"
        )
    counts = item.get("counts")
    if counts is None:  # an intent written before per-file counts: one copy of the rest
        data = b"".join(pathlib.Path(directory, name).read_bytes() for name in item["files"])
        rest = _skip_records(data, done)
        if rest:
            log.append(rest)
            log.sync()
        return
    adopt_min = min(ADOPT_MIN_BYTES, log.config.segment_bytes // 2)
    first = 0  # records of the item before this file
    for name, records in zip(item["files"], counts, strict=True):
        if done < first + records:  # not (wholly) in the log yet: an adopted file is gone
            path = pathlib.Path(directory, name)
            skip = max(done - first, 0)
            if skip == 0 and path.stat().st_size >= adopt_min:
                log.adopt(path)
            else:
                rest = _skip_records(path.read_bytes(), skip)
                if rest:
                    log.append(rest)
        first += records
    log.sync()


def _plan(data_dir: Any, files: list[StagedFile], partitions: int) -> list[dict[str, Any]]:
    """Per partition, in first-staged order: start offset, record count, staged files and
    each file's record count."""
    existing = data_dir.topics()
    for topic in sorted({f.topic for f in files} - set(existing)):
        data_dir.create_topic(topic, partitions)
    plan: dict[tuple[str, int], dict[str, Any]] = {}
    for f in files:
        item = plan.get((f.topic, f.partition))
        if item is None:
            start = data_dir.log(f.topic, f.partition).log_end_offset
            item = {"topic": f.topic, "partition": f.partition, "start": start, "records": 0,
                    "files": [], "counts": []}  # fmt: skip
            plan[(f.topic, f.partition)] = item
        item["records"] += f.records
        item["files"].append(f.name)
        item["counts"].append(f.records)
    return list(plan.values())


def _write_json(path: pathlib.Path, value: dict[str, Any]) -> None:
    atomic_write(path, json.dumps(value, sort_keys=True).encode())


def open_writer(path: str) -> DataDir:
    try:
        return DataDir(path)
    except DataDirLockedError as exc:
        raise DataDirLockedError(
            f"{exc}: another process (a running `seglog serve`?) owns {path}; write through "
            "it with option kafka.bootstrap.servers instead of path"
        ) from exc


def commit_batch(
    path: str, directory: str, messages: Iterable[WriterCommitMessage | None], partitions: int
) -> None:
    """Append a batch job's staged files (task order), sync, delete the staging dir."""
    data_dir = open_writer(path)
    try:
        for item in _plan(data_dir, _files(messages), partitions):
            _append(data_dir, directory, item)
    finally:
        data_dir.close()
    shutil.rmtree(directory, ignore_errors=True)


def commit_stream(
    path: str,
    directory: str,
    messages: Iterable[WriterCommitMessage | None],
    batch_id: int,
    partitions: int,
) -> bool:
    """Append micro-batch ``batch_id`` exactly once (module doc). False if it was a replay."""
    marker = pathlib.Path(directory, "commit.json")
    pathlib.Path(directory).mkdir(parents=True, exist_ok=True)
    state = json.loads(marker.read_bytes()) if marker.exists() else None
    data_dir = open_writer(path)
    try:
        if state is not None and not state["done"]:
            if state["batch"] != batch_id:
                raise RuntimeError(
                    f"sink {directory} has the unfinished commit of batch {state['batch']} "
                    f"but Spark commits batch {batch_id}: was the checkpoint replaced?"
                )
            plan = state["plan"]
        elif state is not None and batch_id <= state["batch"]:
            discard(directory, messages)
            return False
        else:
            plan = _plan(data_dir, _files(messages), partitions)
            _write_json(marker, {"batch": batch_id, "done": False, "plan": plan})
        for item in plan:
            _append(data_dir, directory, item)
        _write_json(marker, {"batch": batch_id, "done": True})
    finally:
        data_dir.close()
    shutil.rmtree(pathlib.Path(directory, "staged"), ignore_errors=True)
    return True


def discard(directory: str, messages: Iterable[WriterCommitMessage | None]) -> None:
    """Delete the staged files of ``messages`` (abort, or a replayed batch)."""
    for f in _files(messages):
        pathlib.Path(directory, f.name).unlink(missing_ok=True)
