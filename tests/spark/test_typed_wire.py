"""Typed reads and writes against a real ``seglog serve --schema-registry-listen``: values
produced with confluent-kafka's AvroSerializer (two compatible versions), read as struct
columns through the broker (the registry found through DescribeConfigs) and from its data
directory (the registry's ``_schemas`` log), batch and streaming, equal to fastavro's
decoding of each record; the sink's output read back by confluent-kafka's AvroDeserializer."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType
from tests.broker._registry import start_with_registry
from tests.columnar.test_typed import FLIGHT_V1, FLIGHT_V2, fastavro_reference
from tests.spark.test_typed_read import flight, stream_rows

from seglog.columnar import discover_registry

PEOPLE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """flights (2 partitions): 6 records of v1, a tombstone, 6 of v2 per partition;
    people: JSON Schema documents."""
    data = tmp_path_factory.mktemp("typed-wire") / "data"
    proc, url = start_with_registry(data)
    try:
        bootstrap = proc.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for topic, n in (("flights", 2), ("people", 1), ("sunk", 1), ("readings", 1)):
            admin.create_topics([NewTopic(topic, num_partitions=n)])[topic].result(30)
        client = SchemaRegistryClient({"url": url})
        ctx = SerializationContext("flights", MessageField.VALUE)
        v1 = AvroSerializer(client, json.dumps(FLIGHT_V1))
        v2 = AvroSerializer(client, json.dumps(FLIGHT_V2))
        producer = Producer({"bootstrap.servers": bootstrap})
        for p in range(2):
            for i in range(6):
                producer.produce("flights", v1(flight(i), ctx), b"k", partition=p)
            producer.produce("flights", None, b"k", partition=p)
            for i in range(6, 12):
                producer.produce("flights", v2({**flight(i), "origin": "LGA"}, ctx), partition=p)
        people = JSONSerializer(json.dumps(PEOPLE), client)
        pctx = SerializationContext("people", MessageField.VALUE)
        for doc in ({"name": "ada", "age": 36}, {"name": "bob"}):
            producer.produce("people", people(doc, pctx))
        reading = _reading_class()
        proto = ProtobufSerializer(reading, client, {"use.deprecated.format": False})
        rctx = SerializationContext("readings", MessageField.VALUE)
        key_ser = AvroSerializer(client, json.dumps(KEY))
        kctx = SerializationContext("readings", MessageField.KEY)
        for i, (sensor, value) in enumerate(READINGS):
            producer.produce(
                "readings", proto(reading(sensor=sensor, value=value, seq=i), rctx),
                key_ser({"sensor": sensor}, kctx),
            )  # fmt: skip
        assert producer.flush(30) == 0
        yield {"proc": proc, "url": url, "data": data, "bootstrap": bootstrap}
    finally:
        assert proc.stop() == 0, proc.log_text()


_groups = itertools.count()

READINGS = [("s1", 1.5), ("s2", 0.0), ("s1", -2.25)]
KEY = {"type": "record", "name": "Key", "fields": [{"name": "sensor", "type": "string"}]}


def _reading_class() -> Any:
    """seglog.t.Reading {string sensor = 1; double value = 2; int64 seq = 3;}, made at run
    time from a FileDescriptorProto (what protoc would generate)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="seglog.t")
    fdp.syntax = "proto3"
    message = fdp.message_type.add(name="Reading")
    message.field.add(name="sensor", number=1, type=9, label=1)  # string
    message.field.add(name="value", number=2, type=1, label=1)  # double
    message.field.add(name="seq", number=3, type=3, label=1)  # int64
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("seglog.t.Reading"))


def _stored(served: dict[str, Any]) -> dict[int, list[bytes | None]]:
    consumer = Consumer({
        "bootstrap.servers": served["bootstrap"], "group.id": f"check-{next(_groups)}",
        "enable.partition.eof": True, "auto.offset.reset": "earliest",
    })  # fmt: skip
    consumer.subscribe(["flights"])
    out: dict[int, list[bytes | None]] = {0: [], 1: []}
    ends = 0
    while ends < 2:
        msg = consumer.poll(10)
        assert msg is not None
        if msg.error():
            ends += 1
            continue
        out[msg.partition()].append(msg.value())
    consumer.close()
    return out


def _fastavro(values: list[bytes | None], url: str, reader: Any) -> list[Any]:
    client = SchemaRegistryClient({"url": url})
    ids = {int.from_bytes(v[1:5], "big") for v in values if v is not None}
    writers = {i: json.loads(client.get_schema(i).schema_str) for i in ids}
    return fastavro_reference(values, writers, reader)


def _by_partition(df: Any) -> dict[int, list[Any]]:
    got: dict[int, list[Any]] = {0: [], 1: []}
    for row in df.orderBy("partition", "offset").collect():
        got[row.partition].append(None if row.value is None else row.value.asDict())
    return got


def test_the_broker_names_its_registry(served: dict[str, Any]) -> None:
    assert discover_registry({"bootstrap.servers": served["bootstrap"]}) == served["url"]


@pytest.mark.parametrize("mode", ["wire", "path"])
def test_typed_batch_read_equals_fastavro(spark: Any, served: dict[str, Any], mode: str) -> None:
    reader = spark.read.format("seglog").option("subscribe", "flights")
    if mode == "wire":  # the registry: found through DescribeConfigs
        reader = reader.option("kafka.bootstrap.servers", served["bootstrap"])
    else:  # the registry's _schemas log in the broker's data directory
        reader = reader.option("path", str(served["data"]))
    df = reader.option("valueFormat", "avro").load()
    assert df.schema["value"].dataType.simpleString() == (
        "struct<carrier:string,flight:int,delay:double,origin:string>"
    )
    stored = _stored(served)
    assert _by_partition(df) == {
        p: _fastavro(v, served["url"], FLIGHT_V2) for p, v in stored.items()
    }
    old = reader.option("valueSchemaVersion", "1").load()
    assert _by_partition(old) == {
        p: _fastavro(v, served["url"], FLIGHT_V1) for p, v in stored.items()
    }


def test_json_schema_through_the_broker(spark: Any, served: dict[str, Any]) -> None:
    df = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", served["bootstrap"])
        .option("subscribe", "people")
        .option("valueFormat", "json")
        .load()
    )
    assert [r.value.asDict() for r in df.orderBy("offset").collect()] == [
        {"name": "ada", "age": 36},
        {"name": "bob", "age": None},
    ]


def test_protobuf_values_and_avro_keys(spark: Any, served: dict[str, Any]) -> None:
    df = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", served["bootstrap"])
        .option("subscribe", "readings")
        .option("valueFormat", "protobuf")
        .option("keyFormat", "avro")
        .load()
    )
    assert (
        df.schema["value"].dataType.simpleString()
        == "struct<sensor:string,value:double,seq:bigint>"
    )
    assert df.schema["key"].dataType.simpleString() == "struct<sensor:string>"
    rows = df.orderBy("offset").collect()
    assert [r.value.asDict() for r in rows] == [
        {"sensor": s, "value": v, "seq": i} for i, (s, v) in enumerate(READINGS)
    ]  # proto3 defaults (0.0, 0) read as values, not nulls
    assert [r.key.sensor for r in rows] == [s for s, _ in READINGS]


def test_typed_stream_through_the_broker(
    spark: Any, served: dict[str, Any], tmp_path: Path
) -> None:
    stream = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", served["bootstrap"])
        .option("schema.registry.url", served["url"])
        .option("subscribe", "flights")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5")
        .option("valueFormat", "avro")
        .load()
    )
    columns = ("partition", "offset", "value.flight AS flight", "value.origin AS origin")
    got = stream_rows(stream, tmp_path, columns)
    expected = sorted(
        (p, o, None if r is None else r["flight"], None if r is None else r["origin"])
        for p, values in _stored(served).items()
        for o, r in enumerate(_fastavro(values, served["url"], FLIGHT_V2))
    )
    assert got == expected


def test_sink_auto_registers_and_avro_deserializer_reads(
    spark: Any, served: dict[str, Any]
) -> None:
    value_type = StructType([
        StructField("carrier", StringType(), False),
        StructField("flight", IntegerType(), False),
        StructField("delay", DoubleType()),
    ])  # fmt: skip
    rows = [flight(i) for i in range(5)]
    df = spark.createDataFrame([(r,) for r in rows], StructType([StructField("value", value_type)]))
    (
        df.write.format("seglog")
        .option("kafka.bootstrap.servers", served["bootstrap"])
        .option("topic", "sunk")
        .option("valueFormat", "avro")
        .option("auto.register.schemas", "true")
        .mode("append")
        .save()
    )
    client = SchemaRegistryClient({"url": served["url"]})
    registered = client.get_latest_version("sunk-value")
    assert json.loads(registered.schema.schema_str)["name"] == "topLevelRecord"
    deserializer = AvroDeserializer(client)
    consumer = Consumer({"bootstrap.servers": served["bootstrap"], "group.id": "sunk",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["sunk"])
    got = []
    ctx = SerializationContext("sunk", MessageField.VALUE)
    while len(got) < len(rows):
        msg = consumer.poll(10)
        assert msg is not None
        assert msg.error() is None
        got.append(deserializer(msg.value(), ctx))
    consumer.close()
    assert sorted(got, key=lambda r: r["flight"]) == rows
