"""Protobuf values decoded column-wise — vectorised from the wire format
(``_protobuf_wire``) or parsed by upb then one field of all messages at a time
(``_protobuf_columns``) — give exactly the column and malformed rows of the record-by-record
decoder (``TypedDecoder.decode_each``, each message converted by google.protobuf)."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from seglog.columnar import MalformedValueError, TypedDecoder, frame
from seglog.schemas import serialized_protobuf

PROTO = """
syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Flat {
  enum Kind { ZERO = 0; ONE = 1; FIVE = 5; }
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5;
  uint64 u64 = 6; sint32 s32 = 7; sint64 s64 = 8; fixed32 f32 = 9; fixed64 f64 = 10;
  sfixed32 sf32 = 11; sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes raw = 15;
  Kind kind = 16; optional int32 maybe = 17; optional string note = 18;
  Inner inner = 19; google.protobuf.Timestamp at = 20;
  google.protobuf.Int64Value w64 = 21; google.protobuf.StringValue ws = 22;
  google.protobuf.UInt64Value wu64 = 23;
}

message Inner { string name = 1; sint64 delta = 2; Deeper deeper = 3; }
message Deeper { optional bool ok = 1; Flat.Kind kind = 2; }

message Listy {
  string id = 1; repeated int32 xs = 2; map<string, Inner> by = 3;
  oneof pick { string a = 4; int64 b = 5; Inner c = 6; }
  repeated fixed32 fx = 7; repeated sint64 zs = 8; repeated string tags = 9;
  repeated Inner inners = 10; repeated Flat.Kind kinds = 11; map<int32, string> names = 12;
  repeated google.protobuf.Timestamp times = 13; repeated double ds = 14;
}
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
    names = ("t.Flat", "t.Inner", "t.Listy")
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names}


def _decoder(message: str, *, failfast: bool = False) -> TypedDecoder:
    layout = json.dumps({"file": serialized_protobuf(PROTO), "message": message})
    return TypedDecoder("protobuf", layout, lambda _: None, failfast=failfast)


def _flat(cls: Any, rng: random.Random) -> Any:
    m = cls()
    pick = rng.random
    if pick() < 0.7:
        m.d = rng.uniform(-1e9, 1e9)
    if pick() < 0.7:
        m.f = rng.choice([0.5, -2.25, 3.0e10])
    if pick() < 0.7:
        m.i32 = rng.randint(-(2**31), 2**31 - 1)  # negatives: 10-byte varints
    if pick() < 0.7:
        m.i64 = rng.randint(-(2**63), 2**63 - 1)
    m.u32 = rng.randint(0, 2**32 - 1)
    m.u64 = rng.choice([0, 1, 2**63, 2**64 - 1])
    m.s32 = rng.randint(-(2**31), 2**31 - 1)
    m.s64 = rng.randint(-(2**63), 2**63 - 1)
    m.f32, m.f64 = rng.randint(0, 2**32 - 1), rng.randint(0, 2**64 - 1)
    m.sf32, m.sf64 = rng.randint(-(2**31), 2**31 - 1), rng.randint(-(2**63), 2**63 - 1)
    m.b = pick() < 0.5
    m.s = rng.choice(["", "ascii", "héllo ✓", "x" * 300])
    m.raw = bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
    m.kind = rng.choice([0, 1, 5, 9])  # 9: a number the reader does not name
    if pick() < 0.5:
        m.maybe = rng.choice([0, -7])  # present even when 0
    if pick() < 0.5:
        m.note = rng.choice(["", "n"])
    if pick() < 0.6:
        m.inner.name = rng.choice(["", "in"])
        m.inner.delta = rng.randint(-5, 5)
        if pick() < 0.5:
            m.inner.deeper.kind = rng.choice([0, 1, 7])
            if pick() < 0.5:
                m.inner.deeper.ok = pick() < 0.5
    if pick() < 0.6:
        m.at.seconds = rng.randint(-(10**10), 10**10)
        m.at.nanos = rng.randrange(10**9)
    if pick() < 0.5:
        m.w64.value = rng.choice([0, -1, 2**40])
    if pick() < 0.5:
        m.ws.value = rng.choice(["", "w"])
    if pick() < 0.5:
        m.wu64.value = rng.choice([0, 2**64 - 1])
    return m


def _same(decoder: TypedDecoder, values: pa.Array) -> tuple[pa.Array, Any]:
    column, bad = decoder.decode(values)
    reference, reference_bad = decoder.decode_each(values)
    assert column.type == decoder.arrow_type
    assert column.to_pylist() == reference.to_pylist()
    assert (bad is None) == (reference_bad is None)
    if bad is not None:
        assert bad.tolist() == reference_bad.tolist()
    return column, bad


def test_every_scalar_enum_presence_nested_timestamp_and_wrapper_vectorised() -> None:
    cls = _classes()["t.Flat"]
    rng = random.Random(7)
    values: list[bytes | None] = []
    for i in range(600):
        values.append(
            None if i % 97 == 0 else frame(3, b"\x00" + _flat(cls, rng).SerializeToString())
        )
    decoder = _decoder("t.Flat")
    assert decoder._reader._wire is not None  # this message is read from the wire format
    array = pa.array(values, type=pa.binary())
    assert decoder._reader._decode_wire(array, 5) is not None  # not sent to the runtime
    column, bad = _same(decoder, array)
    assert bad is None
    assert column.null_count == 7
    _same(decoder, array.slice(11, 300))  # an array that does not start at its buffer's start
    _same(decoder, pa.array([], type=pa.binary()))


def test_unknown_fields_repeats_and_other_wire_types_read_as_the_runtime_reads_them() -> None:
    """Fields of a newer schema are skipped, a scalar written twice keeps its last value,
    a known field number with another wire type is unknown, two writes of an embedded
    message merge (the runtime's path)."""
    classes = _classes()
    cls = classes["t.Flat"]
    rng = random.Random(11)
    unknown = b"\x98\x06\x01\x92\x06\x02ab\x89\x06" + bytes(8) + b"\x85\x06" + bytes(4)
    wrong_wire = b"\x18" + b"\x05" + b"\x1a\x01x"  # i32 (3) as a varint then as bytes
    payloads = [
        _flat(cls, rng).SerializeToString() + unknown,
        wrong_wire + _flat(cls, rng).SerializeToString(),
        cls(i32=1, s="a").SerializeToString() + cls(i32=2).SerializeToString(),
    ]
    decoder = _decoder("t.Flat")
    array = pa.array([frame(1, b"\x00" + p) for p in payloads])
    assert decoder._reader._decode_wire(array, 5) is not None
    column, _ = _same(decoder, array)
    assert column[2].as_py()["i32"] == 2
    assert column[2].as_py()["s"] == "a"
    merged = [cls(inner=classes["t.Inner"](name="x")), cls(inner=classes["t.Inner"](delta=3))]
    two = frame(1, b"\x00" + b"".join(m.SerializeToString() for m in merged))
    assert decoder._reader._decode_wire(pa.array([two]), 5) is None  # merged by the runtime
    column, _ = _same(decoder, pa.array([two]))
    assert column[0].as_py()["inner"] == {"name": "x", "delta": 3, "deeper": None}


MALFORMED = [
    b"\x01\x00\x00\x00\x01\x00",  # no magic byte
    b"\x00\x00\x00",  # shorter than the header
    frame(1, b"\x00\x72\x05ab"),  # string (14) running past the end
    frame(1, b"\x00\x72\x02\xff\xfe"),  # invalid UTF-8 in a proto3 string
    frame(1, b"\x00\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),  # 11-byte varint
    frame(1, b"\x00\x1b\x00"),  # wire type 3 (start group) with no end
    frame(1, b"\x00\x07\x01"),  # field number 0
    frame(1, b"\x02\x02" + b"\x0a\x01a"),  # message indexes [1]: another message
]


@pytest.mark.parametrize("bad_value", MALFORMED)
def test_malformed_values_are_the_rows_the_runtime_refuses(bad_value: bytes) -> None:
    cls = _classes()["t.Flat"]
    good = frame(1, b"\x00" + _flat(cls, random.Random(3)).SerializeToString())
    values = pa.array([good, bad_value, None, good], type=pa.binary())
    column, bad = _same(_decoder("t.Flat"), values)
    assert bad is not None
    assert bad.tolist() == [False, True, False, False]
    assert column[1].as_py() is None
    assert column[0].as_py() is not None
    with pytest.raises(MalformedValueError) as failed:
        _decoder("t.Flat", failfast=True).decode(values)
    assert failed.value.row == 1


def _listy(cls: Any, rng: random.Random, i: int) -> Any:
    m = cls(id=f"r{i}", xs=[rng.randint(-(2**31), 2**31 - 1) for _ in range(rng.randrange(4))])
    for k in range(rng.randrange(3)):
        entry = m.by[f"k{rng.randrange(4)}"]
        if k:
            entry.name, entry.delta = str(k), -k  # k == 0: an entry with an empty value
    choice = rng.randrange(4)
    if choice == 1:
        m.a = rng.choice(["", "a"])
    elif choice == 2:
        m.b = i
    elif choice == 3:
        m.c.name = "c"
    m.fx.extend(rng.randrange(2**32) for _ in range(rng.randrange(3)))
    m.zs.extend(rng.randint(-(2**63), 2**63 - 1) for _ in range(rng.randrange(3)))
    m.tags.extend(rng.choice(["", "t", "ü"]) for _ in range(rng.randrange(3)))
    for _ in range(rng.randrange(3)):
        m.inners.add(name=rng.choice(["", "n"]), delta=rng.randint(-3, 3))
    m.kinds.extend(rng.choice([0, 1, 5, 6]) for _ in range(rng.randrange(3)))
    for _ in range(rng.randrange(3)):
        m.names[rng.randint(-2, 2)] = rng.choice(["", "x"])
    for _ in range(rng.randrange(2)):
        m.times.add(seconds=rng.randint(-(10**9), 10**9), nanos=rng.randrange(10**9))
    m.ds.extend(rng.uniform(-1, 1) for _ in range(rng.randrange(3)))
    return m


LISTY = b"\x02\x06"  # message indexes [3]: the file's fourth message


def test_repeated_fields_maps_and_oneofs_vectorised() -> None:
    """Packed and unpacked repeated scalars, repeated strings, messages, enums and
    Timestamps, maps with scalar and message values, a oneof of three members; then two
    messages concatenated, which the runtime merges: repeated fields appended, a map's
    key written twice keeping its last value, the oneof's last member set winning."""
    cls = _classes()["t.Listy"]
    rng = random.Random(5)
    messages = [_listy(cls, rng, i) for i in range(400)]
    values = [None if i % 50 == 0 else frame(1, LISTY + m.SerializeToString())
              for i, m in enumerate(messages)]  # fmt: skip
    unpacked = cls(id="u")
    unpacked.xs.extend([1, -2])
    raw = unpacked.SerializeToString() + b"\x10\x07\x10\x08"  # xs 7 and 8 unpacked
    values.append(frame(1, LISTY + raw))
    decoder = _decoder("t.Listy")
    array = pa.array(values, type=pa.binary())
    assert decoder._reader._decode_wire(array, 5) is not None
    column, bad = _same(decoder, array)
    assert bad is None
    assert column[400].as_py()["xs"] == [1, -2, 7, 8]
    merged = [
        frame(1, LISTY + a.SerializeToString() + b.SerializeToString())
        for a, b in zip(messages[1:200], messages[200:399], strict=True)
        if not (a.HasField("c") and b.HasField("c"))  # two writes of c merge: the runtime's
    ]
    merged_array = pa.array(merged, type=pa.binary())
    assert decoder._reader._decode_wire(merged_array, 5) is not None
    _same(decoder, merged_array)


def test_a_few_long_messages_among_short_ones() -> None:
    """One message of 600 unpacked values and one of a 600-value packed run among short
    ones: the batch goes to the runtime (numpy's cost per step would outweigh the work),
    with the same column; 600 such messages are vectorised."""
    cls = _classes()["t.Listy"]
    long_unpacked = LISTY + b"".join(b"\x10" + bytes([k % 100]) for k in range(600))
    long_packed = LISTY + cls(xs=list(range(600))).SerializeToString()
    short = LISTY + cls(id="s", xs=[1]).SerializeToString()
    decoder = _decoder("t.Listy")
    for long in (long_unpacked, long_packed):
        array = pa.array([frame(1, v) for v in [short] * 100 + [long]], type=pa.binary())
        assert decoder._reader._decode_wire(array, 5) is None
        column, _ = _same(decoder, array)
        assert len(column[100].as_py()["xs"]) == 600
        many = pa.array([frame(1, long)] * 600, type=pa.binary())
        assert decoder._reader._decode_wire(many, 5) is not None
        _same(decoder, many)


def test_malformed_repeated_values_are_the_rows_the_runtime_refuses() -> None:
    cls = _classes()["t.Listy"]
    good = frame(1, LISTY + _listy(cls, random.Random(1), 1).SerializeToString())
    for bad_value in (
        frame(1, LISTY + b"\x12\x09"),  # packed xs running past the end
        frame(1, LISTY + b"\x3a\x03\x01\x02\x03"),  # packed fixed32 of 3 bytes
        frame(1, LISTY + b"\x4a\x01\xff"),  # a repeated string of invalid UTF-8
    ):
        values = pa.array([good, bad_value, good], type=pa.binary())
        _, bad = _same(_decoder("t.Listy"), values)
        assert bad is not None
        assert bad.tolist() == [False, True, False]


def _mutated(payload: bytes, rng: random.Random) -> bytes:
    out = bytearray(payload)
    op = rng.randrange(3)
    if op == 0 and out:
        out[rng.randrange(len(out))] = rng.randrange(256)
    elif op == 1 and out:
        del out[rng.randrange(len(out)) :]
    else:
        out.insert(rng.randrange(len(out) + 1), rng.randrange(256))
    return bytes(out)


@pytest.mark.parametrize("message", ["t.Flat", "t.Listy"])
def test_mutated_values_decode_as_the_runtime_decodes_them(message: str) -> None:
    """One byte changed, inserted or the value cut short, one value at a time: the same
    column and malformed rows as record by record, whichever path the batch takes (the
    values the mutation leaves well-formed are mostly vectorised)."""
    classes = _classes()
    rng = random.Random(21)
    prefix = b"\x00" if message == "t.Flat" else LISTY
    decoder = _decoder(message)
    vectorised = 0
    for trial in range(250):
        if message == "t.Flat":
            payload = _flat(classes[message], rng).SerializeToString()
        else:
            payload = _listy(classes[message], rng, trial).SerializeToString()
        array = pa.array([frame(1, prefix + _mutated(payload, rng))], type=pa.binary())
        try:
            decoder.decode_each(array)
        except OverflowError:
            continue  # a Timestamp past year 9999: record by record cannot say
        vectorised += decoder._reader._decode_wire(array, 5) is not None
        _same(decoder, array)
    assert vectorised > 25


def test_a_malformed_value_in_a_large_batch_costs_only_its_half() -> None:
    """Values the vectorised decoding refuses are found by cutting the batch in halves:
    the same column and malformed rows as record by record, three bad values among 3,000."""
    classes = _classes()
    rng = random.Random(8)
    values: list[bytes | None] = [
        frame(1, LISTY + _listy(classes["t.Listy"], rng, i).SerializeToString())
        for i in range(3000)
    ]
    values[7] = frame(1, LISTY + b"\x12\x09")  # packed xs running past the end
    values[1500] = frame(1, b"\x00\x0a\x01x")  # written as another message ([0])
    values[2999] = b"junk"
    values[10] = None
    column, bad = _same(_decoder("t.Listy"), pa.array(values, type=pa.binary()))
    assert bad is not None
    assert bad.nonzero()[0].tolist() == [7, 1500, 2999]
    assert column.null_count == 4
