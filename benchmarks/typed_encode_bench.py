"""Typed writes' encoders: JSON Schema and Protobuf against Avro on the same rows.

``seglog.columnar.TypedEncoder`` (what the Spark sink runs on each executor for
``valueFormat`` = ``avro`` | ``json`` | ``protobuf``) encodes one Arrow struct column of
flight-like rows (8 fields: strings, int, long, a nullable double, a timestamp, an array
of strings) into Confluent-framed values, one thread, no Spark: JSON Schema (jsonschema
validation then JSON text) and Protobuf (the runtime's message built from each row)
against Avro (fastavro) as the reference, interleaved rounds after a warm-up.

Prints ``seglog.bench``'s markdown table of medians over ``--repeat`` rounds; ``--json
FILE`` writes the report.

    .venv/bin/python benchmarks/typed_encode_bench.py                  # 100 k rows, 5 rounds
    .venv/bin/python benchmarks/typed_encode_bench.py --rows 500 --repeat 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import pyarrow as pa

from seglog.bench import Report, Row, Samples, machine_info
from seglog.columnar import TypedEncoder
from seglog.schemas import serialized_protobuf

AVRO = {
    "type": "record",
    "name": "Flight",
    "fields": [
        {"name": "carrier", "type": "string"},
        {"name": "flight", "type": "int"},
        {"name": "origin", "type": "string"},
        {"name": "dest", "type": "string"},
        {"name": "distance", "type": "long"},
        {"name": "delay", "type": ["double", "null"]},
        {"name": "departed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "carrier": {"type": "string"},
        "flight": {"type": "integer"},
        "origin": {"type": "string"},
        "dest": {"type": "string"},
        "distance": {"type": "integer"},
        "delay": {"type": ["number", "null"]},
        "departed": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["carrier", "flight", "origin", "dest", "distance", "departed", "tags"],
}
PROTO = """
syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Flight {
  string carrier = 1; int32 flight = 2; string origin = 3; string dest = 4;
  int64 distance = 5; optional double delay = 6; google.protobuf.Timestamp departed = 7;
  repeated string tags = 8;
}
"""
ARROW = pa.struct([
    pa.field("carrier", pa.string(), False), pa.field("flight", pa.int32(), False),
    pa.field("origin", pa.string(), False), pa.field("dest", pa.string(), False),
    pa.field("distance", pa.int64(), False), pa.field("delay", pa.float64()),
    pa.field("departed", pa.timestamp("us", tz="UTC"), False),
    pa.field("tags", pa.list_(pa.string()), False),
])  # fmt: skip
_DEPARTED = dt.datetime(2024, 3, 1, 6, 0, tzinfo=dt.UTC)


def _row(i: int) -> dict[str, object]:
    return {
        "carrier": ("UA", "AA", "B6")[i % 3], "flight": i, "origin": "JFK", "dest": "SFO",
        "distance": 2586, "delay": None if i % 4 else i / 7,
        "departed": _DEPARTED + dt.timedelta(minutes=i), "tags": ["redeye"] * (i % 2),
    }  # fmt: skip


def _column(rows: int) -> pa.Array:
    return pa.array([_row(i) for i in range(rows)], type=ARROW)


def _rate(encoder: TypedEncoder, column: pa.Array) -> float:
    started = time.perf_counter()
    out = encoder.encode(column, "value")
    elapsed = time.perf_counter() - started
    assert out.null_count == 0
    return len(column) / elapsed


def main() -> None:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="write the rows, settings and samples here")
    args = parser.parse_args()
    started = time.perf_counter()
    column = _column(args.rows)
    layout = json.dumps({"file": serialized_protobuf(PROTO), "message": "Flight"})
    encoders = {
        "avro": TypedEncoder("avro", json.dumps(AVRO), 1),
        "json": TypedEncoder("json", json.dumps(JSON_SCHEMA), 2),
        "protobuf": TypedEncoder("protobuf", layout, 3),
    }
    samples = {name: Samples("rows/s") for name in encoders}
    for encoder in encoders.values():  # warm-up
        _rate(encoder, column[: min(len(column), 1000)])
    for round_ in range(args.repeat):
        for name, encoder in encoders.items():
            samples[name].values.append(_rate(encoder, column))
            print(f"round {round_}: {name} {samples[name].values[-1]:,.0f} rows/s",
                  file=sys.stderr, flush=True)  # fmt: skip
    rows = [
        Row("encode valueFormat=json (8 fields, validated)", samples["json"],
            "valueFormat=avro, same rows", samples["avro"]),
        Row("encode valueFormat=protobuf (8 fields)", samples["protobuf"],
            "valueFormat=avro, same rows", samples["avro"]),
    ]  # fmt: skip
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report(rows, machine_info(), settings, time.perf_counter() - started)
    print(report.markdown())
    if args.json:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
