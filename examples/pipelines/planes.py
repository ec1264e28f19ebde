"""``planes`` as a compacted topic keyed by tail number, read back as a changelog table.

The topic (``cleanup.policy=compact``) gets one record per row of ``planes.csv`` (key the
tail number, value the row as JSON), then changes, as a table's changelog would carry them:
updates that shorten manufacturer names (``AIRBUS INDUSTRIE`` → ``AIRBUS``, ...) and
tombstones (null values) for planes whose year of manufacture is unknown. Read back with a
batch ``format("seglog")`` query, the table is the latest value per key with tombstoned
keys removed — the same whether or not the log cleaner has compacted the topic yet.

Joined with the departed flights of topic ``flights-by-time`` on ``tailnum``: flights and
mean departure delay per manufacturer and decade of manufacture, to Parquet and topic
``delay-by-manufacturer``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812

from examples.flights.pipeline import FLIGHT_SCHEMA
from examples.pipelines.output import publish_and_save
from examples.pipelines.tables import planes_frame
from examples.pipelines.windows import SOURCE_TOPIC

__all__ = [
    "PLANES_TOPIC",
    "RENAMES",
    "TOPIC",
    "changelog_records",
    "delay_by_manufacturer",
    "planes_table",
    "reference_planes",
]

PLANES_TOPIC = "planes"
TOPIC = "delay-by-manufacturer"
RENAMES = {
    "AIRBUS INDUSTRIE": "AIRBUS",
    "MCDONNELL DOUGLAS AIRCRAFT CO": "MCDONNELL DOUGLAS",
    "MCDONNELL DOUGLAS CORPORATION": "MCDONNELL DOUGLAS",
    "CANADAIR LTD": "CANADAIR",
}
"""Manufacturer names the changelog's updates shorten."""
PLANE_SCHEMA = (
    "tailnum STRING, year INT, type STRING, manufacturer STRING, model STRING, "
    "engines INT, seats INT, speed INT, engine STRING"
)
GROUP = ["manufacturer", "decade"]
COLUMNS = [*GROUP, "flights", "mean_dep_delay_min"]


def _json_value(value: object) -> object:
    """NaN → null; a whole float (an int column with missing values) → int."""
    if pd.isna(value):  # type: ignore[call-overload]
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _row(record: dict[str, object]) -> bytes:
    return json.dumps({k: _json_value(v) for k, v in record.items()}).encode()


def changelog_records() -> Iterator[tuple[bytes, bytes | None]]:
    """``(key, value)`` of the changelog: every plane, then updates, then tombstones."""
    planes = planes_frame()
    records = planes.astype(object).to_dict("records")
    for record in records:
        yield str(record["tailnum"]).encode(), _row(record)
    for record in records:
        if record["manufacturer"] in RENAMES:
            yield (
                str(record["tailnum"]).encode(),
                _row({**record, "manufacturer": RENAMES[str(record["manufacturer"])]}),
            )
    for record in records:
        if pd.isna(record["year"]):
            yield str(record["tailnum"]).encode(), None


def planes_table(spark: SparkSession, bootstrap: str) -> DataFrame:
    """The changelog topic as a table: latest record per key, tombstoned keys removed."""
    changelog = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", PLANES_TOPIC)
        .load()
    )
    latest = Window.partitionBy("key").orderBy(F.col("partition"), F.col("offset").desc())
    return (
        changelog.withColumn("rank", F.row_number().over(latest))
        .where((F.col("rank") == 1) & F.col("value").isNotNull())
        .select(F.from_json(F.col("value").cast("string"), PLANE_SCHEMA).alias("p"))
        .select("p.*")
    )


def delay_by_manufacturer(spark: SparkSession, bootstrap: str, out: Path) -> pd.DataFrame:
    """Join flights with the planes table; write Parquet and the topic; return the table."""
    flights = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .load()
        .select(F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f"))
        .select("f.tailnum", "f.dep_time", "f.dep_delay")
        .where(F.col("dep_time").isNotNull())
    )
    planes = planes_table(spark, bootstrap).select(
        "tailnum", "manufacturer", (F.floor(F.col("year") / 10) * 10).cast("int").alias("decade")
    )
    table = (
        flights.join(planes, "tailnum")
        .groupBy(*GROUP)
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.avg(F.col("dep_delay").cast("double")).alias("mean_dep_delay_min"),
        )
    )
    key = F.concat_ws("|", "manufacturer", "decade")
    publish_and_save(table, key, COLUMNS, bootstrap=bootstrap, topic=TOPIC, out=out)
    return normalize(pd.read_parquet(out))


def normalize(table: pd.DataFrame) -> pd.DataFrame:
    """Columns in order, sorted by the group, counts and decade int64."""
    table = table.loc[:, COLUMNS].copy()
    for name in ("decade", "flights"):
        table[name] = table[name].astype("int64")
    table["mean_dep_delay_min"] = table["mean_dep_delay_min"].astype("float64")
    return table.sort_values(GROUP).reset_index(drop=True)


def reference_planes(flights: pd.DataFrame) -> pd.DataFrame:
    """The same table with pandas alone: planes.csv with the renames applied and the
    planes of unknown year removed, inner-joined with departed flights."""
    planes = planes_frame()
    planes = planes[planes["year"].notna()].copy()
    planes["manufacturer"] = planes["manufacturer"].replace(RENAMES)
    planes["decade"] = (planes["year"] // 10 * 10).astype("int64")
    departed = flights[flights["dep_time"].notna()]
    joined = departed.merge(planes[["tailnum", "manufacturer", "decade"]], on="tailnum")
    table = (
        joined.groupby(GROUP)
        .agg(flights=("dep_delay", "size"), mean_dep_delay_min=("dep_delay", "mean"))
        .reset_index()
    )
    return normalize(table)
