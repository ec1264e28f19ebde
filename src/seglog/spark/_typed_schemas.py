"""The schema a typed write registers with ``auto.register.schemas=true``, derived from
the column's Spark type, one function per format.

- Avro (``avro_schema_of``): spark-avro's ``toAvroType``: record ``topLevelRecord``,
  nested records named after their field, a nullable field a union with null, timestamp
  -> ``timestamp-micros``, date -> ``date``, decimal -> ``bytes`` + ``decimal``.
- JSON Schema (``json_schema_of``, draft 7): struct -> ``object`` with ``properties`` and
  ``required`` (the fields that are not nullable), a nullable field ``type: [T, "null"]``;
  integral types -> ``integer``, float/double/decimal -> ``number``, boolean, string;
  timestamp -> ``string`` + ``format: date-time`` (RFC 3339 in UTC, as Confluent's JSON
  Schema serializer writes ``java.time.Instant``), timestamp without time zone ->
  ``string`` (local date-time text), date -> ``string`` + ``format: date``, binary ->
  ``string`` + ``contentEncoding: base64``; array -> ``array`` + ``items``; map ->
  ``object`` + ``additionalProperties``. The typed read maps date-time and date strings
  back to string columns.
- Protobuf (``proto_schema_of``, proto3 text): struct -> message ``topLevelRecord``,
  a nested struct a nested message named after its field (CamelCase); fields numbered
  1, 2, ... in column order; a nullable scalar ``optional`` (presence: reads back as
  null); array -> ``repeated``, map -> ``map<K, V>`` (string, integral or boolean keys);
  timestamp (either kind) -> ``google.protobuf.Timestamp``; byte/short/int -> int32,
  long -> int64, float, double, bool, string, binary -> bytes. No Protobuf type holds a
  date, a decimal, an array of arrays or maps, a map of arrays or maps, or a null
  element of an array: ValueError.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["avro_schema_of", "json_schema_of", "proto_schema_of"]

_AVRO: dict[type, Any] = {
    BooleanType: "boolean",
    ByteType: "int",
    ShortType: "int",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    DateType: {"type": "int", "logicalType": "date"},
    TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
}


def avro_schema_of(data_type: DataType, name: str = "topLevelRecord", space: str = "") -> Any:
    """The Avro schema spark-avro's ``toAvroType`` makes of a Spark type (not nullable at
    this level; fields add their null unions). ValueError for types Avro cannot hold."""
    if isinstance(data_type, StructType):
        fields = []
        for field in data_type.fields:
            inner = avro_schema_of(field.dataType, field.name, f"{space}.{name}".strip("."))
            fields.append({"name": field.name, "type": _avro_nullable(inner, field.nullable)})
        record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if space:
            record["namespace"] = space
        return record
    if isinstance(data_type, ArrayType):
        items = avro_schema_of(data_type.elementType, name, space)
        return {"type": "array", "items": _avro_nullable(items, data_type.containsNull)}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise ValueError(f"Avro maps have string keys, not {data_type.keyType.simpleString()}")
        values = avro_schema_of(data_type.valueType, name, space)
        return {"type": "map", "values": _avro_nullable(values, data_type.valueContainsNull)}
    if isinstance(data_type, DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    simple = _AVRO.get(type(data_type))
    if simple is None:
        raise ValueError(f"no Avro type for Spark type {data_type.simpleString()}")
    return simple


def _avro_nullable(schema: Any, nullable: bool) -> Any:
    return [schema, "null"] if nullable else schema


_JSON: dict[type, dict[str, Any]] = {
    BooleanType: {"type": "boolean"},
    ByteType: {"type": "integer"},
    ShortType: {"type": "integer"},
    IntegerType: {"type": "integer"},
    LongType: {"type": "integer"},
    FloatType: {"type": "number"},
    DoubleType: {"type": "number"},
    DecimalType: {"type": "number"},
    StringType: {"type": "string"},
    BinaryType: {"type": "string", "contentEncoding": "base64"},
    DateType: {"type": "string", "format": "date"},
    TimestampType: {"type": "string", "format": "date-time"},
    TimestampNTZType: {"type": "string"},
}


def json_schema_of(data_type: DataType, *, root: bool = True) -> dict[str, Any]:
    """The JSON Schema (draft 7) of a Spark type, as the module docstring lays out
    (not nullable at this level; fields and elements add ``null``). ValueError for a type
    JSON cannot hold."""
    schema: dict[str, Any]
    if isinstance(data_type, StructType):
        properties = {
            f.name: _json_nullable(json_schema_of(f.dataType, root=False), f.nullable)
            for f in data_type.fields
        }
        schema = {"type": "object", "properties": properties}
        required = [f.name for f in data_type.fields if not f.nullable]
        if required:
            schema["required"] = required
        if root:
            schema = {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "title": "topLevelRecord",
                **schema,
            }
        return schema
    if isinstance(data_type, ArrayType):
        items = json_schema_of(data_type.elementType, root=False)
        return {"type": "array", "items": _json_nullable(items, data_type.containsNull)}
    if isinstance(data_type, MapType):
        values = json_schema_of(data_type.valueType, root=False)
        return {
            "type": "object",
            "additionalProperties": _json_nullable(values, data_type.valueContainsNull),
        }
    simple = _JSON.get(type(data_type))
    if simple is None:
        raise ValueError(f"no JSON Schema type for Spark type {data_type.simpleString()}")
    return dict(simple)


def _json_nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    if not nullable:
        return schema
    return {**schema, "type": [schema["type"], "null"]}


_PROTO: dict[type, str] = {
    BooleanType: "bool",
    ByteType: "int32",
    ShortType: "int32",
    IntegerType: "int32",
    LongType: "int64",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    TimestampType: "google.protobuf.Timestamp",
    TimestampNTZType: "google.protobuf.Timestamp",
}
_PROTO_KEYS = (StringType, ByteType, ShortType, IntegerType, LongType, BooleanType)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TIMESTAMP_IMPORT = 'import "google/protobuf/timestamp.proto";'


def proto_schema_of(data_type: StructType, name: str = "topLevelRecord") -> str:
    """The proto3 schema text of a Spark struct, as the module docstring lays out.
    ValueError for a type or a field name Protobuf cannot hold."""
    body = _proto_message(data_type, name, "")
    head = ['syntax = "proto3";']
    if any("google.protobuf.Timestamp" in line for line in body):
        head.append(_TIMESTAMP_IMPORT)
    return "\n".join([*head, "", *body, ""])


def _proto_message(struct: StructType, name: str, indent: str) -> list[str]:
    lines = [f"{indent}message {name} {{"]
    inner = indent + "  "
    taken = set(struct.fieldNames())
    for number, field in enumerate(struct.fields, start=1):
        if not _IDENTIFIER.match(field.name):
            raise ValueError(f"field name {field.name!r} is not a Protobuf identifier")
        kind = field.dataType
        nested = _camel(field.name)
        if nested in taken:
            nested += "Message"
        if isinstance(kind, ArrayType):
            element = _proto_single(kind.elementType, nested, inner, lines, "array element")
            lines.append(f"{inner}repeated {element} {field.name} = {number};")
        elif isinstance(kind, MapType):
            if not isinstance(kind.keyType, _PROTO_KEYS):
                raise ValueError(
                    f"Protobuf map keys are text, integers or booleans, not "
                    f"{kind.keyType.simpleString()} (field {field.name!r})"
                )
            key = _PROTO[type(kind.keyType)]
            value = _proto_single(kind.valueType, nested + "Value", inner, lines, "map value")
            lines.append(f"{inner}map<{key}, {value}> {field.name} = {number};")
        else:
            single = _proto_single(kind, nested, inner, lines, "field")
            optional = field.nullable and not isinstance(kind, StructType) and "." not in single
            label = "optional " if optional else ""
            lines.append(f"{inner}{label}{single} {field.name} = {number};")
    lines.append(f"{indent}}}")
    return lines


def _proto_single(kind: DataType, nested: str, indent: str, out: list[str], what: str) -> str:
    """The type name of one value (a nested message appended to ``out``)."""
    if isinstance(kind, StructType):
        out.extend(_proto_message(kind, nested, indent))
        return nested
    if isinstance(kind, (ArrayType, MapType)):
        raise ValueError(f"a Protobuf {what} cannot be a {kind.simpleString()}")
    found = _PROTO.get(type(kind))
    if found is None:
        raise ValueError(
            f"no Protobuf type for Spark type {kind.simpleString()}: cast it to a string "
            "or a timestamp"
        )
    return found


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))
