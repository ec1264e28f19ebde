"""Protobuf values of any shape (nested messages, repeated fields, enums, maps, well-known
types, the message named by Confluent's message indexes) decoded into Arrow columns, equal
to what google.protobuf's own parser reads from the same bytes."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from seglog.columnar import TypedDecoder, frame
from seglog.schemas import serialized_protobuf

PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; int32 qty = 2; repeated string tags = 3; }
  string id = 1;
  Status status = 2;
  repeated Line lines = 3;
  map<string, int64> totals = 4;
  Customer customer = 5;
  google.protobuf.Timestamp placed = 6;
  google.protobuf.Int32Value priority = 7;
  repeated sint64 deltas = 8;
  uint64 big = 9;
  optional string note = 10;
  oneof pay { string card = 11; int64 account = 12; }
  map<int32, Line> by_pos = 13;
}

message Customer { string name = 1; bytes avatar = 2; }
"""


def _classes() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(serialized_protobuf(PROTO))
    )
    pool = descriptor_pool.DescriptorPool()
    for dep in fdp.dependency:
        known = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(dep).CopyToProto(known)
        pool.Add(known)
    pool.Add(fdp)
    names = ("shop.Order", "shop.Customer", "shop.Order.Line")
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names}


def _layout(message: str) -> str:
    return json.dumps({"file": serialized_protobuf(PROTO), "message": message})


def _orders(classes: dict[str, Any]) -> list[Any]:
    order, line = classes["shop.Order"], classes["shop.Order.Line"]
    placed = dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC)
    full = order(
        id="o1", status=1, totals={"eur": 10, "usd": -3},
        lines=[line(sku="a", qty=2, tags=["x", "y"]), line(sku="b")],
        placed=placed, deltas=[-1, 5, 1 << 40], big=(1 << 64) - 1, note="", card="4111",
        by_pos={3: line(sku="c", qty=1)},
    )  # fmt: skip
    full.customer.name = "ada"
    full.customer.avatar = b"\x00\xff"
    full.priority.value = 0
    unknown_enum = order(id="o3", account=7)
    unknown_enum.status = 9  # proto3 enums are open: a number the reader does not name
    return [full, order(), unknown_enum]


EXPECTED = [
    {
        "id": "o1", "status": "PAID",
        "lines": [{"sku": "a", "qty": 2, "tags": ["x", "y"]}, {"sku": "b", "qty": 0, "tags": []}],
        "totals": [("eur", 10), ("usd", -3)], "customer": {"name": "ada", "avatar": b"\x00\xff"},
        "placed": dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.UTC),
        "priority": 0, "deltas": [-1, 5, 1 << 40], "big": Decimal((1 << 64) - 1), "note": "",
        "card": "4111", "account": None, "by_pos": [(3, {"sku": "c", "qty": 1, "tags": []})],
    },
    {
        "id": "", "status": "NEW", "lines": [], "totals": [], "customer": None, "placed": None,
        "priority": None, "deltas": [], "big": Decimal(0), "note": None, "card": None,
        "account": None, "by_pos": [],
    },
    {
        "id": "o3", "status": "9", "lines": [], "totals": [], "customer": None, "placed": None,
        "priority": None, "deltas": [], "big": Decimal(0), "note": None, "card": None,
        "account": 7, "by_pos": [],
    },
]  # fmt: skip


def test_nested_repeated_enum_map_and_well_known_types() -> None:
    classes = _classes()
    orders = _orders(classes)
    values = [frame(4, b"\x00" + o.SerializeToString()) for o in orders]
    decoder = TypedDecoder("protobuf", _layout("shop.Order"), lambda _: None)
    assert decoder.arrow_type.field("lines").type == pa.list_(
        pa.field("element", pa.struct([("sku", pa.string()), ("qty", pa.int32()),
                                       ("tags", pa.list_(pa.field("element", pa.string())))]))
    )  # fmt: skip
    assert decoder.arrow_type.field("totals").type == pa.map_(pa.string(), pa.int64())
    assert decoder.arrow_type.field("placed").type == pa.timestamp("us", tz="UTC")
    column, bad = decoder.decode(pa.array([*values, None], type=pa.binary()))
    assert bad is None
    got = column.to_pylist()
    assert got == [*EXPECTED, None]
    # the protobuf runtime's own reading of the same bytes agrees field by field
    for value, row in zip(values, got, strict=False):
        parsed = classes["shop.Order"].FromString(value[6:])
        assert [line.sku for line in parsed.lines] == [x["sku"] for x in row["lines"]]
        assert dict(parsed.totals) == dict(row["totals"])
        assert parsed.id == row["id"]
        assert list(parsed.deltas) == row["deltas"]


def test_message_indexes_choose_the_message() -> None:
    """Confluent's indexes: [1] the file's second message, [0, 0] Order's first nested
    message; values of another message than the column's are malformed (PERMISSIVE null)."""
    classes = _classes()
    customer = classes["shop.Customer"](name="bob", avatar=b"1")
    line = classes["shop.Order.Line"](sku="z", qty=4)
    customers = frame(4, b"\x02\x02" + customer.SerializeToString())  # count 1, index 1
    lines = frame(4, b"\x04\x00\x00" + line.SerializeToString())  # count 2, indexes 0 0
    values = pa.array([customers, lines], type=pa.binary())
    column, bad = TypedDecoder("protobuf", _layout("shop.Customer"), lambda _: None).decode(values)
    assert column.to_pylist() == [{"name": "bob", "avatar": b"1"}, None]
    assert bad is not None
    assert bad.tolist() == [False, True]
    column, bad = TypedDecoder("protobuf", _layout("shop.Order.Line"), lambda _: None).decode(
        values
    )
    assert column.to_pylist() == [None, {"sku": "z", "qty": 4, "tags": []}]
    with pytest.raises(ValueError, match="malformed value at row 0"):
        TypedDecoder("protobuf", _layout("shop.Order"), lambda _: None, failfast=True).decode(
            pa.array([frame(4, b"\x00\x0a\xff")], type=pa.binary())
        )


def test_recursive_messages_and_foreign_imports_are_refused() -> None:
    recursive = 'syntax = "proto3"; message Node { string v = 1; Node next = 2; }'
    with pytest.raises(ValueError, match="recursive"):
        TypedDecoder(
            "protobuf",
            json.dumps({"file": serialized_protobuf(recursive), "message": "Node"}),
            lambda _: None,
        )
