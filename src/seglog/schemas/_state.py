"""The registry's state, rebuilt by replaying ``_schemas`` (``_records``' format) in
offset order: subjects and their versions, schemas by global id, configs and modes.

The broker's registry applies each record it writes through the same :meth:`apply`, so
what a restart rebuilds is what was served. Readers that only need the schemas (Spark's
path mode reads ``<data-dir>/_schemas-0`` directly) use :func:`read_registry`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from seglog.schemas._records import (
    SCHEMAS_TOPIC,
    SchemaVersion,
    decode_key,
    decode_schema_value,
)
from seglog.storage import OFFSET_OLDEST, Log, open_log

__all__ = ["BACKWARD", "READWRITE", "RegistryState", "log_records", "read_registry"]

log = logging.getLogger(__name__)

BACKWARD = "BACKWARD"
"""The default compatibility level (Confluent's)."""
READWRITE = "READWRITE"
"""The default mode."""


class RegistryState:
    """Subjects → versions, ids → schemas, configs and modes (``None`` key: global).

    ``next_id`` is one above the largest id any SCHEMA record ever carried (ids are never
    reused while the records naming them are in the topic)."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        """Versions by subject and version number (hard-deleted ones removed)."""
        self.configs: dict[str | None, str] = {}
        """Compatibility level by subject (None: global; absent: BACKWARD)."""
        self.modes: dict[str | None, str] = {}
        """Mode by subject (None: global; absent: READWRITE)."""
        self.next_id = 1
        self._by_id: dict[int, list[SchemaVersion]] = {}

    # -- reads ---------------------------------------------------------------------------

    def by_id(self, schema_id: int) -> list[SchemaVersion]:
        """The versions (any subject, soft-deleted included) carrying ``schema_id``."""
        return self._by_id.get(schema_id, [])

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions in version order (soft-deleted ones only with
        ``deleted``); [] for an unknown subject."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def latest(self, subject: str) -> SchemaVersion | None:
        """The subject's highest live version; None when it has none."""
        live = self.versions(subject)
        return live[-1] if live else None

    def live_version(self, subject: str, version: int) -> SchemaVersion | None:
        """Version ``version`` of the subject; None when absent or soft-deleted."""
        found = self.subjects.get(subject, {}).get(version)
        return None if found is None or found.deleted else found

    def schema_of(self, schema_id: int) -> SchemaVersion | None:
        """A version carrying ``schema_id`` (ids are global: any one has its text; a
        soft-deleted one included); None when no version has that id."""
        found = self._by_id.get(schema_id)
        return found[0] if found else None

    def live_subjects(self, *, deleted: bool = False) -> list[str]:
        """Subjects with a version (a live one unless ``deleted``), sorted."""
        return sorted(s for s in self.subjects if self.versions(s, deleted=deleted))

    def ids_of(self, subject: str) -> set[int]:
        """The ids registered under ``subject`` (soft-deleted versions included)."""
        return {v.id for v in self.subjects.get(subject, {}).values()}

    def compatibility(self, subject: str | None) -> str:
        """The level in force for ``subject``: its own, else the global one, else
        BACKWARD."""
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, BACKWARD)

    def mode(self, subject: str | None) -> str:
        """The mode in force for ``subject``: its own, else the global one, else
        READWRITE."""
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, READWRITE)

    # -- records -------------------------------------------------------------------------

    def apply(self, key: bytes, value: bytes | None) -> None:
        """Apply one ``_schemas`` record. Raises ValueError (or KeyError, TypeError) on a
        malformed one; unknown key types are ignored (as Confluent's NOOP)."""
        doc = decode_key(key)
        keytype = doc["keytype"]
        subject = doc.get("subject")
        if keytype == "SCHEMA":
            self._apply_schema(str(subject), int(doc["version"]), value)
        elif keytype in ("CONFIG", "MODE"):
            table = self.configs if keytype == "CONFIG" else self.modes
            field = "compatibilityLevel" if keytype == "CONFIG" else "mode"
            if value is None:
                table.pop(subject, None)
            else:
                table[subject] = str(json.loads(value)[field])
        elif keytype == "DELETE_SUBJECT" and value is not None:
            upto = int(json.loads(value)["version"])
            for v in self.subjects.get(str(subject), {}).values():
                if v.version <= upto:
                    v.deleted = True

    def _apply_schema(self, subject: str, version: int, value: bytes | None) -> None:
        versions = self.subjects.setdefault(subject, {})
        old = versions.pop(version, None)
        if old is not None:
            same_id = self._by_id.get(old.id, [])
            same_id[:] = [v for v in same_id if v is not old]
            if not same_id:
                self._by_id.pop(old.id, None)
        if value is not None:
            new = decode_schema_value(json.loads(value))
            versions[version] = new
            self._by_id.setdefault(new.id, []).append(new)
            self.next_id = max(self.next_id, new.id + 1)
        if not versions:
            del self.subjects[subject]

    def replay(self, records: Iterator[tuple[bytes | None, bytes | None]]) -> int:
        """Apply ``records`` (key, value) in order, skipping (and logging) malformed
        ones; returns how many were skipped."""
        skipped = 0
        for key, value in records:
            try:
                if key is None:
                    raise ValueError("null key")
                self.apply(key, value)
            except (ValueError, KeyError, TypeError) as exc:
                skipped += 1
                log.warning("skipping a malformed %s record: %s", SCHEMAS_TOPIC, exc)
        return skipped


def log_records(schemas_log: Log) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of a ``_schemas`` log, in offset order."""
    offset = OFFSET_OLDEST
    while True:
        offset, messages = schemas_log.consume(offset, 10_000)
        if not messages:
            return
        for m in messages:
            yield m.key, m.value


def read_registry(data_dir: str | os.PathLike[str]) -> RegistryState:
    """The registry state stored in a broker's data directory (``<data_dir>/_schemas-0``,
    opened read-only; an empty state when there is none): what Spark's path mode decodes
    values with."""
    path = Path(data_dir) / f"{SCHEMAS_TOPIC}-0"
    state = RegistryState()
    if not path.exists():
        return state
    with open_log(path, read_only=True) as schemas_log:
        state.replay(log_records(schemas_log))
    return state
