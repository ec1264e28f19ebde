"""Spark batch reads of a seglog topic next to Spark reading the same records from Parquet
and from JSON lines.

One local SparkSession (``local[2]``, Python workers on this interpreter). The topic is
written with the embedded API (``DataDir`` + ``Log.publish`` in large batches, not through
the broker); the same records (``key`` and ``value`` as text, topic, partition, offset,
timestamp, timestampType) are written once by Spark as Parquet and as JSON lines, one file
per topic partition. Only the reads are timed: building the DataFrame, then ``count()`` or
``groupBy("key").count().collect()``, checking the answer. JSON is read with an explicit
schema (no inference pass). Parquet's ``count()`` reads row-group metadata only.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import SparkSession

import seglog.spark
from seglog.bench._kafka import BenchError
from seglog.bench._noop_source import NoopArrowSource
from seglog.bench._report import measure
from seglog.bench._spark_io import count_rows, spark_writes
from seglog.bench._spark_results import SOURCES, SparkResults
from seglog.columnar import sync_mirrors
from seglog.storage import DataDir, Message

__all__ = ["KEYS", "WARMUP_ROUNDS", "spark_reads"]

KEYS = 1000
"""Distinct keys in the data set (the groupBy result size)."""
WARMUP_ROUNDS = 3
"""Untimed rounds of count() and groupBy(key) on every source before the timed ones."""


def spark_session() -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # the reference files are written from one pandas frame of every row: 2 M rows
        # overflowed the default 1 GiB driver heap (OutOfMemoryError, then a hung job)
        .config("spark.driver.memory", "4g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@dataclass(frozen=True)
class _DataSet:
    """The records: ``keys[i]``, ``values[i]`` at timestamp ``base_ms + i`` (ms), record ``i``
    in partition ``i % partitions`` at offset ``i // partitions``."""

    topic: str
    partitions: int
    keys: list[bytes]
    values: list[bytes]
    base_ms: int = 1_700_000_000_000


def _records(topic: str, partitions: int, rows: int, value_size: int) -> _DataSet:
    filler = b"abcdefghijklmnopqrstuvwxyz0123456789" * (value_size // 36 + 1)
    keys = [b"key-%04d" % (i % KEYS) for i in range(rows)]
    values = [(b"%09d:" % i + filler)[:value_size] for i in range(rows)]
    return _DataSet(topic, partitions, keys, values)


def _write_topic(data_dir: Path, data: _DataSet) -> None:
    with DataDir(data_dir, create=True) as datadir:
        datadir.create_topic(data.topic, data.partitions)
        for partition in range(data.partitions):
            log = datadir.log(data.topic, partition)
            index = range(partition, len(data.keys), data.partitions)
            for lo in range(0, len(index), 10_000):
                log.publish(
                    [
                        Message(key=data.keys[i], value=data.values[i], timestamp=data.base_ms + i)
                        for i in index[lo : lo + 10_000]
                    ]
                )


def _write_files(spark: Any, out: Path, data: _DataSet) -> None:
    idx = np.arange(len(data.keys))
    frame = pd.DataFrame(
        {
            "key": [k.decode() for k in data.keys],
            "value": [v.decode() for v in data.values],
            "topic": data.topic,
            "partition": (idx % data.partitions).astype("int32"),
            "offset": (idx // data.partitions).astype("int64"),
            "timestamp": pd.to_datetime(data.base_ms + idx, unit="ms", utc=True),
            "timestampType": np.zeros(len(idx), dtype="int32"),
        }
    )
    # one file per topic partition, as the topic has one segment file per partition: the
    # frame sorted by partition, Arrow's in-order slices merged (no shuffle) into as many
    frame = frame.sort_values(["partition", "offset"], kind="stable", ignore_index=True)
    df = spark.createDataFrame(frame).coalesce(data.partitions)
    df.write.mode("overwrite").parquet(str(out / "parquet"))
    df.write.mode("overwrite").json(str(out / "json"))


_JSON_SCHEMA = (
    "key string, value string, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


MIRRORED_TOPIC = "spark-bench-mirrored"


def _write_mirrored_topic(data_dir: Path, data: _DataSet) -> None:
    """The same records in a topic of ~8 segments per partition, every closed one mirrored
    as Parquet (``seglog mirror``): a mostly-closed topic."""
    total = sum(len(k) + len(v) + 12 for k, v in zip(data.keys, data.values, strict=True))
    segment_bytes = max(4096, total // (8 * data.partitions))
    with DataDir(data_dir, create=True) as datadir:
        datadir.create_topic(MIRRORED_TOPIC, data.partitions, {"segment.bytes": str(segment_bytes)})
        for partition in range(data.partitions):
            log = datadir.log(MIRRORED_TOPIC, partition)
            index = range(partition, len(data.keys), data.partitions)
            step = max(1, min(10_000, len(index) // 40))
            for lo in range(0, len(index), step):
                log.publish(
                    [
                        Message(key=data.keys[i], value=data.values[i], timestamp=data.base_ms + i)
                        for i in index[lo : lo + step]
                    ]
                )
    sync_mirrors(data_dir, MIRRORED_TOPIC)


def _readers(
    spark: Any, data_dir: Path, out: Path, data: _DataSet, value_size: int
) -> dict[str, Callable[[], Any]]:
    topic, rows, partitions = data.topic, len(data.keys), data.partitions
    return {
        "ceiling": lambda: (
            spark.read.format("seglog-noop")
            .option("rows", rows)
            .option("partitions", partitions)
            .option("valueSize", value_size)
            .option("keys", KEYS)
            .option("topic", topic)
            .load()
        ),
        "mirrors": lambda: seglog.spark.read_topic(spark, data_dir, MIRRORED_TOPIC),
        "seglog": lambda: (
            spark.read.format("seglog").option("subscribe", topic).load(str(data_dir))
        ),
        "parquet": lambda: spark.read.parquet(str(out / "parquet")),
        "json": lambda: spark.read.schema(_JSON_SCHEMA).json(str(out / "json")),
    }


def _group_by(make: Callable[[], Any], rows: int) -> float:
    start = time.perf_counter()
    result = make().groupBy("key").count().collect()
    elapsed = time.perf_counter() - start
    total = sum(r["count"] for r in result)
    if len(result) != min(KEYS, rows) or total != rows:
        raise BenchError(f"groupBy(key) gave {len(result)} keys / {total} rows, expected {rows}")
    return rows / elapsed


def spark_reads(
    work: Path,
    rows: int,
    repeat: int,
    progress: Callable[[str], None],
    *,
    partitions: int = 2,
    value_size: int = 100,
) -> SparkResults:
    """Write ``rows`` records (``value_size`` B values, ``KEYS`` keys) to a seglog topic of
    ``partitions`` partitions and to Parquet and JSON lines under ``work``, then time
    ``repeat`` rounds of count() and groupBy(key) on each source, interleaved. A failing
    source (e.g. the data source is missing) gets its error recorded; the others still run."""
    results = SparkResults()
    progress(f"spark: generating {rows:,} records")
    data = _records("spark-bench", partitions, rows, value_size)
    data_dir, out = work / "spark-data", work / "spark-files"
    try:
        _write_topic(data_dir, data)
        _write_mirrored_topic(data_dir, data)
    except Exception as exc:  # a layer still being built: report it, carry on
        results.fail("seglog", f"writing the topic failed: {exc!r}")
        results.fail("mirrors", f"writing the topic failed: {exc!r}")
    progress("spark: starting local[2] session")
    spark = spark_session()
    try:
        try:
            seglog.spark.register(spark)
            spark.dataSource.register(NoopArrowSource)
        except Exception as exc:
            results.fail("seglog", f"seglog.spark.register failed: {exc!r}")
        progress("spark: writing the same records as Parquet and JSON lines")
        _write_files(spark, out, data)
        readers = _readers(spark, data_dir, out, data, value_size)
        del data
        active = [s for s in SOURCES if results.count[s].error is None]
        # Warm-up, untimed: WARMUP_ROUNDS of both queries on every source. The JVM compiles
        # the scan and aggregation code over the first queries of a session: measured here
        # (1 M rows, groupBy over read_topic's mirrors, 9 interleaved rounds) 500, 320, 240,
        # then ~190 ms from the fourth on; one count() per source before (the old warm-up)
        # left the first timed groupBy rounds cold, unevenly across sources.
        for _ in range(WARMUP_ROUNDS if repeat > 1 else 0):
            for source in list(active):
                try:
                    count_rows(readers[source], rows)
                    _group_by(readers[source], rows)
                except Exception as exc:
                    results.fail(source, f"{type(exc).__name__}: {str(exc)[:300]}")
                    active.remove(source)
        for rnd in range(repeat):
            # a different source first each round: none always runs right after another
            shift = rnd % len(active) if active else 0
            for source in active[shift:] + active[:shift]:
                for kind, samples, read in (
                    ("count()", results.count[source], count_rows),
                    ("groupBy(key)", results.group_by[source], _group_by),
                ):
                    label = f"spark {kind} {source} {rnd + 1}/{repeat}"
                    measure(
                        samples, progress, label, functools.partial(read, readers[source], rows)
                    )
        progress("spark: streaming sink (path, wire) and wire reads")
        try:
            results.sink = spark_writes(
                spark, work, out / "parquet", rows, repeat=repeat, progress=progress
            )
        except Exception as exc:  # e.g. the broker failed to start: report it in the rows
            results.sink.fail(f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
    return results
