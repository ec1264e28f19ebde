"""Typed writes: a struct ``value`` (and ``key``) column encoded as Confluent-framed Avro.

Options (sink): ``valueFormat`` / ``keyFormat`` = ``avro`` (or ``binary``, the default);
``valueSchemaSubject`` / ``keySchemaSubject`` (default ``<topic>-value`` / ``<topic>-key``:
needs the ``topic`` option); ``schema.registry.url`` (as for reads: default the broker's own
registry in wire mode, the data directory's ``_schemas`` in path mode);
``auto.register.schemas`` (Confluent's serializer config name; default false): true derives
an Avro schema from the column's Spark type (spark-avro's ``toAvroType``: record
``topLevelRecord``, nested records named after their field, a nullable field a union with
null, timestamp -> ``timestamp-micros``, date -> ``date``, decimal -> ``bytes`` + ``decimal``)
and registers it (the registry returns the existing id when it is already registered);
false encodes with the subject's latest version (Confluent's ``use.latest.version``).

The schema is chosen once on the driver; each executor encodes every row with fastavro's
``schemaless_writer`` and frames it (magic 0 + 4-byte id). A row that does not fit the
schema fails the task naming the column and the reason.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from seglog.columnar import frame
from seglog.spark._options import WriteOptions, _get, parse_bool
from seglog.spark._typed import registry_of

__all__ = ["TypedWrite", "avro_schema_of", "encode_typed", "typed_write"]


@dataclass(frozen=True)
class TypedWrite:
    """Columns encoded before the sink writes: ``(column, schema id, Avro schema text)``."""

    columns: tuple[tuple[str, int, str], ...]


_SIMPLE: dict[type, Any] = {
    BooleanType: "boolean",
    ByteType: "int",
    ShortType: "int",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    DateType: {"type": "int", "logicalType": "date"},
    TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
}


def avro_schema_of(data_type: DataType, name: str = "topLevelRecord", space: str = "") -> Any:
    """The Avro schema spark-avro's ``toAvroType`` makes of a Spark type (not nullable at
    this level; fields add their null unions). ValueError for types Avro cannot hold."""
    if isinstance(data_type, StructType):
        fields = []
        for field in data_type.fields:
            inner = avro_schema_of(field.dataType, field.name, f"{space}.{name}".strip("."))
            fields.append({"name": field.name, "type": _nullable(inner, field.nullable)})
        record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if space:
            record["namespace"] = space
        return record
    if isinstance(data_type, ArrayType):
        items = avro_schema_of(data_type.elementType, name, space)
        return {"type": "array", "items": _nullable(items, data_type.containsNull)}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise ValueError(f"Avro maps have string keys, not {data_type.keyType.simpleString()}")
        values = avro_schema_of(data_type.valueType, name, space)
        return {"type": "map", "values": _nullable(values, data_type.valueContainsNull)}
    if isinstance(data_type, DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    simple = _SIMPLE.get(type(data_type))
    if simple is None:
        raise ValueError(f"no Avro type for Spark type {data_type.simpleString()}")
    return simple


def _nullable(schema: Any, nullable: bool) -> Any:
    return [schema, "null"] if nullable else schema


def typed_write(
    options: Mapping[str, str], parsed: WriteOptions, schema: StructType
) -> TypedWrite | None:
    """The encoding plan of a sink's options and the DataFrame's ``schema`` (driver side:
    looks up or registers the schemas); None when no column is typed."""
    columns = []
    for column in ("key", "value"):
        fmt = (_get(options, f"{column}Format") or "binary").strip().lower()
        if fmt == "binary":
            continue
        if fmt != "avro":
            raise ValueError(f"option {column}Format of the sink must be avro or binary")
        if column not in schema.fieldNames() or not isinstance(schema[column].dataType, StructType):
            raise ValueError(f"option {column}Format=avro needs a struct column {column!r}")
        subject = _get(options, f"{column}SchemaSubject")
        if not subject:
            if not parsed.topic:
                raise ValueError(f"option {column}SchemaSubject is needed without option topic")
            subject = f"{parsed.topic}-{column}"
        registry = registry_of(options, parsed.path, parsed.kafka)
        auto = parse_bool(
            _get(options, "auto.register.schemas"), "auto.register.schemas", default=False
        )
        if auto:
            text = json.dumps(avro_schema_of(schema[column].dataType))
            schema_id = registry.register(subject, text)
        else:
            try:
                found = registry.subject_version(subject, None)
            except LookupError as exc:
                raise ValueError(
                    f"{exc} in {registry.describe()}: register it first, or set "
                    "auto.register.schemas=true"
                ) from None
            if found.schema_type != "AVRO":
                raise ValueError(f"subject {subject!r} holds a {found.schema_type} schema")
            schema_id, text = found.id, found.schema
        columns.append((column, schema_id, text))
    return TypedWrite(tuple(columns)) if columns else None


_parsed: dict[str, Any] = {}


def encode_typed(
    batches: Iterator[pa.RecordBatch], typed: TypedWrite | None
) -> Iterator[pa.RecordBatch]:
    """Each batch with its typed columns replaced by their Confluent-framed Avro bytes."""
    if typed is None:
        yield from batches
        return
    for batch in batches:
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for column, schema_id, text in typed.columns:
            index = batch.schema.get_field_index(column)
            parsed = _parsed.get(text)
            if parsed is None:
                parsed = _parsed[text] = fastavro.parse_schema(json.loads(text), named_schemas={})
            out: list[bytes | None] = []
            buffer = io.BytesIO()
            for record in arrays[index].to_pylist(maps_as_pydicts="strict"):
                if record is None:
                    out.append(None)
                    continue
                buffer.seek(0)
                buffer.truncate()
                try:
                    fastavro.schemaless_writer(buffer, parsed, record)
                except (ValueError, TypeError, KeyError) as exc:
                    raise ValueError(
                        f"{column} row {record!r} does not fit schema id {schema_id}: {exc}"
                    ) from None
                out.append(frame(schema_id, buffer.getvalue()))
            arrays[index] = pa.array(out, type=pa.binary())
            fields[index] = pa.field(column, pa.binary())
        yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
