"""``seglog.columnar.TypedEncoder``: struct columns into Confluent-framed JSON Schema and
Protobuf values (the sink's typed writes), checked against the bytes' own readers
(json, google.protobuf) and against ``TypedDecoder`` reading them back (no Spark)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from tests.columnar.test_protobuf_tree import EXPECTED, _classes, _layout, _orders

from seglog.columnar import TypedDecoder, TypedEncoder, frame, json_schema_arrow_type

PEOPLE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": ["integer", "null"], "minimum": 0},
        "seen": {"type": "string", "format": "date-time"},
        "photo": {"type": "string", "contentEncoding": "base64"},
        "score": {"type": "number"},
    },
    "required": ["name"],
}
PEOPLE_TYPE = pa.struct([
    ("name", pa.string()), ("age", pa.int64()), ("seen", pa.timestamp("us", tz="UTC")),
    ("photo", pa.binary()), ("score", pa.decimal128(5, 2)),
])  # fmt: skip


def test_json_documents_as_spark_to_json_writes_them() -> None:
    seen = dt.datetime(2024, 2, 29, 12, 0, 1, 250000, tzinfo=dt.UTC)
    rows = [
        {"name": "ada", "age": 36, "seen": seen, "photo": b"\x00\xff", "score": Decimal("1.25")},
        {"name": "bob", "age": None, "seen": None, "photo": None, "score": Decimal("3")},
        None,
    ]
    out = TypedEncoder("json", json.dumps(PEOPLE), 7).encode(pa.array(rows, PEOPLE_TYPE), "value")
    assert out.to_pylist() == [
        frame(7, b'{"name":"ada","age":36,"seen":"2024-02-29T12:00:01.250000Z",'
                 b'"photo":"AP8=","score":1.25}'),
        frame(7, b'{"name":"bob","score":3}'),  # nulls left out (Spark's ignoreNullFields)
        None,
    ]  # fmt: skip
    decoder = TypedDecoder("json", json.dumps(PEOPLE), lambda i: None, failfast=True)
    assert decoder.arrow_type == json_schema_arrow_type(PEOPLE)
    back = decoder.decode(out)[0].to_pylist()
    assert [r and (r["name"], r["age"]) for r in back] == [("ada", 36), ("bob", None), None]


def test_a_json_row_the_schema_refuses_names_column_and_reason() -> None:
    rows = pa.array([{"name": "ok", "age": 1}, {"name": "eve", "age": -4}],
                    pa.struct([("name", pa.string()), ("age", pa.int64())]))  # fmt: skip
    encoder = TypedEncoder("json", json.dumps(PEOPLE), 7)
    with pytest.raises(ValueError, match=r"key row .*'eve'.* schema id 7 \(json\): at age: -4 is "
                       r"less than the minimum of 0"):  # fmt: skip
        encoder.encode(rows, "key")
    missing = pa.array([{"age": 1}], pa.struct([("age", pa.int64())]))
    with pytest.raises(ValueError, match="'name' is a required property"):
        encoder.encode(missing, "value")


def test_protobuf_values_re_encode_to_the_same_messages() -> None:
    """Order values decoded into a column, encoded again: google.protobuf parses messages
    equal to the originals (nested, repeated, maps, enums by name and unknown number,
    Timestamp, wrappers, oneof, proto3 optional, uint64)."""
    classes = _classes()
    originals = _orders(classes)
    layout = _layout("shop.Order")
    decoder = TypedDecoder("protobuf", layout, lambda i: None, failfast=True)
    column = decoder.decode(
        pa.array([frame(3, b"\x00" + m.SerializeToString()) for m in originals])
    )[0]
    assert column.to_pylist() == EXPECTED
    out = TypedEncoder("protobuf", layout, 3).encode(column, "value").to_pylist()
    assert all(v[:6] == b"\x00\x00\x00\x00\x03\x00" for v in out)  # message indexes [0]: 0
    order = classes["shop.Order"]
    assert [order.FromString(v[6:]) for v in out] == originals


def test_protobuf_nested_message_framed_with_its_indexes() -> None:
    classes = _classes()
    line = classes["shop.Order.Line"]
    rows = pa.array([{"sku": "a", "qty": 2, "tags": ["x"]}, {"sku": "b", "qty": None, "tags": []}])
    layout = _layout("shop.Order.Line")
    out = TypedEncoder("protobuf", layout, 5).encode(rows, "value").to_pylist()
    # indexes [0, 0] of the file's first message's first nested one: count 2, then 0, 0
    assert [v[:8] for v in out] == [b"\x00\x00\x00\x00\x05\x04\x00\x00"] * 2
    assert [line.FromString(v[8:]) for v in out] == [
        line(sku="a", qty=2, tags=["x"]),
        line(sku="b"),
    ]
    decoded = TypedDecoder("protobuf", layout, lambda i: None, failfast=True).decode(pa.array(out))
    assert decoded[0].to_pylist() == [
        {"sku": "a", "qty": 2, "tags": ["x"]}, {"sku": "b", "qty": 0, "tags": []}
    ]  # fmt: skip


def test_a_protobuf_row_that_does_not_fit_names_the_field() -> None:
    layout = _layout("shop.Order.Line")
    encoder = TypedEncoder("protobuf", layout, 5)
    extra = pa.array([{"sku": "a", "colour": "red"}])
    with pytest.raises(ValueError, match=r"value row .* schema id 5 \(protobuf\): .*colour"):
        encoder.encode(extra, "value")
    wrong = pa.array([{"sku": "a", "qty": "many"}])
    with pytest.raises(ValueError, match="qty"):
        encoder.encode(wrong, "value")
    null_line = pa.array([{"id": "o", "lines": [None]}])
    with pytest.raises(ValueError, match=r"lines.*null is not allowed"):
        TypedEncoder("protobuf", _layout("shop.Order"), 5).encode(null_line, "value")
