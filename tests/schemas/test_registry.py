"""The registry's store over a real seglog log: Confluent's rules for ids and versions,
and a replay of ``_schemas`` (what a restart and Spark's path mode read) rebuilding the
state the writes produced, in Confluent's record format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import seglog
from seglog.schemas import (
    SCHEMAS_TOPIC,
    Registry,
    RegistryError,
    decode_key,
    frame_schema_id,
    read_registry,
    schema_id_of,
)


def _schema(name: str, *fields: str) -> dict[str, str]:
    doc = {"type": "record", "name": name, "fields": [{"name": f, "type": "int"} for f in fields]}
    return {"schema": json.dumps(doc)}


def _open(data: Path) -> Registry:
    return Registry(seglog.open_log(data / f"{SCHEMAS_TOPIC}-0", create=True))


def test_ids_are_global_and_versions_per_subject(tmp_path: Path) -> None:
    registry = _open(tmp_path)
    assert registry.register("a-value", _schema("A", "x")) == {"id": 1, "version": 1}
    # the same text under another subject: the same id; whitespace does not matter
    spaced = {"schema": json.dumps(json.loads(_schema("A", "x")["schema"]), indent=4)}
    assert registry.register("b-value", spaced) == {"id": 1, "version": 1}
    assert registry.register("a-value", spaced) == {"id": 1, "version": 1}  # already there
    registry.set_config("a-value", "NONE")
    assert registry.register("a-value", _schema("Other", "y")) == {"id": 2, "version": 2}
    assert [v.subject for v in registry.id_versions(1)] == ["a-value", "b-value"]
    # a new version number after soft-deleting the latest one
    assert registry.delete_version("a-value", "latest") == 2
    assert registry.register("a-value", _schema("Third", "z")) == {"id": 3, "version": 3}
    assert registry.versions("a-value") == [1, 3]
    assert registry.versions("a-value", deleted=True) == [1, 2, 3]


def test_replay_rebuilds_the_same_state(tmp_path: Path) -> None:
    registry = _open(tmp_path)
    registry.register("a-value", _schema("A", "x"))
    registry.register("b-value", _schema("B", "x"))
    registry.set_config(None, "FULL")
    registry.set_mode("b-value", "READONLY")
    registry.delete_subject("a-value")
    registry.delete_subject("a-value", permanent=True)
    assert registry.log is not None
    registry.log.close()
    again = read_registry(tmp_path)  # read-only, as Spark's path mode opens it
    assert again.live_subjects(deleted=True) == ["b-value"]
    assert again.compatibility("b-value") == "FULL"
    assert again.mode("b-value") == "READONLY"
    assert again.next_id == 3  # id 1 (hard-deleted) is not handed out again while its record is
    reopened = _open(tmp_path)
    assert reopened.register("c-value", _schema("C", "q"))["id"] == 3
    with pytest.raises(RegistryError) as info:
        reopened.register("b-value", _schema("B2", "x"))
    assert info.value.error_code == 42205


def test_records_are_confluents_format(tmp_path: Path) -> None:
    registry = _open(tmp_path)
    registry.register("a-value", {**_schema("A", "x"), "schemaType": "AVRO"})
    registry.set_config("a-value", "FORWARD")
    assert registry.log is not None
    registry.log.sync()  # what the HTTP layer waits for before answering
    _next, messages = registry.log.consume(seglog.OFFSET_OLDEST, 10)
    keys = [decode_key(m.key or b"") for m in messages]
    assert keys == [
        {"keytype": "SCHEMA", "subject": "a-value", "version": 1, "magic": 1},
        {"keytype": "CONFIG", "subject": "a-value", "magic": 0},
    ]
    value = json.loads(messages[0].value or b"")
    assert value == {
        "subject": "a-value", "version": 1, "id": 1, "references": [],
        "schema": '{"type":"record","name":"A","fields":[{"name":"x","type":"int"}]}',
        "deleted": False,
    }  # fmt: skip
    assert json.loads(messages[1].value or b"") == {"compatibilityLevel": "FORWARD"}


def test_malformed_records_are_skipped_on_replay(tmp_path: Path) -> None:
    registry = _open(tmp_path)
    registry.register("a-value", _schema("A", "x"))
    assert registry.log is not None
    garbage = seglog.storage.encode_records([b"{]"], [b"not json"], 0, None, 1 << 30)
    registry.log.append(bytes(garbage))
    registry.log.close()
    again = _open(tmp_path)
    assert again.skipped == 1
    assert again.versions("a-value") == [1]


def test_wire_format_helpers() -> None:
    framed = frame_schema_id(258, b"payload")
    assert framed[:5] == b"\x00\x00\x00\x01\x02"
    assert schema_id_of(framed) == 258
    assert schema_id_of(b"\x01\x00\x00\x00\x01x") is None
    assert schema_id_of(b"\x00\x00") is None
