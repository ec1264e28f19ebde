"""Typed reads: ``valueFormat`` / ``keyFormat`` turn the binary column into a struct column.

Options (read): ``valueFormat`` / ``keyFormat`` = ``avro`` | ``json`` (JSON Schema) |
``protobuf`` (nested messages as structs, repeated fields as arrays, maps, enums as
strings, ``google.protobuf.Timestamp`` as timestamps; ``valueSchemaMessage`` /
``keySchemaMessage`` name the message, default the file's first) |
``binary`` (default, Spark's Kafka schema); ``schema.registry.url`` (default: the broker's
own registry in wire mode, the data directory's ``_schemas`` topic in path mode);
``valueSchemaSubject`` / ``keySchemaSubject`` (default ``<topic>-value`` / ``<topic>-key``,
Confluent's TopicNameStrategy; one topic read, or the option is needed);
``valueSchemaVersion`` / ``keySchemaVersion`` (default latest): the reader schema; ``mode``
= ``PERMISSIVE`` (default: an undecodable value is null, as Spark's ``from_avro``) or
``FAILFAST`` (the task fails naming topic, partition and offset); ``columnNameOfCorruptRecord``
(Spark's name for it): with PERMISSIVE, adds a binary column of that name holding the raw
bytes of each undecodable key or value (null elsewhere).

The reader schema is resolved once, on the driver, when Spark asks for the schema; the
executors get it inside the reader (``TypedRead`` pickles) and look writer schemas up by the
id each value carries, once per id per process (``seglog.columnar.TypedDecoder``).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import BinaryType, StructField, StructType

from seglog.columnar import (
    MalformedValueError,
    RegistryRef,
    TypedDecoder,
    discover_registry,
)
from seglog.errors import SeglogError
from seglog.schemas import PROTOBUF, parse, serialized_protobuf
from seglog.spark._options import ReadOptions, _get

__all__ = [
    "FORMAT_NAMES",
    "ColumnFormat",
    "TypedRead",
    "registry_of",
    "typed_batch",
    "typed_batches",
    "typed_read",
    "typed_spark_schema",
]

FORMAT_NAMES = {"binary": None, "avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}
"""Option values -> Confluent's ``schemaType`` (None: the column stays binary)."""


class TypedReadError(SeglogError):
    """A value that does not decode with its schema, under ``mode=FAILFAST``."""


@dataclass(frozen=True)
class ColumnFormat:
    """How one column (``key`` or ``value``) is decoded: format and reader schema."""

    column: str
    fmt: str
    """``avro`` or ``json``."""
    subject: str
    version: int
    schema_id: int
    schema: str


@dataclass(frozen=True)
class TypedRead:
    """Everything an executor needs to decode: the columns' formats, the registry, mode."""

    columns: tuple[ColumnFormat, ...]
    registry: RegistryRef
    failfast: bool = False
    corrupt_column: str | None = None


def registry_of(options: Mapping[str, str], path: str | None, kafka: dict[str, str]) -> RegistryRef:
    """The registry named by ``schema.registry.url`` (client options ``schema.registry.*``
    such as ``basic.auth.user.info`` pass through), else the broker's own (wire mode) or the
    data directory's ``_schemas`` topic (path mode)."""
    url = _get(options, "schema.registry.url")
    conf = tuple(
        sorted(
            (k[len("schema.registry.") :], v)
            for k, v in options.items()
            if k.lower().startswith("schema.registry.") and k.lower() != "schema.registry.url"
        )
    )
    if url:
        return RegistryRef(url=url, conf=conf)
    if path:
        return RegistryRef(path=path)
    found = discover_registry(kafka)
    if found is None:
        raise ValueError(
            "option schema.registry.url is needed: the broker serves no schema registry "
            "(seglog serve --schema-registry-listen HOST:PORT)"
        )
    return RegistryRef(url=found, conf=conf)


def _format(options: Mapping[str, str], name: str) -> str | None:
    text = (_get(options, name) or "binary").strip().lower()
    if text not in FORMAT_NAMES:
        raise ValueError(f"option {name} must be one of {', '.join(FORMAT_NAMES)}, not {text!r}")
    return None if text == "binary" else text


def typed_read(options: Mapping[str, str], parsed: ReadOptions) -> TypedRead | None:
    """The typed-read plan of a source's options (None: binary columns, Spark's Kafka
    schema). Contacts the registry (driver side). ValueError naming the option when a
    subject cannot be chosen or has no such version; a schema of another format."""
    wanted = [(c, f) for c in ("key", "value") if (f := _format(options, f"{c}Format"))]
    if not wanted:
        return None
    mode = (_get(options, "mode") or "PERMISSIVE").strip().upper()
    if mode not in ("PERMISSIVE", "FAILFAST"):
        raise ValueError(f"option mode must be PERMISSIVE or FAILFAST, not {mode!r}")
    registry = registry_of(options, parsed.path, parsed.kafka)
    columns = []
    for column, fmt in wanted:
        subject = _get(options, f"{column}SchemaSubject")
        if not subject:
            if len(parsed.subscribe) != 1:
                raise ValueError(
                    f"option {column}SchemaSubject is needed unless exactly one topic is "
                    f"subscribed (the default subject is <topic>-{column})"
                )
            subject = f"{parsed.subscribe[0]}-{column}"
        version_text = _get(options, f"{column}SchemaVersion")
        version = None
        if version_text and version_text.strip().lower() != "latest":
            try:
                version = int(version_text)
            except ValueError:
                raise ValueError(
                    f"option {column}SchemaVersion must be a number or latest"
                ) from None
        try:
            found = registry.subject_version(subject, version)
        except LookupError as exc:
            raise ValueError(f"{column}SchemaSubject: {exc} in {registry.describe()}") from None
        if found.schema_type != FORMAT_NAMES[fmt]:
            raise ValueError(
                f"subject {subject!r} holds a {found.schema_type} schema, not {fmt} "
                f"(option {column}Format)"
            )
        message = _get(options, f"{column}SchemaMessage")
        schema = proto_layout(found.schema, message) if fmt == "protobuf" else found.schema
        columns.append(ColumnFormat(column, fmt, subject, found.version, found.id, schema))
    corrupt = _get(options, "columnNameOfCorruptRecord") or None
    if corrupt and mode == "FAILFAST":
        raise ValueError("option columnNameOfCorruptRecord is for mode PERMISSIVE")
    return TypedRead(tuple(columns), registry, mode == "FAILFAST", corrupt)


def proto_layout(text: str, message: str | None = None) -> str:
    """The layout ``seglog.columnar`` decodes Protobuf with: the schema (.proto text or
    Confluent's serialized descriptor) compiled to a FileDescriptorProto, and the message
    read as the column: ``message`` (full name, or a name relative to the file's package),
    else the file's first message (Confluent's message index ``[0]``). ValueError when the
    file has no such message."""
    model = parse(PROTOBUF, text, []).model
    serialized = serialized_protobuf(text)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    if not fdp.message_type:
        raise ValueError("the Protobuf schema defines no message")
    first = fdp.message_type[0].name
    full = f"{fdp.package}.{first}" if fdp.package else first
    if message:
        candidates = [message, f"{model.package}.{message}" if model.package else message]
        found = [c for c in candidates if c in model.messages]
        if not found:
            raise ValueError(
                f"the Protobuf schema has no message {message!r} "
                f"(it has {', '.join(model.messages)})"
            )
        full = found[0]
    return json.dumps({"file": serialized, "message": full})


def typed_spark_schema(base: StructType, typed: TypedRead | None) -> StructType:
    """``base`` (Spark's Kafka schema) with each typed column a struct of its schema's
    fields (plus the corrupt-record column when asked)."""
    if typed is None:
        return base
    types = {c.column: from_arrow_type(_decoder(typed, c).arrow_type) for c in typed.columns}
    fields = [StructField(f.name, types.get(f.name, f.dataType), True) for f in base.fields]
    if typed.corrupt_column:
        fields.append(StructField(typed.corrupt_column, BinaryType(), True))
    return StructType(fields)


_decoders: dict[tuple[TypedRead, str], TypedDecoder] = {}
_decoders_lock = threading.Lock()


def _decoder(typed: TypedRead, column: ColumnFormat) -> TypedDecoder:
    """One decoder per (plan, column) per process: its writer-schema cache outlives tasks."""
    key = (typed, column.column)
    with _decoders_lock:
        found = _decoders.get(key)
        if found is None:
            found = TypedDecoder(
                column.fmt,
                column.schema,
                typed.registry.schema_text,
                failfast=typed.failfast,
                reader_id=column.schema_id,
            )
            _decoders[key] = found
        return found


def typed_batches(
    batches: Iterator[pa.RecordBatch], typed: TypedRead | None
) -> Iterator[pa.RecordBatch]:
    """Each batch with its typed columns decoded (Arrow in, Arrow out)."""
    if typed is None:
        yield from batches
        return
    for batch in batches:
        yield typed_batch(batch, typed)


def typed_batch(batch: pa.RecordBatch, typed: TypedRead) -> pa.RecordBatch:
    """One batch of Spark's Kafka columns with ``typed``'s columns decoded; TypedReadError
    (FAILFAST) naming topic, partition and offset of an undecodable value."""
    names = batch.schema.names
    arrays = list(batch.columns)
    corrupt_mask: np.ndarray | None = None
    for column in typed.columns:
        index = names.index(column.column)
        try:
            decoded, bad = _decoder(typed, column).decode(arrays[index])
        except MalformedValueError as exc:
            raise TypedReadError(
                f"{column.column} of {batch.column('topic')[exc.row]}-"
                f"{batch.column('partition')[exc.row]} at offset {batch.column('offset')[exc.row]}"
                f" does not decode as {column.fmt} (mode FAILFAST): {exc.reason}"
            ) from None
        if bad is not None and typed.corrupt_column:
            raw = arrays[index].filter(pa.array(bad)).to_pylist()
            kept = iter(raw)
            # one corrupt column for key and value: the value's bytes win when both are bad
            current = [None] * len(bad) if corrupt_mask is None else corrupt_mask.tolist()
            corrupt_mask = np.array(
                [next(kept) if b else c for b, c in zip(bad, current, strict=True)], dtype=object
            )
        arrays[index] = decoded
    fields = [pa.field(n, a.type, True) for n, a in zip(names, arrays, strict=True)]
    if typed.corrupt_column:
        raw_column = (
            pa.nulls(batch.num_rows, pa.binary())
            if corrupt_mask is None
            else pa.array(corrupt_mask.tolist(), type=pa.binary())
        )
        arrays.append(raw_column)
        fields.append(pa.field(typed.corrupt_column, pa.binary(), True))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
