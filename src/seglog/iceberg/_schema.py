"""The Iceberg schema and partition spec of a ``key_value`` table, and its rows from the
columnar decoder.

Columns (Iceberg types; field ids fixed)::

    1 key binary (optional)          5 timestamp timestamptz (µs, UTC; required)
    2 value binary (optional)        6 headers list<struct<key string, value binary>>
    3 partition int (required)         (optional; element 7, fields 8 and 9)
    4 offset long (required)

Partitioned by ``hour(timestamp)`` (Iceberg's hour transform, field ``timestamp_hour``),
as Redpanda's default ``(hour(redpanda.timestamp))``. ``timestamp`` is the record's
timestamp as a Kafka consumer sees it (CreateTime, or the batch's LogAppendTime).
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import HourTransform
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

__all__ = ["DLQ_SCHEMA", "KEY_VALUE_SCHEMA", "hour_spec", "key_value_rows"]

KEY_VALUE_SCHEMA = Schema(
    NestedField(1, "key", BinaryType(), required=False),
    NestedField(2, "value", BinaryType(), required=False),
    NestedField(3, "partition", IntegerType(), required=True),
    NestedField(4, "offset", LongType(), required=True),
    NestedField(5, "timestamp", TimestamptzType(), required=True),
    NestedField(
        6,
        "headers",
        ListType(
            7,
            StructType(
                NestedField(8, "key", StringType(), required=False),
                NestedField(9, "value", BinaryType(), required=False),
            ),
            element_required=False,
        ),
        required=False,
    ),
)
"""The ``key_value`` table's schema."""

DLQ_SCHEMA = Schema(
    *KEY_VALUE_SCHEMA.fields, NestedField(10, "reason", StringType(), required=False)
)
"""A dead-letter table (``value_schema`` mode): the ``key_value`` columns and why the
value did not decode."""

_DECODED = ("key", "value", "partition", "offset", "timestamp", "headers")


def hour_spec(schema: Schema, column: str = "timestamp") -> PartitionSpec:
    """``hour(<column>)`` over ``schema`` (``seglog.timestamp`` in a ``value_schema``
    table)."""
    source = schema.find_field(column).field_id
    return PartitionSpec(
        PartitionField(source_id=source, field_id=1000, transform=HourTransform(),
                       name="timestamp_hour")
    )  # fmt: skip


def key_value_rows(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """Decoded topic rows (``seglog.columnar.decode_batches(..., include_headers=True)``)
    as a table of ``schema`` (the table's Arrow schema: ``Table.schema().as_arrow()``):
    ``topic`` and ``timestampType`` dropped, nullability as the table's."""
    table = pa.Table.from_batches(batches).select(list(_DECODED))
    return table.cast(schema)
