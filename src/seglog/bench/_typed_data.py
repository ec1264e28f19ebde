"""Typed values of the decoding benchmarks: flight-like rows (10 fields: ints, strings, a
nullable double, a timestamp) as Avro records (``FLIGHT_SCHEMA``) and as a proto3 message of
the same fields (``FLIGHT_PROTO``), and a nested Protobuf Order message (enum, repeated
nested messages, a map, a ``Timestamp``, a wrapper, a oneof). Framed in Confluent's wire
format; Protobuf messages serialised by google.protobuf and framed as confluent-kafka's
``ProtobufSerializer`` frames a file's first message (message indexes ``[0]`` as one 0
byte)."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from seglog.columnar import frame
from seglog.schemas import serialized_protobuf

__all__ = [
    "FLIGHT_PROTO",
    "FLIGHT_SCHEMA",
    "ORDER_PROTO",
    "flight_avro",
    "flight_protobuf",
    "flight_row",
    "message_class",
    "order_protobuf",
    "proto_layout_of",
]

FLIGHT_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Flight",
    "namespace": "bench",
    "fields": [
        {"name": "year", "type": "int"},
        {"name": "month", "type": "int"},
        {"name": "carrier", "type": "string"},
        {"name": "flight", "type": "int"},
        {"name": "origin", "type": "string"},
        {"name": "dest", "type": "string"},
        {"name": "dep_delay", "type": ["null", "double"], "default": None},
        {"name": "distance", "type": "long"},
        {"name": "tailnum", "type": "string"},
        {"name": "time_hour", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
"""The flight-like rows as an Avro record."""

FLIGHT_PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";

message Flight {
  int32 year = 1;
  int32 month = 2;
  string carrier = 3;
  int32 flight = 4;
  string origin = 5;
  string dest = 6;
  optional double dep_delay = 7;
  int64 distance = 8;
  string tailnum = 9;
  google.protobuf.Timestamp time_hour = 10;
}
"""
"""The flight-like rows of ``FLIGHT_SCHEMA`` in proto3 (``dep_delay`` the
nullable double as a proto3 ``optional``, ``time_hour`` a Timestamp)."""

ORDER_PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; int32 qty = 2; repeated string tags = 3; }
  string id = 1;
  Status status = 2;
  repeated Line lines = 3;
  map<string, int64> totals = 4;
  google.protobuf.Timestamp placed = 5;
  google.protobuf.Int32Value priority = 6;
  oneof pay { string card = 7; int64 account = 8; }
}
"""
"""A nested message of 8 fields: repeated messages, a map, an enum, well-known types."""

_CARRIERS = ["UA", "AA", "B6", "DL", "EV", "MQ"]
_BASE = dt.datetime(2013, 1, 1, tzinfo=dt.UTC)


def message_class(proto: str, name: str) -> Any:
    """The google.protobuf class of message ``name`` (full name) of the .proto text."""
    fdp = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(serialized_protobuf(proto))
    )
    pool = descriptor_pool.DescriptorPool()
    for dependency in fdp.dependency:
        known = descriptor_pb2.FileDescriptorProto()
        descriptor_pool.Default().FindFileByName(dependency).CopyToProto(known)
        pool.Add(known)
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def proto_layout_of(proto: str, name: str) -> str:
    """The ``seglog.columnar`` layout of message ``name`` of the .proto text."""
    return json.dumps({"file": serialized_protobuf(proto), "message": name})


def flight_row(i: int) -> dict[str, Any]:
    """Row ``i`` of the flight-like rows (fields of ``FLIGHT_SCHEMA``)."""
    return {
        "year": 2013, "month": 1 + i % 12, "carrier": _CARRIERS[i % 6], "flight": i % 5000,
        "origin": "EWR", "dest": "IAH", "dep_delay": None if i % 50 == 0 else float(i % 90 - 10),
        "distance": 1400 + i % 7, "tailnum": f"N{i % 900:03d}UA",
        "time_hour": _BASE + dt.timedelta(hours=i % 8760),
    }  # fmt: skip


def flight_protobuf(rows: range, schema_id: int = 1) -> list[bytes]:
    """Framed Flight messages of rows ``rows`` (``flight_row``)."""
    cls = message_class(FLIGHT_PROTO, "bench.Flight")
    out = []
    for i in rows:
        row = flight_row(i)
        delay, at = row.pop("dep_delay"), row.pop("time_hour")
        message = cls(**row)
        if delay is not None:
            message.dep_delay = delay
        message.time_hour.FromDatetime(at)
        out.append(frame(schema_id, b"\x00" + message.SerializeToString()))
    return out


def flight_avro(rows: range, schema_id: int = 1) -> list[bytes]:
    """The same rows as framed Avro records of ``FLIGHT_SCHEMA``."""
    parsed = fastavro.parse_schema(FLIGHT_SCHEMA, named_schemas={})
    out = []
    for i in rows:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, flight_row(i))
        out.append(frame(schema_id, buffer.getvalue()))
    return out


def order_protobuf(rows: range, schema_id: int = 1) -> list[bytes]:
    """Framed Order messages: 0 to 3 lines of 0 to 2 tags, 1 or 2 totals, every field varied."""
    cls = message_class(ORDER_PROTO, "bench.Order")
    out = []
    for i in rows:
        totals = {"eur": i % 100, **({"usd": -i} if i % 2 else {})}
        message = cls(id=f"o{i}", status=i % 3, totals=totals)
        for k in range(i % 4):
            message.lines.add(sku=f"s{i % 97}", qty=k, tags=["x"] * (k % 3))
        message.placed.FromDatetime(_BASE + dt.timedelta(seconds=i))
        if i % 3:
            message.priority.value = i % 5
        if i % 2:
            message.card = "4111"
        else:
            message.account = i
        out.append(frame(schema_id, b"\x00" + message.SerializeToString()))
    return out
