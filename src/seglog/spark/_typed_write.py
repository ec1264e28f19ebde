"""Typed writes: a struct ``value`` (and ``key``) column encoded in Confluent's wire format
as Avro, JSON Schema or Protobuf.

Options (sink): ``valueFormat`` / ``keyFormat`` = ``avro`` | ``json`` (JSON Schema) |
``protobuf`` (or ``binary``, the default); ``valueSchemaSubject`` / ``keySchemaSubject``
(default ``<topic>-value`` / ``<topic>-key``: needs the ``topic`` option);
``valueSchemaMessage`` / ``keySchemaMessage`` (Protobuf: the message written, a full name
or one relative to the file's package; default the file's first, as on read);
``schema.registry.url`` (as for reads: default the broker's own registry in wire mode, the
data directory's ``_schemas`` in path mode); ``auto.register.schemas`` (Confluent's
serializer config name; default false): true derives a schema from the column's Spark
type (``_typed_schemas``) and registers it (the registry returns the existing id when it
is already registered); false encodes with the subject's latest version (Confluent's
``use.latest.version``), which must be of the column's format.

The schema is chosen once on the driver; each executor encodes every row with
``seglog.columnar.TypedEncoder`` (fastavro; jsonschema validation then JSON text; the
protobuf runtime's message class of the schema's descriptor, framed with its message
indexes), as Confluent's serializers frame them. A row that does not fit the schema (a
JSON Schema it does not validate against, a field the Protobuf message lacks ...) fails
the task naming the column, the row and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.types import StructType

from seglog.columnar import TypedEncoder
from seglog.spark._options import WriteOptions, _get, parse_bool
from seglog.spark._typed import FORMAT_NAMES, proto_layout, registry_of
from seglog.spark._typed_schemas import avro_schema_of, json_schema_of, proto_schema_of

__all__ = ["TypedColumn", "TypedWrite", "avro_schema_of", "encode_typed", "typed_write"]


@dataclass(frozen=True)
class TypedColumn:
    """How one column is encoded: format, the id the values carry, and the schema (the
    Avro or JSON Schema text; for Protobuf the layout of ``proto_layout``)."""

    column: str
    fmt: str
    schema_id: int
    schema: str


@dataclass(frozen=True)
class TypedWrite:
    """Columns encoded before the sink writes."""

    columns: tuple[TypedColumn, ...]


def _derived(fmt: str, struct: StructType) -> str:
    """The schema text ``auto.register.schemas`` registers for a column of ``struct``."""
    if fmt == "avro":
        return json.dumps(avro_schema_of(struct))
    if fmt == "json":
        return json.dumps(json_schema_of(struct))
    return proto_schema_of(struct)


def typed_write(
    options: Mapping[str, str], parsed: WriteOptions, schema: StructType
) -> TypedWrite | None:
    """The encoding plan of a sink's options and the DataFrame's ``schema`` (driver side:
    looks up or registers the schemas); None when no column is typed. ValueError naming
    the option for a format, subject, schema or message that does not fit."""
    columns = []
    for column in ("key", "value"):
        fmt = (_get(options, f"{column}Format") or "binary").strip().lower()
        if fmt == "binary":
            continue
        if fmt not in FORMAT_NAMES:
            raise ValueError(
                f"option {column}Format of the sink must be one of {', '.join(FORMAT_NAMES)}"
            )
        struct = schema[column].dataType if column in schema.fieldNames() else None
        if not isinstance(struct, StructType):
            raise ValueError(f"option {column}Format={fmt} needs a struct column {column!r}")
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
            text = _derived(fmt, struct)
            schema_id = registry.register(subject, text, FORMAT_NAMES[fmt] or "AVRO")
        else:
            try:
                found = registry.subject_version(subject, None)
            except LookupError as exc:
                raise ValueError(
                    f"{exc} in {registry.describe()}: register it first, or set "
                    "auto.register.schemas=true"
                ) from None
            if found.schema_type != FORMAT_NAMES[fmt]:
                raise ValueError(
                    f"subject {subject!r} holds a {found.schema_type} schema, not {fmt} "
                    f"(option {column}Format)"
                )
            schema_id, text = found.id, found.schema
        if fmt == "protobuf":
            text = proto_layout(text, _get(options, f"{column}SchemaMessage"))
        TypedEncoder(fmt, text, schema_id)  # fails here, on the driver, if it does not load
        columns.append(TypedColumn(column, fmt, schema_id, text))
    return TypedWrite(tuple(columns)) if columns else None


_encoders: dict[TypedColumn, TypedEncoder] = {}


def encode_typed(
    batches: Iterator[pa.RecordBatch], typed: TypedWrite | None
) -> Iterator[pa.RecordBatch]:
    """Each batch with its typed columns replaced by their Confluent-framed bytes."""
    if typed is None:
        yield from batches
        return
    for batch in batches:
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for spec in typed.columns:
            index = batch.schema.get_field_index(spec.column)
            encoder = _encoders.get(spec)
            if encoder is None:
                encoder = _encoders[spec] = TypedEncoder(spec.fmt, spec.schema, spec.schema_id)
            arrays[index] = encoder.encode(arrays[index], spec.column)
            fields[index] = pa.field(spec.column, pa.binary())
        yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
