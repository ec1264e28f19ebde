"""``seglog.iceberg.mode=value_schema`` for Protobuf and JSON Schema values through a real
broker serving its schema registry: confluent-kafka's ProtobufSerializer and
JSONSerializer produce, the broker commits the decoded values as columns (nested
messages as structs, repeated fields as lists, enums as names, Timestamp as timestamptz),
a newer schema's fields (nested too) become columns, and values that do not decode go
to ``seglog.<topic>~dlq`` with the reason. Read back with pyiceberg."""

from __future__ import annotations

import base64
import datetime as dt
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyiceberg.types import ListType, StringType, StructType, TimestamptzType
from tests._wait import wait_until
from tests.broker._registry import start_with_registry
from tests.iceberg import _table

from seglog.broker import BrokerProcess
from seglog.schemas import serialized_protobuf

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

ORDER_V1 = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  string id = 1;
  Status status = 2;
  repeated Line lines = 3;
  google.protobuf.Timestamp placed = 4;
}
"""
ORDER_V2 = ORDER_V1.replace("int32 qty = 2; }", "int32 qty = 2; string unit = 3; }").replace(
    "placed = 4;", "placed = 4;\n  string channel = 5;"
)
PLACED = dt.datetime(2024, 2, 29, 12, 0, 1, 250000, tzinfo=dt.UTC)
PEOPLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": ["integer", "null"]},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
PEOPLE_V2 = {**PEOPLE, "properties": {**PEOPLE["properties"], "vip": {"type": "boolean"}}}
CONFIGS = {"seglog.iceberg.mode": "value_schema", "seglog.iceberg.lag.ms": "300"}


def _classes(text: str) -> tuple[Any, Any]:
    """(Order, Order.Line) message classes of a .proto text, as protoc would make them."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized_protobuf(text)))
    fdp.name = "order.proto"
    pool = descriptor_pool.DescriptorPool()
    known = descriptor_pb2.FileDescriptorProto()
    descriptor_pool.Default().FindFileByName("google/protobuf/timestamp.proto").CopyToProto(known)
    pool.Add(known)
    pool.Add(fdp)
    order, line = (pool.FindMessageTypeByName(f"shop.{n}") for n in ("Order", "Order.Line"))
    return message_factory.GetMessageClass(order), message_factory.GetMessageClass(line)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    proc, url = start_with_registry(tmp_path_factory.mktemp("iceberg-formats") / "data")
    try:
        yield proc, url
    finally:
        assert proc.stop(signal.SIGTERM) == 0, proc.log_text()
        assert "Traceback" not in proc.log_text(), proc.log_text()


def _produce(proc: BrokerProcess, topic: str, values: list[bytes | None]) -> None:
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1, config=CONFIGS)])[topic].result(30)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value, key=f"k{i}".encode())
    assert producer.flush(30) == 0


def _wait_rows(proc: BrokerProcess, topic: str, n: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = wait_until(
        lambda: (t := _table.rows_by(proc.data_dir, topic, "seglog")) is not None
        and len(t) == n and t,
        timeout=60, interval=0.2, message="value rows",
    )  # fmt: skip
    return rows


def _wait_dead(proc: BrokerProcess, topic: str, n: int) -> list[dict[str, Any]]:
    dead: list[dict[str, Any]] = wait_until(
        lambda: len(d := _table.dlq_rows(proc.data_dir, topic)) == n and d,
        timeout=60, interval=0.2, message="dead letters",
    )  # fmt: skip
    return dead


def test_protobuf_values_as_columns(running: tuple[BrokerProcess, str], topic: str) -> None:
    proc, url = running
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    order1, line1 = _classes(ORDER_V1)
    order2, line2 = _classes(ORDER_V2)
    v1 = ProtobufSerializer(order1, client, {"use.deprecated.format": False})
    v2 = ProtobufSerializer(order2, client, {"use.deprecated.format": False})
    full = order1(id="o1", status=1, lines=[line1(sku="a", qty=2), line1(sku="b")],
                  placed=PLACED)  # fmt: skip
    values: list[bytes | None] = [v1(full, ctx), v1(order1(id="o2"), ctx)]
    good = values[0]
    assert good is not None
    values.append(good[:-4])  # offset 2: truncated
    values.append(good[:5] + b"\x02\x0e" + good[6:])  # offset 3: message indexes [7]
    values.append(v2(order2(id="o3", lines=[line2(sku="c", qty=1, unit="kg")],
                            channel="web"), ctx))  # fmt: skip
    _produce(proc, topic, values)

    rows = _wait_rows(proc, topic, 3)
    assert [r["seglog"]["offset"] for r in rows] == [0, 1, 4]
    assert [(r["id"], r["status"]) for r in rows] == [("o1", "PAID"), ("o2", "NEW"), ("o3", "NEW")]
    assert rows[0]["lines"] == [
        {"sku": "a", "qty": 2, "unit": None}, {"sku": "b", "qty": 0, "unit": None},
    ]  # fmt: skip
    assert rows[0]["placed"] == PLACED
    assert rows[1]["placed"] is None
    assert (rows[1]["lines"], rows[1]["channel"]) == ([], None)
    assert rows[2]["lines"] == [{"sku": "c", "qty": 1, "unit": "kg"}]  # v2's nested field
    assert rows[2]["channel"] == "web"  # v2's top-level field
    assert rows[2]["seglog"]["key"] == b"k4"
    schema = _table.catalog(proc.data_dir).load_table(("seglog", topic)).schema()
    assert schema.find_type("placed") == TimestamptzType()
    assert isinstance(schema.find_type("lines"), ListType)
    assert isinstance(schema.find_type("lines.element"), StructType)
    assert schema.find_type("lines.element.unit") == StringType()

    dead = _wait_dead(proc, topic, 2)
    assert [r["offset"] for r in dead] == [2, 3]
    assert [r["value"] for r in dead] == values[2:4]
    assert "does not decode with schema id" in dead[0]["reason"]
    assert "message indexes [7] name no message" in dead[1]["reason"]
    assert _table.summary(proc.data_dir, topic)["seglog.offsets.0"] == "5"


def test_json_schema_values_as_columns(running: tuple[BrokerProcess, str], topic: str) -> None:
    proc, url = running
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    # a property added to an open content model is no BACKWARD change (Confluent's rule)
    client.set_compatibility(f"{topic}-value", "NONE")
    v1 = JSONSerializer(json.dumps(PEOPLE), client)
    v2 = JSONSerializer(json.dumps(PEOPLE_V2), client)
    first = v1({"name": "ada", "age": 36, "address": {"city": "London"}, "tags": ["x"]}, ctx)
    assert first is not None
    values: list[bytes | None] = [
        first,
        v1({"name": "bob"}, ctx),
        first[:5] + b'{"name": "eve", "age": "old"}',  # offset 2: a string for a long
        first[:5] + b"[1, 2]",  # offset 3: not an object
        v2({"name": "max", "vip": True}, ctx),
    ]
    _produce(proc, topic, values)

    rows = _wait_rows(proc, topic, 3)
    assert [r["seglog"]["offset"] for r in rows] == [0, 1, 4]
    assert [(r["name"], r["age"], r["vip"]) for r in rows] == [
        ("ada", 36, None), ("bob", None, None), ("max", None, True),
    ]  # fmt: skip
    assert rows[0]["address"] == {"city": "London"}
    assert rows[0]["tags"] == ["x"]
    dead = _wait_dead(proc, topic, 2)
    assert [r["offset"] for r in dead] == [2, 3]
    assert "not valid under its JSON Schema at age" in dead[0]["reason"]
    assert "not an object" in dead[1]["reason"]
