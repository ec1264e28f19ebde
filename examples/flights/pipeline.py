"""The flights pipeline: a Structured Streaming query from topic ``flights`` to delays.

Source: ``spark.readStream.format("seglog")`` over the broker's data directory (read-only,
``path`` option: executors read the segment files) or through the broker (``wire``:
``kafka.bootstrap.servers``, executors fetch over the Kafka protocol), topic ``flights``
from the earliest offset, at most ``max_offsets_per_trigger`` records per micro-batch, run
with ``trigger(availableNow=True)`` (every record present at start, in several
micro-batches, then stop).

The values are Avro (subject ``flights-value``): ``valueFormat=avro`` gives ``value`` as a
struct of the flight's typed fields (the schema from the broker's registry in wire mode,
from its data directory's ``_schemas`` in path mode). Computation: per (origin,
carrier, hour): flights, cancelled, late_departures, mean_dep_delay_min and share_late,
with the definitions of :func:`examples.flights.data.reference_delays`.

Sink: output mode ``complete`` with ``foreachBatch``. Each micro-batch's DataFrame is the
whole current result table (one row per group); it is

1. published to topic ``flight-delays`` through the seglog sink (over the broker,
   ``kafka.bootstrap.servers``): key ``"origin|carrier|hour"``, value the row as a JSON
   object. The topic is a *changelog*: every micro-batch republishes each group's
   current row, so the last record per key is the current value (how Kafka users read
   an aggregate topic; a compacted topic would keep just those);
2. written to Parquet at ``parquet_path`` with mode ``overwrite``, so the directory
   holds the table of the last completed micro-batch: the final result.

Both writes are idempotent per micro-batch (a replayed batch rewrites the same rows), so
the checkpoint's exactly-once offsets carry over to the outputs' final state.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the usual PySpark alias
from pyspark.sql.types import StructType

from examples.flights.data import GROUP_COLUMNS, RESULT_COLUMNS

__all__ = [
    "DELAYS_TOPIC",
    "FLIGHTS_TOPIC",
    "FLIGHT_SCHEMA",
    "BatchProgress",
    "delays_table",
    "make_spark_session",
    "normalize",
    "read_delays_parquet",
    "run_pipeline",
]

FLIGHTS_TOPIC = "flights"
DELAYS_TOPIC = "flight-delays"

FLIGHT_SCHEMA = (
    "year INT, month INT, day INT, dep_time INT, sched_dep_time INT, dep_delay INT, "
    "arr_time INT, sched_arr_time INT, arr_delay INT, carrier STRING, flight INT, "
    "tailnum STRING, origin STRING, dest STRING, air_time INT, distance INT, hour INT, "
    "minute INT, time_hour STRING"
)
"""DDL schema of one value of topic ``flights`` (delays in minutes, times as HHMM)."""

LATE_AFTER_MIN = 15
"""A departure is late when dep_delay > 15 minutes (the US DOT's on-time threshold)."""


@dataclass(frozen=True)
class BatchProgress:
    """One completed micro-batch, from ``StreamingQuery.recentProgress``."""

    batch_id: int
    input_rows: int  # records read from topic ``flights`` in this micro-batch
    total_rows: int  # records read so far by the query
    rows_per_second: float  # processedRowsPerSecond reported by Spark
    duration_ms: int  # triggerExecution duration


def make_spark_session(app_name: str = "seglog-flights", master: str = "local[2]") -> SparkSession:
    """A SparkSession for the demo: loopback, UI off, 2 shuffle partitions, quiet.

    master: ``local[2]`` (default), ``local-cluster[2,1,1024]`` or a standalone cluster's
    ``spark://host:port``. Python workers, on the driver's machine or a worker's, run this
    interpreter (``spark.pyspark.python``), so they import the same seglog and pyarrow: a
    cluster's machines need the same virtual environment at the same path. Registers
    ``format("seglog")``.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, and no warning
    log4j = Path(__file__).with_name("log4j2.properties")
    builder = SparkSession.builder.master(master)
    if not master.startswith("local["):  # executors in JVMs of their own
        builder = (
            builder.config("spark.pyspark.python", sys.executable)
            .config("spark.executor.memory", "1g")
            .config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
            .config(
                "spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}"
            )
        )
    spark = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j.as_uri()}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import seglog.spark  # noqa: PLC0415 - needs pyspark, imported with it

    seglog.spark.register(spark)
    return spark


def delays_table(flights_values: DataFrame) -> DataFrame:
    """The aggregation, from a DataFrame whose ``value`` column is a struct of the flight's
    fields (``valueFormat=avro``), or binary / string JSON (parsed with FLIGHT_SCHEMA).

    Returns one row per (origin, carrier, hour) with :data:`RESULT_COLUMNS`; counts are
    long, mean_dep_delay_min and share_late double (null when every flight of the group
    was cancelled).
    """
    if isinstance(flights_values.schema["value"].dataType, StructType):
        flights = flights_values.select("value.*")
    else:
        flights = flights_values.select(
            F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f")
        ).select("f.*")
    departed = F.col("dep_time").isNotNull()
    table = flights.groupBy(*GROUP_COLUMNS).agg(
        F.count(F.lit(1)).alias("flights"),
        F.count(F.when(~departed, 1)).alias("cancelled"),
        F.count(F.when(departed & (F.col("dep_delay") > LATE_AFTER_MIN), 1)).alias(
            "late_departures"
        ),
        F.avg(F.when(departed, F.col("dep_delay").cast("double"))).alias("mean_dep_delay_min"),
    )
    departed_count = F.col("flights") - F.col("cancelled")
    return table.withColumn(
        "share_late",
        F.when(departed_count > 0, F.col("late_departures") / departed_count),
    ).select(*RESULT_COLUMNS)


def _publish_and_save(
    bootstrap: str, topic: str, parquet_path: Path
) -> Callable[[DataFrame, int], None]:
    def write_batch(table: DataFrame, batch_id: int) -> None:
        del batch_id  # both writes are idempotent: a replay rewrites the same rows
        table.persist()
        try:
            key = F.concat_ws("|", *GROUP_COLUMNS)
            value = F.to_json(F.struct(*RESULT_COLUMNS))
            (
                table.select(key.alias("key"), value.alias("value"))
                .write.format("seglog")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", topic)
                .mode("append")
                .save()
            )
            table.coalesce(1).write.mode("overwrite").parquet(str(parquet_path))
        finally:
            table.unpersist()

    return write_batch


def _progress(raw: dict[str, Any], total: int) -> BatchProgress:
    return BatchProgress(
        batch_id=int(raw["batchId"]),
        input_rows=int(raw.get("numInputRows", 0)),
        total_rows=total,
        rows_per_second=float(raw.get("processedRowsPerSecond") or 0.0),
        duration_ms=int(raw.get("durationMs", {}).get("triggerExecution", 0)),
    )


def run_pipeline(
    spark: SparkSession,
    *,
    source_path: Path,
    bootstrap: str,
    parquet_path: Path,
    checkpoint_dir: Path,
    max_offsets_per_trigger: int = 100_000,
    on_batch: Callable[[BatchProgress], None] | None = None,
    source: str = "path",
) -> pd.DataFrame:
    """Run the streaming query to the end of topic ``flights``; return the final table.

    source_path: the broker's data directory (read directly, read-only, when ``source`` is
    ``"path"``); bootstrap: ``host:port`` of that broker, through which topic
    ``flight-delays`` is written, and topic ``flights`` read when ``source`` is ``"wire"``;
    parquet_path: output directory (overwritten); checkpoint_dir: the query's checkpoint
    (use a fresh one to recompute from the earliest offset). on_batch is called in the
    driver for each completed micro-batch. Returns the Parquet table as pandas, columns
    :data:`RESULT_COLUMNS` sorted by key (counts and hour int64). Raises
    ``pyspark.errors.StreamingQueryException`` if the query fails.
    """
    if source not in ("path", "wire"):
        raise ValueError(f"source must be path or wire, not {source!r}")
    reader = spark.readStream.format("seglog")
    if source == "path":
        reader = reader.option("path", str(source_path))
    else:
        reader = reader.option("kafka.bootstrap.servers", bootstrap)
    flights = (
        reader.option("subscribe", FLIGHTS_TOPIC)
        .option("valueFormat", "avro")  # value: a struct of the registered Avro schema
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
    )
    query = (
        delays_table(flights)
        .writeStream.outputMode("complete")
        .foreachBatch(_publish_and_save(bootstrap, DELAYS_TOPIC, parquet_path))
        .option("checkpointLocation", str(checkpoint_dir))
        .trigger(availableNow=True)
        .queryName("flight_delays")
        .start()
    )
    seen: set[int] = set()
    total = 0

    def report() -> None:
        nonlocal total
        for raw in query.recentProgress:
            batch_id = int(raw["batchId"])
            if batch_id in seen:
                continue
            seen.add(batch_id)
            total += int(raw.get("numInputRows", 0))
            if on_batch is not None:
                on_batch(_progress(raw, total))

    try:
        while not query.awaitTermination(1):
            report()
        report()
    finally:
        if query.isActive:
            query.stop()
    return read_delays_parquet(spark, parquet_path)


def read_delays_parquet(spark: SparkSession, parquet_path: Path) -> pd.DataFrame:
    """The result table stored at ``parquet_path`` as pandas, sorted by key."""
    return normalize(cast(pd.DataFrame, spark.read.parquet(str(parquet_path)).toPandas()))


def normalize(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns :data:`RESULT_COLUMNS` in order, sorted by key, counts and hour int64."""
    frame = frame.loc[:, list(RESULT_COLUMNS)].copy()
    for name in ("hour", "flights", "cancelled", "late_departures"):
        frame[name] = frame[name].astype("int64")
    for name in ("mean_dep_delay_min", "share_late"):
        frame[name] = frame[name].astype("float64")
    return frame.sort_values(list(GROUP_COLUMNS)).reset_index(drop=True)
