"""The schema registry's store read from a data directory: the ``_schemas`` topic.

The registry (``seglog serve --schema-registry-listen``) keeps every registered schema in
the compacted internal topic ``_schemas`` in Confluent Schema Registry's own record
format: key ``{"keytype": "SCHEMA", "subject": s, "version": v, "magic": 1}``, value
``{"subject", "version", "id", "schema", "schemaType", "references", "deleted"}`` (JSON;
``schemaType`` absent means AVRO; a null value is a hard delete). Readers that have the data
directory but no registry endpoint — the Spark source in path mode, Parquet mirrors — fold
those records here: ids are global, so ``by_id`` answers for any subject. SCHEMA and
DELETE_SUBJECT records are read (a subject's versions up to the one named soft-deleted);
CONFIG, MODE and NOOP change neither ids nor versions. (Columnar may import storage only,
so this fold is its own; ``seglog.schemas.read_registry`` is the registry's.)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage import OFFSET_OLDEST, open_log

__all__ = ["SCHEMAS_TOPIC", "RegisteredSchema", "SchemaStore", "load_schema_store"]

SCHEMAS_TOPIC = "_schemas"
"""Confluent Schema Registry's store topic (its ``kafkastore.topic`` default)."""


@dataclass(frozen=True)
class RegisteredSchema:
    """One version of a subject: its global id, schema text and type (AVRO, JSON, PROTOBUF)."""

    subject: str
    version: int
    schema_id: int
    schema: str
    schema_type: str = "AVRO"


@dataclass
class SchemaStore:
    """Registered schemas by id and by (subject, version), soft-deleted versions left out."""

    by_id: dict[int, RegisteredSchema] = field(default_factory=dict)
    versions: dict[tuple[str, int], RegisteredSchema] = field(default_factory=dict)

    def latest(self, subject: str) -> RegisteredSchema | None:
        """The subject's highest live version, None if it has none."""
        found = [s for (subj, _), s in self.versions.items() if subj == subject]
        return max(found, key=lambda s: s.version) if found else None

    def version(self, subject: str, version: int) -> RegisteredSchema | None:
        """One version of a subject (None if absent or deleted)."""
        return self.versions.get((subject, version))

    def _delete_subject(self, value: bytes) -> None:
        """DELETE_SUBJECT ``{"subject", "version"}``: every version up to it soft-deleted."""
        found = _delete_subject_doc(value)
        if found is not None:
            subject, last = found
            for where in [w for w in self.versions if w[0] == subject and w[1] <= last]:
                del self.versions[where]

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Fold one ``_schemas`` record (malformed or non-SCHEMA records are skipped)."""
        try:
            parsed_key = json.loads(key) if key else None
        except ValueError:
            return
        if not isinstance(parsed_key, dict):
            return
        if parsed_key.get("keytype") == "DELETE_SUBJECT" and value is not None:
            self._delete_subject(value)
            return
        if parsed_key.get("keytype") != "SCHEMA":
            return
        where = (str(parsed_key.get("subject")), int(parsed_key.get("version", 0)))
        doc = None
        if value is not None:
            try:
                doc = json.loads(value)
            except ValueError:
                return
        if not isinstance(doc, dict) or doc.get("deleted"):
            self.versions.pop(where, None)
            return
        schema = RegisteredSchema(
            subject=where[0],
            version=where[1],
            schema_id=int(doc["id"]),
            schema=str(doc["schema"]),
            schema_type=str(doc.get("schemaType") or "AVRO"),
        )
        self.versions[where] = schema
        self.by_id[schema.schema_id] = schema  # ids stay resolvable after a soft delete


def _delete_subject_doc(value: bytes) -> tuple[str, int] | None:
    try:
        doc = json.loads(value)
        return str(doc["subject"]), int(doc["version"])
    except (ValueError, KeyError, TypeError):
        return None


def load_schema_store(path: str | os.PathLike[str]) -> SchemaStore:
    """Fold the ``_schemas`` log of the data directory ``path`` (``<path>/_schemas-0``,
    opened read-only, no lock: it may be a running broker's); an empty store when there is
    none."""
    store = SchemaStore()
    directory = Path(path) / f"{SCHEMAS_TOPIC}-0"
    if not directory.is_dir():
        return store
    with open_log(directory, read_only=True) as plog:
        offset = OFFSET_OLDEST
        while True:
            next_offset, messages = plog.consume(offset, 10_000)
            if not messages:
                return store
            for message in messages:
                store.apply(message.key, message.value)
            offset = next_offset
