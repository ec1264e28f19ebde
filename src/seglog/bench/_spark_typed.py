"""Spark typed reads: Confluent-framed Avro values decoded into a struct column
(``valueFormat=avro``) against the same rows read as binary, in the same session.

The topic (``partitions`` partitions, path mode) holds flight-like Avro records (10 fields:
ints, strings, a nullable double, a ``timestamp-millis``; ~60 B encoded) registered under
``<topic>-value`` in the data directory's ``_schemas`` topic, written with the embedded
API. Timed: ``count()`` over ``format("seglog")`` with and without ``valueFormat=avro``
(the Python data source decodes every column whatever the query: no column pruning in
pyspark 4.3), and ``sum(value.flight)`` over the typed read, checked against the known
answer. Rounds interleave typed and binary after an untimed warm-up.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
from pyspark.sql import functions as F  # noqa: N812

from seglog.bench._kafka import BenchError
from seglog.bench._report import Samples, measure
from seglog.bench._spark_io import count_rows
from seglog.columnar import frame
from seglog.schemas import SCHEMAS_TOPIC
from seglog.storage import DataDir, Message

__all__ = ["FLIGHT_SCHEMA", "TypedResults", "typed_reads", "write_typed_topic"]

TOPIC = "typed-bench"

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
SCHEMA_ID = 1


@dataclass
class TypedResults:
    """rows/s of count() typed and binary, and of sum(value.flight) typed."""

    typed: Samples = field(default_factory=lambda: Samples("rows/s"))
    binary: Samples = field(default_factory=lambda: Samples("rows/s"))
    typed_sum: Samples = field(default_factory=lambda: Samples("rows/s"))


def _register(data_dir: DataDir, subject: str, version: int, schema: Any) -> None:
    """One SCHEMA record of ``_schemas`` in Confluent's KafkaStore format, as the registry
    of ``seglog serve --schema-registry-listen`` writes it."""
    if SCHEMAS_TOPIC not in data_dir.topics():
        data_dir.create_topic(SCHEMAS_TOPIC, 1, {"cleanup.policy": "compact"})
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": SCHEMA_ID,
             "schema": json.dumps(schema), "deleted": False}  # fmt: skip
    log = data_dir.log(SCHEMAS_TOPIC, 0)
    log.publish([Message(key=json.dumps(key).encode(), value=json.dumps(value).encode())])
    log.sync()


def write_typed_topic(path: Path, rows: int, partitions: int = 2) -> int:
    """Write ``rows`` Avro records (``FLIGHT_SCHEMA``, id 1) to topic ``typed-bench`` of
    the data directory ``path``; returns the sum of ``flight`` over all rows."""
    parsed = fastavro.parse_schema(FLIGHT_SCHEMA, named_schemas={})
    base = dt.datetime(2013, 1, 1, tzinfo=dt.UTC)
    carriers = ["UA", "AA", "B6", "DL", "EV", "MQ"]
    with DataDir(path, create=True) as data_dir:
        _register(data_dir, f"{TOPIC}-value", 1, FLIGHT_SCHEMA)
        data_dir.create_topic(TOPIC, partitions)
        total = 0
        for partition in range(partitions):
            log = data_dir.log(TOPIC, partition)
            batch: list[Message] = []
            for i in range(partition, rows, partitions):
                out = io.BytesIO()
                record: dict[str, Any] = {
                    "year": 2013, "month": 1 + i % 12, "carrier": carriers[i % 6],
                    "flight": i % 5000, "origin": "EWR", "dest": "IAH",
                    "dep_delay": None if i % 50 == 0 else float(i % 90 - 10),
                    "distance": 1400 + i % 7, "tailnum": f"N{i % 900:03d}UA",
                    "time_hour": base + dt.timedelta(hours=i % 8760),
                }  # fmt: skip
                total += record["flight"]
                fastavro.schemaless_writer(out, parsed, record)
                batch.append(
                    Message(key=record["carrier"].encode(), value=frame(1, out.getvalue()))
                )
                if len(batch) == 10_000:
                    log.publish(batch)
                    batch = []
            if batch:
                log.publish(batch)
            log.sync()
    return total


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
    """Write the topic under ``work``, then time ``repeat`` interleaved rounds (after
    ``min(repeat, 2)`` untimed ones) of typed and binary reads in ``spark``."""
    path = work / "typed-data"
    progress(f"spark typed: writing {rows:,} Avro records")
    expected = write_typed_topic(path, rows)

    def typed() -> Any:
        return (
            spark.read.format("seglog")
            .option("subscribe", TOPIC)
            .option("valueFormat", "avro")
            .load(str(path))
        )

    def binary() -> Any:
        return spark.read.format("seglog").option("subscribe", TOPIC).load(str(path))

    results = TypedResults()
    for _ in range(min(repeat, 2)):
        count_rows(typed, rows)
        count_rows(binary, rows)
    for rnd in range(repeat):
        steps: list[tuple[str, Samples, Callable[[], float]]] = [
            ("typed count()", results.typed, lambda: count_rows(typed, rows)),
            ("binary count()", results.binary, lambda: count_rows(binary, rows)),
            ("typed sum(value.flight)", results.typed_sum,
             lambda: _sum_flight(typed, rows, expected)),
        ]  # fmt: skip
        if rnd % 2:
            steps.reverse()
        for label, samples, run in steps:
            measure(samples, progress, f"{label} {rnd + 1}/{repeat}", run)
    return results
