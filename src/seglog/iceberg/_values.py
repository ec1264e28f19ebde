"""``value_schema`` mode: values in Confluent's wire format (magic byte 0, the schema id
as 4 bytes big-endian, the payload), decoded with the schema the registry holds for that
id (``seglog.schemas``, followed from the ``_schemas`` topic) into the columns of the
schema: Avro (``_avro``), JSON Schema and Protobuf (``_formats``; a Protobuf value's
message indexes name its message). What does not decode goes to the dead-letter table
``seglog.<topic>~dlq`` (the ``key_value`` columns and ``reason``): no framing, an unknown
id, a schema with references (but to Google's well-known types) or outside the type
mappings, a payload that does not parse, a JSON document whose properties do not fit
the columns.

Schema evolution: a schema id (a Protobuf message) whose fields the table lacks, nested
ones included, adds them as optional columns, and one that widens a column (int → long,
float → double) widens it (``union_by_name``, a schema-only commit before the rows'); a
schema whose types clash with the table's sends its records to the dead-letter table
with the reason.

The values of a commit are decoded a group at a time, one group per schema id (Protobuf:
per message), by the column-wise decoders of the Spark typed read (``seglog.columnar``:
``TypedDecoder`` for Avro, ``ProtoTree.decode_column`` for Protobuf), and the table is
assembled column-wise; a value a column decoder flags is decoded alone, for its reason.

Exactly once over two tables: the value table's snapshot summary is the record of what is
done. A commit appends the dead-letter rows first (their table's summary records the same
offsets), then the value rows; after a crash between the two, the records are read again
from the value table's offsets and the dead-letter rows below the dead-letter table's own
offsets are dropped, so each lands once.
"""

from __future__ import annotations

import functools
import io
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
from pyiceberg.schema import Schema, index_by_name
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, FloatType, IntegerType, LongType

from seglog.columnar import TypedDecoder
from seglog.iceberg._avro import META_COLUMN, avro_table_schema
from seglog.iceberg._commit import CommitReport, OffsetRange, read_rows, summary
from seglog.iceberg._formats import HEADER, ProtoMessages, ValueDecoder, json_decoder
from seglog.iceberg._schema import KEY_VALUE_SCHEMA, key_value_rows
from seglog.schemas import AVRO, JSON, PROTOBUF, RegistryState, SchemaVersion, schema_id_of
from seglog.storage import OFFSET_OLDEST, Log

__all__ = ["SchemaLookup", "ValueCommit", "commit_values"]


class SchemaLookup:
    """Registered schemas by id, followed from a ``_schemas`` log (``refresh``)."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self._next = OFFSET_OLDEST
        self._decoders: dict[int, ValueDecoder | ProtoMessages] = {}

    def refresh(self, schemas_log: Log | None) -> None:
        """Apply the ``_schemas`` records appended since the last call."""
        if schemas_log is None:
            return
        while True:
            offset, messages = schemas_log.consume(self._next, 10_000)
            if not messages:
                return
            self.state.replay(iter([(m.key, m.value) for m in messages]))
            self._next = offset

    def decoder(self, schema_id: int, value: bytes) -> ValueDecoder:
        """How ``value`` (framed with ``schema_id``) becomes a row: the decoder of its
        writer schema (for Protobuf, of the message its message indexes name), or why
        there is none (``error``)."""
        found = self._decoders.get(schema_id)
        if found is None:
            versions = self.state.by_id(schema_id)
            if not versions:  # maybe registered later: not cached
                return ValueDecoder(error=f"schema id {schema_id} is not registered")
            found = self._load(schema_id, versions[0])
            self._decoders[schema_id] = found
        if isinstance(found, ProtoMessages):
            return found.decoder(value)
        return found

    @staticmethod
    def _load(schema_id: int, version: SchemaVersion) -> ValueDecoder | ProtoMessages:
        """The decoder(s) of one registered schema (an error decoder when unusable)."""
        try:
            if any(not _well_known(r.name) for r in version.references):
                raise ValueError("it has references (not supported)")
            if version.schema_type == PROTOBUF:
                return ProtoMessages(schema_id, version.schema)
            if version.schema_type == JSON:
                return json_decoder(schema_id, version.schema)
            if version.schema_type != AVRO:
                raise ValueError(f"it is a {version.schema_type} schema")
            parsed = fastavro.parse_schema(json.loads(version.schema))
            return ValueDecoder(
                (schema_id, ""), functools.partial(_decode, parsed=parsed),
                avro_table_schema(version.schema), decode_column=_avro_column(schema_id, version),
            )  # fmt: skip
        except Exception as exc:
            return ValueDecoder(error=f"schema id {schema_id}: {exc}")


def _avro_column(
    schema_id: int, version: SchemaVersion
) -> Callable[[pa.Array], tuple[pa.Array, list[int]]] | None:
    """The column-wise decoder of Avro values of ``version`` (``TypedDecoder``, the
    writer schema its own reader schema); None when it has no Arrow type there."""
    try:
        typed = TypedDecoder(
            "avro", version.schema, lambda i: version.schema if i == schema_id else None,
            reader_id=schema_id,
        )  # fmt: skip
    except Exception:
        return None

    def decode(values: pa.Array) -> tuple[pa.Array, list[int]]:
        column, mask = typed.decode(values)
        return column, ([] if mask is None else np.flatnonzero(mask).tolist())

    return decode


def _well_known(name: str) -> bool:
    """A reference to one of Google's well-known types (ProtobufSerializer registers
    them with ``skip.known.types=false``): read from the protobuf library."""
    return name.startswith("google/protobuf/")


@dataclass
class ValueCommit:
    """What :func:`commit_values` committed."""

    report: CommitReport
    """The value table's commit (rows, offsets, time)."""
    dlq_rows: int
    dlq_offsets: dict[int, int] = field(default_factory=dict)
    """partition → next offset the dead-letter table covers (unchanged if no row went)."""


def _decode(value: bytes, parsed: Any) -> dict[str, Any]:
    """The Avro record of a framed value (after the 5-byte magic and id)."""
    record = fastavro.schemaless_reader(io.BytesIO(value[HEADER:]), parsed)
    if not isinstance(record, dict):
        raise TypeError("not a record")
    return record


def _evolve(table: Table, schema: Schema) -> str | None:
    """Add ``schema``'s missing columns (nested ones too) to ``table``, and widen the
    columns it widens (int → long, float → double); the reason when they clash."""
    if not _needs_update(table.schema(), schema):
        return None
    try:
        with table.update_schema() as update:
            update.union_by_name(schema)
    except Exception as exc:
        return f"the schema does not fit the table's columns: {exc}"
    return None


_WIDER = {(IntegerType(), LongType()), (FloatType(), DoubleType())}


def _needs_update(have: Schema, schema: Schema) -> bool:
    """Whether ``schema`` has a field (by full name) ``have`` lacks, or a primitive
    column Iceberg's promotion rules widen (``_WIDER``)."""
    names = index_by_name(have)
    for name in index_by_name(schema):
        if name not in names:
            return True
        old, new = have.find_type(name), schema.find_type(name)
        if (old, new) in _WIDER:
            return True
    return False


def _arrow_rows(
    rows: list[dict[str, Any]], schema: pa.Schema
) -> tuple[pa.Table, list[int], list[str]]:
    """``rows`` as a table of ``schema``, and the indices (and reasons) of rows that do
    not convert (a value out of a column's range...)."""
    try:
        return pa.Table.from_pylist(rows, schema=schema), [], []
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        pass
    good, bad, reasons = [], [], []
    for i, row in enumerate(rows):
        try:
            pa.Table.from_pylist([row], schema=schema)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            bad.append(i)
            reasons.append(f"the value does not fit the table's columns: {exc}")
        else:
            good.append(row)
    return pa.Table.from_pylist(good, schema=schema), bad, reasons


_META_SOURCES = ("partition", "offset", "timestamp", "headers", "key")


def _decode_values(
    table: Table, decoded: pa.Table, lookup: SchemaLookup
) -> tuple[pa.Table, list[int], list[str]]:
    """(rows of the table's (evolved) schema in ``decoded``'s order, indices of the
    records that go to the dead-letter table, their reasons). The values are grouped by
    decoder (schema id and Protobuf message), each group decoded by one column-wise call
    (``decode_column``); a value it does not decode is decoded alone for the reason (or
    its row). The rows are assembled column-wise, or from Python rows
    (:func:`_arrow_rows`) when a group needs them: a value the column path refuses but
    ``decode`` takes, a group that does not convert as a column, columns that do not cast
    to the table's."""
    values = decoded.column("value").combine_chunks()
    bad: list[int] = []
    reasons: list[str] = []
    groups: dict[tuple[int, str], list[int]] = {}
    decoders: dict[tuple[int, str], ValueDecoder] = {}
    fits: dict[tuple[int, str], str | None] = {}
    for i, value in enumerate(values.to_pylist()):
        schema_id = None if value is None else schema_id_of(value)
        if schema_id is None:
            bad.append(i)
            reasons.append("the value is not in Confluent's wire format (magic 0 + id)")
            continue
        dec = lookup.decoder(schema_id, value)
        if dec.error is None and dec.key not in fits:
            assert dec.schema is not None
            fits[dec.key] = _evolve(table, dec.schema)
        why = dec.error or fits.get(dec.key)
        if why is not None:
            bad.append(i)
            reasons.append(why)
            continue
        groups.setdefault(dec.key, []).append(i)
        decoders[dec.key] = dec
    target = table.schema().as_arrow()  # after the schema updates
    columns: list[tuple[list[int], pa.Array]] = []  # (rows, their values' struct column)
    records: dict[int, dict[str, Any]] = {}  # rows decoded one by one
    for key, rows in groups.items():
        dec = decoders[key]
        group = values.take(pa.array(rows, type=pa.int64()))
        column, failed = None, list(range(len(rows)))
        if dec.decode_column is not None and not (
            dec.open_rows and dec.schema is not None and _lacks(dec.schema.as_arrow(), target)
        ):  # a JSON document may hold a property another schema made a column: its rows
            try:
                column, failed = dec.decode_column(group)
            except Exception:
                column, failed = None, list(range(len(rows)))
        for k in failed:
            i = rows[k]
            assert dec.decode is not None
            try:
                records[i] = dec.decode(group[k].as_py())
            except Exception as exc:
                bad.append(i)
                reasons.append(f"the value does not decode with schema id {key[0]}: {exc!r}")
        if column is not None:
            keep = np.ones(len(rows), dtype=np.bool_)
            keep[failed] = False
            columns.append(([r for r, ok in zip(rows, keep.tolist(), strict=True) if ok],
                            column.filter(pa.array(keep))))  # fmt: skip
    if not records:
        try:
            return _assemble(decoded, columns, target), bad, reasons
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            pass  # a value that does not fit its column: found row by row
    for rows, column in columns:
        records.update(zip(rows, column.to_pylist(), strict=True))
    meta = decoded.select(list(_META_SOURCES))
    order = sorted(records)
    picked = meta.take(pa.array(order, type=pa.int64())).to_pylist()
    out: list[dict[str, Any]] = []
    for i, row_meta in zip(order, picked, strict=True):
        record = records[i]
        record[META_COLUMN] = row_meta
        out.append(record)
    good, unfit, unfit_reasons = _arrow_rows(out, target)
    bad += [order[j] for j in unfit]
    reasons += unfit_reasons
    return good, bad, reasons


def _assemble(
    decoded: pa.Table, columns: Sequence[tuple[list[int], pa.Array]], target: pa.Schema
) -> pa.Table:
    """The table of ``target`` of the decoded ``columns`` (rows in ``decoded``'s order)
    and their :data:`META_COLUMN` from ``decoded``. Raises what a cast raises."""
    value_type = pa.struct([f for f in target if f.name != META_COLUMN])
    rows = np.array([r for group, _ in columns for r in group], dtype=np.int64)
    parts = [_conform(column, value_type) for _, column in columns]
    value = pa.concat_arrays(parts) if parts else pa.array([], type=value_type)
    order = np.argsort(rows, kind="stable")
    value = value.take(pa.array(order))
    picked = decoded.select(list(_META_SOURCES)).take(pa.array(rows[order]))
    meta = pa.StructArray.from_arrays(
        [picked.column(c).combine_chunks() for c in _META_SOURCES], names=list(_META_SOURCES)
    )
    arrays = []
    for f in target:
        if f.name == META_COLUMN:
            arrays.append(_conform(meta, f.type))
        else:
            arrays.append(value.field(f.name))
    return pa.Table.from_arrays(arrays, schema=target)


def _lacks(have: pa.Schema | pa.DataType, want: pa.Schema | pa.DataType) -> bool:
    """Whether ``want`` has a struct field (nested ones included) ``have`` lacks."""
    if isinstance(have, pa.Schema) or isinstance(want, pa.Schema):
        have = pa.struct(list(have)) if isinstance(have, pa.Schema) else have
        want = pa.struct(list(want)) if isinstance(want, pa.Schema) else want
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        fields = {have.field(i).name: have.field(i).type for i in range(have.num_fields)}
        return any(f.name not in fields or _lacks(fields[f.name], f.type) for f in want)
    if pa.types.is_list(have) and pa.types.is_list(want):
        return _lacks(have.value_type, want.value_type)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _lacks(have.item_type, want.item_type)
    return False


def _conform(array: pa.Array, to: pa.DataType) -> pa.Array:
    """``array`` as type ``to``: struct fields matched by name (a field ``array`` lacks
    is null: a column another schema added), the rest cast (int → long...)."""
    if array.type == to:
        return array
    if pa.types.is_struct(to) and pa.types.is_struct(array.type):
        have = {array.type.field(i).name for i in range(array.type.num_fields)}
        children = [
            _conform(array.field(f.name), f.type) if f.name in have
            else pa.nulls(len(array), f.type)
            for f in to
        ]  # fmt: skip
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(to), mask=mask)
    return array.cast(to)


def commit_values(
    table: Table,
    dlq_table: Callable[[], Table],
    *,
    topic: str,
    topic_id: uuid.UUID,
    logs: Mapping[int, Log],
    ranges: Sequence[OffsetRange],
    committed: Mapping[int, int],
    dlq_committed: Mapping[int, int],
    lookup: SchemaLookup,
) -> ValueCommit:
    """Commit ``ranges`` in ``value_schema`` mode: decoded values to ``table``, the rest
    to ``dlq_table()`` (called only when a row goes there) with the reason. Raises what
    pyiceberg raises; nothing of the value table is committed then (see the module)."""
    began = time.perf_counter()
    batches: list[pa.RecordBatch] = []
    for part in ranges:
        batches += read_rows(logs[part.partition], topic, part)
    decoded = pa.Table.from_batches(batches) if batches else None
    good = None
    bad: list[int] = []
    reasons: list[str] = []
    if decoded is not None:
        good, bad, reasons = _decode_values(table, decoded, lookup)
    if good is None:
        good = table.schema().as_arrow().empty_table()
    offsets = dict(committed)
    offsets.update({part.partition: part.end for part in ranges})
    dlq_offsets = dict(dlq_committed)
    dlq_rows = 0
    if decoded is not None and bad:
        order = sorted(range(len(bad)), key=lambda k: bad[k])  # offset order
        picked = decoded.take(pa.array([bad[k] for k in order], type=pa.int64()))
        dlq = dlq_table()
        base = key_value_rows(picked.to_batches(), KEY_VALUE_SCHEMA.as_arrow())
        base = base.append_column("reason", pa.array([reasons[k] for k in order], pa.string()))
        keep = [
            off >= dlq_committed.get(p, 0)
            for p, off in zip(base.column("partition").to_pylist(),
                              base.column("offset").to_pylist(), strict=True)
        ]  # fmt: skip
        base = base.filter(pa.array(keep))
        if base.num_rows:
            dlq_offsets.update({part.partition: part.end for part in ranges})
            dlq.append(base.cast(dlq.schema().as_arrow()),
                       snapshot_properties=summary(dlq_offsets, topic_id))  # fmt: skip
            dlq_rows = base.num_rows
    table.append(good, snapshot_properties=summary(offsets, topic_id))
    report = CommitReport(good.num_rows, offsets, time.perf_counter() - began)
    return ValueCommit(report, dlq_rows, dlq_offsets)
