"""Avro record schemas as Iceberg schemas (``value_schema`` mode), and the ``seglog``
column of record metadata.

Type mapping (Apache Iceberg's Avro mapping): boolean, int, long, float, double, bytes,
string as themselves; ``enum`` → string; ``fixed`` → fixed; ``record`` → struct;
``array`` → list; ``map`` → map<string, V>; a union of ``null`` and one type → that type,
optional; logical types ``date`` → date, ``timestamp-millis`` / ``timestamp-micros`` →
timestamptz, ``local-timestamp-*`` → timestamp, ``decimal`` → decimal(p, s), ``uuid`` →
string. Every column is optional, so that rows of older and newer schema versions fit one
table (a column a version lacks is null). Anything else (unions of several types,
recursive records) raises :class:`UnsupportedSchemaError`.

A ``value_schema`` table has the value's fields as columns plus ``seglog``, a struct of the
record's ``partition``, ``offset``, ``timestamp``, ``headers`` and ``key`` (Redpanda keeps
the same in its ``redpanda`` column), partitioned by ``hour(seglog.timestamp)``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

__all__ = [
    "META_COLUMN",
    "UnsupportedSchemaError",
    "avro_table_schema",
    "meta_field",
    "value_table_base",
]

META_COLUMN = "seglog"
"""The struct column of record metadata in a ``value_schema`` table."""

_PRIMITIVES: dict[str, IcebergType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: dict[str, IcebergType] = {
    "date": DateType(),
    "timestamp-millis": TimestamptzType(),
    "timestamp-micros": TimestamptzType(),
    "local-timestamp-millis": TimestampType(),
    "local-timestamp-micros": TimestampType(),
    "uuid": StringType(),
}


class UnsupportedSchemaError(ValueError):
    """An Avro schema (or one of its types) with no Iceberg column type here."""


def _convert(avro: Any, ids: Iterator[int], names: dict[str, Any], depth: int) -> IcebergType:
    if depth > 32:
        raise UnsupportedSchemaError("nested deeper than 32 levels (a recursive record?)")
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        if avro in names:
            return _convert(names[avro], ids, names, depth + 1)
        raise UnsupportedSchemaError(f"type {avro!r}")
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise UnsupportedSchemaError(f"union {json.dumps(avro)} (only [null, T])")
        return _convert(branches[0], ids, names, depth + 1)
    if not isinstance(avro, dict):
        raise UnsupportedSchemaError(f"type {avro!r}")
    kind = avro.get("type")
    logical = avro.get("logicalType")
    if logical == "decimal":
        return DecimalType(int(avro["precision"]), int(avro.get("scale", 0)))
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if kind in ("record", "enum", "fixed") and "name" in avro:
        names[avro["name"]] = avro
    if kind == "record":
        return StructType(*_fields(avro, ids, names, depth + 1))
    if kind == "enum":
        return StringType()
    if kind == "fixed":
        return FixedType(int(avro["size"]))
    if kind == "array":
        element_id = next(ids)
        element = _convert(avro["items"], ids, names, depth + 1)
        return ListType(element_id, element, element_required=False)
    if kind == "map":
        key_id, value_id = next(ids), next(ids)
        value = _convert(avro["values"], ids, names, depth + 1)
        return MapType(key_id, StringType(), value_id, value, value_required=False)
    return _convert(kind, ids, names, depth + 1)


def _fields(record: dict[str, Any], ids: Iterator[int], names: dict[str, Any], depth: int
            ) -> list[NestedField]:  # fmt: skip
    fields = []
    for f in record.get("fields", []):
        field_id = next(ids)
        fields.append(
            NestedField(field_id, f["name"], _convert(f["type"], ids, names, depth), required=False)
        )
    return fields


def avro_table_schema(schema_text: str) -> Schema:
    """The Iceberg schema of a ``value_schema`` table for values of the Avro record schema
    ``schema_text``: its fields (optional) and :data:`META_COLUMN`. Raises
    :class:`UnsupportedSchemaError` (also for a schema that is no record, or has a field
    named ``seglog``) and ``ValueError`` for text that is no JSON."""
    avro = json.loads(schema_text)
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise UnsupportedSchemaError("the value schema is no Avro record")
    ids = itertools.count(1)
    fields = _fields(avro, ids, {}, 0)
    if any(f.name == META_COLUMN for f in fields):
        raise UnsupportedSchemaError(f"a value field is named {META_COLUMN!r}")
    fields.append(meta_field(ids))
    return Schema(*fields)


def value_table_base() -> Schema:
    """The schema a ``value_schema`` table is created with: :data:`META_COLUMN` alone (the
    value's columns are added by the first schema seen)."""
    return Schema(meta_field(itertools.count(1)))


def meta_field(ids: Iterator[int]) -> NestedField:
    """The :data:`META_COLUMN` field (struct of ``partition`` int, ``offset`` long,
    ``timestamp`` timestamptz, ``headers`` list<struct<key string, value binary>>, ``key``
    binary), its ids taken from ``ids`` (the last column of a ``value_schema`` table)."""
    meta = StructType(
        NestedField(next(ids), "partition", IntegerType(), required=False),
        NestedField(next(ids), "offset", LongType(), required=False),
        NestedField(next(ids), "timestamp", TimestamptzType(), required=False),
        NestedField(
            next(ids), "headers",
            ListType(next(ids), StructType(
                NestedField(next(ids), "key", StringType(), required=False),
                NestedField(next(ids), "value", BinaryType(), required=False),
            ), element_required=False),
            required=False,
        ),
        NestedField(next(ids), "key", BinaryType(), required=False),
    )  # fmt: skip
    return NestedField(next(ids), META_COLUMN, meta, required=False)
