"""Struct columns encoded into Confluent-framed values: the inverse of ``TypedDecoder``.

The bytes are those of Confluent's serializers: magic byte 0, the schema id as a 4-byte
big-endian integer, then

- ``avro``: the record in Avro's binary encoding (fastavro's ``schemaless_writer``), as
  ``KafkaAvroSerializer``;
- ``json``: the document as UTF-8 JSON text, after validating it against the JSON Schema
  (``seglog.schemas.json_checker``: the same verdict as jsonschema's validator of the
  schema's draft, faster for schemas that only say which types go where), as
  ``KafkaJsonSchemaSerializer`` with ``json.fail.invalid.schema=true``;
- ``protobuf``: the message indexes of the column's message (a single 0 for the file's
  first message, else a zigzag varint count and the indexes), then the serialized message
  (the protobuf runtime's class of the registered schema's descriptor), as
  ``KafkaProtobufSerializer``.

A row (one Python value of the column, from ``pa.Array.to_pylist``) becomes a JSON
document as Spark's ``to_json`` writes it: struct fields that are null are left out
(``ignoreNullFields``), timestamps as RFC 3339 text in UTC (``...Z``; a timestamp
without time zone without the ``Z`` in JSON, read as UTC in Protobuf), dates as
``YYYY-MM-DD``, binary as base64, decimals as numbers (an integer when the scale is 0),
map keys as text. A Protobuf message is built
by the runtime's constructor from the row: struct -> message (null: not set), list ->
repeated, map -> map, timestamp -> ``google.protobuf.Timestamp`` (naive: UTC), an enum
field from its constant's name, a wrapper type from the plain value; a row the
constructor refuses is built again by ``json_format.ParseDict`` from its JSON value, which
takes an enum's number as text too and whose error names the field (the constructor's
does not). Measured (``benchmarks/typed_encode_bench.py``, 100 k rows of 8 fields, one
thread): Protobuf 47,015 rows/s (21 k through ``ParseDict`` alone), JSON 14,240 rows/s
with jsonschema's validation on every row (most of the time; before ``json_checker``),
Avro 56,836 rows/s.

A null column value (a tombstone) stays null. A row that does not fit the schema raises
ValueError naming the column, the row and the reason.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from seglog.columnar._protobuf_tree import WRAPPERS, encode_indexes, indexes_of, load_layout
from seglog.columnar._typed import FORMATS, frame
from seglog.schemas import json_checker

__all__ = ["TypedEncoder"]

Encode = Callable[[Any, pa.DataType], bytes]
"""One row (a Python value of the column, of the Arrow type) -> the payload after the
schema id."""


class TypedEncoder:
    """Encodes a struct column into a binary column of Confluent-framed values.

    fmt: ``avro``, ``json`` or ``protobuf``. schema: the Avro schema's JSON text, the JSON
    Schema's text, or for Protobuf the layout of ``_protobuf_tree`` (the registered schema's
    descriptor and the message written). schema_id: the id the values carry. ValueError for
    an unknown format or a schema that does not load."""

    def __init__(self, fmt: str, schema: str, schema_id: int) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"value format {fmt!r} is not one of {', '.join(FORMATS)}")
        self.fmt = fmt
        self.schema_id = schema_id
        self._encode: Encode
        if fmt == "avro":
            self._encode = _avro_encoder(schema)
        elif fmt == "json":
            self._encode = _json_encoder(schema)
        else:
            self._encode = _protobuf_encoder(schema)

    def encode(self, values: pa.Array, column: str) -> pa.Array:
        """A binary column of the framed values of ``values`` (nulls stay null).
        ValueError naming ``column``, the row and the reason for a row that does not fit."""
        arrow_type = values.type
        out: list[bytes | None] = []
        for value in values.to_pylist(maps_as_pydicts="strict"):
            if value is None:
                out.append(None)
                continue
            try:
                out.append(frame(self.schema_id, self._encode(value, arrow_type)))
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                raise ValueError(
                    f"{column} row {value!r} does not fit schema id {self.schema_id} "
                    f"({self.fmt}): {exc}"
                ) from None
        return pa.array(out, type=pa.binary())


def _avro_encoder(schema: str) -> Encode:
    parsed = fastavro.parse_schema(json.loads(schema), named_schemas={})

    def encode(value: Any, _: pa.DataType) -> bytes:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, value)
        return buffer.getvalue()

    return encode


def _json_encoder(schema: str) -> Encode:
    check = json_checker(json.loads(schema))

    def encode(value: Any, arrow_type: pa.DataType) -> bytes:
        value = _plain(value, arrow_type)
        why = check(value)
        if why is not None:
            raise ValueError(why)
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    return encode


def _protobuf_encoder(layout: str) -> Encode:
    file, message = load_layout(layout)
    cls = message_factory.GetMessageClass(message)
    prefix = encode_indexes(indexes_of(message, file))

    build = _builder(message)

    def encode(value: Any, arrow_type: pa.DataType) -> bytes:
        try:  # the runtime's constructor: fast, but its errors do not name the field
            built = cls(**build(value))
        except (ValueError, TypeError, KeyError, OverflowError, AttributeError):
            try:  # the same message through json_format, whose errors name it
                built = json_format.ParseDict(_plain(value, arrow_type, utc=True), cls())
            except json_format.ParseError as exc:
                raise ValueError(str(exc)) from None
        payload: bytes = built.SerializeToString()
        return prefix + payload

    return encode


Convert = Callable[[Any], Any]


def _builder(message: Descriptor) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A row (dict) -> the keyword arguments of the message's constructor: null fields
    left out, nested rows as dicts, wrappers as ``{"value": v}``, unsigned 64-bit Decimals
    as ints (timestamps, enum names, bytes and maps as the constructor takes them)."""
    converters: dict[str, Convert | None] = {}
    for field in message.fields:
        converters[field.name] = _field_converter(field)

    def build(row: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for name, value in row.items():
            if value is not None:
                convert = converters.get(name)
                out[name] = value if convert is None else convert(value)
        return out

    return build


def _field_converter(field: FieldDescriptor) -> Convert | None:
    """How one field's value is given to the constructor (None: as it is)."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        inner = _single_converter(field.message_type.fields_by_name["value"])
        if inner is None:
            return None
        return lambda m: {k: inner(v) for k, v in m.items()}
    one = _single_converter(field)
    if one is None or not field.is_repeated:
        return one
    return lambda items: [one(x) for x in items]


def _single_converter(field: FieldDescriptor) -> Convert | None:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        full = field.message_type.full_name
        if full == "google.protobuf.Timestamp":
            return None  # the constructor takes a datetime (naive: UTC)
        if full in WRAPPERS:
            return lambda v: {"value": int(v) if isinstance(v, Decimal) else v}
        return _builder(field.message_type)
    if field.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return lambda v: int(v) if isinstance(v, Decimal) else v
    return None


def _plain(value: Any, arrow_type: pa.DataType, *, utc: bool = False) -> Any:
    """``value`` (of ``arrow_type``) as a JSON value (``utc``: naive timestamps with ``Z``,
    for ``google.protobuf.Timestamp``)."""
    if value is None:
        return value
    if pa.types.is_struct(arrow_type):
        out = {}
        for field in arrow_type:
            inner = value.get(field.name)
            if inner is not None:  # Spark's to_json ignoreNullFields
                out[field.name] = _plain(inner, field.type, utc=utc)
        return out
    if pa.types.is_map(arrow_type):
        return {
            _key(k): _plain(v, arrow_type.item_type, utc=utc) for k, v in value.items()
        }  # fmt: skip
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_plain(v, arrow_type.value_type, utc=utc) for v in value]
    if isinstance(value, dt.datetime):
        return _rfc3339(value, utc=utc or value.tzinfo is not None)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(_plain(key, pa.null()))


def _rfc3339(value: dt.datetime, *, utc: bool) -> str:
    """RFC 3339 text of a timestamp in UTC with ``Z``; a naive one without ``Z`` unless
    ``utc`` (``google.protobuf.Timestamp`` reads it as UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + ("Z" if utc else "")
