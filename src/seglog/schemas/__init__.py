"""seglog's schema registry core: schema formats (Avro with fastavro, JSON Schema with
jsonschema, Protobuf with proto-schema-parser), their compatibility rules, and the
subject / version / id store kept in the compacted ``_schemas`` topic in Confluent
Schema Registry's own record format. No HTTP, no asyncio: the broker serves it
(``seglog.broker``'s schema registry), Spark reads ``_schemas`` with
:func:`read_registry`. See docs/schema-registry.md.

Names are imported on first use (PEP 562): the broker and the CLI name ``SCHEMAS_TOPIC``
without loading fastavro, jsonschema and the .proto parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seglog._lazy import load_export

if TYPE_CHECKING:
    from seglog.schemas._errors import RegistryError
    from seglog.schemas._formats import (
        LEVELS,
        Parsed,
        check_level,
        compact,
        incompatibilities,
        parse,
    )
    from seglog.schemas._jsoncheck import json_checker
    from seglog.schemas._protobuf_descriptor import serialized_protobuf
    from seglog.schemas._records import (
        AVRO,
        JSON,
        PROTOBUF,
        SCHEMA_TYPES,
        SCHEMAS_TOPIC,
        Reference,
        SchemaVersion,
        decode_key,
        decode_schema_value,
    )
    from seglog.schemas._registry import MODES, Registry, version_json
    from seglog.schemas._state import (
        BACKWARD,
        READWRITE,
        RegistryState,
        log_records,
        read_registry,
    )
    from seglog.schemas._wire import MAGIC, frame_schema_id, schema_id_of

_LAZY: dict[str, str] = {
    "RegistryError": "_errors",
    "LEVELS": "_formats",
    "Parsed": "_formats",
    "check_level": "_formats",
    "compact": "_formats",
    "incompatibilities": "_formats",
    "parse": "_formats",
    "AVRO": "_records",
    "JSON": "_records",
    "PROTOBUF": "_records",
    "SCHEMA_TYPES": "_records",
    "SCHEMAS_TOPIC": "_records",
    "Reference": "_records",
    "SchemaVersion": "_records",
    "decode_key": "_records",
    "decode_schema_value": "_records",
    "serialized_protobuf": "_protobuf_descriptor",
    "json_checker": "_jsoncheck",
    "MODES": "_registry",
    "Registry": "_registry",
    "version_json": "_registry",
    "BACKWARD": "_state",
    "READWRITE": "_state",
    "RegistryState": "_state",
    "log_records": "_state",
    "read_registry": "_state",
    "MAGIC": "_wire",
    "frame_schema_id": "_wire",
    "schema_id_of": "_wire",
}

__all__ = [  # noqa: RUF022 (grouped by concern)
    # formats and compatibility
    "AVRO",
    "JSON",
    "LEVELS",
    "PROTOBUF",
    "SCHEMA_TYPES",
    "Parsed",
    "check_level",
    "compact",
    "incompatibilities",
    "parse",
    "serialized_protobuf",
    # validation of JSON documents (fast for type-only schemas)
    "json_checker",
    # the store (records in _schemas: Confluent's format, see _records)
    "BACKWARD",
    "MODES",
    "READWRITE",
    "SCHEMAS_TOPIC",
    "Reference",
    "Registry",
    "RegistryError",
    "RegistryState",
    "SchemaVersion",
    "decode_key",
    "decode_schema_value",
    "log_records",
    "read_registry",
    "version_json",
    # Confluent's wire format of keys and values
    "MAGIC",
    "frame_schema_id",
    "schema_id_of",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    return load_export(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted(__all__)
