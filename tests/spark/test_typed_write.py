"""Typed writes in path mode: a struct ``value`` encoded with the subject's registered Avro
schema in Confluent's wire format, read back by fastavro and by a typed read."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import fastavro
import pytest
from pyspark.sql.types import (
    DoubleType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from tests.columnar.test_typed import FLIGHT_V1
from tests.spark.test_typed_read import flight, store_schema

from seglog.spark._typed_write import avro_schema_of
from seglog.storage import DataDir


def test_avro_schema_of_a_spark_struct() -> None:
    struct = StructType([
        StructField("a", IntegerType(), False),
        StructField("at", TimestampType()),
        StructField("inner", StructType([StructField("x", DoubleType())])),
    ])  # fmt: skip
    assert avro_schema_of(struct) == {
        "type": "record",
        "name": "topLevelRecord",
        "fields": [
            {"name": "a", "type": "int"},
            {"name": "at", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
            {
                "name": "inner",
                "type": [
                    {
                        "type": "record",
                        "name": "inner",
                        "namespace": "topLevelRecord",
                        "fields": [{"name": "x", "type": ["double", "null"]}],
                    },
                    "null",
                ],
            },
        ],
    }


def test_sink_encodes_with_the_registered_schema(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "data"
    with DataDir(path) as data_dir:
        store_schema(data_dir, "out-value", 1, 7, FLIGHT_V1)
    rows = [flight(i) for i in range(6)]
    value_type = StructType([
        StructField("carrier", StringType(), False),
        StructField("flight", IntegerType(), False),
        StructField("delay", DoubleType()),
    ])  # fmt: skip
    df = spark.createDataFrame(
        [(r,) for r in rows], StructType([StructField("value", value_type, True)])
    )
    df.write.format("seglog").option("topic", "out").option("valueFormat", "avro").mode(
        "append"
    ).save(str(path))
    with DataDir(path, create=False, read_only=True) as data_dir:
        stored = [m.value for m in data_dir.log("out", 0).consume(-2, 100)[1]]
    assert all(v is not None and v[:5] == b"\x00\x00\x00\x00\x07" for v in stored)
    decoded = [fastavro.schemaless_reader(io.BytesIO(v[5:]), FLIGHT_V1, None) for v in stored]
    assert sorted(decoded, key=lambda r: r["flight"]) == rows
    back = (
        spark.read.format("seglog").option("subscribe", "out").option("valueFormat", "avro")
    ).load(str(path))
    assert sorted((r.value.asDict() for r in back.collect()), key=lambda r: r["flight"]) == rows
    with pytest.raises(Exception, match=r"auto\.register\.schemas"):
        df.write.format("seglog").option("topic", "other").option("valueFormat", "avro").mode(
            "append"
        ).save(str(path))
