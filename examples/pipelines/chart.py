"""Mean departure delay by hour of the day and carrier: a Spark batch query and a PNG chart.

The query reads topic ``flights-by-time`` through the broker and averages ``dep_delay``
(minutes, departed flights) per (carrier, hour of scheduled departure). The chart draws
one line per carrier for the ``top`` carriers by departures (matplotlib, Agg backend: no
display needed).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from examples.flights.pipeline import FLIGHT_SCHEMA
from examples.pipelines.windows import SOURCE_TOPIC

mpl.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["delay_by_hour_and_carrier", "plot_delay_by_hour", "reference_delay_by_hour"]

COLUMNS = ["carrier", "hour", "flights", "mean_dep_delay_min"]


def delay_by_hour_and_carrier(spark: SparkSession, bootstrap: str) -> pd.DataFrame:
    """(carrier, hour) → departed flights and mean departure delay, as pandas."""
    table = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .load()
        .select(F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f"))
        .where(F.col("f.dep_time").isNotNull())
        .groupBy("f.carrier", "f.hour")
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.avg(F.col("f.dep_delay").cast("double")).alias("mean_dep_delay_min"),
        )
        .toPandas()
    )
    return normalize(table)


def normalize(table: pd.DataFrame) -> pd.DataFrame:
    """Columns in order, sorted by (carrier, hour), counts int64."""
    table = table.loc[:, COLUMNS].copy()
    for name in ("hour", "flights"):
        table[name] = table[name].astype("int64")
    table["mean_dep_delay_min"] = table["mean_dep_delay_min"].astype("float64")
    return table.sort_values(["carrier", "hour"]).reset_index(drop=True)


def reference_delay_by_hour(flights: pd.DataFrame) -> pd.DataFrame:
    """The same table with pandas alone."""
    departed = flights[flights["dep_time"].notna()]
    table = (
        departed.groupby(["carrier", "hour"])
        .agg(flights=("dep_delay", "size"), mean_dep_delay_min=("dep_delay", "mean"))
        .reset_index()
    )
    return normalize(table)


def plot_delay_by_hour(
    table: pd.DataFrame, path: Path, airlines: dict[str, str] | None = None, top: int = 6
) -> Path:
    """Write a PNG line chart (one line per carrier, the ``top`` by departures) to ``path``."""
    busiest = table.groupby("carrier")["flights"].sum().nlargest(top).index
    figure, axes = plt.subplots(figsize=(9, 4.8), dpi=110)
    for carrier in busiest:
        rows = table[(table["carrier"] == carrier) & (table["flights"] >= 30)]
        label = f"{carrier} {airlines.get(carrier, '')}".strip() if airlines else carrier
        axes.plot(rows["hour"], rows["mean_dep_delay_min"], marker="o", markersize=3, label=label)
    axes.set_xticks(sorted(table["hour"].unique()))
    axes.set_xlabel("hour of scheduled departure (local time)")
    axes.set_ylabel("mean departure delay (min)")
    axes.set_title("NYC departures 2013: delay builds through the day (hours with >= 30 flights)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
