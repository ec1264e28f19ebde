"""``value_schema`` mode: values in Confluent's wire format (magic byte 0, the schema id
as 4 bytes big-endian, the Avro binary payload), decoded with the schema the registry
holds for that id (``seglog.schemas``, followed from the ``_schemas`` topic) into the
columns of the schema; what does not decode goes to the dead-letter table
``seglog.<topic>~dlq`` (the ``key_value`` columns and ``reason``).

Schema evolution: a schema id whose fields the table lacks adds them as optional columns
(``union_by_name``, a schema-only commit before the rows'); a schema whose types clash
with the table's sends its records to the dead-letter table with the reason.

Exactly once over two tables: the value table's snapshot summary is the record of what is
done. A commit appends the dead-letter rows first (their table's summary records the same
offsets), then the value rows; after a crash between the two, the records are read again
from the value table's offsets and the dead-letter rows below the dead-letter table's own
offsets are dropped, so each lands once.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from seglog.iceberg._avro import META_COLUMN, avro_table_schema
from seglog.iceberg._commit import CommitReport, OffsetRange, read_rows, summary
from seglog.iceberg._schema import KEY_VALUE_SCHEMA, key_value_rows
from seglog.schemas import AVRO, RegistryState, schema_id_of
from seglog.storage import OFFSET_OLDEST, Log

__all__ = ["SchemaLookup", "ValueCommit", "commit_values"]


@dataclass
class _Decoder:
    parsed: Any = None
    schema: Schema | None = None
    error: str | None = None


class SchemaLookup:
    """Registered schemas by id, followed from a ``_schemas`` log (``refresh``)."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self._next = OFFSET_OLDEST
        self._decoders: dict[int, _Decoder] = {}

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

    def decoder(self, schema_id: int) -> _Decoder:
        """The parsed Avro schema and table schema of ``schema_id``, or why there is none."""
        found = self._decoders.get(schema_id)
        if found is not None:
            return found
        versions = self.state.by_id(schema_id)
        if not versions:  # maybe registered later: not cached
            return _Decoder(error=f"schema id {schema_id} is not registered")
        version = versions[0]
        try:
            if version.schema_type != AVRO:
                raise ValueError(f"it is a {version.schema_type} schema (value_schema: Avro)")
            if version.references:
                raise ValueError("it has references (not supported)")
            found = _Decoder(
                parsed=fastavro.parse_schema(json.loads(version.schema)),
                schema=avro_table_schema(version.schema),
            )
        except Exception as exc:
            found = _Decoder(error=f"schema id {schema_id}: {exc}")
        self._decoders[schema_id] = found
        return found


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
    record = fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed)
    if not isinstance(record, dict):
        raise TypeError("not a record")
    return record


def _evolve(table: Table, schema: Schema) -> str | None:
    """Add ``schema``'s missing columns to ``table``; the reason when they clash."""
    have = {f.name for f in table.schema().fields}
    if {f.name for f in schema.fields} <= have:
        return None
    try:
        with table.update_schema() as update:
            update.union_by_name(schema)
    except Exception as exc:
        return f"the schema does not fit the table's columns: {exc}"
    return None


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
    rows: list[dict[str, Any]] = []
    row_index: list[int] = []
    bad: list[int] = []
    reasons: list[str] = []
    if decoded is not None:
        names = ("key", "value", "partition", "offset", "timestamp", "headers")
        cols = {c: decoded.column(c).to_pylist() for c in names}
        fits: dict[int, str | None] = {}
        for i, value in enumerate(cols["value"]):
            schema_id = None if value is None else schema_id_of(value)
            if schema_id is None:
                bad.append(i)
                reasons.append("the value is not in Confluent's wire format (magic 0 + id)")
                continue
            dec = lookup.decoder(schema_id)
            if dec.error is None and schema_id not in fits:
                assert dec.schema is not None
                fits[schema_id] = _evolve(table, dec.schema)
            why = dec.error or fits.get(schema_id)
            if why is None:
                try:
                    record = _decode(value, dec.parsed)
                except Exception as exc:
                    why = f"the value does not decode with schema id {schema_id}: {exc!r}"
            if why is not None:
                bad.append(i)
                reasons.append(why)
                continue
            record[META_COLUMN] = {
                "partition": cols["partition"][i], "offset": cols["offset"][i],
                "timestamp": cols["timestamp"][i], "headers": cols["headers"][i],
                "key": cols["key"][i],
            }  # fmt: skip
            rows.append(record)
            row_index.append(i)
    good, unfit, unfit_reasons = _arrow_rows(rows, table.schema().as_arrow())
    bad += [row_index[j] for j in unfit]
    reasons += unfit_reasons
    offsets = dict(committed)
    offsets.update({part.partition: part.end for part in ranges})
    dlq_offsets = dict(dlq_committed)
    dlq_rows = 0
    if decoded is not None and bad:
        order = sorted(range(len(bad)), key=lambda k: bad[k])
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
