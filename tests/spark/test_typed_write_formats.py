"""Typed writes in JSON Schema and Protobuf: a struct ``value`` column encoded by the sink
with the subject's registered schema (path mode) or an auto-registered one (through a
real ``seglog serve --schema-registry-listen``), read back by the typed source in the same
format as equal rows, and by confluent-kafka's JSONDeserializer / ProtobufDeserializer."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from pyspark.sql.types import (
    ArrayType,
    DateType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from tests.broker._registry import start_with_registry

from seglog.schemas import serialized_protobuf
from seglog.spark._typed_schemas import json_schema_of, proto_schema_of
from seglog.storage import DataDir, Message

PLACED = dt.datetime(2024, 2, 29, 12, 0, 1, 250000, tzinfo=dt.UTC)
LINE = StructType([StructField("sku", StringType()), StructField("qty", IntegerType())])
ORDER = StructType([
    StructField("id", StringType(), False),
    StructField("lines", ArrayType(LINE, False), False),
    StructField("totals", MapType(StringType(), LongType(), False), False),
    StructField("placed", TimestampType()),
    StructField("note", StringType()),
])  # fmt: skip
ORDERS = [
    {"id": "o1", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 0}],
     "totals": {"eur": 10, "usd": -3}, "placed": PLACED, "note": "rush"},
    {"id": "o2", "lines": [], "totals": {}, "placed": None, "note": None},
]  # fmt: skip
ORDER_PROTO = """
syntax = "proto3";
package seglog.t;
import "google/protobuf/timestamp.proto";

message Order {
  message Line { string sku = 1; int32 qty = 2; }
  string id = 1;
  repeated Line lines = 2;
  map<string, int64> totals = 3;
  google.protobuf.Timestamp placed = 4;
  optional string note = 5;
}
"""
PEOPLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
}
PERSON_PROTO = """
syntax = "proto3";
message Person { string name = 1; int64 age = 2; repeated string tags = 3; }
"""
PERSON = StructType([
    StructField("name", StringType()),
    StructField("age", IntegerType()),
    StructField("tags", ArrayType(StringType())),
])  # fmt: skip


def _store(data_dir: DataDir, subject: str, schema_id: int, text: str, kind: str) -> None:
    """Version 1 of ``subject`` in ``_schemas`` (Confluent's KafkaStore key and value)."""
    if "_schemas" not in data_dir.topics():
        data_dir.create_topic("_schemas", 1, {"cleanup.policy": "compact"})
    key = {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
    value = {"subject": subject, "version": 1, "id": schema_id, "schema": text,
             "deleted": False, "schemaType": kind}  # fmt: skip
    log = data_dir.log("_schemas", 0)
    log.publish([Message(key=json.dumps(key).encode(), value=json.dumps(value).encode())])
    log.sync()


def _plain(row: Any) -> Any:
    """A collected struct as a dict; timestamps back in UTC (the session's time zone)."""
    out = row.asDict(recursive=True)
    if out.get("placed") is not None:
        out["placed"] = out["placed"].replace(tzinfo=dt.UTC)
    return out


def _write(df: Any, **options: str) -> None:
    writer = df.write.format("seglog").mode("append")
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def _read(spark: Any, topic: str, fmt: str, **options: str) -> list[Any]:
    reader = spark.read.format("seglog").option("subscribe", topic).option("valueFormat", fmt)
    for name, value in options.items():
        reader = reader.option(name, value)
    return [_plain(r.value) for r in reader.load().orderBy("offset").collect()]


def test_schemas_derived_from_spark_types() -> None:
    assert json_schema_of(PERSON) == {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "topLevelRecord",
        "type": "object",
        "properties": {
            "name": {"type": ["string", "null"]},
            "age": {"type": ["integer", "null"]},
            "tags": {"type": ["array", "null"], "items": {"type": ["string", "null"]}},
        },
    }
    assert json_schema_of(ORDER)["required"] == ["id", "lines", "totals"]
    assert json_schema_of(ORDER)["properties"]["placed"] == {
        "type": ["string", "null"], "format": "date-time"
    }  # fmt: skip
    assert proto_schema_of(ORDER) == (
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n\n'
        "message topLevelRecord {\n  string id = 1;\n"
        "  message Lines {\n    optional string sku = 1;\n    optional int32 qty = 2;\n  }\n"
        "  repeated Lines lines = 2;\n  map<string, int64> totals = 3;\n"
        "  google.protobuf.Timestamp placed = 4;\n  optional string note = 5;\n}\n"
    )
    with pytest.raises(ValueError, match="no Protobuf type for Spark type date"):
        proto_schema_of(StructType([StructField("day", DateType())]))
    with pytest.raises(ValueError, match="array element cannot be a array"):
        proto_schema_of(StructType([StructField("m", ArrayType(ArrayType(StringType())))]))


def test_path_mode_round_trips_json_and_protobuf(spark: Any, tmp_path: Path) -> None:
    """Registered schemas (JSON Schema id 4, Protobuf id 5): rows written, read back
    equal; a nested Protobuf message chosen by valueSchemaMessage; a row the JSON Schema
    refuses fails the write naming the column and the reason."""
    path = str(tmp_path / "data")
    with DataDir(path) as data_dir:
        _store(data_dir, "people-value", 4, json.dumps(PEOPLE), "JSON")
        _store(data_dir, "orders-value", 5, ORDER_PROTO, "PROTOBUF")
        _store(data_dir, "lines-value", 6, ORDER_PROTO, "PROTOBUF")
    people = [{"name": "ada", "age": 36, "tags": ["x"]}, {"name": "bob", "age": None, "tags": []}]
    frame = spark.createDataFrame(
        [(p,) for p in people], StructType([StructField("value", PERSON)])
    )
    _write(frame, path=path, topic="people", valueFormat="json")
    assert sorted(_read(spark, "people", "json", path=path), key=lambda d: d["name"]) == people
    with DataDir(path, create=False, read_only=True) as data_dir:
        stored = sorted(m.value or b"" for m in data_dir.log("people", 0).consume(-2, 9)[1])
    assert stored == [
        b'\x00\x00\x00\x00\x04{"name":"ada","age":36,"tags":["x"]}',
        b'\x00\x00\x00\x00\x04{"name":"bob","tags":[]}',  # null fields left out
    ]

    orders = spark.createDataFrame(
        [(o,) for o in ORDERS], StructType([StructField("value", ORDER)])
    )
    _write(orders, path=path, topic="orders", valueFormat="protobuf")
    assert sorted(_read(spark, "orders", "protobuf", path=path), key=lambda d: d["id"]) == ORDERS

    lines = spark.createDataFrame(
        [({"sku": "x", "qty": 1},)], StructType([StructField("value", LINE)])
    )
    _write(lines, path=path, topic="lines", valueFormat="protobuf", valueSchemaMessage="Order.Line")
    with DataDir(path, create=False, read_only=True) as data_dir:
        line = data_dir.log("lines", 0).consume(-2, 1)[1][0].value
    assert line is not None
    assert line[5:8] == b"\x04\x00\x00"  # message indexes [0, 0]
    got = _read(spark, "lines", "protobuf", path=path, valueSchemaMessage="seglog.t.Order.Line")
    assert got == [{"sku": "x", "qty": 1}]

    negative = spark.createDataFrame([({"name": "eve", "age": -1, "tags": []},)], frame.schema)
    with pytest.raises(Exception, match=r"value row .*'eve'.* -1 is less than the minimum of 0"):
        _write(negative, path=path, topic="people", valueFormat="json")
    assert len(_read(spark, "people", "json", path=path)) == 2  # nothing of the failed write


def test_streaming_json_topic_into_a_protobuf_topic(spark: Any, tmp_path: Path) -> None:
    """A streaming query reads a JSON Schema topic as columns and writes them to a
    Protobuf topic (path mode, exactly-once): the Protobuf topic reads back equal."""
    path = str(tmp_path / "data")
    with DataDir(path) as data_dir:
        _store(data_dir, "people-value", 4, json.dumps(PEOPLE), "JSON")
        _store(data_dir, "people-pb-value", 7, PERSON_PROTO, "PROTOBUF")
    people = [{"name": f"p{i}", "age": i, "tags": ["t"] * i} for i in range(5)]
    frame = spark.createDataFrame(
        [(p,) for p in people], StructType([StructField("value", PERSON)])
    )
    _write(frame, path=path, topic="people", valueFormat="json")
    stream = (
        spark.readStream.format("seglog")
        .option("path", path)
        .option("subscribe", "people")
        .option("valueFormat", "json")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "2")
        .load()
    )
    query = (
        stream.select("value")
        .writeStream.format("seglog")
        .option("path", path)
        .option("topic", "people-pb")
        .option("valueFormat", "protobuf")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None
    got = _read(spark, "people-pb", "protobuf", path=path)
    assert sorted(got, key=lambda d: d["name"]) == people


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("typed-write-formats") / "data"
    proc, url = start_with_registry(data)
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        for topic in ("jsunk", "psunk"):
            admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
        yield {"bootstrap": proc.bootstrap, "url": url}
    finally:
        assert proc.stop() == 0, proc.log_text()


def _consume(served: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": served["bootstrap"], "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    got: list[bytes] = []
    while len(got) < count:
        msg = consumer.poll(10)
        assert msg is not None
        assert msg.error() is None
        got.append(msg.value())
    consumer.close()
    return got


def _message_class(text: str, name: str) -> Any:
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized_protobuf(text)))
    pool = descriptor_pool.DescriptorPool()
    for dependency in fdp.dependency:
        known = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(dependency).CopyToProto(known)
        pool.Add(known)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def test_auto_register_through_the_broker_read_by_confluent(
    spark: Any, served: dict[str, Any]
) -> None:
    client = SchemaRegistryClient({"url": served["url"]})
    wire = {"kafka.bootstrap.servers": served["bootstrap"], "auto.register.schemas": "true"}
    person = StructType([*PERSON.fields, StructField("scores", MapType(StringType(), LongType()))])
    key = StructType([StructField("id", LongType(), False)])
    people = [
        {"name": "ada", "age": 36, "tags": ["x", None], "scores": {"go": 3, "chess": None}},
        {"name": None, "age": 7, "tags": [], "scores": None},
    ]
    frame = spark.createDataFrame(
        [({"id": p["age"]}, p) for p in people],
        StructType([StructField("key", key), StructField("value", person)]),
    )
    _write(frame, topic="jsunk", valueFormat="json", keyFormat="json", **wire)
    registered = client.get_latest_version("jsunk-value").schema
    assert registered.schema_type == "JSON"
    assert json.loads(registered.schema_str) == json_schema_of(person)
    assert json.loads(client.get_latest_version("jsunk-key").schema.schema_str) == (
        json_schema_of(key)
    )
    json_reader = JSONDeserializer(None, schema_registry_client=client)
    ctx = SerializationContext("jsunk", MessageField.VALUE)
    documents = [json_reader(v, ctx) for v in _consume(served, "jsunk", 2)]
    assert sorted(documents, key=lambda d: d["age"]) == [
        {"age": 7, "tags": []},
        {"name": "ada", "age": 36, "tags": ["x", None], "scores": {"go": 3, "chess": None}},
    ]  # fmt: skip  (the two tasks' writes in either order)
    back = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", served["bootstrap"])
        .option("subscribe", "jsunk")
        .option("valueFormat", "json")
        .option("keyFormat", "json")
        .load()
        .collect()
    )
    got = sorted(((r.key.asDict(), r.value.asDict()) for r in back), key=lambda kv: kv[0]["id"])
    assert got == [({"id": p["age"]}, p) for p in people[::-1]]

    orders = spark.createDataFrame(
        [(o,) for o in ORDERS], StructType([StructField("value", ORDER)])
    )
    _write(orders, topic="psunk", valueFormat="protobuf", **wire)
    text = client.get_latest_version("psunk-value").schema.schema_str
    assert text == proto_schema_of(ORDER).strip()
    cls = _message_class(text, "topLevelRecord")
    proto_reader = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    pctx = SerializationContext("psunk", MessageField.VALUE)
    decoded = [proto_reader(v, pctx) for v in _consume(served, "psunk", 2)]
    assert sorted((json_format.MessageToDict(m) for m in decoded), key=lambda d: d["id"]) == [
        {"id": "o1", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 0}],
         "totals": {"eur": "10", "usd": "-3"}, "placed": "2024-02-29T12:00:01.250Z",
         "note": "rush"},
        {"id": "o2"},
    ]  # fmt: skip
    back = _read(spark, "psunk", "protobuf", **{"kafka.bootstrap.servers": served["bootstrap"]})
    assert sorted(back, key=lambda d: d["id"]) == ORDERS
