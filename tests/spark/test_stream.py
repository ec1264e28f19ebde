"""Structured Streaming reads: maxOffsetsPerTrigger, availableNow, restart from checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from seglog.spark._options import ReadOptions
from seglog.spark._reader import DataLossError, SeglogStreamReader
from seglog.storage import DataDir, Message


def _publish(path: Path, topic: str, partition: int, first: int, count: int) -> None:
    with DataDir(path) as data_dir:
        if topic not in data_dir.topics():
            data_dir.create_topic(topic, 2)
        log = data_dir.log(topic, partition)
        for i in range(first, first + count, 4):  # batches of up to 4 records
            log.publish(
                [
                    Message(key=f"{partition}-{j}".encode(), value=f"v{j}".encode())
                    for j in range(i, min(i + 4, first + count))
                ]
            )
        log.sync()


def _run(spark: Any, path: Path, out: Path, checkpoint: Path) -> Any:
    query = (
        spark.readStream.format("seglog")
        .option("subscribe", "clicks")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "17")
        .load(str(path))
        .selectExpr("partition", "offset", "CAST(key AS STRING) AS key")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None
    return query


def _read_out(out: Path) -> list[tuple[int, int, str]]:
    table = pq.read_table(out)
    return sorted(
        zip(*(table.column(c).to_pylist() for c in ("partition", "offset", "key")), strict=True)
    )


def _expected(counts: dict[int, int]) -> list[tuple[int, int, str]]:
    return sorted((p, o, f"{p}-{o}") for p, n in counts.items() for o in range(n))


def test_available_now_with_limit_then_restart(spark: Any, tmp_path: Path) -> None:
    path, out, checkpoint = tmp_path / "data", tmp_path / "out", tmp_path / "checkpoint"
    _publish(path, "clicks", 0, 0, 30)
    _publish(path, "clicks", 1, 0, 11)

    query = _run(spark, path, out, checkpoint)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 41
    assert max(sizes) <= 17
    assert len(sizes) == 3
    assert _read_out(out) == _expected({0: 30, 1: 11})
    last = json.loads(query.lastProgress["sources"][0]["endOffset"])
    assert last == {"clicks": {"0": 30, "1": 11}}

    _publish(path, "clicks", 1, 11, 20)
    _publish(path, "clicks", 0, 30, 5)
    query = _run(spark, path, out, checkpoint)
    assert sum(p["numInputRows"] for p in query.recentProgress) == 25
    assert _read_out(out) == _expected({0: 35, 1: 31})  # nothing lost, nothing twice


def test_offsets_are_sorted_json_and_rate_limited(tmp_path: Path) -> None:
    path = tmp_path / "data"
    _publish(path, "clicks", 0, 0, 10)
    _publish(path, "clicks", 1, 0, 30)
    options = {"path": str(path), "subscribe": "clicks", "startingOffsets": "earliest"}
    reader = SeglogStreamReader(ReadOptions.parse(options, streaming=True))
    start = reader.initialOffset()
    assert json.dumps(start) == '{"clicks": {"0": 0, "1": 0}}'
    end = reader.latestOffset(start, ReadMaxRows(8))
    assert end == {"clicks": {"0": 2, "1": 6}}  # shared in proportion to lag
    assert reader.latestOffset(start, ReadAllAvailable()) == {"clicks": {"0": 10, "1": 30}}
    parts = reader.partitions(start, end)
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 2), (1, 0, 6)]
    rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, 0), (0, 1)] + [
        (1, o) for o in range(6)
    ]
    reader.prepareForTriggerAvailableNow()
    _publish(path, "clicks", 0, 10, 3)  # after the availableNow target: not read
    assert reader.latestOffset(end, ReadAllAvailable()) == {"clicks": {"0": 10, "1": 30}}


def test_fail_on_data_loss(tmp_path: Path) -> None:
    path = tmp_path / "data"
    _publish(path, "clicks", 0, 0, 5)
    options = {"path": str(path), "subscribe": "clicks"}
    strict = SeglogStreamReader(ReadOptions.parse(options, streaming=True))
    beyond = {"clicks": {"0": 9, "1": 0}}
    end = {"clicks": {"0": 12, "1": 0}}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        strict.partitions(beyond, end)
    lenient = SeglogStreamReader(
        ReadOptions.parse({**options, "failOnDataLoss": "false"}, streaming=True)
    )
    assert [(p.start, p.end) for p in lenient.partitions(beyond, end)] == [(5, 12)]


def test_offset_beyond_the_high_watermark_resets_instead_of_stalling(tmp_path: Path) -> None:
    """A checkpointed offset past the high watermark (topic recreated with fewer records,
    or startingOffsets beyond the end): Spark's Kafka source ends the next micro-batch at
    the high watermark, reporting data loss (failOnDataLoss=true raises, false skips) and
    reading on from there; it must not wait until the log reaches the old offset."""
    path = tmp_path / "data"
    _publish(path, "clicks", 0, 0, 5)
    options = {"path": str(path), "subscribe": "clicks"}
    beyond = {"clicks": {"0": 9, "1": 0}}
    strict = SeglogStreamReader(ReadOptions.parse(options, streaming=True))
    end = strict.latestOffset(beyond, ReadAllAvailable())
    assert end == {"clicks": {"0": 5, "1": 0}}
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        strict.partitions(beyond, end)
    lenient = SeglogStreamReader(
        ReadOptions.parse({**options, "failOnDataLoss": "false"}, streaming=True)
    )
    end = lenient.latestOffset(beyond, ReadAllAvailable())
    assert end == {"clicks": {"0": 5, "1": 0}}
    assert lenient.partitions(beyond, end) == []
    _publish(path, "clicks", 0, 5, 2)
    following = lenient.latestOffset(end, ReadAllAvailable())
    assert following == {"clicks": {"0": 7, "1": 0}}
    assert [(p.start, p.end) for p in lenient.partitions(end, following)] == [(5, 7)]


def test_partition_missing_from_starting_offsets_json_starts_at_earliest(tmp_path: Path) -> None:
    """As documented (ReadOptions) and as the batch reader does: a partition the
    startingOffsets JSON omits starts at its log start offset, not at the high watermark
    (which silently skipped its records)."""
    path = tmp_path / "data"
    _publish(path, "clicks", 0, 0, 5)
    _publish(path, "clicks", 1, 0, 3)
    options = {"path": str(path), "subscribe": "clicks", "startingOffsets": '{"clicks": {"0": 2}}'}
    reader = SeglogStreamReader(ReadOptions.parse(options, streaming=True))
    assert reader.initialOffset() == {"clicks": {"0": 2, "1": 0}}
