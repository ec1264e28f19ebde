"""Vectorised decoding of Avro records: one field of every record at a time, numpy over the
values' buffer (the way ``decode_columns`` decodes record batches).

Avro's binary encoding (Avro 1.11 spec, "Binary Encoding") writes a record's fields in
schema order with no framing: ``int``/``long`` and every length, enum index and union
branch as a zigzag varint (Kafka's varints: ``seglog.storage.decode_varints``),
``float``/``double`` as 4/8 bytes little-endian, ``boolean`` as one byte, ``string``/
``bytes`` as a length then the bytes, ``fixed`` as its size in bytes. So with one position
per record, each field is decoded for all records at once and every position moves on.

A writer schema is vectorised when its record holds only those types, nested records,
enums and unions of one of them with null (``compile_plan``; else None, and the caller
decodes record by record with fastavro). Logical types come out as Spark's Arrow types
(``date`` -> date32, ``timestamp-millis``/``-micros`` -> timestamp[us, UTC], ``local-``
ones without zone); ``decimal`` is not vectorised. A record whose fields run past its
value, or do not end exactly at its end, a union branch or enum index out of range, or a
boolean byte other than 0/1 is flagged malformed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seglog.columnar._decode import _cut
from seglog.storage import I64, decode_varints

__all__ = ["Field", "compile_plan", "decode_records", "resolve_record"]

U8 = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]

_TS_UTC = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Field:
    """One field of a vectorised record: ``kind`` a primitive name, ``enum``, ``fixed`` or
    ``record`` (``children``); ``null_branch`` 0/1 for a union with null (None: no union);
    ``logical`` the logical type; ``symbols`` (enum) / ``size`` (fixed)."""

    name: str
    kind: str
    null_branch: int | None = None
    logical: str | None = None
    symbols: tuple[str, ...] = ()
    size: int = 0
    children: tuple[Field, ...] = ()


_PRIMITIVE = ("boolean", "int", "long", "float", "double", "string", "bytes")


def compile_plan(schema: Any) -> tuple[Field, ...] | None:
    """The fields of a record schema (parsed JSON) as vectorised steps; None when some
    type is not vectorised (arrays, maps, decimals, general unions, recursion)."""
    try:
        root = _field("", schema, {}, None, ())
    except _NotVector:
        return None
    return root.children if root.kind == "record" else None


class _NotVector(Exception):  # noqa: N818 (a signal, not an error)
    pass


def _field(
    name: str, node: Any, names: dict[str, Any], space: str | None, seen: tuple[str, ...]
) -> Field:
    if isinstance(node, list):
        rest = [b for b in node if b != "null"]
        if len(node) != 2 or len(rest) != 1:
            raise _NotVector
        inner = _field(name, rest[0], names, space, seen)
        return Field(name, inner.kind, node.index("null"), inner.logical, inner.symbols,
                     inner.size, inner.children)  # fmt: skip
    if isinstance(node, str):
        if node in _PRIMITIVE:
            return Field(name, node)
        full = node if "." in node or not space else f"{space}.{node}"
        target = names.get(full, names.get(node))
        if target is None or full in seen:
            raise _NotVector
        return _field(name, target, names, space, seen)
    if not isinstance(node, dict):
        raise _NotVector
    kind = node.get("type")
    logical = node.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _field(name, kind, names, space, seen)
    if kind in ("record", "enum", "fixed"):
        short = str(node["name"])
        space = node.get("namespace", space) if "." not in short else short.rsplit(".", 1)[0]
        full = short if "." in short or not space else f"{space}.{short}"
        names[full] = node
        if kind == "enum":
            return Field(name, "enum", symbols=tuple(node["symbols"]))
        if kind == "fixed":
            if logical == "decimal":
                raise _NotVector
            return Field(name, "fixed", size=int(node["size"]))
        children = tuple(
            _field(f["name"], f["type"], names, space, (*seen, full)) for f in node["fields"]
        )
        return Field(name, "record", children=children)
    if kind in _PRIMITIVE:
        if logical == "decimal":
            raise _NotVector
        return Field(name, kind, logical=logical if isinstance(logical, str) else None)
    raise _NotVector


def decode_records(
    plan: tuple[Field, ...], data: pa.Buffer, starts: I64, ends: I64
) -> tuple[pa.StructArray, Mask]:
    """Decode one record per ``[starts[i], ends[i])`` of ``data`` (positions ascending);
    returns (struct column in the writer's shape with Spark's Arrow types, malformed mask).
    Malformed rows hold arbitrary values: the caller nulls them."""
    buf = np.frombuffer(data, dtype=np.uint8) if data.size else np.zeros(1, dtype=np.uint8)
    pos = starts.astype(np.int64).copy()
    bad = np.zeros(len(pos), dtype=np.bool_)
    column = _record(plan, buf, data, pos, ends, bad, None)
    bad |= pos != ends
    return column, bad


def _record(  # noqa: PLR0917 (the decoding state, passed down the recursion)
    plan: tuple[Field, ...], buf: U8, data: pa.Buffer, pos: I64, ends: I64, bad: Mask,
    mask: Mask | None,
) -> pa.StructArray:  # fmt: skip
    """The fields of ``plan`` for every row, moving ``pos`` (in place) past them."""
    arrays = [_one(f, buf, data, pos, ends, bad) for f in plan]
    fields = [pa.field(f.name, a.type, f.null_branch is not None) for f, a in
              zip(plan, arrays, strict=True)]  # fmt: skip
    return pa.StructArray.from_arrays(
        arrays, fields=fields, mask=None if mask is None else pa.array(mask)
    )


def _one(  # noqa: PLR0917
    f: Field, buf: U8, data: pa.Buffer, pos: I64, ends: I64, bad: Mask
) -> pa.Array:
    if f.null_branch is None:
        return _value(f, buf, data, pos, ends, bad)
    branch, pos[:] = decode_varints(buf, pos, strict=False)
    bad |= (branch != 0) & (branch != 1)
    present = np.flatnonzero(branch != f.null_branch)
    sub = pos[present]
    sub_bad = bad[present]
    inner = _value(f, buf, data, sub, ends[present], sub_bad)
    bad[present] = sub_bad
    pos[present] = sub
    # scatter the present rows' values back: nulls elsewhere
    index = np.full(len(pos), -1, dtype=np.int64)
    index[present] = np.arange(len(present))
    return inner.take(pa.array(index, mask=index < 0))


def _value(  # noqa: PLR0917
    f: Field, buf: U8, data: pa.Buffer, pos: I64, ends: I64, bad: Mask
) -> pa.Array:
    n = len(pos)
    kind = f.kind
    if kind == "record":
        return _record(f.children, buf, data, pos, ends, bad, None)
    if kind == "boolean":
        b = buf.take(pos, mode="clip")
        bad |= b > 1
        pos += 1
        return pa.array(b == 1)
    if kind in ("int", "long", "enum"):
        values, pos[:] = decode_varints(buf, pos, strict=False)
        if kind == "enum":
            bad |= (values < 0) | (values >= len(f.symbols))
            return pa.array(f.symbols, type=pa.string()).take(
                pa.array(np.clip(values, 0, max(len(f.symbols) - 1, 0)))
            )
        return _logical(f, values)
    if kind in ("float", "double"):
        width = 4 if kind == "float" else 8
        raw = buf.take(pos[:, None] + np.arange(width), mode="clip")
        pos += width
        return pa.array(raw.view("<f4" if width == 4 else "<f8").reshape(n))
    if kind == "fixed":
        length = np.full(n, f.size, dtype=np.int64)
    else:  # string, bytes: a varint length, then the bytes
        length, pos[:] = decode_varints(buf, pos, strict=False)
    room = np.maximum(ends - pos, 0)
    bad |= (length < 0) | (length > room)
    length = np.clip(length, 0, room)
    column = _cut(data, pos, length)
    pos += length
    return column.cast(pa.string()) if kind == "string" else column


def _logical(f: Field, values: I64) -> pa.Array:
    """An int/long column with its logical type as Spark's Arrow type."""
    if f.logical == "date" and f.kind == "int":
        return pa.array(values.astype(np.int32), type=pa.int32()).cast(pa.date32())
    if f.kind == "long" and f.logical in ("timestamp-millis", "local-timestamp-millis"):
        values = values * 1000
    if f.kind == "long" and f.logical in ("timestamp-millis", "timestamp-micros"):
        return pa.array(values, type=_TS_UTC)
    if f.kind == "long" and f.logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.array(values, type=pa.timestamp("us"))
    if f.kind == "int":
        return pa.array(values.astype(np.int32))
    return pa.array(values)


def resolve_record(column: pa.StructArray, reader: pa.StructType, schema: Any) -> pa.StructArray:
    """A record column decoded with the writer's schema in the reader's shape (Avro's
    schema resolution, top-level fields): fields matched by name and cast (int -> long,
    float -> double promotions), reader fields the writer lacks filled with their
    ``default``, writer fields the reader lacks dropped. ValueError when a reader field
    has neither (the caller then decodes record by record, which reports it)."""
    if column.type == reader:
        return column
    defaults = {f["name"]: f for f in schema.get("fields", [])} if isinstance(schema, dict) else {}
    n = len(column)
    children = []
    for field in reader:
        index = column.type.get_field_index(field.name)
        if index >= 0:
            child = column.field(index)
            children.append(child if child.type == field.type else child.cast(field.type))
            continue
        spec = defaults.get(field.name, {})
        if "default" not in spec:
            raise ValueError(f"reader field {field.name!r} has no default")
        children.append(pa.array([spec["default"]] * n, type=field.type))
    return pa.StructArray.from_arrays(children, fields=list(reader))
