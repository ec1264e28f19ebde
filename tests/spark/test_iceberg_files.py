"""Spark reads an Iceberg topic's table without Iceberg's runtime jar: the Parquet data
files of its current snapshot (``seglog.iceberg.data_files``) through Spark's own Parquet
scan hold exactly the rows pyiceberg reads, with the ``key_value`` columns and types."""

from __future__ import annotations

import uuid
from pathlib import Path

from pyspark.sql import SparkSession

import seglog
import seglog.iceberg as ice
from seglog.storage import open_log


def test_spark_reads_the_table_files(spark: SparkSession, tmp_path: Path) -> None:
    catalog = ice.open_catalog(ice.catalog_properties(tmp_path / "data"))
    table = ice.load_topic_table(catalog, "clicks")
    hour = 3600 * 1000
    base = 1_700_000_000_000 // hour * hour
    with open_log(tmp_path / "clicks-0", create=True) as plog:
        plog.publish([
            seglog.Message(key=b"u%d" % (i % 5), value=b"click %d" % i,
                           timestamp=base + (i % 3) * hour, headers=[("src", b"web")])
            for i in range(300)
        ])  # fmt: skip
        ice.commit_ranges(
            table, topic="clicks", topic_id=uuid.uuid4(), logs={0: plog},
            ranges=[ice.OffsetRange(0, 0, 300)], committed={},
        )  # fmt: skip
    files = ice.data_files(catalog.load_table(("seglog", "clicks")))
    assert len(files) == 3  # one per hour
    df = spark.read.parquet(*files)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("headers", "array<struct<key:string,value:binary>>"),
    ]  # fmt: skip
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    assert [r["offset"] for r in rows] == list(range(300))
    assert rows[7]["value"] == b"click 7"
    assert rows[7]["key"] == b"u2"
    assert rows[7]["headers"][0]["value"] == b"web"
    by_hour = df.groupBy((df["timestamp"].cast("long") / 3600).cast("long")).count().collect()
    assert sorted(r["count"] for r in by_hour) == [100, 100, 100]
