"""One interface over the three schema formats: parse a schema (with its references'
texts) into a :class:`Parsed`, and list the incompatibilities of a pair; and the
compatibility levels (Confluent's ``CompatibilityLevel``), which pairs each one checks.

Levels, for a new schema against the subject's live versions (oldest first):
BACKWARD (the new one reads data written with the latest), FORWARD (the latest reads
data written with the new one), FULL (both), their ``_TRANSITIVE`` forms (against every
live version, not only the latest), NONE (no check).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from seglog.schemas import _avro, _jsonschema, _protobuf
from seglog.schemas._errors import COMPATIBILITY_UNSUPPORTED, INVALID_SCHEMA, RegistryError
from seglog.schemas._records import AVRO, JSON, PROTOBUF, SCHEMA_TYPES

__all__ = ["LEVELS", "Parsed", "check_level", "compact", "incompatibilities", "parse"]

LEVELS = (
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
    "FULL_TRANSITIVE",
)  # fmt: skip


@dataclass
class Parsed:
    """A schema parsed: its type, the text stored and compared (:func:`compact`), and
    the format's model (fastavro's parsed form, the JSON Schema document, the
    Protobuf model)."""

    schema_type: str
    text: str
    model: Any


def compact(schema_type: str, text: str, *, normalize: bool = False) -> str:
    """The form a schema is stored and compared in: Avro and JSON Schema as compact JSON
    (whitespace-insensitive; ``normalize`` also sorts object keys, Confluent's
    ``normalize=true``), Protobuf text as given (trimmed). Raises RegistryError 42201 on
    text that is not JSON for a JSON-based type."""
    if schema_type == PROTOBUF:
        return text.strip()
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise RegistryError(INVALID_SCHEMA, f"Invalid schema: not JSON: {exc!r}") from None
    return json.dumps(doc, separators=(",", ":"), sort_keys=normalize, ensure_ascii=False)


def parse(schema_type: str, text: str, references: list[str], *, normalize: bool = False) -> Parsed:
    """Parse ``text`` of ``schema_type`` (AVRO, JSON, PROTOBUF) after the texts of its
    references (dependencies first). Raises RegistryError 42201 (invalid schema or
    unknown type)."""
    if schema_type not in SCHEMA_TYPES:
        raise RegistryError(INVALID_SCHEMA, f"Invalid schema type {schema_type!r}")
    stored = compact(schema_type, text, normalize=normalize)
    try:
        model: Any
        if schema_type == AVRO:
            model = _avro.parse_avro(stored, references)
        elif schema_type == JSON:
            model = _jsonschema.parse_json_schema(stored)
        else:
            model = _protobuf.parse_protobuf(stored)
    except ValueError as exc:
        raise RegistryError(INVALID_SCHEMA, str(exc)) from None
    return Parsed(schema_type, stored, model)


def incompatibilities(reader: Parsed, writer: Parsed) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can).
    Schemas of different types are incompatible. Raises RegistryError 42203 when the
    rule the pair needs is not implemented (JSON Schema keywords: ``_jsonschema``)."""
    if reader.schema_type != writer.schema_type:
        return [f"schema type {writer.schema_type} read as {reader.schema_type}"]
    if reader.schema_type == AVRO:
        return _avro.reader_errors(reader.model, writer.model)
    if reader.schema_type == PROTOBUF:
        return _protobuf.reader_errors(reader.model, writer.model)
    try:
        return _jsonschema.reader_errors(reader.model, writer.model)
    except _jsonschema.Unsupported as exc:
        raise RegistryError(COMPATIBILITY_UNSUPPORTED, str(exc)) from None


def check_level(level: str, new: Parsed, previous: list[Parsed]) -> list[str]:
    """The incompatibilities of ``new`` against ``previous`` (live versions, oldest
    first) under ``level`` (empty: compatible). Raises RegistryError 42203."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            out += [f"{m} (new schema reading data of an older one)"
                    for m in incompatibilities(new, old)]  # fmt: skip
        if base in ("FORWARD", "FULL"):
            out += [f"{m} (older schema reading data of the new one)"
                    for m in incompatibilities(old, new)]  # fmt: skip
    return out
