"""Spark's timestamp options and minOffsetsPerTrigger, in path mode and through a broker.

Partition p of topic ``stamps`` holds 10 records, offset i at timestamp ``T0 + 1000 * i + p``
(ms), so a timestamp names a known offset in each partition. Both read modes run against
one data directory: a live ``seglog serve`` owns it and path mode reads it read-only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from seglog.broker import BrokerProcess, start_broker
from seglog.spark._options import ReadOptions, parse_duration_ms
from seglog.spark._reader import SeglogStreamReader
from seglog.storage import DataDir, Message

T0 = 1_700_000_000_000
N = 10


@pytest.fixture(scope="module")
def stamped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    path = tmp_path_factory.mktemp("stamps") / "data"
    with DataDir(path) as data_dir:
        data_dir.create_topic("stamps", 2)
        for p in range(2):
            log = data_dir.log("stamps", p)
            for i in range(N):  # one record per batch: the time index sees every record
                log.publish(
                    [Message(key=f"{p}-{i}".encode(), value=b"v", timestamp=T0 + 1000 * i + p)]
                )
            log.sync()
    broker = start_broker(path)
    try:
        yield broker
    finally:
        assert broker.stop() == 0, broker.log_text()


@pytest.fixture(params=["path", "wire"])
def reader(request: pytest.FixtureRequest, spark: Any, stamped: BrokerProcess) -> Any:
    """A batch reader of ``stamps`` by data directory or by ``kafka.bootstrap.servers``."""

    def make() -> Any:
        read = spark.read.format("seglog").option("subscribe", "stamps")
        if request.param == "path":
            return read.option("path", str(stamped.data_dir))
        return read.option("kafka.bootstrap.servers", stamped.bootstrap)

    return make


def _offsets(df: Any) -> dict[int, list[int]]:
    got: dict[int, list[int]] = {0: [], 1: []}
    for row in df.select("partition", "offset").orderBy("partition", "offset").collect():
        got[row["partition"]].append(row["offset"])
    return got


def test_starting_and_ending_timestamp(reader: Any) -> None:
    df = reader().option("startingTimestamp", str(T0 + 3000)).load()
    # partition 1's record 3 has T0 + 3001 >= T0 + 3000; partition 0's record 3 is exact
    assert _offsets(df) == {0: list(range(3, N)), 1: list(range(3, N))}
    df = reader().option("startingTimestamp", str(T0 + 3001)).load()
    assert _offsets(df) == {0: list(range(4, N)), 1: list(range(3, N))}
    df = (
        reader()
        .option("startingTimestamp", str(T0 + 2000))
        .option("startingOffsets", "latest")  # startingTimestamp takes precedence
        .option("endingTimestamp", str(T0 + 6000))
        .load()
    )
    assert _offsets(df) == {0: [2, 3, 4, 5], 1: [2, 3, 4, 5]}


def test_offsets_by_timestamp_per_partition(reader: Any) -> None:
    starting = json.dumps({"stamps": {"0": T0 + 7000, "1": T0}})
    ending = json.dumps({"stamps": {"0": T0 + 99_000, "1": T0 + 2001}})
    df = (
        reader()
        .option("startingOffsetsByTimestamp", starting)
        .option("endingOffsetsByTimestamp", ending)
        .load()
    )
    # an ending timestamp beyond every record ends at the high watermark
    assert _offsets(df) == {0: [7, 8, 9], 1: [0, 1]}


def test_by_timestamp_must_name_every_partition(reader: Any) -> None:
    starting = json.dumps({"stamps": {"0": T0}})
    with pytest.raises(Exception, match="must name every partition read: stamps-1"):
        reader().option("startingOffsetsByTimestamp", starting).load().collect()


def test_timestamp_after_every_record_follows_the_strategy(reader: Any) -> None:
    late = str(T0 + 99_000)
    with pytest.raises(Exception, match=r"no record of stamps-\d has a timestamp >="):
        reader().option("startingTimestamp", late).load().collect()
    df = (
        reader()
        .option("startingTimestamp", late)
        .option("startingOffsetsByTimestampStrategy", "latest")
        .load()
    )
    assert df.count() == 0
    with pytest.raises(Exception, match="must be error or latest"):
        reader().option("startingOffsetsByTimestampStrategy", "nearest").load().collect()


def test_streaming_start_by_timestamp(spark: Any, stamped: BrokerProcess, tmp_path: Path) -> None:
    query = (
        spark.readStream.format("seglog")
        .option("subscribe", "stamps")
        .option("kafka.bootstrap.servers", stamped.bootstrap)
        .option("startingTimestamp", str(T0 + 8000))
        .load()
        .select("partition", "offset")
        .writeStream.format("memory")
        .queryName("stamps_by_time")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    rows = spark.sql("SELECT partition, offset FROM stamps_by_time").collect()
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(0, 8), (0, 9), (1, 8), (1, 9)]


def test_options_for_the_wrong_kind_of_query_are_refused() -> None:
    base = {"path": "/nowhere", "subscribe": "t"}
    with pytest.raises(ValueError, match="for batch queries"):
        ReadOptions.parse({**base, "endingTimestamp": "5"}, streaming=True)
    with pytest.raises(ValueError, match="for streaming queries"):
        ReadOptions.parse({**base, "minOffsetsPerTrigger": "5"}, streaming=False)
    with pytest.raises(ValueError, match="startingTimestamp must be >= 0"):
        ReadOptions.parse({**base, "startingTimestamp": "-5"}, streaming=False)
    with pytest.raises(ValueError, match="maxTriggerDelay must be a duration"):
        ReadOptions.parse({**base, "maxTriggerDelay": "soon"}, streaming=True)
    assert [parse_duration_ms(t, "d") for t in ("15m", "30s", "250ms", "1h", "7")] == [
        900_000,
        30_000,
        250,
        3_600_000,
        7,
    ]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_min_offsets_per_trigger_waits_for_data_or_the_delay(tmp_path: Path) -> None:
    path = tmp_path / "data"
    with DataDir(path) as data_dir:
        data_dir.create_topic("few", 1)
    options = ReadOptions.parse(
        {
            "path": str(path),
            "subscribe": "few",
            "startingOffsets": "earliest",
            "minOffsetsPerTrigger": "5",
            "maxTriggerDelay": "10s",
        },
        streaming=True,
    )
    clock = _Clock()
    reader = SeglogStreamReader(options)
    reader.clock = clock  # type: ignore[method-assign]

    def publish(count: int) -> None:
        with DataDir(path) as data_dir:
            log = data_dir.log("few", 0)
            log.publish([Message(value=b"x") for _ in range(count)])
            log.sync()

    start = reader.initialOffset()
    assert start == {"few": {"0": 0}}
    publish(2)
    # the first trigger never waits (as Spark's lastTriggerMillis = 0)
    first = reader.latestOffset(start, ReadAllAvailable())
    assert first == {"few": {"0": 2}}
    publish(2)
    clock.now += 1
    assert reader.latestOffset(first, ReadAllAvailable()) == first  # 2 < 5 new: wait
    publish(1)
    clock.now += 1
    assert reader.latestOffset(first, ReadAllAvailable()) == first  # 3 < 5 new: wait
    publish(2)
    clock.now += 1
    second = reader.latestOffset(first, ReadAllAvailable())
    assert second == {"few": {"0": 7}}  # 5 new: a micro-batch
    publish(1)
    clock.now += 9.5
    assert reader.latestOffset(second, ReadAllAvailable()) == second  # 9.5 s < 10 s
    clock.now += 0.5
    assert reader.latestOffset(second, ReadAllAvailable()) == {"few": {"0": 8}}  # delay passed
    clock.now += 60
    third = {"few": {"0": 8}}
    assert reader.latestOffset(third, ReadAllAvailable()) == third  # nothing new: no batch
