"""Vectorised decoding of Protobuf messages straight from the wire format: one tag of every
message at a time, numpy over the values' buffer (as ``_avro_vector`` decodes Avro).

Protobuf's encoding (protobuf.dev, "Encoding") writes a message as (tag, value) pairs in
any order: the tag a varint ``field number << 3 | wire type``; wire type 0 a varint
(``int32``/``int64``/``uint*``/``bool``/enum as is, ``sint*`` zigzag), 1 eight bytes
little-endian (``fixed64``/``sfixed64``/``double``), 5 four bytes (``fixed32``/
``sfixed32``/``float``), 2 a varint length then that many bytes (``string``/``bytes``,
embedded messages). So with one position per message, the next pair of every message
is read at once and stored in its field's column; the loop runs as many times as the
longest message has pairs. A scalar field written twice keeps its last value, fields the
reader does not know (or of another wire type than its field's) are skipped, as the
runtime does; absent fields keep their default (0, empty, the enum's 0) or are null where
the field has presence.

Repeated fields collect every occurrence in each message's order (a scalar one packed —
one length-delimited run — or not, both accepted as the runtime does); a map is a repeated
entry message of ``key`` and ``value`` (a value absent from its entry reads as its default),
its keys sorted and the last entry of a key kept; a oneof keeps its last member written.

A message is vectorised (``compile_wire``) when its fields are scalars, open enums,
strings, bytes, nested messages of the same kind, ``google.protobuf.Timestamp`` and the
``*Value`` wrappers, singular or repeated, maps of them and oneofs (no groups or closed
enums); else None and the caller parses with the runtime. Anything unusual in a batch —
a truncated value, a wire type 3/4/6/7 or field number 0, a varint over 10 bytes, a packed
run of fixed-size values cut short, a singular embedded message written twice (the runtime
merges them), invalid UTF-8 in a string, a few messages of hundreds of fields among short
ones — raises ``NotVectorised`` and the caller decodes that batch with the runtime, which
names the malformed rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from seglog.columnar._decode import _cut
from seglog.storage import I64

__all__ = ["NotVectorised", "WireMessage", "compile_wire", "decode_wire"]

U8 = npt.NDArray[np.uint8]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]

_TIMESTAMP = "google.protobuf.Timestamp"
_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_WIRE = {
    FieldDescriptor.TYPE_DOUBLE: _I64, FieldDescriptor.TYPE_FIXED64: _I64,
    FieldDescriptor.TYPE_SFIXED64: _I64, FieldDescriptor.TYPE_FLOAT: _I32,
    FieldDescriptor.TYPE_FIXED32: _I32, FieldDescriptor.TYPE_SFIXED32: _I32,
    FieldDescriptor.TYPE_STRING: _LEN, FieldDescriptor.TYPE_BYTES: _LEN,
    FieldDescriptor.TYPE_MESSAGE: _LEN,
}  # fmt: skip
_U32 = np.uint64(0xFFFFFFFF)
_FEW_STEPS, _FEW_ROWS = 256, 64
"""Past 256 steps with under 1/64 of the messages left, numpy's cost per step outweighs
the work per message: the batch goes to the runtime."""


class NotVectorised(Exception):  # noqa: N818 (a signal, not an error)
    """This batch is not decoded here: the caller parses it with the runtime."""


@dataclass(frozen=True)
class WireField:
    """One field of a vectorised message: its number, wire type, proto type, whether it
    has presence, its Arrow type and, for messages, their plan (``kind``: ``scalar``,
    ``enum``, ``message``, ``timestamp``, ``wrapper``)."""

    name: str
    number: int
    wire: int
    type: int
    kind: str
    presence: bool
    arrow: pa.DataType
    child: WireMessage | None = None
    enum_numbers: Any = None
    enum_names: Any = None
    repeated: bool = False
    """A repeated field (``arrow`` then the element type, ``container`` the list's)."""
    container: pa.DataType | None = None
    """The list or map type of a repeated field or a map."""
    oneof: str | None = None
    """The oneof of several members this field belongs to."""


@dataclass(frozen=True)
class WireMessage:
    """The vectorised plan of a message: its fields and struct type."""

    fields: tuple[WireField, ...]
    arrow: pa.StructType
    map_entry: bool = False
    """A map's entry: one with a field the reader does not know is dropped by upb (kept
    as an unknown field of the map's message), so such a batch goes to the runtime."""


def compile_wire(
    message: Descriptor,
    arrow: pa.StructType,
    wrappers: dict[str, str],
    *,
    map_entry: bool = False,
) -> WireMessage | None:
    """The plan of ``message`` (column type ``arrow``), or None when some field is not
    vectorised (see the module docstring). ``map_entry``: a map's entry, whose value
    reads as its default when absent (as the runtime's ``map[key]``), never null."""
    fields = []
    for field in message.fields:
        container = arrow.field(field.name).type
        one = _repeated(field, container, wrappers)
        if one is None:
            one = _field(field, container, wrappers)
        if one is None:
            return None
        if map_entry:
            one = replace(one, presence=False)
        oneof = field.containing_oneof
        if oneof is not None and len(oneof.fields) > 1:
            one = replace(one, oneof=oneof.name)
        fields.append(one)
    return WireMessage(tuple(fields), arrow, map_entry)


def _repeated(
    field: FieldDescriptor, arrow: pa.DataType, wrappers: dict[str, str]
) -> WireField | None:
    """A repeated field or a map (None: not one, or not vectorised)."""
    if not field.is_repeated:
        return None
    if pa.types.is_map(arrow):
        entry = pa.struct([("key", arrow.key_type), ("value", arrow.item_type)])
        child = compile_wire(field.message_type, entry, wrappers, map_entry=True)
        if child is None:
            return None
        common = (field.name, field.number, _LEN, field.type)
        return WireField(*common, "map", False, entry, child, repeated=True, container=arrow)
    element = _field(field, arrow.value_type, wrappers)
    if element is None:
        return None
    return replace(element, presence=False, repeated=True, container=arrow)


def _field(
    field: FieldDescriptor, arrow: pa.DataType, wrappers: dict[str, str]
) -> WireField | None:
    """A singular field, or an element of a repeated one."""
    wire = _WIRE.get(field.type, _VARINT)
    common = (field.name, field.number, wire, field.type)
    if field.type == FieldDescriptor.TYPE_GROUP:
        return None
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum = field.enum_type
        if enum.is_closed:
            return None  # the runtime keeps unknown numbers of closed enums as unknown fields
        numbers = sorted(enum.values_by_number)
        return WireField(
            *common, "enum", field.has_presence, arrow,
            enum_numbers=pa.array(numbers, type=pa.int64()),
            enum_names=pa.array([enum.values_by_number[n].name for n in numbers], pa.string()),
        )  # fmt: skip
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        return WireField(*common, "scalar", field.has_presence, arrow)
    full = field.message_type.full_name
    if full == _TIMESTAMP:
        ts = pa.struct([("seconds", pa.int64()), ("nanos", pa.int32())])
        child = compile_wire(field.message_type, ts, wrappers)
        return None if child is None else WireField(*common, "timestamp", True, arrow, child)
    if full in wrappers:
        inner = pa.struct([("value", arrow)])
        child = compile_wire(field.message_type, inner, wrappers)
        return None if child is None else WireField(*common, "wrapper", True, arrow, child)
    child = compile_wire(field.message_type, arrow, wrappers)
    return None if child is None else WireField(*common, "message", True, arrow, child)


def decode_wire(
    plan: WireMessage, data: pa.Buffer, starts: I64, ends: I64, mask: pa.Array | None
) -> pa.StructArray:
    """The struct column of the messages at ``data[starts[i]:ends[i]]`` (null where
    ``mask`` is True). Raises NotVectorised (see the module docstring)."""
    buf: U8 = np.frombuffer(data, dtype=np.uint8) if data.size else np.zeros(1, np.uint8)
    return _message(plan, buf, data, starts, ends, mask=mask)


@dataclass
class _Slot:
    """The last value of one field read so far, per message."""

    seen: Mask
    value: U64
    length: I64  # length-delimited fields: value is the start


def _message(
    plan: WireMessage, buf: U8, data: pa.Buffer, starts: I64, ends: I64, *, mask: pa.Array | None
) -> pa.StructArray:
    n = len(starts)
    slots = {
        f.number: _Slot(np.zeros(n, np.bool_), np.zeros(n, np.uint64), np.zeros(n, np.int64))
        for f in plan.fields
        if not f.repeated
    }
    chunks: dict[int, list[_Chunk]] = {f.number: [] for f in plan.fields if f.repeated}
    which = {f.oneof: np.zeros(n, np.int64) for f in plan.fields if f.oneof is not None}
    by_tag = {f.number << 3 | f.wire: f for f in plan.fields}
    by_tag.update({f.number << 3 | _LEN: f for f in plan.fields if f.repeated})  # packed
    pos = starts.copy()
    rows = np.flatnonzero(pos < ends)
    step = 0
    while len(rows):  # one (tag, value) pair of every message not yet at its end
        end = ends[rows]
        tag, at = _varints(buf, pos[rows], end)
        after = np.empty_like(at)
        for key, sel in _groups(tag):
            number, wire = key >> 3, key & 7
            if not 0 < number < 1 << 29 or wire not in (_VARINT, _I64, _LEN, _I32):
                raise NotVectorised("a field number 0, a group or an unknown wire type")
            value, length, after[sel] = _read(wire, buf, at[sel], end[sel])
            field = by_tag.get(key)
            if field is None and plan.map_entry:
                raise NotVectorised("a map entry with an unknown field (dropped by upb)")
            if field is None:
                continue  # a field the reader does not know: skipped
            at_rows = rows[sel]
            if field.repeated:
                lengths = np.broadcast_to(np.asarray(length, np.int64), at_rows.shape)
                chunks[field.number].append(_Chunk(at_rows, step, value, lengths, wire))
                continue
            slot = slots[field.number]
            again = slot.seen[at_rows]
            if field.child is not None and again.any():
                raise NotVectorised("an embedded message written twice (merged by the runtime)")
            if field.type == FieldDescriptor.TYPE_STRING and again.any():
                _check_utf8(data, slot, at_rows[again])  # upb checks the value replaced too
            slot.seen[at_rows] = True
            slot.value[at_rows] = value
            slot.length[at_rows] = length
            if field.oneof is not None:
                which[field.oneof][at_rows] = field.number  # the oneof's last member set
        pos[rows] = after
        rows = rows[after < end]
        step += 1
        if step >= _FEW_STEPS and 0 < len(rows) * _FEW_ROWS < n:
            raise NotVectorised("a few messages of many fields: the runtime parses them faster")
    children = []
    for f in plan.fields:
        if f.repeated:
            children.append(_list_column(f, chunks[f.number], n, buf, data))
            continue
        slot = slots[f.number]
        if f.oneof is not None:
            won = which[f.oneof] == f.number
            if (slot.seen & ~won).any():  # replaced by another member: upb parsed it still
                _column(f, slot, buf, data, starts)
            slot.seen &= won
        children.append(_column(f, slot, buf, data, starts))
    return pa.StructArray.from_arrays(children, fields=list(plan.arrow), mask=mask)


@dataclass(frozen=True)
class _Chunk:
    """Occurrences of a repeated field read in one step: the messages (rows) they are in,
    their values (starts of length-delimited ones) and lengths, and their wire type."""

    rows: I64
    step: int
    value: U64
    length: I64
    wire: int


def _list_column(
    field: WireField, chunks: list[_Chunk], n: int, buf: U8, data: pa.Buffer
) -> pa.Array:
    """The list (or map) array of a repeated field: its occurrences in each message's
    order, packed ones expanded."""
    assert field.container is not None
    rows = [c.rows for c in chunks]
    steps = [np.full(len(c.rows), c.step, np.int64) for c in chunks]
    values = [c.value for c in chunks]
    lengths = [c.length for c in chunks]
    subs = [np.zeros(len(c.rows), np.int64) for c in chunks]
    if field.wire != _LEN:
        for i, c in enumerate(chunks):
            if c.wire == _LEN:  # packed: one length-delimited run of values
                rows[i], steps[i], values[i], subs[i] = _unpack(field.wire, buf, c, n)
                lengths[i] = np.zeros(len(rows[i]), np.int64)
    if not chunks:
        rows = steps = subs = lengths = [np.zeros(0, np.int64)]
        values = [np.zeros(0, np.uint64)]
    row, at_step, sub = np.concatenate(rows), np.concatenate(steps), np.concatenate(subs)
    order = np.lexsort((sub, at_step, row))
    row = row[order]
    value, length = np.concatenate(values)[order], np.concatenate(lengths)[order]
    begin = value.astype(np.int64)
    elements = _values(field, None, value, length, begin, buf=buf, data=data)
    if field.kind == "map":
        return _map(field.container, elements, row, n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(row, minlength=n), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), elements, type=field.container)


def _unpack(wire: int, buf: U8, chunk: _Chunk, n: int) -> tuple[I64, I64, U64, I64]:
    """(rows, steps, values, index in the run) of the values of packed runs (in a batch
    of ``n`` messages)."""
    starts = chunk.value.astype(np.int64)
    ends = starts + chunk.length
    if wire != _VARINT:
        width = 8 if wire == _I64 else 4
        if (chunk.length % width).any():
            raise NotVectorised("a packed run of fixed-size values cut short")
        counts = chunk.length // width
        owner = np.repeat(np.arange(len(starts)), counts)
        sub = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
        at = starts[owner] + sub * width
        value, _, _ = _read(wire, buf, at, at + width)
        return chunk.rows[owner], np.full(len(owner), chunk.step), value, sub
    owners, subs, parts = [], [], []
    index = np.arange(len(starts))
    pos = starts.copy()
    k = 0
    while True:
        live = index[pos[index] < ends[index]]
        if not len(live):
            break
        value, pos[live] = _varints(buf, pos[live], ends[live])
        owners.append(live)
        subs.append(np.full(len(live), k))
        parts.append(value)
        index, k = live, k + 1
        if k >= _FEW_STEPS and len(live) * _FEW_ROWS < n:
            raise NotVectorised("a few long packed runs: the runtime parses them faster")
    owner = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    sub = np.concatenate(subs) if subs else np.zeros(0, np.int64)
    value = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
    return chunk.rows[owner], np.full(len(owner), chunk.step), value, sub


def _map(arrow: pa.MapType, entries: pa.StructArray, row: I64, n: int) -> pa.MapArray:
    """A map array from its entries in each message's order: keys sorted, the last entry
    of a key kept (the runtime's map)."""
    keys = entries.field(0)
    table = pa.table({"row": row, "key": keys, "seq": np.arange(len(row))})
    table = table.sort_by([("row", "ascending"), ("key", "ascending"), ("seq", "descending")])
    sorted_rows = table["row"].to_numpy()
    seq = table["seq"].to_numpy()
    keep = np.ones(len(seq), np.bool_)
    if len(seq) > 1:
        sorted_keys = table["key"].combine_chunks()
        same_key = pc.equal(sorted_keys.slice(1), sorted_keys.slice(0, len(seq) - 1))
        same = np.asarray(same_key.to_numpy(zero_copy_only=False), np.bool_)
        keep[1:] = ~(same & (sorted_rows[1:] == sorted_rows[:-1]))
    picked = pa.array(seq[keep])
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.bincount(sorted_rows[keep], minlength=n), out=offsets[1:])
    items = entries.field(1)
    return pa.MapArray.from_arrays(
        pa.array(offsets), keys.take(picked), items.take(picked), type=arrow
    )


def _groups(tag: U64) -> list[tuple[int, slice | I64]]:
    """(tag, the rows holding it) for each distinct tag; one slice when all are the same
    (messages of one schema write their fields in the same order: the common case)."""
    lo, hi = int(tag.min()), int(tag.max())
    if lo == hi:
        return [(lo, slice(None))]
    return [(int(key), np.flatnonzero(tag == key)) for key in np.unique(tag)]


def _read(wire: int, buf: U8, at: I64, end: I64) -> tuple[U64, I64 | int, I64]:
    """(values, lengths (0 but for length-delimited ones: their starts as values), the
    positions after them) of one wire type at ``at``; NotVectorised past ``end``."""
    if wire == _VARINT:
        value, after = _varints(buf, at, end)
        return value, 0, after
    if wire == _LEN:
        size, begin = _varints(buf, at, end)
        if (size > np.uint64(1 << 31)).any():
            raise NotVectorised("length over 2 GiB")
        length = size.astype(np.int64)
        after = begin + length
        if (after > end).any():
            raise NotVectorised("a value past the message")
        return begin.astype(np.uint64), length, after
    width = 8 if wire == _I64 else 4
    after = at + width
    if (after > end).any():
        raise NotVectorised("a value past the message")
    raw = buf.take(at[:, None] + np.arange(width), mode="clip").astype(np.uint64)
    shifts = np.arange(width, dtype=np.uint64) * np.uint64(8)
    return (raw << shifts).sum(axis=1, dtype=np.uint64), 0, after


def _varints(buf: U8, positions: I64, ends: I64) -> tuple[U64, I64]:
    """(unsigned varints at ``positions``, positions after them); NotVectorised when one
    runs past its end or over 10 bytes."""
    value = np.zeros(len(positions), np.uint64)
    at = positions.copy()
    live = np.ones(len(positions), np.bool_)
    for k in range(10):
        byte = buf.take(at, mode="clip")
        value |= ((byte & 0x7F).astype(np.uint64) * live) << np.uint64(7 * k)
        at += live
        live &= byte >= 0x80
        if not live.any():
            if (at > ends).any():
                raise NotVectorised("a varint past the message")
            return value, at
    raise NotVectorised("a varint over 10 bytes")


def _column(field: WireField, slot: _Slot, buf: U8, data: pa.Buffer, starts: I64) -> pa.Array:
    """The Arrow array of one field from its slot (``starts``: where each message begins;
    a field not seen is read as empty there, keeping the positions in buffer order)."""
    absent = ~slot.seen if field.presence and not slot.seen.all() else None
    begin = np.where(slot.seen, slot.value.astype(np.int64), starts)
    length = np.where(slot.seen, slot.length, 0)
    return _values(field, absent, slot.value, length, begin, buf=buf, data=data)


def _values(
    field: WireField,
    absent: Mask | None,
    value: U64,
    length: I64,
    begin: I64,
    *,
    buf: U8,
    data: pa.Buffer,
) -> pa.Array:
    """The Arrow array of a field's values (raw scalars in ``value``; length-delimited
    ones at ``begin``, ``length`` long), null where ``absent``."""
    if field.child is not None:
        inner = _message(field.child, buf, data, begin, begin + length, mask=None)
        if field.kind == "timestamp":
            seconds = np.asarray(inner.field(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            nanos = np.asarray(inner.field(1).to_numpy(zero_copy_only=False), dtype=np.int64)
            micros = seconds * 1_000_000 + nanos // 1000
            return pa.array(micros, type=pa.int64(), mask=absent).view(_TIMESTAMP_UTC)
        if field.kind == "wrapper":
            wrapped = inner.field(0)
            return wrapped if absent is None else _null_where(absent, wrapped)
        return pa.StructArray.from_arrays(
            [inner.field(i) for i in range(inner.type.num_fields)],
            fields=list(field.arrow),
            mask=None if absent is None else pa.array(absent),
        )
    if field.wire == _LEN:
        raw = _cut(data, begin, length)
        if field.type == FieldDescriptor.TYPE_STRING:
            try:
                raw = raw.cast(pa.string())
            except pa.ArrowInvalid as exc:
                raise NotVectorised("invalid UTF-8 in a string") from exc
        return raw if absent is None else _null_where(absent, raw)
    numbers = _numbers(field.type, value)
    if field.kind == "enum":
        got = pa.array(numbers.astype(np.int64), mask=absent)
        named = field.enum_names.take(pc.index_in(got, value_set=field.enum_numbers))
        return pc.coalesce(named, pc.cast(got, pa.string()))
    if pa.types.is_decimal(field.arrow):
        return pa.array(numbers, mask=absent).cast(field.arrow)
    return pa.array(numbers, type=field.arrow, mask=absent)


def _check_utf8(data: pa.Buffer, slot: _Slot, rows: I64) -> None:
    """NotVectorised unless the strings of ``slot`` in ``rows`` are valid UTF-8."""
    try:
        _cut(data, slot.value[rows].astype(np.int64), slot.length[rows]).cast(pa.string())
    except pa.ArrowInvalid as exc:
        raise NotVectorised("invalid UTF-8 in a string") from exc


def _null_where(absent: Mask, column: pa.Array) -> pa.Array:
    return pc.if_else(pa.array(absent), pa.scalar(None, type=column.type), column)


def _numbers(kind: int, v: U64) -> npt.NDArray[Any]:
    """A scalar field's values from their raw wire bits (protobuf.dev, "Encoding")."""
    t = FieldDescriptor
    if kind in (t.TYPE_INT32, t.TYPE_ENUM, t.TYPE_SFIXED32):
        return (v & _U32).astype(np.uint32).view(np.int32)
    if kind in (t.TYPE_INT64, t.TYPE_SFIXED64):
        return v.view(np.int64)
    if kind in (t.TYPE_UINT32, t.TYPE_FIXED32):
        return (v & _U32).astype(np.int64)
    if kind in (t.TYPE_UINT64, t.TYPE_FIXED64):
        return v
    if kind == t.TYPE_SINT32:
        low = (v & _U32).astype(np.int64)
        return ((low >> 1) ^ -(low & 1)).astype(np.int32)
    if kind == t.TYPE_SINT64:
        return (v >> np.uint64(1)).view(np.int64) ^ -(v & np.uint64(1)).view(np.int64)
    if kind == t.TYPE_BOOL:
        flags: Mask = v != 0
        return flags
    if kind == t.TYPE_DOUBLE:
        return v.view(np.float64)
    if kind == t.TYPE_FLOAT:
        return (v & _U32).astype(np.uint32).view(np.float32)
    raise NotVectorised(f"proto type {kind}")
