"""Struct columns encoded into Confluent-framed values: the inverse of ``TypedDecoder``.

The bytes are those of Confluent's serializers: magic byte 0, the schema id as a 4-byte
big-endian integer, then

- ``avro``: the record in Avro's binary encoding (fastavro's ``schemaless_writer``), as
  ``KafkaAvroSerializer``;
- ``json``: the document as UTF-8 JSON text, after validating it against the JSON Schema
  (jsonschema, the validator of the schema's draft, as the registry parses it), as
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
with the runtime's ``json_format.ParseDict`` from the same value: struct -> message (null:
not set), list -> repeated, map -> map, timestamp -> ``google.protobuf.Timestamp``, an
enum field from its constant's name (or number), a wrapper type from the plain value.

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
import jsonschema
import pyarrow as pa
from google.protobuf import json_format, message_factory

from seglog.columnar._protobuf_tree import encode_indexes, indexes_of, load_layout
from seglog.columnar._typed import FORMATS, frame

__all__ = ["TypedEncoder"]

Encode = Callable[[Any], bytes]
"""One row (a Python value of the column) -> the payload after the schema id."""


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

    def encode_value(self, value: Any) -> bytes:
        """The framed bytes of one row. ValueError when it does not fit the schema."""
        return frame(self.schema_id, self._encode(value))

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
                out.append(self.encode_value(_plain(value, arrow_type, self.fmt)))
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                raise ValueError(
                    f"{column} row {value!r} does not fit schema id {self.schema_id} "
                    f"({self.fmt}): {exc}"
                ) from None
        return pa.array(out, type=pa.binary())


def _avro_encoder(schema: str) -> Encode:
    parsed = fastavro.parse_schema(json.loads(schema), named_schemas={})

    def encode(value: Any) -> bytes:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, value)
        return buffer.getvalue()

    return encode


def _json_encoder(schema: str) -> Encode:
    document = json.loads(schema)
    validator = jsonschema.validators.validator_for(document)(document)

    def encode(value: Any) -> bytes:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "#"
            raise ValueError(f"{error.message} (at {where})")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    return encode


def _protobuf_encoder(layout: str) -> Encode:
    _, top, message = load_layout(layout)
    cls = message_factory.GetMessageClass(message)
    prefix = encode_indexes(indexes_of(message, top))

    def encode(value: Any) -> bytes:
        try:
            built = json_format.ParseDict(value, cls())
        except json_format.ParseError as exc:
            raise ValueError(str(exc)) from None
        payload: bytes = built.SerializeToString()
        return prefix + payload

    return encode


def _plain(value: Any, arrow_type: pa.DataType, fmt: str) -> Any:
    """``value`` (of ``arrow_type``) as the format's encoder takes it: Avro as it is
    (fastavro takes datetimes, Decimals, bytes); JSON and Protobuf as JSON values."""
    if fmt == "avro" or value is None:
        return value
    if pa.types.is_struct(arrow_type):
        out = {}
        for field in arrow_type:
            inner = value.get(field.name)
            if inner is not None:  # Spark's to_json ignoreNullFields
                out[field.name] = _plain(inner, field.type, fmt)
        return out
    if pa.types.is_map(arrow_type):
        return {
            _key(k): _plain(v, arrow_type.item_type, fmt) for k, v in value.items()
        }  # fmt: skip
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_plain(v, arrow_type.value_type, fmt) for v in value]
    if isinstance(value, dt.datetime):
        return _rfc3339(value, utc=fmt == "protobuf" or value.tzinfo is not None)
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
    return str(_plain(key, pa.null(), "json"))


def _rfc3339(value: dt.datetime, *, utc: bool) -> str:
    """RFC 3339 text of a timestamp in UTC with ``Z``; a naive one without ``Z`` unless
    ``utc`` (``google.protobuf.Timestamp`` reads it as UTC)."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    return text + ("Z" if utc else "")
