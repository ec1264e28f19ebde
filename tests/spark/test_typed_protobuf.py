"""Typed Protobuf reads of values produced by confluent-kafka's ProtobufSerializer through a
real ``seglog serve --schema-registry-listen``: nested messages, repeated fields, enums,
maps and ``google.protobuf.Timestamp`` as Spark columns; a nested message type chosen by
``valueSchemaMessage``, its values framed with message indexes ``[0, 0]``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from tests.broker._registry import start_with_registry

_STRING, _INT32, _INT64, _MESSAGE, _ENUM = 9, 5, 3, 11, 14
_OPTIONAL, _REPEATED = 1, 3
PLACED = dt.datetime(2024, 2, 29, 12, 0, 1, 250000, tzinfo=dt.UTC)


def _order_classes() -> dict[str, Any]:
    """seglog.t.Order {string id = 1; Status status = 2; repeated Line lines = 3;
    map<string, int64> totals = 4; google.protobuf.Timestamp placed = 5;} with nested
    enum Status {NEW, PAID} and message Line {string sku = 1; int32 qty = 2;}: the
    FileDescriptorProto protoc makes of it."""
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="seglog.t")
    fdp.syntax = "proto3"
    fdp.dependency.append("google/protobuf/timestamp.proto")
    order = fdp.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=_STRING, label=_OPTIONAL)
    line.field.add(name="qty", number=2, type=_INT32, label=_OPTIONAL)
    entry = order.nested_type.add(name="TotalsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_STRING, label=_OPTIONAL)
    entry.field.add(name="value", number=2, type=_INT64, label=_OPTIONAL)
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    order.field.add(name="id", number=1, type=_STRING, label=_OPTIONAL)
    order.field.add(name="status", number=2, type=_ENUM, label=_OPTIONAL,
                    type_name=".seglog.t.Order.Status")  # fmt: skip
    order.field.add(name="lines", number=3, type=_MESSAGE, label=_REPEATED,
                    type_name=".seglog.t.Order.Line")  # fmt: skip
    order.field.add(name="totals", number=4, type=_MESSAGE, label=_REPEATED,
                    type_name=".seglog.t.Order.TotalsEntry")  # fmt: skip
    order.field.add(name="placed", number=5, type=_MESSAGE, label=_OPTIONAL,
                    type_name=".google.protobuf.Timestamp")  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    known = descriptor_pb2.FileDescriptorProto()
    descriptor_pool.Default().FindFileByName("google/protobuf/timestamp.proto").CopyToProto(known)
    pool.Add(known)
    pool.Add(fdp)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"seglog.t.{name}"))
        for name in ("Order", "Order.Line")
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """orders: two Order values; lines: two Order.Line values (message indexes [0, 0])."""
    data = tmp_path_factory.mktemp("typed-protobuf") / "data"
    proc, url = start_with_registry(data)
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        for topic in ("orders", "lines"):
            admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
        client = SchemaRegistryClient({"url": url})
        classes = _order_classes()
        order, line = classes["Order"], classes["Order.Line"]
        producer = Producer({"bootstrap.servers": proc.bootstrap})
        orders = ProtobufSerializer(order, client, {"use.deprecated.format": False})
        octx = SerializationContext("orders", MessageField.VALUE)
        full = order(id="o1", status=1, lines=[line(sku="a", qty=2), line(sku="b")],
                     totals={"eur": 10, "usd": -3}, placed=PLACED)  # fmt: skip
        for value in (full, order(id="o2")):
            producer.produce("orders", orders(value, octx))
        lines = ProtobufSerializer(line, client, {"use.deprecated.format": False})
        lctx = SerializationContext("lines", MessageField.VALUE)
        for sku, qty in (("x", 1), ("y", 0)):
            producer.produce("lines", lines(line(sku=sku, qty=qty), lctx))
        assert producer.flush(30) == 0
        yield {"bootstrap": proc.bootstrap, "url": url, "data": data}
    finally:
        assert proc.stop() == 0, proc.log_text()


def _read(spark: Any, served: dict[str, Any], topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", served["bootstrap"])
        .option("subscribe", topic)
        .option("valueFormat", "protobuf")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_nested_repeated_enum_map_and_timestamp(spark: Any, served: dict[str, Any]) -> None:
    df = _read(spark, served, "orders")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:string,status:string,lines:array<struct<sku:string,qty:int>>,"
        "totals:map<string,bigint>,placed:timestamp>"
    )
    rows = [r.value.asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert rows == [
        {
            "id": "o1",
            "status": "PAID",
            "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 0}],
            "totals": {"eur": 10, "usd": -3},
            "placed": PLACED.replace(tzinfo=None),
        },
        {"id": "o2", "status": "NEW", "lines": [], "totals": {}, "placed": None},
    ]  # fmt: skip  (the session's time zone is UTC: Spark collects naive datetimes)


def test_the_message_named_by_the_message_indexes(spark: Any, served: dict[str, Any]) -> None:
    """ProtobufSerializer frames Order.Line values with indexes [0, 0]: read as that
    message with valueSchemaMessage; as the file's first message they do not decode."""
    df = _read(spark, served, "lines", valueSchemaMessage="seglog.t.Order.Line")
    assert df.schema["value"].dataType.simpleString() == "struct<sku:string,qty:int>"
    got = [r.value.asDict() for r in df.orderBy("offset").collect()]
    assert got == [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 0}]
    first = _read(spark, served, "lines", columnNameOfCorruptRecord="_corrupt")
    rows = first.orderBy("offset").collect()
    assert [r.value for r in rows] == [None, None]
    assert all(r["_corrupt"] for r in rows)
    with pytest.raises(Exception, match="has no message 'Nope'"):
        _read(spark, served, "lines", valueSchemaMessage="Nope").schema  # noqa: B018
