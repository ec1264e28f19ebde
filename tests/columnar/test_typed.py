"""``seglog.columnar.TypedDecoder``: Confluent-framed Avro and JSON values into Arrow struct
columns, checked against fastavro's own decoding of each record (no Spark needed)."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from seglog.columnar import (
    MalformedValueError,
    TypedDecoder,
    avro_arrow_type,
    frame,
    json_schema_arrow_type,
)
from seglog.schemas import RegistryState

FLIGHT_V1 = {
    "type": "record",
    "name": "Flight",
    "namespace": "demo",
    "fields": [
        {"name": "carrier", "type": "string"},
        {"name": "flight", "type": "int"},
        {"name": "delay", "type": ["null", "double"], "default": None},
    ],
}
FLIGHT_V2 = {  # BACKWARD-compatible: a field added with a default
    **FLIGHT_V1,
    "fields": [*FLIGHT_V1["fields"], {"name": "origin", "type": "string", "default": "?"}],
}

RICH = {
    "type": "record",
    "name": "Rich",
    "fields": [
        {"name": "b", "type": "boolean"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "s", "type": ["string", "null"]},
        {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {"name": "raw", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {
            "name": "inner",
            "type": {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]},
        },
        {"name": "again", "type": ["null", "Inner"]},
        {"name": "wide", "type": ["int", "long"]},
    ],
}

RICH_ROW = {
    "b": True,
    "l": 1 << 40,
    "f": 1.5,
    "s": None,
    "e": "GREEN",
    "raw": b"\x00\x01",
    "fx": b"abcd",
    "tags": ["a", "b"],
    "attrs": {"k": 1, "n": None},
    "day": dt.date(2024, 2, 29),
    "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
    "at_us": dt.datetime(2024, 1, 2, 3, 4, 5, 7, tzinfo=dt.UTC),
    "price": Decimal("1234.56"),
    "inner": {"x": 7},
    "again": {"x": 8},
    "wide": 5,
}


def avro(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas={}), record)
    return frame(schema_id, out.getvalue())


def fastavro_reference(values: list[bytes | None], writers: dict[int, Any], reader: Any) -> list:
    out = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        writer = writers[int.from_bytes(value[1:5], "big")]
        out.append(fastavro.schemaless_reader(io.BytesIO(value[5:]), writer, reader))
    return out


def test_avro_types_as_spark_maps_them() -> None:
    arrow = avro_arrow_type(RICH)
    assert arrow.field("b").type == pa.bool_()
    assert not arrow.field("b").nullable
    assert arrow.field("s").type == pa.string()
    assert arrow.field("s").nullable
    assert arrow.field("e").type == pa.string()
    assert arrow.field("fx").type == pa.binary()
    assert arrow.field("tags").type == pa.list_(pa.field("element", pa.string(), False))
    assert arrow.field("attrs").type == pa.map_(pa.string(), pa.field("value", pa.int64()))
    assert arrow.field("day").type == pa.date32()
    assert arrow.field("at").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("price").type == pa.decimal128(9, 2)
    assert arrow.field("again").type == arrow.field("inner").type  # named type reused
    assert arrow.field("again").nullable
    assert arrow.field("wide").type == pa.int64()
    with pytest.raises(ValueError, match="union"):
        avro_arrow_type({"type": "record", "name": "U", "fields": [
            {"name": "u", "type": ["string", "int"]}]})  # fmt: skip
    with pytest.raises(ValueError, match="recursive"):
        avro_arrow_type({"type": "record", "name": "Node", "fields": [
            {"name": "next", "type": ["null", "Node"]}]})  # fmt: skip


def test_avro_decode_equals_fastavro() -> None:
    parsed = fastavro.parse_schema(RICH, named_schemas={})
    values = [avro(3, RICH, RICH_ROW), None, avro(3, RICH, {**RICH_ROW, "s": "x", "again": None})]
    decoder = TypedDecoder("avro", json.dumps(RICH), {3: json.dumps(RICH)}.get, reader_id=3)
    column, bad = decoder.decode(pa.array(values, type=pa.binary()))
    assert bad is None
    assert column.type == avro_arrow_type(RICH)
    assert column.to_pylist(maps_as_pydicts="strict") == fastavro_reference(
        values, {3: parsed}, None
    )
    assert column.null_count == 1


def test_old_and_new_writers_resolved_to_the_reader_schema() -> None:
    schemas = {1: json.dumps(FLIGHT_V1), 2: json.dumps(FLIGHT_V2)}
    row = {"carrier": "UA", "flight": 1545, "delay": 2.0}
    values = [avro(1, FLIGHT_V1, row), avro(2, FLIGHT_V2, {**row, "origin": "EWR"})]
    new = TypedDecoder("avro", schemas[2], schemas.get, reader_id=2)
    assert new.decode(pa.array(values))[0].to_pylist() == [
        {**row, "origin": "?"},  # the reader's default
        {**row, "origin": "EWR"},
    ]
    old = TypedDecoder("avro", schemas[1], schemas.get, reader_id=1)
    assert old.decode(pa.array(values))[0].to_pylist() == [row, row]  # origin dropped


@pytest.mark.parametrize(
    "garbage",
    [b"not avro at all", frame(99, b"\x02"), frame(1, b"\x04UA"), frame(1, b"\x04UA\x02\x00\x00")],
    ids=["no-magic", "unknown-id", "truncated", "trailing-bytes"],
)
def test_permissive_nulls_and_failfast_raises(garbage: bytes) -> None:
    schemas = {1: json.dumps(FLIGHT_V1)}
    good = avro(1, FLIGHT_V1, {"carrier": "AA", "flight": 1, "delay": None})
    values = pa.array([good, garbage, good])
    permissive = TypedDecoder("avro", schemas[1], schemas.get)
    column, bad = permissive.decode(values)
    assert column.to_pylist()[1] is None
    assert column.to_pylist()[0]["carrier"] == "AA"
    assert bad is not None
    assert bad.tolist() == [False, True, False]
    failfast = TypedDecoder("avro", schemas[1], schemas.get, failfast=True)
    with pytest.raises(MalformedValueError) as caught:
        failfast.decode(values)
    assert caught.value.row == 1


def test_json_schema_flat_and_a_misfit() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "n": {"type": "integer"},
            "x": {"type": ["number", "null"]},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    assert json_schema_arrow_type(schema).field("n").type == pa.int64()
    assert json_schema_arrow_type(schema).field("counts").type == pa.map_(pa.string(), pa.int64())
    docs = [
        {"name": "a", "n": 1, "x": 0.5, "ok": True, "tags": ["t"], "counts": {"u": 2}},
        {"name": "b"},
    ]
    values = [frame(4, json.dumps(d).encode()) for d in docs]
    values.append(frame(4, b'{"n": "not a number"}'))
    decoder = TypedDecoder("json", json.dumps(schema), {4: json.dumps(schema)}.get)
    column, bad = decoder.decode(pa.array(values))
    rows = column.to_pylist()
    assert rows[0] == {**docs[0], "counts": [("u", 2)]}
    assert rows[1] == {"name": "b", "n": None, "x": None, "ok": None, "tags": None, "counts": None}
    assert rows[2] is None
    assert bad is not None
    assert bad.tolist() == [False, False, True]
    with pytest.raises(MalformedValueError):
        TypedDecoder("json", json.dumps(schema), lambda _: None, failfast=True).decode(
            pa.array(values)
        )


def test_registry_replay_serves_typed_reads() -> None:
    """What typed reads and mirrors ask of ``seglog.schemas``' replay of ``_schemas``
    (``RegistryRef`` in path mode, ``value_decoder``): the latest live version of a
    subject, a live version by number, a schema by id (soft-deleted included)."""
    state = RegistryState()

    def key(subject: str, version: int) -> bytes:
        doc = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
        return json.dumps(doc).encode()

    def value(subject: str, version: int, schema_id: int, deleted: bool = False) -> bytes:
        doc = {"subject": subject, "version": version, "id": schema_id, "schema": "\"int\"",
               "deleted": deleted}  # fmt: skip
        return json.dumps(doc).encode()

    skipped = state.replay(
        iter([
            (key("t-value", 1), value("t-value", 1, 1)),
            (key("t-value", 2), value("t-value", 2, 5)),
            (b'{"keytype":"NOOP","magic":0}', None),
            (b"garbage", b"garbage"),
        ])
    )  # fmt: skip
    assert skipped == 1
    latest = state.latest("t-value")
    assert latest is not None
    assert (latest.id, latest.schema_type) == (5, "AVRO")
    state.replay(iter([(key("t-value", 2), value("t-value", 2, 5, deleted=True))]))
    latest = state.latest("t-value")  # soft delete
    assert latest is not None
    assert latest.version == 1
    assert state.live_version("t-value", 2) is None
    found = state.schema_of(5)  # an id stays readable after a soft delete
    assert found is not None
    assert found.schema == '"int"'
    state.replay(iter([(key("t-value", 1), None)]))  # hard delete
    assert state.latest("t-value") is None
    state.replay(
        iter([
            (key("u-value", 1), value("u-value", 1, 6)),
            (key("u-value", 2), value("u-value", 2, 7)),
            (b'{"keytype":"DELETE_SUBJECT","subject":"u-value","magic":0}',
             b'{"subject":"u-value","version":2}'),
        ])
    )  # fmt: skip
    assert state.latest("u-value") is None
    assert state.schema_of(7) is not None
    assert state.schema_of(99) is None


VECTOR = {  # every type the vectorised decoder takes
    "type": "record",
    "name": "V",
    "fields": [
        {"name": f["name"], "type": f["type"]}
        for f in RICH["fields"]
        if f["name"] not in ("tags", "attrs", "price", "wide")
    ]
    + [{"name": "maybe_at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
       {"name": "d", "type": "double"}],
}  # fmt: skip


def test_vectorised_records_equal_fastavro() -> None:
    rows = [
        {**{k: v for k, v in RICH_ROW.items() if k not in ("tags", "attrs", "price", "wide")},
         "maybe_at": None if i % 2 else RICH_ROW["at"], "d": i / 3, "s": None if i % 3 else "é",
         "again": None if i % 4 else {"x": i}, "e": ["RED", "GREEN"][i % 2], "b": i % 2 == 0}
        for i in range(50)
    ]  # fmt: skip
    values = [avro(9, VECTOR, r) for r in rows]
    values[7] = None
    decoder = TypedDecoder("avro", json.dumps(VECTOR), {9: json.dumps(VECTOR)}.get, reader_id=9)
    column, bad = decoder.decode(pa.array(values, type=pa.binary()))
    assert decoder._plan(9) is not None  # decoded vectorised
    assert bad is None
    parsed = fastavro.parse_schema(VECTOR, named_schemas={})
    assert column.to_pylist() == fastavro_reference(values, {9: parsed}, None)
    sliced, _ = decoder.decode(pa.array(values, type=pa.binary()).slice(5, 10))
    assert sliced.to_pylist() == column.to_pylist()[5:15]


def test_protobuf_scalars_equal_the_protobuf_runtime() -> None:
    """A flat proto3 message built and serialised by google.protobuf, framed as
    confluent-kafka's ProtobufSerializer frames it (message index [0] as one 0 byte)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="r.proto", package="t", syntax="proto3")
    message = fdp.message_type.add(name="Reading")
    kinds = {"sensor": 9, "value": 1, "at": 3, "ok": 8, "z": 17, "small": 7}  # proto type ids
    for number, (name, kind) in enumerate(kinds.items(), 1):
        message.field.add(name=name, number=number, type=kind, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Reading"))
    docs = [
        {"sensor": "s1", "value": 1.25, "at": -5, "ok": True, "z": -3, "small": 7},
        {"sensor": "", "value": 0.0, "at": 0, "ok": False, "z": 0, "small": 0},  # defaults
    ]
    values = [frame(5, b"\x00" + cls(**d).SerializeToString()) for d in docs]
    values.append(frame(5, b"\x00\x0a\xff"))  # a string field running past the end
    serialized = base64.b64encode(fdp.SerializeToString()).decode()
    layout = json.dumps({"file": serialized, "message": "t.Reading"})
    column, bad = TypedDecoder("protobuf", layout, lambda _: None).decode(pa.array(values))
    assert column.to_pylist() == [*docs, None]
    assert bad is not None
    assert bad.tolist() == [False, False, True]
