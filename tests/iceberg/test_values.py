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
