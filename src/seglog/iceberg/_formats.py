"""JSON Schema and Protobuf value schemas as Iceberg schemas (``value_schema`` mode), and
their values decoded into rows: the Arrow type seglog's Spark typed read gives a schema
(``seglog.columnar``: ``json_schema_arrow_type``; ``ProtoTree`` for a Protobuf message)
turned into Iceberg types, the values decoded by the same code, a column of values at a
time (``ValueDecoder.decode_column``: Protobuf by ``ProtoTree.decode_column``, JSON
documents by ``json.loads``, each validated against its JSON Schema as Confluent's
``JSONDeserializer`` does, ``seglog.schemas.json_checker``, then one ``pa.array``) or one
value at a time (``ValueDecoder.decode``: the reason a value does not decode).

Arrow (as the typed read makes it) → Iceberg:

==============================  ======================================================
Arrow                           Iceberg
==============================  ======================================================
bool, int32, int64              boolean, int, long
float32, float64                float, double
string, binary                  string, binary
decimal128(p, s)                decimal(p, s) (Protobuf uint64 / fixed64: (20, 0))
timestamp[us, UTC]              timestamptz (google.protobuf.Timestamp)
timestamp[us], date32           timestamp, date
struct                          struct (nested messages, JSON objects)
list                            list (repeated fields, JSON arrays)
map                             map (Protobuf ``map<K, V>``)
==============================  ======================================================

So Protobuf enums are strings (the constant's name), ``google.protobuf.*Value`` wrappers
nullable scalars, uint32 a long (as spark-protobuf); JSON Schema ``integer`` is a long,
``number`` a double, ``[T, "null"]`` an optional T. Every column is optional and ids are
given in the order of :func:`seglog.iceberg._avro.avro_table_schema` (a field, then what it
holds), with :data:`META_COLUMN` last. A struct without fields (an empty message, an object
without properties) has no Parquet column and is refused (:class:`UnsupportedSchemaError`).

A Protobuf schema may hold several messages: a value's Confluent message indexes (after the
schema id) name the one it was written with, and each message of a schema id is a table
schema of its own (Redpanda's Iceberg topics pick the message the same way).
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
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

from seglog.columnar import ProtoTree, indexed_message, json_schema_arrow_type, message_indexes
from seglog.iceberg._avro import META_COLUMN, UnsupportedSchemaError, meta_field
from seglog.schemas import json_checker, serialized_protobuf

__all__ = ["ProtoMessages", "ValueDecoder", "arrow_table_schema", "json_decoder"]

HEADER = 5
"""Bytes of Confluent's framing before the payload (magic byte 0, 4-byte schema id)."""

_SCALARS: dict[pa.DataType, IcebergType] = {
    pa.bool_(): BooleanType(),
    pa.int8(): IntegerType(),
    pa.int16(): IntegerType(),
    pa.int32(): IntegerType(),
    pa.int64(): LongType(),
    pa.float32(): FloatType(),
    pa.float64(): DoubleType(),
    pa.string(): StringType(),
    pa.large_string(): StringType(),
    pa.binary(): BinaryType(),
    pa.large_binary(): BinaryType(),
    pa.date32(): DateType(),
    pa.timestamp("us"): TimestampType(),
    pa.timestamp("us", tz="UTC"): TimestamptzType(),
}


@dataclass
class ValueDecoder:
    """How the values of one writer schema (a Protobuf schema: one of its messages) become
    rows, or why they cannot."""

    key: tuple[int, str] = (-1, "")
    """(schema id, Protobuf message full name or "")."""
    decode: Callable[[bytes], dict[str, Any]] | None = None
    """A framed value → its row (raises on a value that does not decode)."""
    schema: Schema | None = None
    """The table schema of the values (their columns and :data:`META_COLUMN`)."""
    error: str | None = None
    decode_column: Callable[[pa.Array], tuple[pa.Array, list[int]]] | None = None
    """A binary array of framed values → (struct column, positions it did not decode:
    null there; ``decode`` says why). Raises when the column as a whole does not convert
    (the values are then decoded one by one)."""
    open_rows: bool = False
    """Whether a row may hold keys beyond the schema's columns (a JSON object's other
    properties), which become columns another schema added to the table."""


def _convert(arrow: pa.DataType, ids: Iterator[int]) -> IcebergType:
    found = _SCALARS.get(arrow)
    if found is not None:
        return found
    if pa.types.is_decimal(arrow):
        return DecimalType(arrow.precision, arrow.scale)
    if pa.types.is_struct(arrow):
        return StructType(*_fields(arrow, ids))
    if pa.types.is_map(arrow):
        key_id, value_id = next(ids), next(ids)
        key = _convert(arrow.key_type, ids)
        value = _convert(arrow.item_type, ids)
        return MapType(key_id, key, value_id, value, value_required=False)
    if pa.types.is_list(arrow) or pa.types.is_large_list(arrow):
        element_id = next(ids)
        return ListType(element_id, _convert(arrow.value_type, ids), element_required=False)
    raise UnsupportedSchemaError(f"no Iceberg type for Arrow type {arrow}")


def _fields(struct: pa.StructType, ids: Iterator[int]) -> list[NestedField]:
    if struct.num_fields == 0:
        raise UnsupportedSchemaError("a struct without fields (an empty message or object)")
    fields = []
    for i in range(struct.num_fields):
        field = struct.field(i)
        field_id = next(ids)
        fields.append(NestedField(field_id, field.name, _convert(field.type, ids), required=False))
    return fields


def arrow_table_schema(struct: pa.DataType) -> Schema:
    """The Iceberg schema of a ``value_schema`` table for values of the Arrow ``struct``
    type: its fields (optional) and :data:`META_COLUMN`. Raises
    :class:`UnsupportedSchemaError` for a type that is no struct, has a type outside the
    module's table, an empty struct, or a field named ``seglog``."""
    if not pa.types.is_struct(struct):
        raise UnsupportedSchemaError(f"the value type {struct} is no struct")
    ids = itertools.count(1)
    fields = _fields(struct, ids)
    if any(f.name == META_COLUMN for f in fields):
        raise UnsupportedSchemaError(f"a value field is named {META_COLUMN!r}")
    fields.append(meta_field(ids))
    return Schema(*fields)


def _json_document(value: bytes, check: Callable[[Any], str | None]) -> dict[str, Any]:
    """The JSON object after the framing, valid under its schema (as Confluent's
    ``JSONDeserializer`` checks). ValueError (not JSON, not valid), TypeError (no
    object)."""
    doc = json.loads(memoryview(value)[HEADER:].tobytes())
    if not isinstance(doc, dict):
        raise TypeError(f"the JSON document is a {type(doc).__name__}, not an object")
    why = check(doc)
    if why is not None:
        raise ValueError(f"not valid under its JSON Schema {why}")
    return doc


def _json_column(
    values: pa.Array, check: Callable[[Any], str | None], arrow_type: pa.DataType
) -> tuple[pa.Array, list[int]]:
    """JSON documents of framed ``values`` (each validated as :func:`_json_document`) as
    one struct column of ``arrow_type``; raises what ``pa.array`` raises."""
    docs: list[dict[str, Any] | None] = []
    bad: list[int] = []
    for row, value in enumerate(values.to_pylist()):
        try:
            docs.append(_json_document(value, check))
        except Exception:
            docs.append(None)
            bad.append(row)
    return pa.array(docs, type=arrow_type), bad


def json_decoder(schema_id: int, text: str) -> ValueDecoder:
    """The decoder of values of the JSON Schema ``text``: the object's properties as
    columns (``json_schema_arrow_type``), each document validated against the schema
    (``seglog.schemas.json_checker``). Raises ValueError (a schema outside that mapping) and
    :class:`UnsupportedSchemaError`. Valid documents whose values do not fit the columns
    (an integer beyond a long) fail when made rows (the caller's dead letters)."""
    arrow_type = json_schema_arrow_type(text)
    schema = arrow_table_schema(arrow_type)
    check = json_checker(json.loads(text))
    return ValueDecoder(
        (schema_id, ""), functools.partial(_json_document, check=check), schema,
        decode_column=functools.partial(_json_column, check=check, arrow_type=arrow_type),
        open_rows=True,
    )  # fmt: skip


def _proto_column(values: pa.Array, tree: ProtoTree) -> tuple[pa.Array, list[int]]:
    """Protobuf values column-wise (``ProtoTree.decode_column``, message indexes after
    the 5-byte framing)."""
    column, bad = tree.decode_column(values, HEADER)
    return column, sorted(bad)


class ProtoMessages:
    """The messages of one registered Protobuf schema (.proto text or Confluent's
    serialized descriptor), each a :class:`ValueDecoder` made on first use. Raises
    ValueError for a schema that does not compile."""

    def __init__(self, schema_id: int, text: str) -> None:
        self.schema_id = schema_id
        self._serialized = serialized_protobuf(text)
        self._file = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(self._serialized)
        )
        self._by_name: dict[str, ValueDecoder] = {}

    def decoder(self, value: bytes) -> ValueDecoder:
        """The decoder of the message ``value``'s message indexes name (an error
        decoder when they do not parse or name no message of the schema)."""
        try:
            indexes, _ = message_indexes(value, HEADER)
        except (IndexError, ValueError) as exc:
            why = f"bad message indexes ({exc!r})"
            return ValueDecoder(error=f"the value does not decode with schema id "
                                      f"{self.schema_id}: {why}")  # fmt: skip
        name = indexed_message(self._file, indexes)
        if name is None:
            return ValueDecoder(error=f"the value does not decode with schema id "
                                      f"{self.schema_id}: message indexes {list(indexes)} "
                                      "name no message of the schema")  # fmt: skip
        found = self._by_name.get(name)
        if found is None:
            try:
                tree = ProtoTree(json.dumps({"file": self._serialized, "message": name}))
                found = ValueDecoder(
                    (self.schema_id, name),
                    lambda framed: tree.decode(framed, HEADER),
                    arrow_table_schema(tree.arrow_type),
                    decode_column=functools.partial(_proto_column, tree=tree),
                )
            except (ValueError, KeyError, TypeError) as exc:
                found = ValueDecoder(error=f"schema id {self.schema_id} message {name}: {exc}")
            self._by_name[name] = found
        return found
