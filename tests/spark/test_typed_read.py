"""Typed reads in path mode: ``valueFormat=avro`` / ``json`` decodes Confluent-framed values
into a struct column, equal to decoding each stored record with fastavro; schema evolution
read with a reader schema; PERMISSIVE vs FAILFAST; batch and streaming.

The schemas are found in the data directory's ``_schemas`` topic, written here in Confluent
Schema Registry's record format (what ``seglog serve --schema-registry-listen`` stores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from tests.columnar.test_typed import (
    FLIGHT_V1,
    FLIGHT_V2,
    RICH,
    RICH_ROW,
    avro,
    fastavro_reference,
)

from seglog.columnar import avro_arrow_type, frame, sync_mirrors
from seglog.spark import read_topic
from seglog.storage import DataDir, Message

GARBAGE = b"\x07 not framed"


def store_schema(
    data_dir: DataDir, subject: str, version: int, schema_id: int, schema: Any, kind: str = "AVRO"
) -> None:
    """One SCHEMA record of ``_schemas`` (Confluent's KafkaStore key and value)."""
    if "_schemas" not in data_dir.topics():
        data_dir.create_topic("_schemas", 1, {"cleanup.policy": "compact"})
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {
        "subject": subject,
        "version": version,
        "id": schema_id,
        "schema": json.dumps(schema),
        "deleted": False,
        **({} if kind == "AVRO" else {"schemaType": kind}),
    }
    log = data_dir.log("_schemas", 0)
    log.publish([Message(key=json.dumps(key).encode(), value=json.dumps(value).encode())])
    log.sync()


def flight(i: int) -> dict[str, Any]:
    return {"carrier": ["UA", "AA", "B6"][i % 3], "flight": i, "delay": None if i % 4 else 1.5}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """flights: v1 then v2 records, a tombstone, 2 partitions; rich: every mapped type;
    bad: a garbage value among good ones; people: JSON Schema."""
    path = tmp_path_factory.mktemp("typed") / "data"
    with DataDir(path) as data_dir:
        store_schema(data_dir, "flights-value", 1, 1, FLIGHT_V1)
        store_schema(data_dir, "flights-value", 2, 2, FLIGHT_V2)
        store_schema(data_dir, "rich-value", 1, 3, RICH)
        store_schema(data_dir, "bad-value", 1, 1, FLIGHT_V1)
        people = {"type": "object", "properties": {"name": {"type": "string"},
                  "age": {"type": "integer"}}}  # fmt: skip
        store_schema(data_dir, "people-value", 1, 4, people, "JSON")
        data_dir.create_topic("flights", 2)
        for p in range(2):
            log = data_dir.log("flights", p)
            log.publish([Message(key=b"k", value=avro(1, FLIGHT_V1, flight(i))) for i in range(5)])
            log.publish([Message(key=b"k", value=None)])
            v2 = [{**flight(i), "origin": "JFK"} for i in range(5, 9)]
            log.publish([Message(key=b"k", value=avro(2, FLIGHT_V2, r)) for r in v2])
            log.sync()
        data_dir.create_topic("rich", 1)
        data_dir.log("rich", 0).publish([Message(value=avro(3, RICH, RICH_ROW))])
        data_dir.create_topic("bad", 1)
        good = avro(1, FLIGHT_V1, flight(1))
        data_dir.log("bad", 0).publish([Message(value=v) for v in (good, GARBAGE, good)])
        data_dir.create_topic("people", 1)
        docs = [{"name": "ada", "age": 36}, {"name": "bob"}]
        data_dir.log("people", 0).publish(
            [Message(value=frame(4, json.dumps(d).encode())) for d in docs]
        )
        for topic in ("rich", "bad", "people"):
            data_dir.log(topic, 0).sync()
        stored = {
            p: [m.value for m in data_dir.log("flights", p).consume(-2, 100)[1]] for p in range(2)
        }
    return {"path": str(path), "stored": stored}


def _read(spark: Any, path: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("seglog").option("subscribe", topic).option("valueFormat", "avro")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load(path)


def _fastavro(values: list[bytes | None], reader_schema: Any) -> list[Any]:
    return fastavro_reference(values, {1: FLIGHT_V1, 2: FLIGHT_V2}, reader_schema)


def stream_rows(stream: Any, tmp_path: Path, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Run a streaming read with ``trigger(availableNow=True)`` into Parquet files under
    ``tmp_path`` (checkpointed there too); the rows written, as tuples of ``columns``
    sorted."""
    query = (
        stream.selectExpr(*columns)
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert query.exception() is None
    table = pq.read_table(tmp_path / "out")
    names = [c.split(" AS ")[-1] for c in columns]
    return sorted(zip(*(table.column(c).to_pylist() for c in names), strict=True))


def _values(df: Any) -> dict[int, list[Any]]:
    rows = df.orderBy("partition", "offset").collect()
    got: dict[int, list[Any]] = {0: [], 1: []}
    for row in rows:
        got[row.partition].append(None if row.value is None else row.value.asDict())
    return got


def test_latest_schema_equals_fastavro(spark: Any, data: dict[str, Any]) -> None:
    df = _read(spark, data["path"], "flights")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<carrier:string,flight:int,delay:double,origin:string>"
    )
    assert df.schema["key"].dataType.simpleString() == "binary"  # keyFormat not given
    expected = {p: _fastavro(v, FLIGHT_V2) for p, v in data["stored"].items()}
    assert _values(df) == expected
    assert expected[0][0]["origin"] == "?"  # a v1 record read with v2's default


def test_older_reader_version(spark: Any, data: dict[str, Any]) -> None:
    df = _read(spark, data["path"], "flights", valueSchemaVersion="1")
    assert "origin" not in df.schema["value"].dataType.fieldNames()
    assert _values(df) == {p: _fastavro(v, FLIGHT_V1) for p, v in data["stored"].items()}


def test_every_mapped_type(spark: Any, data: dict[str, Any]) -> None:
    df = _read(spark, data["path"], "rich")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<b:boolean,l:bigint,f:float,s:string,e:string,raw:binary,fx:binary,"
        "tags:array<string>,attrs:map<string,bigint>,day:date,at:timestamp,at_us:timestamp,"
        "price:decimal(9,2),inner:struct<x:int>,again:struct<x:int>,wide:bigint>"
    )
    row = df.select("value.*").collect()[0].asDict(recursive=True)
    assert row == {**RICH_ROW, "at": RICH_ROW["at"].replace(tzinfo=None),
                   "at_us": RICH_ROW["at_us"].replace(tzinfo=None)}  # fmt: skip


def test_permissive_and_failfast(spark: Any, data: dict[str, Any]) -> None:
    df = _read(spark, data["path"], "bad", columnNameOfCorruptRecord="_corrupt_record")
    rows = df.orderBy("offset").collect()
    assert [r.value is None for r in rows] == [False, True, False]
    assert [r._corrupt_record for r in rows] == [None, GARBAGE, None]
    assert rows[0].value.carrier == "AA"
    permissive = _read(spark, data["path"], "bad").orderBy("offset").collect()
    assert [r.value is None for r in permissive] == [False, True, False]
    with pytest.raises(Exception, match="bad-0 at offset 1 does not decode as avro"):
        _read(spark, data["path"], "bad", mode="FAILFAST").collect()


def test_json_schema_flat(spark: Any, data: dict[str, Any]) -> None:
    df = _read(spark, data["path"], "people", valueFormat="json")
    assert df.schema["value"].dataType.simpleString() == "struct<name:string,age:bigint>"
    assert [r.value.asDict() for r in df.orderBy("offset").collect()] == [
        {"name": "ada", "age": 36},
        {"name": "bob", "age": None},
    ]


def test_option_errors(spark: Any, data: dict[str, Any]) -> None:
    with pytest.raises(Exception, match="no version"):
        _read(spark, data["path"], "flights", valueSchemaVersion="9").schema  # noqa: B018
    with pytest.raises(Exception, match="holds a AVRO schema, not json"):
        _read(spark, data["path"], "flights", valueFormat="json").schema  # noqa: B018
    with pytest.raises(Exception, match="valueSchemaSubject is needed"):
        _read(spark, data["path"], "flights,bad").schema  # noqa: B018
    with pytest.raises(Exception, match="mode must be"):
        _read(spark, data["path"], "flights", mode="DROPMALFORMED").schema  # noqa: B018


def test_streaming_available_now(spark: Any, data: dict[str, Any], tmp_path: Path) -> None:
    stream = (
        spark.readStream.format("seglog")
        .option("subscribe", "flights")
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .option("maxOffsetsPerTrigger", "7")
        .load(data["path"])
    )
    columns = ("partition", "offset", "value.carrier AS carrier", "value.origin AS origin")
    got = stream_rows(stream, tmp_path, columns)
    expected = [
        (p, o, None if r is None else r["carrier"], None if r is None else r["origin"])
        for p, values in data["stored"].items()
        for o, r in enumerate(_fastavro(values, FLIGHT_V2))
    ]
    assert got == expected


def test_typed_mirrors_and_read_topic(spark: Any, tmp_path: Path) -> None:
    """Closed segments get a typed mirror beside the binary one; read_topic scans the typed
    mirrors and decodes the active tail, equal to a valueFormat=avro read; a new schema
    version makes the typed mirrors stale (rebuilt), typed=False stays binary."""
    path = tmp_path / "data"
    with DataDir(path) as data_dir:
        store_schema(data_dir, "fl-value", 1, 1, FLIGHT_V1)
        data_dir.create_topic("fl", 1, {"segment.bytes": "2000"})
        log = data_dir.log("fl", 0)
        for i in range(0, 200, 10):
            log.publish([Message(value=avro(1, FLIGHT_V1, flight(j))) for j in range(i, i + 10)])
        log.sync()
    report = sync_mirrors(path, "fl")
    typed_files = [p for p in report.built if ".value-1." in p.name]
    assert typed_files
    assert len(typed_files) * 2 == len(report.built)  # a binary and a typed mirror each
    assert pq.read_schema(typed_files[0]).field("value").type == avro_arrow_type(FLIGHT_V1)
    expected = sorted((r.offset, r.value.asDict()) for r in _read(spark, str(path), "fl").collect())
    assert len(expected) == 200
    got = read_topic(spark, path, "fl")
    assert (
        got.schema["value"].dataType.simpleString()
        == "struct<carrier:string,flight:int,delay:double>"
    )
    assert sorted((r.offset, r.value.asDict()) for r in got.collect()) == expected
    binary = read_topic(spark, path, "fl", typed=False)
    assert binary.schema["value"].dataType.simpleString() == "binary"
    with DataDir(path) as data_dir:
        store_schema(data_dir, "fl-value", 2, 2, FLIGHT_V2)
    again = sync_mirrors(path, "fl")
    assert {p.name for p in again.removed} == {p.name for p in typed_files}
    assert all(".value-2." in p.name for p in again.built)
    rows = read_topic(spark, path, "fl").collect()
    assert {r.value.origin for r in rows} == {"?"}  # read with v2, its default
    with pytest.raises(ValueError, match="no Avro or JSON schema"):
        read_topic(spark, path, "_schemas", typed=True)
