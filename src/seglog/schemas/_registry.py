"""The registry's operations (Confluent Schema Registry's REST resources, without HTTP):
subjects, versions, ids, register and look up, soft and hard deletes, configs and modes,
compatibility checks. Each write appends its ``_schemas`` records to the registry's log
(one record batch) and applies them to :class:`RegistryState` with the code a replay
runs; the caller answers the client once ``end_offset`` is durable (a concurrent read may
see a write a moment before its fsync completes, as a Kafka follower never would; the
writer's answer always waits for it; if that fsync fails the log goes offline and the
broker must restart, which replays only what is on disk).

Confluent's rules kept here: ids are global (the same schema text, type and references
registered under two subjects has one id); a subject's next version is one above its
highest, soft-deleted included; a soft-deleted version is still served by id; a hard
delete (``permanent``) needs a soft delete first (40405 / 40407); a schema other live
schemas reference cannot be deleted (42206); an id may be given only in IMPORT mode,
which skips compatibility checks; READONLY refuses writes (42205).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from seglog.errors import SeglogError
from seglog.schemas._errors import (
    ID_CONFLICT,
    INCOMPATIBLE_SCHEMA,
    INVALID_COMPATIBILITY_LEVEL,
    INVALID_MODE,
    INVALID_SCHEMA,
    INVALID_SUBJECT,
    INVALID_VERSION,
    OPERATION_NOT_PERMITTED,
    REFERENCE_EXISTS,
    SCHEMA_NOT_FOUND,
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
    SUBJECT_MODE_NOT_CONFIGURED,
    SUBJECT_NOT_FOUND,
    SUBJECT_NOT_SOFT_DELETED,
    SUBJECT_SOFT_DELETED,
    VERSION_NOT_FOUND,
    VERSION_NOT_SOFT_DELETED,
    VERSION_SOFT_DELETED,
    RegistryError,
)
from seglog.schemas._formats import LEVELS, Parsed, check_level, compact, parse
from seglog.schemas._records import (
    AVRO,
    Reference,
    SchemaVersion,
    config_key,
    delete_subject_key,
    mode_key,
    schema_key,
    schema_value,
)
from seglog.schemas._state import RegistryState, log_records
from seglog.storage import Log, encode_records

__all__ = ["MODES", "Registry"]

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
_MAX_VERSION = (1 << 31) - 1
_MAX_SUBJECT = 255


def _check_subject(subject: str) -> None:
    if not subject or len(subject) > _MAX_SUBJECT or any(ord(c) < 32 for c in subject):
        raise RegistryError(INVALID_SUBJECT, f"Invalid subject {subject!r}")


def _identity(schema_type: str, text: str, refs: tuple[Reference, ...]) -> tuple[Any, ...]:
    return (schema_type, text, refs)


class Registry:
    """The schema registry over its ``_schemas`` log (None: in memory only, tests).
    Loop thread only (its writes append synchronously; see the module docstring)."""

    def __init__(self, schemas_log: Log | None) -> None:
        self.log = schemas_log
        self.state = RegistryState()
        self.end_offset = 0
        """The log end offset after this registry's last write (wait for it to be
        durable before answering that write)."""
        if schemas_log is not None:
            self.skipped = self.state.replay(log_records(schemas_log))
            self.end_offset = schemas_log.log_end_offset
        self._ids: dict[tuple[Any, ...], int] = {}
        for versions in self.state.subjects.values():
            for v in versions.values():
                self._ids.setdefault(_identity(v.schema_type, v.schema, v.references), v.id)

    # -- writes --------------------------------------------------------------------------

    def _write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append ``records`` as one batch, then apply them. Raises RegistryError 50001
        when the log refuses the append (nothing applied)."""
        if self.log is not None:
            keys = [k for k, _v in records]
            values = [v for _k, v in records]
            batch = bytes(encode_records(values, keys, int(time.time() * 1000), None, 1 << 30))
            try:
                info = self.log.append(batch)
            except (OSError, SeglogError) as exc:  # the log is offline, full, closed
                raise RegistryError(50001, f"Error while storing the schema: {exc}") from exc
            self.end_offset = info.last_offset + 1
        for key, value in records:
            self.state.apply(key, value)

    # -- reads ---------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        """Subjects with a live version (any version with ``deleted``), sorted."""
        return [s for s in self.state.live_subjects(deleted=deleted) if s.startswith(prefix)]

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        """The subject's version numbers. Raises 40401."""
        found = self.state.versions(subject, deleted=deleted)
        if not found:
            raise RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return [v.version for v in found]

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> SchemaVersion:
        """One version: a number, ``latest`` or -1 (the latest live one). Raises 42202
        (not a valid version), 40401, 40402."""
        number = self._version_number(version)
        live = self.state.versions(subject, deleted=deleted)
        if not self.state.versions(subject, deleted=True):
            raise RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        if number == -1:
            if not live:
                raise RegistryError(VERSION_NOT_FOUND, f"Version latest not found for '{subject}'.")
            return live[-1]
        for v in live:
            if v.version == number:
                return v
        raise RegistryError(VERSION_NOT_FOUND, f"Version {number} not found.")

    @staticmethod
    def _version_number(version: str | int) -> int:
        if version == "latest":
            return -1
        try:
            number = int(version)
        except (TypeError, ValueError):
            number = 0
        if number == -1 or 1 <= number <= _MAX_VERSION:
            return number
        raise RegistryError(
            INVALID_VERSION,
            f"The specified version '{version}' is not a valid version id. Allowed values "
            'are between [1, 2^31-1] and the string "latest"',
        )

    def by_id(self, schema_id: int) -> SchemaVersion:
        """A version carrying ``schema_id`` (its text, type and references). Raises
        40403."""
        found = self.state.by_id(schema_id)
        if not found:
            raise RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return found[0]

    def id_versions(self, schema_id: int, *, deleted: bool = False) -> list[SchemaVersion]:
        """The (subject, version)s carrying ``schema_id``. Raises 40403."""
        self.by_id(schema_id)
        found = [v for v in self.state.by_id(schema_id) if deleted or not v.deleted]
        return sorted(found, key=lambda v: (v.subject, v.version))

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        """Ids of live schemas referencing that version. Raises 40401, 40402, 42202."""
        target = self.version(subject, version)
        return sorted({
            v.id for s in self.state.subjects for v in self.state.versions(s)
            if any(r.subject == subject and r.version == target.version for r in v.references)
        })  # fmt: skip

    # -- register and look up ------------------------------------------------------------

    def _references(self, raw: Any) -> tuple[tuple[Reference, ...], list[str]]:
        """The references of a request body and their schema texts, dependencies first.
        Raises 42201."""
        if raw is None:
            return (), []
        try:
            refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                         for r in raw)  # fmt: skip
        except (TypeError, KeyError, ValueError):
            raise RegistryError(INVALID_SCHEMA, "Invalid schema references") from None
        texts: list[str] = []
        seen: set[tuple[str, int]] = set()

        def visit(ref: Reference, depth: int) -> None:
            if (ref.subject, ref.version) in seen:
                return
            if depth > 32:
                raise RegistryError(INVALID_SCHEMA, "Invalid schema: references nest too deep")
            seen.add((ref.subject, ref.version))
            try:
                target = self.version(ref.subject, ref.version, deleted=True)
            except RegistryError:
                raise RegistryError(
                    INVALID_SCHEMA,
                    f"Invalid schema: reference {ref.name} ({ref.subject} version "
                    f"{ref.version}) not found",
                ) from None
            for inner in target.references:
                visit(inner, depth + 1)
            texts.append(target.schema)

        for ref in refs:
            visit(ref, 0)
        return refs, texts

    def _parse_body(
        self, body: Mapping[str, Any], normalize: bool
    ) -> tuple[Parsed, tuple[Reference, ...]]:
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise RegistryError(INVALID_SCHEMA, "Empty schema")
        schema_type = str(body.get("schemaType") or AVRO).upper()
        refs, texts = self._references(body.get("references"))
        return parse(schema_type, text, texts, normalize=normalize), refs

    def _parsed(self, v: SchemaVersion) -> Parsed:
        _refs, texts = self._references([r.to_json() for r in v.references])
        return parse(v.schema_type, v.schema, texts)

    @staticmethod
    def _same(v: SchemaVersion, new: Parsed, refs: tuple[Reference, ...], normalize: bool) -> bool:
        if v.schema_type != new.schema_type or v.references != refs:
            return False
        if v.schema == new.text:
            return True
        return normalize and compact(v.schema_type, v.schema, normalize=True) == new.text

    def register(
        self, subject: str, body: Mapping[str, Any], *, normalize: bool = False
    ) -> dict[str, Any]:
        """``POST /subjects/{subject}/versions``: the schema's id (and version), the
        existing one when the subject already has it. Raises 42201, 409, 42205, 42207,
        42208, 50001."""
        _check_subject(subject)
        mode = self.state.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        new, refs = self._parse_body(body, normalize)
        given_id = body.get("id")
        if given_id is not None and (not isinstance(given_id, int) or not 0 < given_id < 1 << 31):
            raise RegistryError(INVALID_SCHEMA, f"Invalid schema id {given_id!r}")
        if given_id is not None and mode != "IMPORT":
            raise RegistryError(
                OPERATION_NOT_PERMITTED, "A schema id may be given only in IMPORT mode"
            )
        live = self.state.versions(subject)
        for v in live:
            if self._same(v, new, refs, normalize):
                if given_id is not None and int(given_id) != v.id:
                    raise RegistryError(ID_CONFLICT, f"Schema already registered with id {v.id}")
                return {"id": v.id, "version": v.version}
        if mode != "IMPORT":
            level = self.state.compatibility(subject)
            needed = live if level.endswith("_TRANSITIVE") else live[-1:]
            errors = check_level(level, new, [self._parsed(v) for v in needed])
            if errors:
                raise RegistryError(
                    INCOMPATIBLE_SCHEMA,
                    "Schema being registered is incompatible with an earlier schema for "
                    f'subject "{subject}", details: {errors}',
                )
        schema_id = self._new_id(new, refs, given_id)
        every = self.state.versions(subject, deleted=True)
        version = max((v.version for v in every), default=0) + 1
        if mode == "IMPORT" and body.get("version") is not None:
            version = self._version_number(body["version"])
        record = SchemaVersion(subject, version, schema_id, new.text, new.schema_type, refs)
        self._write([(schema_key(subject, version), schema_value(record))])
        self._ids.setdefault(_identity(new.schema_type, new.text, refs), schema_id)
        return {"id": schema_id, "version": version}

    def _new_id(self, new: Parsed, refs: tuple[Reference, ...], given: Any) -> int:
        key = _identity(new.schema_type, new.text, refs)
        if given is not None:
            schema_id = int(given)
            holders = self.state.by_id(schema_id)
            if holders and _identity(holders[0].schema_type, holders[0].schema,
                                     holders[0].references) != key:  # fmt: skip
                raise RegistryError(
                    ID_CONFLICT, f"Overwrite new schema with id {schema_id} is not permitted."
                )
            return schema_id
        known = self._ids.get(key)
        if known is not None and self.state.by_id(known):
            return known
        return self.state.next_id

    def lookup(
        self, subject: str, body: Mapping[str, Any], *, normalize: bool = False,
        deleted: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """``POST /subjects/{subject}``: the version of the subject holding this schema.
        Raises 40401, 40403, 42201."""
        if not self.state.versions(subject, deleted=deleted):
            raise RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        new, refs = self._parse_body(body, normalize)
        for v in reversed(self.state.versions(subject, deleted=deleted)):
            if self._same(v, new, refs, normalize):
                return version_json(v)
        raise RegistryError(SCHEMA_NOT_FOUND, "Schema not found")

    # -- deletes -------------------------------------------------------------------------

    def _referenced(self, subject: str, versions: set[int]) -> None:
        for s in self.state.subjects:
            for v in self.state.versions(s):
                if any(r.subject == subject and r.version in versions for r in v.references):
                    raise RegistryError(
                        REFERENCE_EXISTS,
                        f"One or more references exist to the schema {{subject={subject}}}",
                    )

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """``DELETE /subjects/{subject}``: the versions deleted. Raises 40401, 40404,
        40405, 42205, 42206."""
        self._writable(subject)
        every = self.state.versions(subject, deleted=True)
        live = self.state.versions(subject)
        if not every:
            raise RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        if permanent:
            if live:
                raise RegistryError(
                    SUBJECT_NOT_SOFT_DELETED,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            self._referenced(subject, {v.version for v in every})
            records: list[tuple[bytes, bytes | None]] = [
                (schema_key(subject, v.version), None) for v in every
            ]
            if subject in self.state.configs:
                records.append((config_key(subject), None))
            if subject in self.state.modes:
                records.append((mode_key(subject), None))
            self._write(records)
            return [v.version for v in every]
        if not live:
            raise RegistryError(
                SUBJECT_SOFT_DELETED,
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        self._referenced(subject, {v.version for v in live})
        upto = max(v.version for v in every)
        value = json.dumps({"subject": subject, "version": upto}).encode()
        self._write([(delete_subject_key(subject), value)])
        return [v.version for v in live]

    def delete_version(self, subject: str, version: str | int, *, permanent: bool = False) -> int:
        """``DELETE /subjects/{subject}/versions/{version}``: the version deleted. Raises
        40401, 40402, 40406, 40407, 42202, 42205, 42206."""
        self._writable(subject)
        target = self.version(subject, version, deleted=permanent)
        self._referenced(subject, {target.version})
        if permanent:
            if not target.deleted:
                raise RegistryError(
                    VERSION_NOT_SOFT_DELETED,
                    f"Subject '{subject}' Version {target.version} was not deleted first "
                    "before being permanently deleted",
                )
            self._write([(schema_key(subject, target.version), None)])
            return target.version
        if target.deleted:
            raise RegistryError(VERSION_SOFT_DELETED, f"Version {target.version} was soft deleted")
        gone = SchemaVersion(
            subject, target.version, target.id, target.schema, target.schema_type,
            target.references, deleted=True,
        )  # fmt: skip
        self._write([(schema_key(subject, target.version), schema_value(gone))])
        return target.version

    def _writable(self, subject: str) -> None:
        if self.state.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")

    # -- configs and modes ---------------------------------------------------------------

    def config(self, subject: str | None, *, default_to_global: bool = False) -> str:
        """The compatibility level of ``subject`` (None: global). Raises 40408 for a
        subject without its own level unless ``default_to_global``."""
        if subject is None or subject in self.state.configs or default_to_global:
            return self.state.compatibility(subject)
        raise RegistryError(
            SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
            f"Subject '{subject}' does not have subject-level compatibility configured",
        )

    def set_config(self, subject: str | None, level: Any) -> str:
        """Set a compatibility level. Raises 42203, 42208."""
        if subject is not None:
            _check_subject(subject)
        text = str(level or "").upper()
        if text not in LEVELS:
            raise RegistryError(
                INVALID_COMPATIBILITY_LEVEL,
                f"Invalid compatibility level. Valid values are {', '.join(LEVELS)}",
            )
        value = json.dumps({"compatibilityLevel": text}).encode()
        self._write([(config_key(subject), value)])
        return text

    def delete_config(self, subject: str | None) -> str:
        """Remove a subject's level (None: reset the global one); the level it had.
        Raises 40408."""
        previous = self.config(subject)
        if subject is None and None not in self.state.configs:
            return previous
        self._write([(config_key(subject), None)])
        return previous

    def mode(self, subject: str | None, *, default_to_global: bool = False) -> str:
        """The mode of ``subject`` (None: global). Raises 40409 for a subject without its
        own mode unless ``default_to_global``."""
        if subject is None or subject in self.state.modes or default_to_global:
            return self.state.mode(subject)
        raise RegistryError(
            SUBJECT_MODE_NOT_CONFIGURED,
            f"Subject '{subject}' does not have subject-level mode configured",
        )

    def set_mode(self, subject: str | None, mode: Any, *, force: bool = False) -> str:
        """Set a mode. IMPORT on a registry (subject) holding schemas needs ``force``.
        Raises 42204, 42205, 42208."""
        if subject is not None:
            _check_subject(subject)
        text = str(mode or "").upper()
        if text not in MODES:
            raise RegistryError(INVALID_MODE, f"Invalid mode. Valid values are {', '.join(MODES)}")
        if text == "IMPORT" and not force:
            holding = self.state.versions(subject) if subject else self.subjects()
            if holding:
                raise RegistryError(
                    OPERATION_NOT_PERMITTED,
                    "Cannot import since found existing subjects (use force=true)",
                )
        self._write([(mode_key(subject), json.dumps({"mode": text}).encode())])
        return text

    def delete_mode(self, subject: str) -> str:
        """Remove a subject's mode; the mode it had. Raises 40409."""
        previous = self.mode(subject)
        self._write([(mode_key(subject), None)])
        return previous

    # -- compatibility -------------------------------------------------------------------

    def check(
        self, subject: str, version: str | int | None, body: Mapping[str, Any], *,
        normalize: bool = False,
    ) -> list[str]:  # fmt: skip
        """``POST /compatibility/subjects/{subject}/versions[/{version}]``: the
        incompatibilities of the schema against that version (None: the versions the
        subject's level names). Raises 40401, 40402, 42201, 42202, 42203."""
        new, _refs = self._parse_body(body, normalize)
        level = self.state.compatibility(subject)
        if version is None:
            live = self.state.versions(subject)
            needed = live if level.endswith("_TRANSITIVE") else live[-1:]
            return check_level(level, new, [self._parsed(v) for v in needed])
        target = self.version(subject, version)
        return check_level(level.removesuffix("_TRANSITIVE"), new, [self._parsed(target)])


def version_json(v: SchemaVersion) -> dict[str, Any]:
    """A version as Confluent answers it: subject, version, id, schemaType (not for AVRO),
    references (when any), schema."""
    out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != AVRO:
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.to_json() for r in v.references]
    out["schema"] = v.schema
    return out
