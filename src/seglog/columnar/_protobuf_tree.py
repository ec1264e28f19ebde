"""Protobuf messages of any shape in Confluent's wire format, decoded by the protobuf runtime.

``layout``: JSON ``{"file": base64 of a serialized FileDescriptorProto, "message": full
name}`` — the registered schema compiled to a descriptor (``seglog.schemas``'
``serialized_protobuf``) and the message read as the column. Imports of Google's
well-known types (``google/protobuf/*.proto``) are taken from the protobuf library; other
imports are refused (ValueError).

After the magic byte and the 4-byte schema id, Confluent's framing has the message
indexes (a zigzag varint count then that many zigzag varints, a single 0 meaning ``[0]``):
the path to the writer's message in the file (``[i]`` the file's i-th message, ``[i, j]``
its j-th nested message ...), looked up in the reader's file. A value whose indexes name
another message than the column's is malformed. The message bytes are parsed by
``google.protobuf`` (upb) and turned into the column's values:

| Protobuf | Arrow (Spark) |
|---|---|
| scalars | as ``PROTO_SCALARS`` (uint32 -> bigint, uint64 -> decimal(20,0), spark-protobuf's map) |
| enum | string: the constant's name (the number as text when the reader does not know it) |
| message | struct of its fields (null when absent); recursive messages are refused |
| ``repeated T`` | list<T> (Spark array) |
| ``map<K, V>`` | map<K, V> (entries in key order: the runtime keeps no order) |
| ``google.protobuf.Timestamp`` | timestamp[us, UTC] (nanoseconds truncated to micros) |
| ``google.protobuf.*Value`` wrappers | the wrapped scalar, null when absent |

Fields without presence (proto3 plain fields) read as their type's default when absent,
as the protobuf runtime returns them; fields with presence (proto2 optional, proto3
``optional``, oneof members) read as null when absent.

``decode`` converts one message at a time (the reference); ``decode_column`` decodes a
batch column-wise, from the wire format (``_protobuf_wire``) where the message and the
batch allow, else through the runtime one field at a time (``_protobuf_columns``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import (
    any_pb2,  # noqa: F401 (registers the well-known files in the default pool)
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,  # noqa: F401
    empty_pb2,  # noqa: F401
    field_mask_pb2,  # noqa: F401
    message_factory,
    struct_pb2,  # noqa: F401
    timestamp_pb2,  # noqa: F401
    wrappers_pb2,  # noqa: F401
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError
from kafka.record.util import encode_varint

from seglog.columnar._decode import binary_layout
from seglog.columnar._protobuf_columns import compile_message
from seglog.columnar._protobuf_wire import NotVectorised, compile_wire, decode_wire

__all__ = [
    "PROTO_SCALARS",
    "WRAPPERS",
    "ProtoTree",
    "encode_indexes",
    "indexed_message",
    "indexes_of",
    "load_layout",
    "message_indexes",
]

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

_TIMESTAMP = "google.protobuf.Timestamp"
WRAPPERS = {
    f"google.protobuf.{name}Value": kind
    for name, kind in (("Double", "double"), ("Float", "float"), ("Int64", "int64"),
                       ("UInt64", "uint64"), ("Int32", "int32"), ("UInt32", "uint32"),
                       ("Bool", "bool"), ("String", "string"), ("Bytes", "bytes"))
}  # fmt: skip
"""Google's wrapper messages (``google/protobuf/wrappers.proto``) -> the scalar they wrap."""
_TYPE_NAMES = {
    FieldDescriptor.TYPE_DOUBLE: "double", FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64", FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32", FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_UINT32: "uint32", FieldDescriptor.TYPE_SFIXED32: "sfixed32",
    FieldDescriptor.TYPE_SFIXED64: "sfixed64", FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
}  # fmt: skip
_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

Convert = Callable[[Any], Any]
SMALLEST_SPLIT = 512
"""Batches the vectorised decoding refuses are cut in halves down to this many values,
then parsed by the runtime."""
_MALFORMED = "not a Protobuf message of the schema: "


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


def message_indexes(value: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """(Confluent's message indexes at ``pos``, the position after them)."""
    count, pos = _varint(value, pos)
    if not count:
        return (0,), pos
    indexes = []
    for _ in range(_zigzag(count)):
        index, pos = _varint(value, pos)
        indexes.append(_zigzag(index))
    return tuple(indexes), pos


def indexed_message(
    file: descriptor_pb2.FileDescriptorProto, indexes: tuple[int, ...]
) -> str | None:
    """The full name of the message Confluent's message ``indexes`` name in ``file``
    (``[i]`` its i-th message, ``[i, j]`` that one's j-th nested message ...); None when
    they name none."""
    if not indexes or not 0 <= indexes[0] < len(file.message_type):
        return None
    node = file.message_type[indexes[0]]
    name = f"{file.package}.{node.name}" if file.package else node.name
    for index in indexes[1:]:
        if not 0 <= index < len(node.nested_type):
            return None
        node = node.nested_type[index]
        name = f"{name}.{node.name}"
    return name


def load_layout(layout: str) -> tuple[descriptor_pb2.FileDescriptorProto, Descriptor]:
    """(a layout's file, its message, in a pool of their own). ValueError for an import
    that is not a well-known type; KeyError for a message not in the file."""
    parsed = json.loads(layout)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(parsed["file"]))
    pool = descriptor_pool.DescriptorPool()
    default = descriptor_pool.Default()
    for dependency in fdp.dependency:
        if not dependency.startswith("google/protobuf/"):
            raise ValueError(f"import {dependency!r}: only well-known types are read")
        known = descriptor_pb2.FileDescriptorProto()
        default.FindFileByName(dependency).CopyToProto(known)
        pool.Add(known)
    pool.Add(fdp)
    return fdp, pool.FindMessageTypeByName(parsed["message"])


def indexes_of(message: Descriptor, file: descriptor_pb2.FileDescriptorProto) -> tuple[int, ...]:
    """Confluent's message indexes of ``message`` (the inverse of :func:`indexed_message`):
    its top-level ancestor's place in ``file``, then each nested message's place in its
    parent."""
    path: list[int] = []
    node = message
    while node.containing_type is not None:
        parent = node.containing_type
        path.append([n.full_name for n in parent.nested_types].index(node.full_name))
        node = parent
    top = [f"{file.package}.{m.name}" if file.package else m.name for m in file.message_type]
    path.append(top.index(node.full_name))
    return tuple(reversed(path))


def encode_indexes(indexes: tuple[int, ...]) -> bytes:
    """Confluent's message-index prefix: a single 0 for ``(0,)`` (the file's first
    message), else the zigzag varint count then each index as a zigzag varint."""
    if indexes == (0,):
        return b"\x00"
    out = bytearray()
    for n in (len(indexes), *indexes):
        encode_varint(n, out.append)  # zigzag varints, as Kafka's record fields
    return bytes(out)


class ProtoTree:
    """The column type of a layout's message and the decoding of framed values into it.

    Raises ValueError for a layout whose message is recursive, imports a file that is
    not a well-known type, or is not in the file."""

    def __init__(self, layout: str) -> None:
        self._file, self.message = load_layout(layout)
        self._class = message_factory.GetMessageClass(self.message)
        self.arrow_type, self._convert = _message(self.message, ())
        self._paths: dict[tuple[int, ...], bool] = {}
        self._build = compile_message(self.message, self.arrow_type, WRAPPERS)
        self._first = self._names_reader((0,))  # indexes [0] as one 0 byte: the fast path
        self._wire = compile_wire(self.message, self.arrow_type, WRAPPERS)
        self._prefix = encode_indexes(indexes_of(self.message, self._file))

    def _names_reader(self, indexes: tuple[int, ...]) -> bool:
        """Whether message indexes name the column's message in the reader's file."""
        found = self._paths.get(indexes)
        if found is None:
            found = indexed_message(self._file, indexes) == self.message.full_name
            self._paths[indexes] = found
        return found

    def decode(self, value: bytes, start: int) -> dict[str, Any]:
        """The column value of the message framed in ``value`` from ``start`` (after the
        schema id). ValueError / IndexError on malformed bytes (the runtime's DecodeError
        as ValueError) or indexes naming another message."""
        indexes, pos = message_indexes(value, start)
        if not self._names_reader(indexes):
            raise ValueError(
                f"message indexes {list(indexes)} do not name {self.message.full_name}"
            )
        result: dict[str, Any] = self._convert(self._parse(value, pos))
        return result

    def _parse(self, value: bytes, pos: int) -> Any:
        """The runtime's message parsed from ``value[pos:]``; ValueError when malformed."""
        try:
            return self._class.FromString(memoryview(value)[pos:].tobytes())
        except DecodeError as exc:
            raise ValueError(f"not a {self.message.full_name}: {exc}") from None

    def _framed(self, value: bytes, start: int) -> Any:
        """The message framed in ``value`` from ``start`` (as ``decode``, unconverted)."""
        indexes, pos = message_indexes(value, start)
        if not self._names_reader(indexes):
            raise ValueError(
                f"message indexes {list(indexes)} do not name {self.message.full_name}"
            )
        return self._parse(value, pos)

    def decode_column(self, values: pa.Array, start: int) -> tuple[pa.Array, dict[int, str]]:
        """(column of ``arrow_type``, {row: why it is malformed}) of a binary array of
        framed values (the message indexes at ``start`` of each). Null and malformed rows
        are null. A value without the magic byte and schema id is malformed; the schema id
        itself is not looked at.

        Vectorised from the wire format (``_protobuf_wire``) when the message allows and
        every value is well-formed and written with the indexes Confluent's serializers
        write for the column's message; else the batch is cut in halves, each decoded the
        same way, down to ``SMALLEST_SPLIT`` values, whose every message is parsed by the
        runtime and each field of all of them turned into one Arrow array
        (``_protobuf_columns``): a malformed value costs a few vectorised passes, not the
        whole batch through the runtime."""
        if self._wire is None or not len(values):
            return self._decode_parsed(values.to_pylist(), start)
        return self._decode_halves(values, start)

    def _decode_halves(self, values: pa.Array, start: int) -> tuple[pa.Array, dict[int, str]]:
        """``decode_column`` vectorised, else in halves (see there)."""
        column = self._decode_wire(values, start)
        if column is not None:
            return column, {}
        if len(values) <= SMALLEST_SPLIT:
            return self._decode_parsed(values.to_pylist(), start)
        half = len(values) // 2
        first, bad = self._decode_halves(values.slice(0, half), start)
        second, bad_second = self._decode_halves(values.slice(half), start)
        bad.update({row + half: why for row, why in bad_second.items()})
        return pa.concat_arrays([first, second]), bad

    def _decode_wire(self, values: pa.Array, start: int) -> pa.Array | None:
        """The column decoded from the wire format; None when the batch is not vectorised
        (a value malformed, or of another message, or unusual: ``NotVectorised``)."""
        assert self._wire is not None
        data, offsets, buf, null = binary_layout(values)
        starts = offsets[:-1]
        prefix = self._prefix
        framed = (np.diff(offsets) >= start + len(prefix)) & (buf.take(starts, mode="clip") == 0)
        for k, byte in enumerate(prefix):
            framed &= buf.take(starts + start + k, mode="clip") == byte
        if not (framed | null).all():
            return None  # some value is malformed, or written as another message
        begin = np.where(null, offsets[1:], starts + start + len(prefix))
        try:
            return decode_wire(
                self._wire, data, begin, offsets[1:], pa.array(null) if null.any() else None
            )
        except NotVectorised:
            return None

    def _decode_parsed(
        self, values: list[bytes | None], start: int
    ) -> tuple[pa.Array, dict[int, str]]:
        """``decode_column`` through the runtime: every message parsed, then column-wise."""
        empty = self._class()
        parse = self._class.FromString
        fast = self._first
        skip = start + 1
        messages: list[Any] = []
        nulls: list[int] = []
        bad: dict[int, str] = {}
        for row, value in enumerate(values):
            if value is None:
                nulls.append(row)
                messages.append(empty)
                continue
            try:
                if fast and len(value) > start and value[0] == 0 and value[start] == 0:
                    messages.append(parse(value[skip:]))  # indexes [0]: the first message
                elif len(value) < start or value[0] != 0:
                    bad[row] = "no Confluent wire-format header (magic byte 0 + schema id)"
                    messages.append(empty)
                else:
                    messages.append(self._framed(value, start))
            except DecodeError as exc:
                bad[row] = f"{_MALFORMED}not a {self.message.full_name}: {exc}"
                messages.append(empty)
            except (ValueError, IndexError) as exc:
                bad[row] = f"{_MALFORMED}{exc}"
                messages.append(empty)
        absent = sorted((*nulls, *bad))
        mask = None
        if absent:
            flags = np.zeros(len(values), dtype=np.bool_)
            flags[absent] = True
            mask = pa.array(flags)
        try:
            return self._build(messages, mask), bad
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError) as exc:
            return self._column_by_rows(messages, absent, bad, exc)

    def _column_by_rows(
        self, messages: list[Any], absent: list[int], bad: dict[int, str], error: Exception
    ) -> tuple[pa.Array, dict[int, str]]:
        """The column built message by message (``decode``'s conversion), for a batch the
        column-wise build refused: the rows whose conversion fails are malformed."""
        rows: list[Any] = []
        skip = set(absent)
        for row, message in enumerate(messages):
            if row in skip:
                rows.append(None)
                continue
            try:
                rows.append(self._convert(message))
            except (ValueError, IndexError, UnicodeDecodeError, OverflowError) as exc:
                bad[row] = f"{_MALFORMED}{exc}"
                rows.append(None)
        try:
            return pa.array(rows, type=self.arrow_type), dict(sorted(bad.items()))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise ValueError(f"no column of {self.message.full_name}: {exc}") from error


def _message(message: Descriptor, seen: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    """(struct type, message -> dict) of a message's fields."""
    if message.full_name in seen:
        raise ValueError(f"message {message.full_name} is recursive: not read as a column")
    seen = (*seen, message.full_name)
    fields: list[pa.Field] = []
    defaults: dict[str, Any] = {}  # the column value of each field when not set
    converters: dict[str, Convert] = {}
    for field in message.fields:
        arrow, one = _field(field, seen)
        fields.append(pa.field(field.name, arrow))
        converters[field.name] = one
        if field.is_repeated:
            defaults[field.name] = []  # shared, never mutated
        elif field.has_presence:
            defaults[field.name] = None
        else:
            defaults[field.name] = one(field.default_value)

    def convert(msg: Any) -> dict[str, Any]:
        out = defaults.copy()
        for field, value in msg.ListFields():  # the fields set (proto3: non-default)
            out[field.name] = converters[field.name](value)
        return out

    return pa.struct(fields), convert


def _field(field: FieldDescriptor, seen: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    """(Arrow type, runtime value -> column value) of one field, repeated and maps included."""
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key_type, key_fn = _single(field.message_type.fields_by_name["key"], seen)
        value_type, value_fn = _single(field.message_type.fields_by_name["value"], seen)
        return pa.map_(key_type, pa.field("value", value_type)), lambda m: [
            (key_fn(k), value_fn(m[k])) for k in sorted(m)
        ]
    arrow, fn = _single(field, seen)
    if field.is_repeated:
        return pa.list_(pa.field("element", arrow)), lambda items: [fn(x) for x in items]
    return arrow, fn


def _single(field: FieldDescriptor, seen: tuple[str, ...]) -> tuple[pa.DataType, Convert]:
    """One value of a field (an element of a repeated one)."""
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum = field.enum_type

        def name(number: int) -> str:
            known = enum.values_by_number.get(number)
            return str(number) if known is None else known.name

        return pa.string(), name
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        full = field.message_type.full_name
        if full == _TIMESTAMP:
            return (
                _TIMESTAMP_UTC,
                lambda ts: _EPOCH + dt.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000),
            )
        if full in WRAPPERS:
            return PROTO_SCALARS[WRAPPERS[full]], _scalar(WRAPPERS[full], wrapped=True)
        return _message(field.message_type, seen)
    return PROTO_SCALARS[_TYPE_NAMES[field.type]], _scalar(_TYPE_NAMES[field.type])


def _scalar(kind: str, *, wrapped: bool = False) -> Convert:
    """The runtime's scalar -> the column's (unsigned 64-bit as Decimal)."""
    if kind in ("uint64", "fixed64"):
        return (lambda w: Decimal(w.value)) if wrapped else Decimal
    if wrapped:
        return lambda w: w.value
    return lambda v: v
