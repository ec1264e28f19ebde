"""``value_schema`` commits of Protobuf and JSON Schema values next to Avro values of the same
fields, in process (no broker): ``seglog.iceberg.commit_values`` of ``--records`` values
framed in Confluent's wire format, read from a seglog log, decoded with the schema a
``Registry`` over an embedded ``_schemas`` log holds, and appended to a new table of a local
SQLite catalog (decode, Arrow conversion, Parquet write, catalog commit).

The values: ``carrier`` string, ``flight`` and ``delay`` ints, ``distance`` double, ``legs``
a list of 0-2 strings; Avro written by fastavro (confluent-kafka's AvroSerializer's
payload), Protobuf by the protobuf runtime (its ProtobufSerializer's, message indexes
``[0]``), JSON as ``json.dumps`` text (its JSONSerializer's). Rows: records/s of a whole
commit; reference: the Avro commit of the same records, the three formats interleaved in
every repeat. Medians of ``--repeat``.

    .venv/bin/python benchmarks/iceberg_values_bench.py                   # 100,000 records
    .venv/bin/python benchmarks/iceberg_values_bench.py --records 2000 --repeat 1   # tiny
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from seglog.bench import Report, Row, Samples, machine_info
from seglog.iceberg import (
    VALUE_SCHEMA,
    OffsetRange,
    SchemaLookup,
    catalog_properties,
    commit_values,
    load_topic_table,
    open_catalog,
)
from seglog.schemas import Registry, frame_schema_id, serialized_protobuf
from seglog.storage import Log, open_log

AVRO = {
    "type": "record", "name": "Flight",
    "fields": [
        {"name": "carrier", "type": "string"}, {"name": "flight", "type": "int"},
        {"name": "delay", "type": "int"}, {"name": "distance", "type": "double"},
        {"name": "legs", "type": {"type": "array", "items": "string"}},
    ],
}  # fmt: skip
PROTO = """syntax = "proto3";
message Flight {
  string carrier = 1; int32 flight = 2; int32 delay = 3; double distance = 4;
  repeated string legs = 5;
}"""
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "carrier": {"type": "string"}, "flight": {"type": "integer"},
        "delay": {"type": "integer"}, "distance": {"type": "number"},
        "legs": {"type": "array", "items": {"type": "string"}},
    },
}  # fmt: skip
FORMATS = ("avro", "protobuf", "json")


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _flight(i: int) -> dict[str, Any]:
    return {"carrier": ("UA", "AA", "DL")[i % 3], "flight": 100 + i % 900, "delay": i % 97 - 20,
            "distance": 150.0 + i % 2500, "legs": ["SFO", "JFK"][: i % 3]}  # fmt: skip


def _encoders(registry: Registry) -> dict[str, Callable[[dict[str, Any]], bytes]]:
    """Format → record → framed value, each schema registered."""
    avro_id = registry.register("avro-value", {"schema": json.dumps(AVRO)})["id"]
    proto_id = registry.register("protobuf-value", {"schema": PROTO,
                                                    "schemaType": "PROTOBUF"})["id"]  # fmt: skip
    json_id = registry.register("json-value", {"schema": json.dumps(JSON_SCHEMA),
                                               "schemaType": "JSON"})["id"]  # fmt: skip
    parsed = fastavro.parse_schema(AVRO)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(serialized_protobuf(PROTO))
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    flight = message_factory.GetMessageClass(pool.FindMessageTypeByName("Flight"))

    def avro(record: dict[str, Any]) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        return frame_schema_id(avro_id, out.getvalue())

    def proto(record: dict[str, Any]) -> bytes:
        return frame_schema_id(proto_id, b"\x00" + flight(**record).SerializeToString())

    def json_text(record: dict[str, Any]) -> bytes:
        return frame_schema_id(json_id, json.dumps(record).encode())

    return {"avro": avro, "protobuf": proto, "json": json_text}


def _commit(catalog: Any, schemas: Log, plog: Log, topic: str, records: int) -> float:
    """Seconds of one commit of ``records`` values to a new table."""
    lookup = SchemaLookup()
    lookup.refresh(schemas)
    table = load_topic_table(catalog, topic, mode=VALUE_SCHEMA)
    began = time.perf_counter()
    done = commit_values(
        table, lambda: None, topic=topic, topic_id=uuid.uuid4(), logs={0: plog},
        ranges=[OffsetRange(0, 0, records)], committed={}, dlq_committed={}, lookup=lookup,
    )  # fmt: skip
    seconds = time.perf_counter() - began
    if done.report.rows != records or done.dlq_rows:
        raise RuntimeError(f"{topic}: {done.report.rows} rows, {done.dlq_rows} dead letters")
    return seconds


def main() -> None:
    """Run the benchmark; print the table (``--json FILE``: the report too)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    rates = {fmt: Samples("records/s") for fmt in FORMATS}
    with tempfile.TemporaryDirectory(prefix="seglog-iceberg-values-bench-") as tmp:
        root = Path(tmp)
        schemas = open_log(root / "_schemas-0", create=True)
        logs: dict[str, Log] = {}
        try:
            encoders = _encoders(Registry(schemas))
            schemas.sync()
            records = [_flight(i) for i in range(args.records)]
            for fmt in FORMATS:
                logs[fmt] = open_log(root / f"{fmt}-0", create=True)
                values = [encoders[fmt](r) for r in records]
                logs[fmt].publish_values(values)
            catalog = open_catalog(catalog_properties(root / "data"))
            for i in range(args.repeat):
                for fmt in FORMATS:  # interleaved
                    seconds = _commit(catalog, schemas, logs[fmt], f"{fmt}-{i}", args.records)
                    rates[fmt].values.append(args.records / seconds)
                    _log(f"{fmt} {i + 1}/{args.repeat}: {seconds:.3f} s")
        finally:
            for plog in logs.values():
                plog.close()
            schemas.close()
    reference = "Avro values of the same fields"
    out = [
        Row(f"value_schema commit, Protobuf values ({args.records:,} records)",
            rates["protobuf"], reference, rates["avro"]),
        Row(f"value_schema commit, JSON Schema values ({args.records:,} records)",
            rates["json"], reference, rates["avro"]),
    ]  # fmt: skip
    settings = {k: v for k, v in vars(args).items() if k != "json"}
    report = Report(out, machine_info(), settings, time.perf_counter() - started)
    print(report.markdown())
    if args.json is not None:
        report.write_json(args.json)


if __name__ == "__main__":
    main()
