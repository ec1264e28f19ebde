"""Confluent-framed values (Avro, JSON Schema) decoded into one Arrow struct column.

Confluent's wire format: magic byte 0, the schema id as a 4-byte big-endian integer, then
the payload: Avro binary encoding (schemaless), or JSON text for JSON Schema. A value is
decoded with the writer schema its id names (looked up once per id, then cached) and, for
Avro, resolved to the reader schema by Avro's schema resolution rules (fastavro's
``schemaless_reader`` with ``reader_schema``): a record written with an older or newer
compatible schema is read in the reader schema's shape.

Undecodable values — no magic byte, an unknown id, a payload the writer schema does not
parse (or not wholly), a JSON document whose fields do not fit the column types — are null
with ``failfast=False`` (Spark's PERMISSIVE, as ``from_avro``) and flagged in the returned
mask; with ``failfast=True`` (FAILFAST) they raise ``MalformedValueError`` naming the row.
A null value (tombstone) is a null struct and not malformed.

Measured (``benchmarks/spark_typed_bench.py``): fastavro's per-record decode into dicts,
then one ``pa.array(dicts, type=struct)`` (Arrow's C++ converter walks the dicts).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seglog.columnar._avro_types import avro_arrow_type, json_schema_arrow_type

__all__ = ["FORMATS", "MalformedValueError", "TypedDecoder", "frame", "schema_id_of"]

FORMATS = ("avro", "json")
"""Payload formats decoded into columns (Confluent's ``AVRO`` and ``JSON`` schema types)."""

_HEADER = 5  # magic byte + 4-byte schema id


class MalformedValueError(ValueError):
    """A value that does not decode with its schema (FAILFAST); ``row`` is its index."""

    def __init__(self, row: int, reason: str) -> None:
        super().__init__(f"malformed value at row {row}: {reason}")
        self.row = row
        self.reason = reason


def frame(schema_id: int, payload: bytes) -> bytes:
    """Confluent's wire format of ``payload``: magic 0 + 4-byte big-endian id + payload."""
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def schema_id_of(value: bytes) -> int | None:
    """The schema id of a Confluent-framed value; None without the magic byte."""
    if len(value) < _HEADER or value[0] != 0:
        return None
    return int.from_bytes(value[1:_HEADER], "big")


class TypedDecoder:
    """Decodes a binary column of framed values into a struct column of ``arrow_type``.

    fmt: ``avro`` or ``json``. reader_schema: the schema's JSON text (the reader schema for
    Avro; the column types for JSON Schema). writer_schema(id): the schema text registered
    under ``id``, or None when no schema has that id (called once per id). reader_id: the
    reader schema's own id when registered (values written with it skip resolution).
    """

    def __init__(
        self,
        fmt: str,
        reader_schema: str,
        writer_schema: Callable[[int], str | None],
        *,
        failfast: bool = False,
        reader_id: int | None = None,
    ) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"value format {fmt!r} is not one of {', '.join(FORMATS)}")
        self.fmt = fmt
        self.failfast = failfast
        self._lookup = writer_schema
        self._writers: dict[int, Any] = {}
        self.reader_id = reader_id
        self._reader: Any = None
        if fmt == "avro":
            self.arrow_type = avro_arrow_type(reader_schema)
            self._reader = fastavro.parse_schema(json.loads(reader_schema), named_schemas={})
        else:
            self.arrow_type = json_schema_arrow_type(reader_schema)

    def _writer(self, schema_id: int) -> Any:
        """The parsed writer schema of ``schema_id``; False when unknown (cached)."""
        found = self._writers.get(schema_id)
        if found is None:
            if self.fmt == "json":
                found = True  # a JSON payload decodes without its schema
            else:
                text = self._lookup(schema_id)
                found = (
                    False
                    if text is None
                    else fastavro.parse_schema(json.loads(text), named_schemas={})
                )
            self._writers[schema_id] = found
        return found

    def _one(self, value: bytes) -> tuple[Any, str | None]:
        """(decoded, None) or (None, why it is malformed)."""
        schema_id = schema_id_of(value)
        if schema_id is None:
            return None, "no Confluent wire-format header (magic byte 0 + schema id)"
        writer = self._writer(schema_id)
        if writer is False:
            return None, f"unknown schema id {schema_id}"
        if self.fmt == "json":
            try:
                doc = json.loads(memoryview(value)[_HEADER:].tobytes())
            except (ValueError, UnicodeDecodeError) as exc:
                return None, f"not JSON: {exc}"
            return (doc, None) if isinstance(doc, dict) else (None, "not a JSON object")
        reader = None if schema_id == self.reader_id else self._reader
        stream = io.BytesIO(value)
        stream.seek(_HEADER)
        try:
            record = fastavro.schemaless_reader(stream, writer, reader)
        except Exception as exc:
            return None, f"not Avro of schema id {schema_id}: {type(exc).__name__}: {exc}"
        if stream.tell() != len(value):
            return None, f"{len(value) - stream.tell()} bytes left after the Avro record"
        return record, None

    def decode(self, values: pa.Array) -> tuple[pa.Array, npt.NDArray[np.bool_] | None]:
        """(struct column of ``arrow_type``, mask of malformed rows or None if none).

        Raises MalformedValueError (FAILFAST) on the first malformed value."""
        rows: list[Any] = []
        bad: list[int] = []
        for row, value in enumerate(values.to_pylist()):
            if value is None:
                rows.append(None)
                continue
            record, why = self._one(value)
            if why is not None:
                if self.failfast:
                    raise MalformedValueError(row, why)
                bad.append(row)
            rows.append(record)
        try:
            column = pa.array(rows, type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            column = self._one_by_one(rows, bad, exc)
        if not bad:
            return column, None
        mask = np.zeros(len(rows), dtype=np.bool_)
        mask[bad] = True
        return column, mask

    def _one_by_one(self, rows: list[Any], bad: list[int], error: Exception) -> pa.Array:
        """Rows that do not fit the column type (a JSON field of another type) found one
        at a time: null in PERMISSIVE, MalformedValueError in FAILFAST."""
        for row, record in enumerate(rows):
            if record is None:
                continue
            try:
                pa.array([record], type=self.arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                if self.failfast:
                    raise MalformedValueError(row, f"does not fit the schema: {exc}") from error
                rows[row] = None
                bad.append(row)
        bad.sort()
        return pa.array(rows, type=self.arrow_type)
