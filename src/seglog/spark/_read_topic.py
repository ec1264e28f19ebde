"""``read_topic``: a batch read of a topic that scans its Parquet mirrors natively.

Spark's own Parquet scan reads the mirrored (closed) segments — past the Python data source
ceiling — and ``format("seglog")`` reads what has no mirror (the active segment, segments
not mirrored yet), each offset range exactly once: for every partition, the offsets
``[start, end)`` are cut at the mirrors' bounds; each mirrored piece is a Parquet file
filtered to its piece, every other piece a ``format("seglog")`` range. The union has the
Kafka source's schema and no offset lost or duplicated at the seams.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from seglog.columnar import mirrors_of
from seglog.spark._options import EARLIEST, LATEST, TopicPartition, offsets_from_json
from seglog.spark._schema import spark_schema
from seglog.storage import DataDir

__all__ = ["plan_topic_read", "read_topic"]

Piece = tuple[int, int, int, str | None, bool]
"""(partition, start, end, mirror file or None for a format("seglog") range, whether the
piece is the mirror's whole segment)."""


def _offset_spec(
    spec: str | dict[str, dict[str, int]], name: str
) -> str | dict[TopicPartition, int]:
    if isinstance(spec, dict):
        return offsets_from_json(json.dumps(spec), name)
    lowered = spec.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    return offsets_from_json(spec, name)


def _resolve(
    spec: str | dict[TopicPartition, int], tp: TopicPartition, low: int, high: int, default: int
) -> int:
    value = (
        {"earliest": EARLIEST, "latest": LATEST}[spec]
        if isinstance(spec, str)
        else spec.get(tp, default)
    )
    if value == EARLIEST:
        return low
    if value == LATEST:
        return high
    return min(max(value, low), high)


def plan_topic_read(
    path: str | os.PathLike[str],
    topic: str,
    starting_offsets: str | dict[str, dict[str, int]] = "earliest",
    ending_offsets: str | dict[str, dict[str, int]] = "latest",
) -> list[Piece]:
    """The pieces of ``read_topic``: per partition, ``[start, end)`` cut at mirror bounds.

    Offsets as Spark's Kafka source takes them ("earliest", "latest", or JSON / a dict
    ``{"topic": {"0": 42}}`` with -2/-1). Raises ``UnknownTopicError``, ValueError."""
    starting = _offset_spec(starting_offsets, "startingOffsets")
    ending = _offset_spec(ending_offsets, "endingOffsets")
    pieces: list[Piece] = []
    data_dir = DataDir(path, create=False, read_only=True)
    try:
        info = data_dir.topic(topic)
        for partition in range(info.partitions):
            plog = data_dir.log(topic, partition)
            low, high = plog.log_start_offset, plog.high_watermark
            tp = (topic, partition)
            start = _resolve(starting, tp, low, high, EARLIEST)
            end = max(start, _resolve(ending, tp, low, high, LATEST))
            position = start
            for mirror in mirrors_of(plog):
                if mirror.next_offset <= position or mirror.base_offset >= end:
                    continue
                if mirror.base_offset > position:  # a gap without mirror before it
                    pieces.append((partition, position, mirror.base_offset, None, False))
                    position = mirror.base_offset
                stop = min(mirror.next_offset, end)
                whole = position == mirror.base_offset and stop == mirror.next_offset
                pieces.append((partition, position, stop, str(mirror.path), whole))
                position = stop
            if position < end:
                pieces.append((partition, position, end, None, False))
    finally:
        data_dir.close()
    return pieces


def read_topic(
    spark: SparkSession,
    path: str | os.PathLike[str],
    topic: str,
    starting_offsets: str | dict[str, dict[str, int]] = "earliest",
    ending_offsets: str | dict[str, dict[str, int]] = "latest",
    *,
    include_headers: bool = False,
) -> DataFrame:
    """One DataFrame of the topic's records between the offsets (batch), with the schema of
    Spark's Kafka source (``headers`` with ``include_headers``).

    Mirrored segments (topic config ``seglog.parquet.mirror=true``, or ``seglog mirror``) are
    read by Spark's Parquet scan, never past the segment's last offset; the rest through
    ``format("seglog")``. Offsets are resolved when this is called (like a batch read's
    planning). Raises ``UnknownTopicError`` for an unknown topic, ValueError for bad offsets.
    """
    columns = [f.name for f in spark_schema(include_headers).fields]
    frames: list[DataFrame] = []
    files: list[str] = []
    spans: list[tuple[int, int, int]] = []  # (partition, start, end) of the mirrored pieces
    partial = False
    ranges: list[dict[int, tuple[int, int]]] = []
    plan = plan_topic_read(path, topic, starting_offsets, ending_offsets)
    for partition, start, end, mirror, whole in plan:
        if start >= end:
            continue
        if mirror is not None:
            files.append(mirror)
            spans.append((partition, start, end))
            partial |= not whole
            continue
        # at most one range per partition per format("seglog") read
        for round_ in ranges:
            if partition not in round_:
                round_[partition] = (start, end)
                break
        else:
            ranges.append({partition: (start, end)})
    if files:
        mirrored = spark.read.parquet(*files)
        if partial:  # cut the first/last mirror to the asked offsets (pushed down to Parquet)
            condition: Any = None
            for partition, start, end in spans:
                piece = (F.col("partition") == partition) & F.col("offset").between(start, end - 1)
                condition = piece if condition is None else condition | piece
            mirrored = mirrored.where(condition)
        frames.append(mirrored.select(*columns))
    for round_ in ranges:
        frames.append(
            spark.read.format("seglog")
            .option("path", str(path))
            .option("assign", json.dumps({topic: sorted(round_)}))
            .option(
                "startingOffsets",
                json.dumps({topic: {str(p): s for p, (s, _) in sorted(round_.items())}}),
            )
            .option(
                "endingOffsets",
                json.dumps({topic: {str(p): e for p, (_, e) in sorted(round_.items())}}),
            )
            .option("includeHeaders", str(include_headers).lower())
            .load()
            .select(*columns)
        )
    if not frames:
        return spark.createDataFrame([], spark_schema(include_headers))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
