"""Columnar topic mirrors: Parquet per closed segment, and ``read_topic`` over them.

The proof is always the same: ``read_topic`` (Parquet scan of the mirrors + format("seglog")
for the rest) returns exactly the rows ``format("seglog")`` alone returns — for whole
topics, offset ranges cutting into mirrored segments, after retention, after compaction —
and stale mirrors are never read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests._wait import wait_until
from tests.columnar._mirrored import PARTITIONS, PER_PARTITION, TOPIC, fill, mirrored_data

from seglog.broker import BrokerProcess, start_broker
from seglog.columnar import arrow_schema, mirrors_of, sync_mirrors
from seglog.spark import read_topic
from seglog.spark._read_topic import plan_topic_read
from seglog.spark._tail import TAIL_DIR, TAIL_TTL_S
from seglog.storage import DataDir, Message, compact, trim_by_offset


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(
        (r["partition"], r["offset"], bytes(r["key"]), bytes(r["value"]), r["timestamp"])
        for r in df.collect()
    )


def _seglog(spark: Any, path: Path, start: str = "earliest", end: str = "latest") -> Any:
    return (
        spark.read.format("seglog")
        .option("subscribe", TOPIC)
        .option("startingOffsets", start)
        .option("endingOffsets", end)
        .load(str(path))
    )


@pytest.fixture
def mirrored(tmp_path: Path) -> Path:
    return mirrored_data(tmp_path)


def test_read_topic_equals_format_seglog(spark: Any, mirrored: Path) -> None:
    plan = plan_topic_read(mirrored, TOPIC)
    assert sum(1 for piece in plan if piece.mirror is not None) == 2 * 5  # mostly Parquet
    assert sum(1 for piece in plan if piece.mirror is None) == PARTITIONS  # the active tails
    expected = _rows(_seglog(spark, mirrored))
    assert len(expected) == PARTITIONS * PER_PARTITION
    assert _rows(read_topic(spark, mirrored, TOPIC)) == expected  # tails decoded on the driver
    # tails read by format("seglog") tasks (what a large active segment gets)
    assert _rows(read_topic(spark, mirrored, TOPIC, local_tail_bytes=0)) == expected
    with_headers = read_topic(spark, mirrored, TOPIC, include_headers=True)
    got = {
        (r["partition"], r["offset"]): [(h["key"], bytes(h["value"])) for h in r["headers"]]
        for r in with_headers.collect()
    }
    assert got[(0, 3)] == [("h", b"3")]
    assert got[(1, 4)] == []
    assert with_headers.schema.simpleString().endswith(
        "headers:array<struct<key:string,value:binary>>>"
    )


def test_offset_ranges_cut_into_mirrored_segments(spark: Any, mirrored: Path) -> None:
    start = json.dumps({TOPIC: {"0": 37, "1": 2}})
    end = json.dumps({TOPIC: {"0": 411, "1": 599}})
    expected = _rows(_seglog(spark, mirrored, start, end))
    assert {r[0] for r in expected} == {0, 1}
    got = _rows(read_topic(spark, mirrored, TOPIC, start, end))
    assert got == expected
    assert _rows(read_topic(spark, mirrored, TOPIC, start, end, local_tail_bytes=0)) == expected
    # a range inside one segment: its mirror, cut at both ends
    inside = _rows(
        read_topic(
            spark, mirrored, TOPIC, {TOPIC: {"0": 21, "1": 599}}, {TOPIC: {"0": 24, "1": 599}}
        )
    )
    assert [(p, o) for p, o, *_ in inside] == [(0, 21), (0, 22), (0, 23)]


def _leaf_relations(df: Any) -> str:
    return str(df._jdf.queryExecution().optimizedPlan().toString())


def test_tail_snapshot_makes_one_parquet_scan(spark: Any, mirrored: Path) -> None:
    expected = _rows(_seglog(spark, mirrored))
    df = read_topic(spark, mirrored, TOPIC)
    snapshots = list((mirrored / TAIL_DIR).glob("*.parquet"))
    assert len(snapshots) == 1  # both partitions' tails in one file
    tail = pq.read_table(snapshots[0])
    assert tail.schema == arrow_schema(include_headers=True)
    assert sorted(tail.column("offset").to_pylist()) == sorted(
        o
        for p, o, *_ in expected
        if o
        >= min(
            piece.start
            for piece in plan_topic_read(mirrored, TOPIC)
            if piece.mirror is None and piece.partition == p
        )
    )
    plan = _leaf_relations(df)
    assert "Union" not in plan  # one Parquet relation, no second one for the tail
    assert "LocalRelation" not in plan
    assert _rows(df) == expected
    # the same tail again: the file is reused (no new file), its use time refreshed
    old = time.time() - 2 * TAIL_TTL_S
    os.utime(snapshots[0], (old, old))
    assert _rows(read_topic(spark, mirrored, TOPIC)) == expected
    assert list((mirrored / TAIL_DIR).glob("*.parquet")) == snapshots
    assert snapshots[0].stat().st_mtime > old + TAIL_TTL_S
    # records appended: a new snapshot; the old one, unused for over TAIL_TTL_S, is deleted
    os.utime(snapshots[0], (old, old))
    with DataDir(mirrored) as data_dir:
        data_dir.log(TOPIC, 1).publish([Message(key=b"late", value=b"appended")])
    grown = _rows(read_topic(spark, mirrored, TOPIC))
    assert grown == _rows(_seglog(spark, mirrored))
    assert (1, PER_PARTITION, b"late", b"appended") in [r[:4] for r in grown]
    now = list((mirrored / TAIL_DIR).glob("*.parquet"))
    assert len(now) == 1
    assert now != snapshots


def test_tail_without_a_writable_snapshot_dir_is_still_read(spark: Any, mirrored: Path) -> None:
    (mirrored / TAIL_DIR).write_text("a file where the snapshot directory would go")
    df = read_topic(spark, mirrored, TOPIC)
    plan = _leaf_relations(df)
    assert "Union" in plan  # the tail handed over as an Arrow table, beside the mirrors
    assert "LocalRelation" in plan
    assert _rows(df) == _rows(_seglog(spark, mirrored))


def test_retention_and_compaction_never_read_stale_mirrors(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "data"
    fill(path, keys=50)
    sync_mirrors(path)
    with DataDir(path) as data_dir:
        log0, log1 = data_dir.log(TOPIC, 0), data_dir.log(TOPIC, 1)
        before = len(mirrors_of(log1))
        trim_by_offset(log0, 250)
        result = compact(log1, delete_retention_ms=0, min_compaction_lag_ms=0)
        assert result.offsets  # compaction rewrote segments of partition 1
        # before the next sync the stale mirrors are still on disk, and ignored
        assert len(list(Path(log1.directory).glob("*.parquet"))) == before
        assert len(mirrors_of(log1)) < before
        # the trimmed segments' mirrors are gone from view; the first kept segment's mirror
        # starts below the new log start offset 250, and read_topic cuts it there
        first_kept = log0.stats().segments[0].base_offset
        assert next(m.base_offset for m in mirrors_of(log0)) == first_kept < 250
    expected = _rows(_seglog(spark, path))
    assert _rows(read_topic(spark, path, TOPIC)) == expected
    report = sync_mirrors(path)
    assert report.removed  # mirrors of removed / rewritten segments deleted
    assert report.built  # rewritten segments mirrored again
    assert _rows(read_topic(spark, path, TOPIC)) == expected
    assert min(o for p, o, *_ in expected if p == 0) == 250


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path / "broker", extra_args=["--log-retention-check-interval-ms", "200"]
    )
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()


def test_broker_writes_mirrors_in_the_background(spark: Any, broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"segment.bytes": "8192", "seglog.parquet.mirror": "true"}
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, config=config)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(400):
        producer.produce(TOPIC, key=f"k{i}".encode(), value=b"x" * 100)
        if i % 20 == 19:  # batches of 20 records (~2.5 KiB): several segments of 8 KiB
            assert producer.flush(30) == 0
    seen = (0, 0)

    def all_mirrored() -> bool:
        nonlocal seen
        # a read-only view, opened anew each time to see the broker's new segments
        with DataDir(broker.data_dir, create=False, read_only=True) as data_dir:
            log = data_dir.log(TOPIC, 0)
            closed = len(log.stats().segments) - 1
            seen = (len(mirrors_of(log)), closed)
        return closed > 2 and seen[0] == closed

    wait_until(
        all_mirrored,
        timeout=60,
        interval=0.2,
        message=lambda: f"{seen[0]} of {seen[1]} closed segments mirrored",
    )
    got = read_topic(spark, broker.data_dir, TOPIC)
    assert _rows(got) == _rows(_seglog(spark, broker.data_dir))
    assert got.count() == 400
