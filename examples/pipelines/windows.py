"""Event-time windows with a watermark: departures per origin per hour.

Source: topic ``flights-by-time`` read as a stream (``format("seglog")`` through the broker),
event time the scheduled departure hour ``time_hour``, departed flights only (``dep_time``
not null). ``withWatermark("event_time", "2 hours")`` then a tumbling 1-hour window per
origin, output mode ``append``: a window is emitted once, when the watermark (the largest
event time seen, minus 2 hours) passes its end, and a record whose event time is below the
watermark when it arrives is dropped (Spark counts it in ``numRowsDroppedByWatermark``).

Sink (``foreachBatch``): each micro-batch's finished windows go to topic
``departures-by-hour`` (key ``origin|window start``, value JSON) and to Parquet under
``<out>/batch=<id>`` (overwritten per batch id, so a replayed batch rewrites itself).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from examples.flights.pipeline import FLIGHT_SCHEMA
from examples.pipelines.output import publish_and_save

__all__ = [
    "SOURCE_TOPIC",
    "TOPIC",
    "WATERMARK_DELAY_H",
    "departures_by_hour",
    "reference_windows",
    "run_windows",
]

SOURCE_TOPIC = "flights-by-time"
TOPIC = "departures-by-hour"
WATERMARK_DELAY_H = 2
COLUMNS = ["origin", "window_start", "departures"]


def departures_by_hour(values: DataFrame) -> DataFrame:
    """Finished 1-hour windows per origin from a stream of flight JSON values."""
    flights = values.select(F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f"))
    departed = (
        flights.select("f.origin", "f.dep_time", F.to_timestamp("f.time_hour").alias("event_time"))
        .where(F.col("dep_time").isNotNull())
        .withWatermark("event_time", f"{WATERMARK_DELAY_H} hours")
    )
    return (
        departed.groupBy(F.window("event_time", "1 hour"), "origin")
        .agg(F.count(F.lit(1)).alias("departures"))
        .select("origin", F.col("window.start").alias("window_start"), "departures")
    )


def _sink(bootstrap: str, out: Path) -> Callable[[DataFrame, int], None]:
    def write(batch: DataFrame, batch_id: int) -> None:
        key = F.concat_ws("|", "origin", F.date_format("window_start", "yyyy-MM-dd'T'HH:mm'Z'"))
        publish_and_save(
            batch, key, COLUMNS, bootstrap=bootstrap, topic=TOPIC, out=out / f"batch={batch_id}"
        )

    return write


def run_windows(
    spark: SparkSession, *, bootstrap: str, out: Path, checkpoint: Path
) -> list[dict[str, Any]]:
    """Run the query with ``trigger(availableNow=True)`` from its checkpoint; return the
    progress of each micro-batch (Spark's ``recentProgress``). Raises
    ``StreamingQueryException`` if the query fails."""
    values = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100000")
        .load()
    )
    query = (
        departures_by_hour(values)
        .writeStream.outputMode("append")
        .foreachBatch(_sink(bootstrap, out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .queryName("departures_by_hour")
        .start()
    )
    query.awaitTermination()
    return list(query.recentProgress)


def read_windows(out: Path) -> pd.DataFrame:
    """Every window written under ``out`` (all batches), sorted, as pandas."""
    frames = [pd.read_parquet(p) for p in sorted(out.glob("batch=*")) if any(p.glob("*.parquet"))]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    return _normalize(table)


def _normalize(table: pd.DataFrame) -> pd.DataFrame:
    table = table.loc[:, COLUMNS].copy()
    table["window_start"] = pd.to_datetime(table["window_start"], utc=True)
    table["departures"] = table["departures"].astype("int64")
    return table.sort_values(["origin", "window_start"]).reset_index(drop=True)


def reference_windows(flights: pd.DataFrame) -> pd.DataFrame:
    """The windows pandas expects to be emitted from ``flights`` loaded in time order: every
    (origin, hour) with departures whose window ends at or before the final watermark
    (latest departed event time minus the delay)."""
    departed = flights[flights["dep_time"].notna()].copy()
    departed["window_start"] = pd.to_datetime(departed["time_hour"], utc=True)
    watermark = departed["window_start"].max() - pd.Timedelta(hours=WATERMARK_DELAY_H)
    table = departed.groupby(["origin", "window_start"]).size().rename("departures").reset_index()
    table = table[table["window_start"] + pd.Timedelta(hours=1) <= watermark]
    return _normalize(table)
