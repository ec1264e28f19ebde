"""Batch reads of a data directory through format("seglog"), against what was stored."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecords
from tests.columnar._data import Row, record_batch

import seglog.spark
from seglog.storage import DataDir, Message

CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd


def _rows(tag: str, n: int) -> list[Row]:
    """Keys, null keys, null values, empty values and headers (some with null values)."""
    rows: list[Row] = []
    for i in range(n):
        key = None if i % 4 == 0 else f"{tag}-k{i}".encode()
        value = None if i % 7 == 3 else (b"" if i % 7 == 5 else f"{tag}-v{i}".encode() * (i % 3))
        headers = [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else []
        rows.append((key, value, headers))
    return rows


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """events: 2 partitions, a batch of every codec each; stamped: LogAppendTime."""
    path = tmp_path_factory.mktemp("read") / "data"
    with DataDir(path) as data_dir:
        data_dir.create_topic("events", 2)
        data_dir.create_topic("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
        for p in range(2):
            log = data_dir.log("events", p)
            for codec in CODECS:
                log.append(record_batch(_rows(f"p{p}c{codec}", 9), codec))
            log.publish([Message(key=b"last", value=b"published", headers=[("x", b"y")])])
            log.sync()
        stamped = data_dir.log("stamped", 0)
        stamped.append(record_batch(_rows("s", 5), 0, timestamp_ms=1_000))
        stamped.sync()
        expected = {}
        for topic, partitions in (("events", 2), ("stamped", 1)):
            for p in range(partitions):
                expected[(topic, p)] = _stored(data_dir, topic, p)
    return {"path": str(path), "expected": expected}


def _stored(data_dir: DataDir, topic: str, partition: int) -> list[dict[str, Any]]:
    """Reference decoding of every stored record with kafka-python's MemoryRecords."""
    rows = []
    log = data_dir.log(topic, partition)
    for raw in log.batches():
        for batch in MemoryRecords(bytes(raw)):
            if batch.is_control_batch:
                continue
            for r in batch:
                rows.append(
                    {
                        "key": r.key,
                        "value": r.value,
                        "topic": topic,
                        "partition": partition,
                        "offset": r.offset,
                        "timestamp_ms": r.timestamp,
                        "timestampType": r.timestamp_type,
                        "headers": [{"key": k, "value": v} for k, v in r.headers],
                    }
                )
    return rows


def _collect(df: Any, headers: bool = False) -> list[dict[str, Any]]:
    out = []
    for row in df.orderBy("topic", "partition", "offset").collect():
        d = row.asDict(recursive=True)
        d["key"] = None if d["key"] is None else bytes(d["key"])
        d["value"] = None if d["value"] is None else bytes(d["value"])
        d["timestamp_ms"] = round(d.pop("timestamp").timestamp() * 1000)
        if headers:
            d["headers"] = [
                {"key": h["key"], "value": None if h["value"] is None else bytes(h["value"])}
                for h in d["headers"]
            ]
        out.append(d)
    return out


def _expected(data: dict[str, Any], *tps: tuple[str, int], headers: bool = False) -> list[Any]:
    rows = [dict(r) for tp in tps for r in data["expected"][tp]]
    if not headers:
        for r in rows:
            del r["headers"]
    return rows


def test_batch_read_equals_stored_records(spark: Any, data: dict[str, Any]) -> None:
    df = spark.read.format("seglog").option("subscribe", "events").load(data["path"])
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    got = _collect(df)
    assert got == _expected(data, ("events", 0), ("events", 1))
    assert len(got) == 2 * (5 * 9 + 1)
    assert {r["timestampType"] for r in got} == {0}


def test_include_headers_and_path_option(spark: Any, data: dict[str, Any]) -> None:
    df = (
        spark.read.format("seglog")
        .option("path", data["path"])
        .option("subscribePattern", "ev.*")
        .option("includeHeaders", "true")
        .load()
    )
    assert df.schema["headers"].dataType.simpleString() == (
        "array<struct<key:string,value:binary>>"
    )
    got = _collect(df, headers=True)
    assert got == _expected(data, ("events", 0), ("events", 1), headers=True)
    assert any(r["headers"] for r in got)
    assert any(not r["headers"] for r in got)


def test_log_append_time(spark: Any, data: dict[str, Any]) -> None:
    df = spark.read.format("seglog").option("subscribe", "stamped").load(data["path"])
    got = _collect(df)
    assert got == _expected(data, ("stamped", 0))
    assert {r["timestampType"] for r in got} == {1}
    assert all(r["timestamp_ms"] > 1_000_000 for r in got)  # broker time, not the 1 s given


def test_starting_and_ending_offsets(spark: Any, data: dict[str, Any]) -> None:
    reader = spark.read.format("seglog").option("subscribe", "events")
    per_partition = json.dumps({"events": {"0": 3, "1": -2}})
    ending = json.dumps({"events": {"0": 20, "1": -1}})
    df = (
        reader.option("startingOffsets", per_partition)
        .option("endingOffsets", ending)
        .load(data["path"])
    )
    got = [(r["partition"], r["offset"]) for r in _collect(df)]
    all0 = [(0, r["offset"]) for r in data["expected"][("events", 0)]]
    all1 = [(1, r["offset"]) for r in data["expected"][("events", 1)]]
    assert got == [x for x in all0 if 3 <= x[1] < 20] + all1

    latest = reader.option("startingOffsets", "latest").load(data["path"])
    assert latest.count() == 0
    earliest_to_json = (
        spark.read.format("seglog")
        .option("assign", json.dumps({"events": [1]}))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", json.dumps({"events": {"1": 10}}))
        .load(data["path"])
    )
    assert [(r["partition"], r["offset"]) for r in _collect(earliest_to_json)] == all1[:10]


def test_min_partitions_splits_ranges(spark: Any, data: dict[str, Any]) -> None:
    df = (
        spark.read.format("seglog")
        .option("subscribe", "events")
        .option("minPartitions", "5")
        .load(data["path"])
    )
    assert df.rdd.getNumPartitions() >= 5
    assert _collect(df) == _expected(data, ("events", 0), ("events", 1))


def test_bad_options_name_the_option(spark: Any, data: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        spark.read.format("seglog").load(data["path"]).collect()
    with pytest.raises(Exception, match="endingOffsets cannot be earliest"):
        (
            spark.read.format("seglog")
            .option("subscribe", "events")
            .option("endingOffsets", "earliest")
            .load(data["path"])
            .collect()
        )


def test_explicit_register(spark: Any, data: dict[str, Any]) -> None:
    seglog.spark.register(spark)
    df = spark.read.format("seglog").option("subscribe", "stamped").load(data["path"])
    assert df.count() == len(data["expected"][("stamped", 0)])


def test_read_only_reader_leaves_directory_untouched(spark: Any, data: dict[str, Any]) -> None:
    path = pathlib.Path(data["path"])
    before = {p: p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()}
    with DataDir(path):  # a writer holds the lock, as a broker would
        df = spark.read.format("seglog").option("subscribe", "events").load(str(path))
        assert df.count() == 2 * (5 * 9 + 1)
    after = {p: p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()}
    assert after == before
