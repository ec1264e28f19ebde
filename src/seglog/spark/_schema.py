"""The row schema of the ``seglog`` data source: the schema of Spark's own Kafka source.

``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int`` and, only with ``includeHeaders=true``, ``headers array<struct<key
string, value binary>>`` (Spark's ``KafkaRecordToRowConverter``). ``timestampType`` is 0 for
CreateTime and 1 for LogAppendTime (record batch attribute bit 3).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["ARROW_HEADERS_TYPE", "arrow_schema", "spark_schema"]

_HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)

ARROW_HEADERS_TYPE = pa.list_(
    pa.field(
        "element",
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]),
    )
)
"""Arrow type of the ``headers`` column, as pyspark's ``to_arrow_schema`` spells it."""


def spark_schema(include_headers: bool = False) -> StructType:
    """The Spark schema of rows read from a topic (every field nullable, as Kafka's)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", _HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema ``read()`` yields: ``to_arrow_schema(spark_schema(), timezone="UTC")``.

    int32 partition/timestampType, int64 offset, ``timestamp[us, tz=UTC]``; pyspark checks
    the yielded batches against it field by field (DATA_SOURCE_RETURN_SCHEMA_MISMATCH).
    """
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", ARROW_HEADERS_TYPE))
    return pa.schema(fields)
