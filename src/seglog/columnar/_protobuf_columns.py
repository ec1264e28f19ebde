"""Parsed Protobuf messages turned into one Arrow column, one field of every message at a
time (the column-wise half of ``_protobuf_tree``).

The path of the batches ``_protobuf_wire`` does not take (a malformed value, a closed enum,
an embedded message written twice ...). The protobuf runtime (upb) parses a message in
about a microsecond; what costs is turning it into Python values field by field and
building Arrow from row dicts. Here each field
of all the messages is read with one list comprehension (``[m.f for m in msgs]``) and
handed to ``pa.array`` with its Arrow type: nested messages recursively column-wise (a
struct array from the child arrays, null where ``HasField`` is false), repeated fields and
maps as offsets plus the flattened elements, enums by a vectorised lookup of the numbers
in the enum's names (the number as text when the reader does not name it),
``google.protobuf.Timestamp`` from its seconds and nanos arrays (timestamp[us, UTC],
nanoseconds floored to micros), the ``*Value`` wrappers as nullable scalars.

Types and semantics are ``_protobuf_tree``'s table: fields without presence read as the
runtime returns them (their default when absent), fields with presence are null when
``HasField`` is false. A null row is given as the message class's empty instance and
masked by the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

__all__ = ["Build", "compile_message"]

Mask = npt.NDArray[np.bool_]
Build = Callable[[list[Any]], pa.Array]
"""Messages (parsed, one per row) -> the column's array of them (length = len(messages))."""

_TIMESTAMP = "google.protobuf.Timestamp"
_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")


def compile_message(
    message: Descriptor, arrow: pa.StructType, wrappers: dict[str, str]
) -> Callable[[list[Any], pa.Array | None], pa.StructArray]:
    """The builder of a message's struct column: ``(messages, null mask or None) ->
    StructArray`` of type ``arrow`` (the struct ``_protobuf_tree`` derived from
    ``message``); ``wrappers`` maps the ``google.protobuf.*Value`` names to their scalar
    kind."""
    builders = [_field(f, arrow.field(f.name).type, wrappers) for f in message.fields]
    fields = list(arrow)

    def build(msgs: list[Any], mask: pa.Array | None) -> pa.StructArray:
        children = [one(msgs) for one in builders]
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)

    return build


def _field(field: FieldDescriptor, arrow: pa.DataType, wrappers: dict[str, str]) -> Build:
    """The builder of one field's array from its messages."""
    get = attrgetter(field.name)
    if pa.types.is_map(arrow):
        entry = field.message_type
        keys = _values(entry.fields_by_name["key"], arrow.key_type, wrappers)
        items = _values(entry.fields_by_name["value"], arrow.item_type, wrappers)

        def build_map(msgs: list[Any]) -> pa.Array:
            maps = [get(m) for m in msgs]
            ordered = [sorted(mp) for mp in maps]  # the runtime keeps no order
            flat_keys = [k for ks in ordered for k in ks]
            flat_items = [mp[k] for mp, ks in zip(maps, ordered, strict=True) for k in ks]
            offsets = _offsets(ordered)
            return pa.MapArray.from_arrays(
                offsets, keys(flat_keys, None), items(flat_items, None), arrow
            )

        return build_map
    if field.is_repeated:
        element = _values(field, arrow.value_type, wrappers)

        def build_list(msgs: list[Any]) -> pa.Array:
            lists = [get(m) for m in msgs]
            flat = [x for items in lists for x in items]
            return pa.ListArray.from_arrays(_offsets(lists), element(flat, None), type=arrow)

        return build_list
    values = _values(field, arrow, wrappers)
    if not field.has_presence:
        return lambda msgs: values([get(m) for m in msgs], None)
    has = field.name

    def build_optional(msgs: list[Any]) -> pa.Array:
        absent = np.fromiter((not m.HasField(has) for m in msgs), dtype=np.bool_, count=len(msgs))
        return values([get(m) for m in msgs], absent if absent.any() else None)

    return build_optional


Values = Callable[[list[Any], Mask | None], pa.Array]
"""(runtime values, null mask or None) -> their array (null where the mask is True)."""


def _values(field: FieldDescriptor, arrow: pa.DataType, wrappers: dict[str, str]) -> Values:
    """The builder of the array of a field's values (elements of a repeated one):
    runtime values -> Arrow."""
    if field.type == FieldDescriptor.TYPE_ENUM:
        numbers = sorted(field.enum_type.values_by_number)
        known = pa.array(numbers, type=pa.int64())
        names = pa.array(
            [field.enum_type.values_by_number[n].name for n in numbers], type=pa.string()
        )

        def enum_names(values: list[Any], mask: Mask | None) -> pa.Array:
            got = pa.array(values, type=pa.int64(), mask=mask)
            named = names.take(pc.index_in(got, value_set=known))
            return pc.coalesce(named, pc.cast(got, pa.string()))

        return enum_names
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        full = field.message_type.full_name
        if full == _TIMESTAMP:
            return _timestamps
        if full in wrappers:
            return lambda values, mask: pa.array([w.value for w in values], arrow, mask=mask)
        struct = compile_message(field.message_type, arrow, wrappers)
        return lambda values, mask: struct(values, None if mask is None else pa.array(mask))
    return lambda values, mask: pa.array(values, type=arrow, mask=mask)


def _timestamps(values: list[Any], mask: Mask | None) -> pa.Array:
    """Timestamp messages -> timestamp[us, UTC] (nanos floored to micros)."""
    seconds = np.array([t.seconds for t in values], dtype=np.int64)
    nanos = np.array([t.nanos for t in values], dtype=np.int64)
    micros = seconds * 1_000_000 + nanos // 1000
    return pa.array(micros, type=pa.int64(), mask=mask).view(_TIMESTAMP_UTC)


def _offsets(lists: list[Any]) -> pa.Array:
    """int32 offsets of a list of sized items (0, len(a), len(a)+len(b), ...)."""
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    return pa.array(offsets)
