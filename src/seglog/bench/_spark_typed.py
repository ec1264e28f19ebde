"""Spark typed reads: Confluent-framed Avro and Protobuf values decoded into a struct
column (``valueFormat=avro`` / ``protobuf``) against the same rows read as binary, in the
same session.

Two topics (``partitions`` partitions, path mode) hold the same flight-like rows (10
fields: ints, strings, a nullable double, a timestamp; ``seglog.bench._typed_data``): as
Avro records (~60 B encoded) and as proto3 messages (~56 B), registered under
``<topic>-value`` in the data directory's ``_schemas`` topic, written with the embedded
API. Timed: ``count()`` over ``format("seglog")`` with and without ``valueFormat`` (the
Python data source decodes every column whatever the query: no column pruning in pyspark
4.3), and ``sum(value.flight)`` over the typed reads, checked against the known answer.
Rounds interleave typed and binary after an untimed warm-up.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F  # noqa: N812

from seglog.bench._kafka import BenchError
from seglog.bench._report import Samples, measure
from seglog.bench._spark_io import count_rows
from seglog.bench._typed_data import (
    FLIGHT_PROTO,
    FLIGHT_SCHEMA,
    flight_avro,
    flight_protobuf,
    flight_row,
)
from seglog.schemas import SCHEMAS_TOPIC
from seglog.storage import DataDir, Message

__all__ = ["FLIGHT_SCHEMA", "TypedResults", "typed_reads", "write_typed_topic"]

TOPIC = "typed-bench"
PROTO_TOPIC = "typed-bench-protobuf"

SCHEMA_ID = 1
PROTO_SCHEMA_ID = 2


@dataclass
class TypedResults:
    """rows/s of count() typed and binary, and of sum(value.flight) typed: Avro, then
    Protobuf (``proto_*``)."""

    typed: Samples = field(default_factory=lambda: Samples("rows/s"))
    binary: Samples = field(default_factory=lambda: Samples("rows/s"))
    typed_sum: Samples = field(default_factory=lambda: Samples("rows/s"))
    proto: Samples = field(default_factory=lambda: Samples("rows/s"))
    proto_binary: Samples = field(default_factory=lambda: Samples("rows/s"))
    proto_sum: Samples = field(default_factory=lambda: Samples("rows/s"))


def _register(
    data_dir: DataDir, subject: str, schema_id: int, schema: str, schema_type: str | None
) -> None:
    """One SCHEMA record (version 1) of ``_schemas`` in Confluent's KafkaStore format, as
    the registry of ``seglog serve --schema-registry-listen`` writes it (``schemaType``
    absent for Avro)."""
    if SCHEMAS_TOPIC not in data_dir.topics():
        data_dir.create_topic(SCHEMAS_TOPIC, 1, {"cleanup.policy": "compact"})
    key = {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
    value: dict[str, Any] = {"subject": subject, "version": 1, "id": schema_id,
                             "schema": schema, "deleted": False}  # fmt: skip
    if schema_type is not None:
        value["schemaType"] = schema_type
    log = data_dir.log(SCHEMAS_TOPIC, 0)
    log.publish([Message(key=json.dumps(key).encode(), value=json.dumps(value).encode())])
    log.sync()


def write_typed_topic(path: Path, rows: int, partitions: int = 2) -> int:
    """Write ``rows`` flight-like rows to topic ``typed-bench`` of the data directory
    ``path`` as Avro records (``FLIGHT_SCHEMA``, id 1) and to ``typed-bench-protobuf`` as
    Protobuf messages (``FLIGHT_PROTO``, id 2); returns the sum of ``flight`` over all
    rows."""
    with DataDir(path, create=True) as data_dir:
        _register(data_dir, f"{TOPIC}-value", SCHEMA_ID, json.dumps(FLIGHT_SCHEMA), None)
        _register(data_dir, f"{PROTO_TOPIC}-value", PROTO_SCHEMA_ID, FLIGHT_PROTO, "PROTOBUF")
        for topic in (TOPIC, PROTO_TOPIC):
            data_dir.create_topic(topic, partitions)
            for partition in range(partitions):
                log = data_dir.log(topic, partition)
                for first in range(partition, rows, 10_000 * partitions):
                    numbers = range(first, min(rows, first + 10_000 * partitions), partitions)
                    values = (
                        flight_avro(numbers, SCHEMA_ID)
                        if topic == TOPIC
                        else flight_protobuf(numbers, PROTO_SCHEMA_ID)
                    )
                    keys = [flight_row(i)["carrier"].encode() for i in numbers]
                    log.publish(
                        [Message(key=k, value=v) for k, v in zip(keys, values, strict=True)]
                    )
                log.sync()
    return sum(flight_row(i)["flight"] for i in range(rows))


def _sum_flight(make: Callable[[], Any], rows: int, expected: int) -> float:
    start = time.perf_counter()
    got = make().select(F.sum("value.flight")).collect()[0][0]
    elapsed = time.perf_counter() - start
    if got != expected:
        raise BenchError(f"sum(value.flight) gave {got}, expected {expected}")
    return rows / elapsed


def typed_reads(
    spark: Any, work: Path, rows: int, repeat: int, progress: Callable[[str], None]
) -> TypedResults:
    """Write the topics under ``work``, then time ``repeat`` interleaved rounds (after
    ``min(repeat, 2)`` untimed ones) of typed and binary reads in ``spark``."""
    path = work / "typed-data"
    progress(f"spark typed: writing {rows:,} Avro records and {rows:,} Protobuf messages")
    expected = write_typed_topic(path, rows)

    def read(topic: str, fmt: str | None) -> Callable[[], Any]:
        def make() -> Any:
            reader = spark.read.format("seglog").option("subscribe", topic)
            return (reader if fmt is None else reader.option("valueFormat", fmt)).load(str(path))

        return make

    typed, binary = read(TOPIC, "avro"), read(TOPIC, None)
    proto, proto_binary = read(PROTO_TOPIC, "protobuf"), read(PROTO_TOPIC, None)
    results = TypedResults()
    for _ in range(min(repeat, 2)):
        for make in (typed, binary, proto, proto_binary):
            count_rows(make, rows)
    for rnd in range(repeat):
        steps: list[tuple[str, Samples, Callable[[], float]]] = [
            ("typed count()", results.typed, lambda: count_rows(typed, rows)),
            ("binary count()", results.binary, lambda: count_rows(binary, rows)),
            ("typed sum(value.flight)", results.typed_sum,
             lambda: _sum_flight(typed, rows, expected)),
            ("protobuf count()", results.proto, lambda: count_rows(proto, rows)),
            ("protobuf topic binary count()", results.proto_binary,
             lambda: count_rows(proto_binary, rows)),
            ("protobuf sum(value.flight)", results.proto_sum,
             lambda: _sum_flight(proto, rows, expected)),
        ]  # fmt: skip
        if rnd % 2:
            steps.reverse()
        for label, samples, run in steps:
            measure(samples, progress, f"{label} {rnd + 1}/{repeat}", run)
    return results
