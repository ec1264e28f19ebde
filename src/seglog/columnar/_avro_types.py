"""Avro and JSON Schema types as Arrow types, the way Spark maps them.

Avro (spark-avro's ``SchemaConverters.toSqlType``, then pyspark's ``to_arrow_type``):

==========================  ==========================================================
Avro                        Arrow (Spark)
==========================  ==========================================================
boolean, int, long          bool, int32, int64 (BooleanType, IntegerType, LongType)
float, double               float32, float64
string, enum                string
bytes, fixed                binary
int + ``date``              date32 (DateType)
long + ``timestamp-millis`` timestamp[us, UTC] (TimestampType)
/ ``timestamp-micros``
long + ``local-timestamp-*`` timestamp[us] (TimestampNTZType)
bytes/fixed + ``decimal``   decimal128(precision, scale) (DecimalType)
record                      struct (fields in order; nullable only if a union with null)
array                       list<element> (containsNull = element nullable)
map                         map<string, value> (valueContainsNull = value nullable)
[null, T] / [T, null]       T, nullable
[int, long] / [float,       int64 / float64 (widened, as spark-avro)
double] (+ null)
==========================  ==========================================================

Other unions (several non-null branches of other types) and recursive records are refused
with ValueError, as Spark refuses recursive types. JSON Schema (flat and nested objects):
``object`` with ``properties`` -> struct, ``string`` -> string, ``integer`` -> int64,
``number`` -> float64, ``boolean`` -> bool, ``array`` with ``items`` -> list, ``object``
with ``additionalProperties`` (a schema) and no ``properties`` -> map<string, T>; every
field nullable (JSON may omit any property).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

__all__ = ["avro_arrow_type", "json_schema_arrow_type"]

_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}

_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")


def avro_arrow_type(schema: str | dict[str, Any] | list[Any]) -> pa.DataType:
    """The Arrow type of values of the Avro ``schema`` (JSON text or parsed JSON).

    A record schema gives a struct type. Raises ValueError for what Spark cannot type
    (recursive records, general unions, a bare ``null``)."""
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    arrow, _ = _avro(parsed, {}, (), None)
    return arrow


def _fullname(node: dict[str, Any], namespace: str | None) -> tuple[str, str | None]:
    name = str(node["name"])
    space = node.get("namespace", namespace)
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    return (f"{space}.{name}" if space else name), space


def _avro(
    node: Any, names: dict[str, Any], seen: tuple[str, ...], namespace: str | None
) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of one Avro schema node; ``names`` collects named types."""
    if isinstance(node, list):
        return _union(node, names, seen, namespace)
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return _PRIMITIVES[node], False
        if node == "null":
            raise ValueError("a bare Avro null has no Spark type")
        full = node if "." in node or not namespace else f"{namespace}.{node}"
        target = names.get(full, names.get(node))
        if target is None:
            raise ValueError(f"unknown Avro type name {node!r}")
        if (target.get("type") == "record") and (full in seen or node in seen):
            raise ValueError(f"recursive Avro record {node!r} has no Spark type")
        return _avro(target, names, seen, namespace)
    if not isinstance(node, dict):
        raise ValueError(f"not an Avro schema: {node!r}")
    kind = node.get("type")
    logical = node.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _avro(kind, names, seen, namespace)
    if kind in ("record", "error"):
        full, space = _fullname(node, namespace)
        names[full] = node
        fields = []
        for field in node.get("fields", []):
            arrow, nullable = _avro(field["type"], names, (*seen, full), space)
            fields.append(pa.field(field["name"], arrow, nullable=nullable))
        return pa.struct(fields), False
    if kind in ("enum", "fixed"):
        full, _ = _fullname(node, namespace)
        names[full] = node
        if kind == "fixed" and logical == "decimal":
            return pa.decimal128(int(node["precision"]), int(node.get("scale", 0))), False
        return (pa.string() if kind == "enum" else pa.binary()), False
    if kind == "array":
        arrow, nullable = _avro(node["items"], names, seen, namespace)
        return pa.list_(pa.field("element", arrow, nullable=nullable)), False
    if kind == "map":
        arrow, nullable = _avro(node["values"], names, seen, namespace)
        return pa.map_(pa.string(), pa.field("value", arrow, nullable=nullable)), False
    if kind == "int" and logical == "date":
        return pa.date32(), False
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return _TIMESTAMP_UTC, False
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("us"), False
    if kind == "bytes" and logical == "decimal":
        return pa.decimal128(int(node["precision"]), int(node.get("scale", 0))), False
    return _avro(kind, names, seen, namespace)


def _union(
    branches: list[Any], names: dict[str, Any], seen: tuple[str, ...], namespace: str | None
) -> tuple[pa.DataType, bool]:
    nullable = "null" in branches
    rest = [b for b in branches if b != "null"]
    if len(rest) == 1:
        arrow, _ = _avro(rest[0], names, seen, namespace)
        return arrow, nullable
    if set(map(str, rest)) in ({"int", "long"}, {"float", "double"}):
        return (pa.int64() if "long" in rest else pa.float64()), nullable
    raise ValueError(
        f"Avro union {branches!r}: only unions of one type with null (and int/long, "
        "float/double) have a Spark type here"
    )


def json_schema_arrow_type(schema: str | dict[str, Any]) -> pa.DataType:
    """The Arrow type of documents of a JSON Schema whose root is an ``object``; every
    field nullable. Raises ValueError for types outside the table in the module docstring."""
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    arrow = _json(parsed)
    if not pa.types.is_struct(arrow):
        raise ValueError("a JSON Schema read as columns needs an object at its root")
    return arrow


_JSON_SCALARS = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}


def _json(node: Any) -> pa.DataType:
    if not isinstance(node, dict):
        raise ValueError(f"not a JSON Schema: {node!r}")
    kind = node.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        if len(rest) != 1:
            raise ValueError(f"JSON Schema type {kind!r}: one type (and null) only")
        kind = rest[0]
    if kind is None and "properties" in node:
        kind = "object"
    extra = node.get("additionalProperties")
    if kind == "object" and "properties" not in node and isinstance(extra, dict):
        return pa.map_(pa.string(), _json(extra))
    if kind == "object":
        props = node.get("properties", {})
        return pa.struct([pa.field(name, _json(sub)) for name, sub in props.items()])
    if kind == "array":
        return pa.list_(pa.field("element", _json(node.get("items", {"type": "string"}))))
    if kind in _JSON_SCALARS:
        return _JSON_SCALARS[kind]
    raise ValueError(f"JSON Schema type {kind!r} has no column type here")
