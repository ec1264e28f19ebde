"""The row schema of the ``seglog`` data source: the schema of Spark's own Kafka source.

``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int`` and, only with ``includeHeaders=true``, ``headers array<struct<key
string, value binary>>`` (Spark's ``KafkaRecordToRowConverter``). ``timestampType`` is 0 for
CreateTime and 1 for LogAppendTime (record batch attribute bit 3).
"""

from __future__ import annotations

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

from seglog.columnar import ARROW_HEADERS_TYPE, arrow_schema

__all__ = ["ARROW_HEADERS_TYPE", "arrow_schema", "spark_schema"]


_HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


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
