"""Flat Protobuf messages (scalar fields only) in Confluent's wire format, decoded per record.

After the magic byte and the 4-byte schema id, Confluent's Protobuf framing has the
message indexes: a zigzag varint count then that many zigzag varints (the path to the
message type in the .proto file), a single 0 meaning ``[0]``, the file's first message —
the only one decoded here. The message itself is Protobuf's wire format: per field a key
varint ``number << 3 | wire type`` (0 varint, 1 64-bit, 2 length-delimited, 5 32-bit),
then the value; unknown field numbers are skipped (how Protobuf readers take newer
writers), repeated scalars keep the last value as proto3 does for a scalar.

``layout``: the message as JSON ``{"syntax": "proto3", "fields": [[number, name, type],
...]}`` with Protobuf scalar type names; the Spark layer makes it from the registered
.proto text. proto3 fields absent from a message read as their type's default (0, "",
false, empty bytes: proto3 does not write defaults); proto2 ones as null.
"""

from __future__ import annotations

import json
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa

__all__ = ["PROTO_SCALARS", "decode_flat_message", "layout_arrow_type", "parse_layout"]

PROTO_SCALARS: dict[str, pa.DataType] = {
    "double": pa.float64(),
    "float": pa.float32(),
    "int32": pa.int32(),
    "sint32": pa.int32(),
    "sfixed32": pa.int32(),
    "uint32": pa.int64(),
    "fixed32": pa.int64(),
    "int64": pa.int64(),
    "sint64": pa.int64(),
    "sfixed64": pa.int64(),
    "uint64": pa.decimal128(20, 0),
    "fixed64": pa.decimal128(20, 0),
    "bool": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
"""Protobuf scalar types -> Arrow (Spark: uint32 -> bigint, uint64 -> decimal(20,0), as
spark-protobuf maps unsigned types)."""

_DEFAULTS = {"bool": False, "string": "", "bytes": b"", "double": 0.0, "float": 0.0}
_FIXED = {"double": "<d", "float": "<f", "fixed32": "<I", "sfixed32": "<i", "fixed64": "<Q",
          "sfixed64": "<q"}  # fmt: skip


def layout_arrow_type(layout: str) -> pa.StructType:
    """The struct type of a layout (see the module docstring); every field nullable."""
    fields = json.loads(layout)["fields"]
    return pa.struct([pa.field(name, PROTO_SCALARS[kind]) for _, name, kind in fields])


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]  # IndexError past the end: malformed
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def parse_layout(layout: str) -> dict[str, Any]:
    """A layout's JSON with ``by_number``: {field number: (name, type)}."""
    parsed: dict[str, Any] = json.loads(layout)
    parsed["by_number"] = {n: (name, kind) for n, name, kind in parsed["fields"]}
    return parsed


def decode_flat_message(value: bytes, start: int, layout: dict[str, Any]) -> dict[str, Any]:
    """The fields of the message framed in ``value`` from ``start`` (after the schema id);
    ``layout`` from ``parse_layout``.
    Raises ValueError / IndexError / UnicodeDecodeError on malformed bytes or a message
    index other than the file's first message."""
    count, pos = _varint(value, start)
    indexes = [0]
    if count:
        indexes = []
        for _ in range(_zigzag(count)):
            index, pos = _varint(value, pos)
            indexes.append(_zigzag(index))
    if indexes != [0]:
        raise ValueError(f"message indexes {indexes}: only the file's first message is read")
    by_number = layout["by_number"]
    proto3 = layout["syntax"] == "proto3"
    out: dict[str, Any] = {
        name: (_DEFAULTS.get(kind, 0) if proto3 else None) for _, name, kind in layout["fields"]
    }
    end = len(value)
    while pos < end:
        key, pos = _varint(value, pos)
        number, wire = key >> 3, key & 7
        raw: int | bytes
        if wire == 0:
            raw, pos = _varint(value, pos)
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            raw, pos = value[pos : pos + width], pos + width
        elif wire == 2:
            length, pos = _varint(value, pos)
            raw, pos = value[pos : pos + length], pos + length
        else:
            raise ValueError(f"wire type {wire} (groups) is not read")
        if pos > end:
            raise ValueError("a field runs past the message")
        field = by_number.get(number)
        if field is not None:
            out[field[0]] = _scalar(field[1], raw)
    return out


def _scalar(kind: str, raw: Any) -> Any:
    if kind in _FIXED:
        number = struct.unpack(_FIXED[kind], raw)[0]
        return Decimal(number) if kind == "fixed64" else number
    if kind == "string":
        return bytes(raw).decode()
    if kind == "bytes":
        return bytes(raw)
    if kind == "bool":
        return raw != 0
    if kind in ("sint32", "sint64"):
        return _zigzag(raw)
    if kind in ("int32", "int64"):
        return raw - (1 << 64) if raw >= 1 << 63 else raw  # two's complement in 64 bits
    if kind in ("uint64", "fixed64"):
        return Decimal(raw)
    return raw  # uint32
