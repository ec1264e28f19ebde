"""``value_schema`` commits in process: values framed with a registered Avro schema's id
(a ``Registry`` over an embedded ``_schemas`` log, as the broker keeps it) become columns;
the rest goes to the dead-letter table; a crash between the dead-letter commit and the
value commit (the value table's offsets behind the dead-letter table's) lands each record
once."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import fastavro
import pytest
from pyiceberg.catalog import Catalog

import seglog
import seglog.iceberg as ice
from seglog.schemas import Registry, frame_schema_id
from seglog.storage import Log, open_log

TOPIC = "flights"
SCHEMA = {
    "type": "record", "name": "Flight",
    "fields": [{"name": "carrier", "type": "string"}, {"name": "delay", "type": "int"}],
}  # fmt: skip


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return ice.open_catalog(ice.catalog_properties(tmp_path / "data"))


def _avro(record: dict[str, object]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
    return out.getvalue()


def _setup(tmp_path: Path) -> tuple[Log, Log, list[bytes | None]]:
    schemas = open_log(tmp_path / "_schemas-0", create=True)
    schema_id = Registry(schemas).register(f"{TOPIC}-value", {"schema": json.dumps(SCHEMA)})["id"]
    values: list[bytes | None] = [
        frame_schema_id(schema_id, _avro({"carrier": "UA", "delay": i})) for i in range(4)
    ]
    values[1] = b"plain text"
    values[3] = frame_schema_id(schema_id, b"\x01")  # truncated payload
    plog = open_log(tmp_path / "flights-0", create=True)
    plog.publish([seglog.Message(key=b"k%d" % i, value=v) for i, v in enumerate(values)])
    return schemas, plog, values


def test_values_to_columns_rest_to_dead_letters_once(tmp_path: Path, catalog: Catalog) -> None:
    schemas, plog, values = _setup(tmp_path)
    topic_id = uuid.uuid4()
    lookup = ice.SchemaLookup()
    schemas.sync()  # the registry's records below the high watermark
    lookup.refresh(schemas)
    table = ice.load_topic_table(catalog, TOPIC, mode=ice.VALUE_SCHEMA)

    def dlq() -> object:
        return ice.load_topic_table(catalog, TOPIC, dlq=True)

    try:
        done = ice.commit_values(
            table, dlq, topic=TOPIC, topic_id=topic_id, logs={0: plog},
            ranges=[ice.OffsetRange(0, 0, 4)], committed={}, dlq_committed={}, lookup=lookup,
        )  # fmt: skip
        assert (done.report.rows, done.dlq_rows) == (2, 2)
        assert done.dlq_offsets == {0: 4}
        # a crash after the dead-letter commit, before the value commit: the records are
        # read again from the value table's (older) offsets — here a value table that
        # never got them — and the dead letters are not doubled
        replay = ice.load_topic_table(catalog, "flights-replay", mode=ice.VALUE_SCHEMA)
        again = ice.commit_values(
            replay, dlq, topic=TOPIC, topic_id=topic_id, logs={0: plog},
            ranges=[ice.OffsetRange(0, 0, 4)], committed={}, dlq_committed={0: 4},
            lookup=lookup,
        )  # fmt: skip
        assert (again.report.rows, again.dlq_rows) == (2, 0)
    finally:
        plog.close()
        schemas.close()
    dead = ice.load_topic_table(catalog, TOPIC, dlq=True).scan().to_arrow().to_pylist()
    assert sorted(r["offset"] for r in dead) == [1, 3]
    reasons = {r["offset"]: r["reason"] for r in dead}
    assert "wire format" in reasons[1]
    assert "does not decode" in reasons[3]
    assert {r["value"] for r in dead} == {values[1], values[3]}
    rows = catalog.load_table(("seglog", TOPIC)).scan().to_arrow().to_pylist()
    assert sorted((r["seglog"]["offset"], r["carrier"], r["delay"]) for r in rows) == [
        (0, "UA", 0), (2, "UA", 2),
    ]  # fmt: skip
    assert rows[0]["seglog"]["key"] in (b"k0", b"k2")
    assert ice.summary_of(catalog.load_table(("seglog", TOPIC)))["seglog.offsets.0"] == "4"


@pytest.mark.parametrize("trailing", [False, True])
def test_two_schemas_in_offset_order(tmp_path: Path, catalog: Catalog, trailing: bool) -> None:
    """Values of two schema ids interleaved, decoded one column per id, land in offset
    order, the first id's rows null in the column the second adds, each with its
    metadata struct; with ``trailing``, a value with a byte after its record (the
    column-wise decoder flags it, the rows are then built one by one) is still read as
    fastavro reads it."""
    gate = {"name": "gate", "type": ["null", "string"], "default": None}
    wider = {**SCHEMA, "fields": [*SCHEMA["fields"], gate]}  # type: ignore[misc]
    schemas = open_log(tmp_path / "_schemas-0", create=True)
    registry = Registry(schemas)
    first = registry.register(f"{TOPIC}-value", {"schema": json.dumps(SCHEMA)})["id"]
    second = registry.register(f"{TOPIC}-value", {"schema": json.dumps(wider)})["id"]

    def framed(i: int) -> bytes:
        if i % 2:
            out = io.BytesIO()
            record = {"carrier": "LH", "delay": i, "gate": f"G{i}"}
            fastavro.schemaless_writer(out, fastavro.parse_schema(wider), record)
            return frame_schema_id(second, out.getvalue())
        extra = b"\x00" if trailing and i == 4 else b""
        return frame_schema_id(first, _avro({"carrier": "UA", "delay": i}) + extra)

    plog = open_log(tmp_path / "flights-0", create=True)
    plog.publish([seglog.Message(key=b"k%d" % i, value=framed(i)) for i in range(6)])
    lookup = ice.SchemaLookup()
    schemas.sync()  # the registry's records below the high watermark
    lookup.refresh(schemas)
    table = ice.load_topic_table(catalog, TOPIC, mode=ice.VALUE_SCHEMA)
    try:
        done = ice.commit_values(
            table, lambda: ice.load_topic_table(catalog, TOPIC, dlq=True), topic=TOPIC,
            topic_id=uuid.uuid4(), logs={0: plog}, ranges=[ice.OffsetRange(0, 0, 6)],
            committed={}, dlq_committed={}, lookup=lookup,
        )  # fmt: skip
    finally:
        plog.close()
        schemas.close()
    assert (done.report.rows, done.dlq_rows) == (6, 0)
    rows = catalog.load_table(("seglog", TOPIC)).scan().to_arrow().to_pylist()
    assert [(r["delay"], r["carrier"], r["gate"]) for r in rows] == [
        (0, "UA", None), (1, "LH", "G1"), (2, "UA", None), (3, "LH", "G3"), (4, "UA", None),
        (5, "LH", "G5"),
    ]  # fmt: skip
    assert [(r["seglog"]["offset"], r["seglog"]["key"]) for r in rows] == [
        (i, b"k%d" % i) for i in range(6)
    ]
