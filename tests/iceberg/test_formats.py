"""``value_schema`` beyond Avro, in process: Protobuf and JSON Schema value schemas as
Iceberg schemas (the types seglog's Spark typed read gives the same schemas), and
``commit_values`` of Confluent-framed Protobuf and JSON values registered in a
``Registry`` over an embedded ``_schemas`` log: rows as columns, a newer schema's field
(nested too) added to the table, what does not decode in the dead-letter table."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.table import Table
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestamptzType,
)
from tests.columnar.test_protobuf_tree import PROTO, _classes, _orders

import seglog
import seglog.iceberg as ice
from seglog.columnar import ProtoTree, json_schema_arrow_type
from seglog.schemas import Registry, frame_schema_id, serialized_protobuf
from seglog.storage import Log, open_log

PEOPLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": ["integer", "null"]},
        "score": {"type": "number"},
        "admin": {"type": "boolean"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def _types(schema: Schema) -> dict[str, Any]:
    """Top-level column → Iceberg type (every column optional)."""
    assert not any(f.required for f in schema.fields)
    return {f.name: f.field_type for f in schema.fields}


def _order_schema() -> Schema:
    layout = json.dumps({"file": serialized_protobuf(PROTO), "message": "shop.Order"})
    return ice.arrow_table_schema(ProtoTree(layout).arrow_type)


def test_protobuf_message_as_iceberg_schema() -> None:
    schema = _order_schema()
    types = _types(schema)
    assert list(types) == [
        "id", "status", "lines", "totals", "customer", "placed", "priority", "deltas",
        "big", "note", "card", "account", "by_pos", "seglog",
    ]  # fmt: skip
    assert types["id"] == StringType()
    assert types["status"] == StringType()  # the enum's constant name
    lines = types["lines"]
    assert isinstance(lines, ListType)
    assert isinstance(lines.element_type, StructType)
    sku, qty, tags = lines.element_type.fields
    assert [(sku.name, sku.field_type), (qty.name, qty.field_type)] == [
        ("sku", StringType()), ("qty", IntegerType()),
    ]  # fmt: skip
    assert isinstance(tags.field_type, ListType)
    assert tags.field_type.element_type == StringType()
    totals = types["totals"]
    assert isinstance(totals, MapType)
    assert (totals.key_type, totals.value_type) == (StringType(), LongType())
    customer = types["customer"]
    assert isinstance(customer, StructType)
    assert [(f.name, f.field_type) for f in customer.fields] == [
        ("name", StringType()), ("avatar", BinaryType()),
    ]  # fmt: skip
    assert types["placed"] == TimestamptzType()  # google.protobuf.Timestamp
    assert types["priority"] == IntegerType()  # Int32Value: a nullable int
    assert types["deltas"] == ListType(types["deltas"].element_id, LongType(), False)
    assert types["big"] == DecimalType(20, 0)  # uint64, as spark-protobuf
    assert isinstance(types["by_pos"], MapType)
    assert types["by_pos"].key_type == IntegerType()
    # ids: a field, then what it holds; the seglog struct last, as the Avro path
    assert schema.find_field("id").field_id == 1
    ids = sorted(index_by_id(schema))
    assert ids == list(range(1, len(ids) + 1))
    assert schema.find_field("seglog").field_id == ids[-1]


def test_json_schema_as_iceberg_schema() -> None:
    types = _types(ice.arrow_table_schema(json_schema_arrow_type(json.dumps(PEOPLE))))
    assert types["name"] == StringType()
    assert types["age"] == LongType()  # [integer, null]: an optional long
    assert types["score"] == DoubleType()
    assert types["admin"] == BooleanType()
    assert isinstance(types["address"], StructType)
    assert isinstance(types["tags"], ListType)
    assert types["tags"].element_type == StringType()
    assert "seglog" in types


@pytest.mark.parametrize("fmt", ["protobuf", "json"])
def test_columns_mirror_the_spark_typed_read(fmt: str) -> None:
    """The table's value columns, as Arrow, are the typed read's struct (pyiceberg's
    large string / list types aside): the same schema, the same columns in Spark."""
    if fmt == "protobuf":
        layout = json.dumps({"file": serialized_protobuf(PROTO), "message": "shop.Order"})
        typed = ProtoTree(layout).arrow_type
    else:
        typed = json_schema_arrow_type(json.dumps(PEOPLE))
    arrow = ice.arrow_table_schema(typed).as_arrow()
    assert arrow.names[-1] == "seglog"
    value = pa.struct([f for f in arrow if f.name != "seglog"])
    assert str(value).replace("large_", "") == str(typed)


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"type": "object", "properties": {"seglog": {"type": "string"}}}, "named 'seglog'"),
        ({"type": "object", "properties": {"x": {"type": "object"}}}, "without fields"),
        ({"type": "object", "properties": {}}, "without fields"),
    ],
)
def test_refused_json_schemas(schema: dict[str, Any], error: str) -> None:
    with pytest.raises(ice.UnsupportedSchemaError, match=error):
        ice.arrow_table_schema(json_schema_arrow_type(json.dumps(schema)))


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return ice.open_catalog(ice.catalog_properties(tmp_path / "data"))


@pytest.fixture
def schemas(tmp_path: Path) -> Iterator[Log]:
    log = open_log(tmp_path / "_schemas-0", create=True)
    yield log
    log.close()


def _commit(
    catalog: Catalog, schemas: Log, tmp_path: Path, topic: str, values: list[bytes | None]
) -> tuple[ice.ValueCommit, Table]:
    plog = open_log(tmp_path / f"{topic}-0", create=True)
    try:
        plog.publish([seglog.Message(key=b"k%d" % i, value=v) for i, v in enumerate(values)])
        schemas.sync()  # the registry's records below the high watermark
        lookup = ice.SchemaLookup()
        lookup.refresh(schemas)
        table = ice.load_topic_table(catalog, topic, mode=ice.VALUE_SCHEMA)
        done = ice.commit_values(
            table, lambda: ice.load_topic_table(catalog, topic, dlq=True), topic=topic,
            topic_id=uuid.uuid4(), logs={0: plog}, ranges=[ice.OffsetRange(0, 0, len(values))],
            committed={}, dlq_committed={}, lookup=lookup,
        )  # fmt: skip
    finally:
        plog.close()
    return done, catalog.load_table(("seglog", topic))


def _rows(table: Table) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["seglog"]["offset"])


def _dead(catalog: Catalog, topic: str) -> dict[int, str]:
    table = ice.load_topic_table(catalog, topic, dlq=True)
    return {r["offset"]: r["reason"] for r in table.scan().to_arrow().to_pylist()}


def _proto_frame(schema_id: int, indexes: bytes, message: Any) -> bytes:
    return frame_schema_id(schema_id, indexes + message.SerializeToString())


def test_protobuf_values_to_columns(catalog: Catalog, schemas: Log, tmp_path: Path) -> None:
    body = {"schema": PROTO, "schemaType": "PROTOBUF"}
    schema_id = Registry(schemas).register("orders-value", body)["id"]
    classes = _classes()
    full, empty, _ = _orders(classes)
    customer = classes["shop.Customer"](name="bo")
    values: list[bytes | None] = [
        _proto_frame(schema_id, b"\x00", full),  # indexes [0]: shop.Order
        _proto_frame(schema_id, b"\x00", empty),
        _proto_frame(schema_id, b"\x00", full)[:-3],  # truncated
        _proto_frame(schema_id, b"\x02\x0a", customer),  # indexes [5]: no such message
        _proto_frame(schema_id, b"\x02\x02", customer),  # indexes [1]: shop.Customer
    ]
    done, table = _commit(catalog, schemas, tmp_path, "orders", values)
    assert (done.report.rows, done.dlq_rows) == (3, 2)
    rows = _rows(table)
    assert [r["seglog"]["offset"] for r in rows] == [0, 1, 4]
    first = rows[0]
    assert first["status"] == "PAID"
    assert first["lines"] == [
        {"sku": "a", "qty": 2, "tags": ["x", "y"]}, {"sku": "b", "qty": 0, "tags": []},
    ]  # fmt: skip
    assert sorted(first["totals"]) == [("eur", 10), ("usd", -3)]
    assert first["customer"] == {"name": "ada", "avatar": b"\x00\xff"}
    assert first["placed"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    assert first["priority"] == 0  # a wrapper set to its default: present
    assert first["deltas"] == [-1, 5, 1 << 40]
    assert first["big"] == Decimal((1 << 64) - 1)
    assert (first["note"], first["card"], first["account"]) == ("", "4111", None)
    assert first["by_pos"] == [(3, {"sku": "c", "qty": 1, "tags": []})]
    assert first["seglog"]["key"] == b"k0"
    empty_row = rows[1]
    assert (empty_row["status"], empty_row["placed"], empty_row["priority"]) == ("NEW", None, None)
    assert empty_row["customer"] is None
    # the Customer message (indexes [1]) is a schema of its own: its fields added
    assert (rows[2]["name"], rows[2]["id"]) == ("bo", None)
    dead = _dead(catalog, "orders")
    assert sorted(dead) == [2, 3]
    assert "does not decode with schema id" in dead[2]
    assert "message indexes [5] name no message" in dead[3]


def test_protobuf_schema_evolution_nested(catalog: Catalog, schemas: Log, tmp_path: Path) -> None:
    """v2 adds a top-level field and a field of a nested message: both become columns."""
    v1 = 'syntax = "proto3"; message M { string a = 1; N n = 2; } message N { int32 x = 1; }'
    v2 = (
        'syntax = "proto3"; message M { string a = 1; N n = 2; int64 b = 3; }'
        " message N { int32 x = 1; string y = 2; }"
    )
    registry = Registry(schemas)
    id1 = registry.register("m-value", {"schema": v1, "schemaType": "PROTOBUF"})["id"]
    id2 = registry.register("m-value", {"schema": v2, "schemaType": "PROTOBUF"})["id"]
    assert id1 != id2
    # hand-encoded: M{a="p", n{x=1}} and M{a="q", n{x=2, y="z"}, b=7}
    m1 = b"\x0a\x01p\x12\x02\x08\x01"
    m2 = b"\x0a\x01q\x12\x05\x08\x02\x12\x01z\x18\x07"
    values: list[bytes | None] = [
        frame_schema_id(id1, b"\x00" + m1), frame_schema_id(id2, b"\x00" + m2),
    ]  # fmt: skip
    done, table = _commit(catalog, schemas, tmp_path, "m", values)
    assert (done.report.rows, done.dlq_rows) == (2, 0)
    assert [f.name for f in table.schema().fields] == ["seglog", "a", "n", "b"]
    assert table.schema().find_type("n.y") == StringType()
    rows = _rows(table)
    assert [(r["a"], r["n"], r["b"]) for r in rows] == [
        ("p", {"x": 1, "y": None}, None), ("q", {"x": 2, "y": "z"}, 7),
    ]  # fmt: skip


def test_protobuf_widened_column(catalog: Catalog, schemas: Log, tmp_path: Path) -> None:
    """int32 → int64 of a field (wire-compatible): the column is promoted int → long."""
    registry = Registry(schemas)
    registry.set_config("w-value", "NONE")
    id1 = registry.register("w-value", {"schema": 'syntax = "proto3"; message W { int32 v = 1; }',
                                        "schemaType": "PROTOBUF"})["id"]  # fmt: skip
    id2 = registry.register("w-value", {"schema": 'syntax = "proto3"; message W { int64 v = 1; }',
                                        "schemaType": "PROTOBUF"})["id"]  # fmt: skip
    big = 1 << 40
    varint = bytearray()
    n = big
    while n >= 0x80:
        varint.append((n & 0x7F) | 0x80)
        n >>= 7
    varint.append(n)
    values: list[bytes | None] = [
        frame_schema_id(id1, b"\x00\x08\x05"), frame_schema_id(id2, b"\x00\x08" + bytes(varint)),
    ]  # fmt: skip
    done, table = _commit(catalog, schemas, tmp_path, "w", values)
    assert (done.report.rows, done.dlq_rows) == (2, 0)
    assert table.schema().find_type("v") == LongType()
    assert [r["v"] for r in _rows(table)] == [5, big]


def test_json_values_to_columns(catalog: Catalog, schemas: Log, tmp_path: Path) -> None:
    body = {"schema": json.dumps(PEOPLE), "schemaType": "JSON"}
    schema_id = Registry(schemas).register("people-value", body)["id"]

    def doc(value: Any) -> bytes:
        return frame_schema_id(schema_id, json.dumps(value).encode())

    values: list[bytes | None] = [
        doc({"name": "ada", "age": 36, "score": 1.5, "admin": True,
             "address": {"city": "London"}, "tags": ["a", "b"]}),
        doc({"name": "bob", "extra": "ignored"}),
        doc({"name": "eve", "age": "thirty"}),  # not valid: a string for an integer
        doc(["not", "an", "object"]),
        frame_schema_id(schema_id, b"{not json"),
        doc({"name": "max", "address": {"city": 7}}),  # not valid: nested
        doc({"name": "ivy", "age": 1.5}),  # not valid (a long column would truncate it)
        doc({"name": "kim", "age": 1 << 70}),  # valid, but beyond a long column
    ]  # fmt: skip
    done, table = _commit(catalog, schemas, tmp_path, "people", values)
    assert (done.report.rows, done.dlq_rows) == (2, 6)
    rows = _rows(table)
    assert [(r["name"], r["age"], r["score"], r["admin"]) for r in rows] == [
        ("ada", 36, 1.5, True), ("bob", None, None, None),
    ]  # fmt: skip
    assert rows[0]["address"] == {"city": "London"}
    assert rows[0]["tags"] == ["a", "b"]
    assert "extra" not in rows[1]
    dead = _dead(catalog, "people")
    assert sorted(dead) == [2, 3, 4, 5, 6, 7]
    assert "not valid under its JSON Schema at age" in dead[2]
    assert "not an object" in dead[3]
    assert "does not decode with schema id" in dead[4]
    assert "not valid under its JSON Schema at address/city" in dead[5]
    assert "not valid under its JSON Schema at age" in dead[6]
    assert "does not fit the table's columns" in dead[7]


def test_json_schema_evolution(catalog: Catalog, schemas: Log, tmp_path: Path) -> None:
    v1 = {"type": "object", "properties": {"a": {"type": "string"}}}
    v2 = {"type": "object", "properties": {"a": {"type": "string"},
                                           "b": {"type": ["boolean", "null"]}}}  # fmt: skip
    registry = Registry(schemas)
    registry.set_config("e-value", "NONE")
    ids = [
        registry.register("e-value", {"schema": json.dumps(s), "schemaType": "JSON"})["id"]
        for s in (v1, v2)
    ]
    values: list[bytes | None] = [
        frame_schema_id(ids[0], b'{"a": "x"}'), frame_schema_id(ids[1], b'{"a": "y", "b": true}'),
    ]  # fmt: skip
    values.append(frame_schema_id(ids[0], b'{"a": "z", "b": false}'))  # b: not v1's column
    done, table = _commit(catalog, schemas, tmp_path, "e", values)
    assert (done.report.rows, done.dlq_rows) == (3, 0)
    assert [(r["a"], r["b"]) for r in _rows(table)] == [("x", None), ("y", True), ("z", False)]


def test_unusable_schema_to_dead_letters(catalog: Catalog, schemas: Log, tmp_path: Path) -> None:
    """A JSON Schema outside the mapping (oneOf at a property) and a Protobuf schema with
    an empty message: their values go to the dead-letter table with the reason."""
    registry = Registry(schemas)
    odd = {"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}}
    json_id = registry.register("o-value", {"schema": json.dumps(odd), "schemaType": "JSON"})["id"]
    proto_id = registry.register(
        "p-value", {"schema": 'syntax = "proto3"; message E {}', "schemaType": "PROTOBUF"}
    )["id"]
    values: list[bytes | None] = [
        frame_schema_id(json_id, b'{"x": "a"}'), frame_schema_id(proto_id, b"\x00"),
    ]  # fmt: skip
    done, _ = _commit(catalog, schemas, tmp_path, "o", values)
    assert (done.report.rows, done.dlq_rows) == (0, 2)
    dead = _dead(catalog, "o")
    assert f"schema id {json_id}" in dead[0]
    assert "without fields" in dead[1]
