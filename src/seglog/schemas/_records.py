"""The registry's records in its compacted topic ``_schemas``: Confluent Schema Registry's
own format (its ``KafkaStore`` keys and values, JSON in UTF-8), so a reader that knows
Confluent's topic reads seglog's, and the other way round.

Keys (``magic`` 1 for SCHEMA keys, 0 for the others, as Confluent writes them)::

    {"keytype": "SCHEMA", "subject": "orders-value", "version": 3, "magic": 1}
    {"keytype": "CONFIG", "subject": "orders-value", "magic": 0}    subject null: global
    {"keytype": "MODE", "subject": null, "magic": 0}                subject null: global
    {"keytype": "DELETE_SUBJECT", "subject": "orders-value", "magic": 0}
    {"keytype": "NOOP", "magic": 0}                                 ignored

Values::

    SCHEMA          {"subject", "version", "id", "schema", "schemaType" (absent: AVRO),
                     "references": [{"name", "subject", "version"}], "deleted": bool}
    CONFIG          {"compatibilityLevel": "BACKWARD"}
    MODE            {"mode": "READWRITE" | "READONLY" | "IMPORT"}
    DELETE_SUBJECT  {"subject", "version"}: every version up to it soft-deleted

A null value (a tombstone) removes its key: a SCHEMA tombstone is a permanent (hard)
delete of that version, a CONFIG or MODE tombstone a subject's setting removed. The last
record per key is the state (the topic is compacted); replaying the topic from the start
in offset order rebuilds the registry (:class:`~seglog.schemas.RegistryState`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AVRO",
    "JSON",
    "PROTOBUF",
    "SCHEMAS_TOPIC",
    "SCHEMA_TYPES",
    "Reference",
    "SchemaVersion",
    "config_key",
    "decode_key",
    "decode_schema_value",
    "delete_subject_key",
    "mode_key",
    "schema_key",
    "schema_value",
]

SCHEMAS_TOPIC = "_schemas"
"""The registry's compacted topic (Confluent's ``kafkastore.topic`` default)."""

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)
"""The schema types served (``GET /schemas/types`` order, as Confluent's)."""


@dataclass(frozen=True)
class Reference:
    """A schema reference: the ``name`` the referring schema uses (an Avro full name, a
    JSON ``$ref`` URL, a .proto import path) for version ``version`` of ``subject``."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        """``{"name", "subject", "version"}``."""
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class SchemaVersion:
    """One version of a subject: its global schema ``id``, the schema text as stored,
    its type (AVRO, JSON, PROTOBUF), references, and whether it is soft-deleted."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = ()
    deleted: bool = False


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    """The SCHEMA key of one version."""
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(v: SchemaVersion) -> bytes:
    """The SCHEMA value of one version (``schemaType`` omitted for AVRO, as Confluent)."""
    doc: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != AVRO:
        doc["schemaType"] = v.schema_type
    doc["references"] = [r.to_json() for r in v.references]
    doc["schema"] = v.schema
    doc["deleted"] = v.deleted
    return _dump(doc)


def config_key(subject: str | None) -> bytes:
    """The CONFIG key of a subject (None: the global config)."""
    return _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    """The MODE key of a subject (None: the global mode)."""
    return _dump({"keytype": "MODE", "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    """The DELETE_SUBJECT key of a subject."""
    return _dump({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def decode_key(raw: bytes) -> dict[str, Any]:
    """A key's JSON object. Raises ValueError when it is not one with a ``keytype``."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("keytype"), str):
        raise ValueError("not a _schemas key")
    return doc


def decode_schema_value(doc: dict[str, Any]) -> SchemaVersion:
    """A SCHEMA value's object → :class:`SchemaVersion`. Raises ValueError, KeyError,
    TypeError on a malformed one."""
    refs = tuple(
        Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
        for r in doc.get("references") or ()
    )
    return SchemaVersion(
        subject=str(doc["subject"]),
        version=int(doc["version"]),
        id=int(doc["id"]),
        schema=str(doc["schema"]),
        schema_type=str(doc.get("schemaType") or AVRO),
        references=refs,
        deleted=bool(doc.get("deleted", False)),
    )
