"""The Arrow schema of topic rows: the columns of Spark's Kafka source, as Arrow types.

``key binary, value binary, topic string, partition int32, offset int64, timestamp
timestamp[us, UTC], timestampType int32`` and, only with headers, ``headers
list<struct<key string, value binary>>`` — exactly what pyspark's ``to_arrow_schema`` makes
of the Spark schema (``seglog.spark.spark_schema``), so batches built here are accepted by a
Python data source and written as Parquet files Spark reads back with the same schema.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["ARROW_HEADERS_TYPE", "arrow_schema"]

ARROW_HEADERS_TYPE = pa.list_(
    pa.field(
        "element",
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]),
    )
)
"""Arrow type of the ``headers`` column, as pyspark's ``to_arrow_schema`` spells it."""


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
