"""Tail snapshots: the unmirrored tail of a ``read_topic`` as one Parquet file.

A topic with Parquet mirrors still has records no mirror holds (the active segment, closed
segments not mirrored yet). ``read_topic`` used to hand that tail to Spark as an Arrow
table (``createDataFrame``), unioned with the Parquet scan of the mirrors: a second relation
whose every read is a job over a parallelised collection — measured ~130 ms for 40 k rows,
as much as Spark's whole scan of 1 M rows of plain Parquet. Decoded on the driver once and
written as Parquet beside the mirrors (same columns, ``arrow_schema(True)``), the tail joins
the one Parquet scan of the read instead: no union, no Python on the read path.

Files: ``<data dir>/__spark_tail/<topic>-<key>.parquet``, where ``key`` hashes the topic id,
the pieces (partition, start, end) and the bytes of the log segments they cover, so a file
is reused only for the same records (appends, compaction, a recreated topic change the key).
Each is written with ``seglog.storage.atomic_write`` (temporary file, fsync, rename, fsync
directory). A snapshot unused for ``TAIL_TTL_S`` seconds is deleted by the next snapshot
written in that directory; a DataFrame planned over it and evaluated later than that fails
with Spark's missing-file error (read the topic again). Storage ignores the directory
(topics live in ``__topics``); deleting it loses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from seglog.columnar import arrow_schema
from seglog.spark._reader import OffsetRangePartition, read_range
from seglog.storage import DataDir, atomic_write

__all__ = ["TAIL_DIR", "TAIL_TTL_S", "TailRange", "tail_snapshot"]

TAIL_DIR = "__spark_tail"
"""Directory of the snapshots inside the data directory."""

TAIL_TTL_S = 3600.0
"""Seconds a snapshot may stay unused before a later snapshot deletes it."""

TailRange = tuple[int, int, int, int]
"""One unmirrored piece: (partition, start offset, end offset (exclusive), bytes of the
stored batches of the segments it overlaps)."""


def _key(topic_id: str, topic: str, ranges: Sequence[TailRange]) -> str:
    text = json.dumps([topic_id, topic, sorted(ranges)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _expire(directory: Path, keep: Path, now: float) -> None:
    """Delete snapshots (and leftover temporary files) unused for ``TAIL_TTL_S``."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if entry.path == str(keep):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > TAIL_TTL_S:
                    os.unlink(entry.path)


def tail_snapshot(
    path: str | os.PathLike[str],
    topic: str,
    ranges: Sequence[TailRange],
    *,
    read_committed: bool = False,
) -> Path | None:
    """The Parquet file holding exactly the records of ``ranges`` of ``topic`` (every
    column of ``arrow_schema(True)``, rows by partition then offset), written if missing,
    its modification time refreshed if reused.

    Returns None when the data directory cannot take the file (read-only, full: OSError),
    the caller then reads the tail another way. Raises ``UnknownTopicError`` for a topic
    that is gone, ``CorruptRecordError`` as ``format("seglog")`` reads would.
    ``read_committed``: without the records of aborted transactions (another file)."""
    with DataDir(path, create=False, read_only=True) as data_dir:
        topic_id = str(data_dir.topic(topic).topic_id)
    directory = Path(path) / TAIL_DIR
    key = _key(topic_id + ("/read_committed" if read_committed else ""), topic, ranges)
    final = directory / f"{topic}-{key}.parquet"
    now = time.time()
    try:
        if final.exists():
            os.utime(final, (now, now))
        else:
            sink = io.BytesIO()  # compressed Parquet; the decoded rows a chunk at a time
            with pq.ParquetWriter(sink, arrow_schema(True), compression="snappy") as writer:
                for partition, start, end, _ in ranges:
                    part = OffsetRangePartition(
                        os.fspath(path), topic, partition, start, end, True, True, read_committed
                    )
                    for batch in read_range(part):
                        writer.write_batch(batch)
            directory.mkdir(exist_ok=True)
            atomic_write(final, sink.getvalue())
        _expire(directory, final, now)
    except OSError:
        return None
    return final
