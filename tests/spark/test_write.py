"""Writers: batch and streaming into a data directory (exactly-once), and through a broker."""

from __future__ import annotations

import json
import os
import pathlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2
from pyspark.sql.streaming.datasource import ReadMaxRows

from seglog.broker import start_broker
from seglog.spark import _stage
from seglog.spark._options import ReadOptions, WriteOptions
from seglog.spark._reader import SeglogStreamReader
from seglog.spark._stage import _plan, _write_json, commit_stream
from seglog.spark._writer import SeglogStreamArrowWriter
from seglog.storage import DataDir, Message

HEADERS = "array<struct<key:string,value:binary>>"


def _read(spark: Any, path: Path | str, topic: str) -> list[dict[str, Any]]:
    df = (
        spark.read.format("seglog")
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load(str(path))
    )
    rows = []
    for r in df.orderBy("partition", "offset").collect():
        rows.append(
            {
                "key": None if r["key"] is None else bytes(r["key"]),
                "value": None if r["value"] is None else bytes(r["value"]),
                "partition": r["partition"],
                "offset": r["offset"],
                "headers": [(h["key"], bytes(h["value"])) for h in r["headers"]],
            }
        )
    return rows


def test_batch_write_round_trip(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "data"
    rows = [
        (f"k{i}".encode() if i % 3 else None, f"value {i}", [(f"h{i}", b"x")] if i % 2 else [])
        for i in range(40)
    ]
    df = spark.createDataFrame(rows, f"key binary, value string, headers {HEADERS}")
    df.repartition(3).write.format("seglog").option("topic", "out").option("partitions", "3").mode(
        "append"
    ).save(str(path))
    got = _read(spark, path, "out")
    assert sorted((r["value"], r["key"], r["headers"]) for r in got) == sorted(
        (v.encode(), k, h) for k, v, h in rows
    )
    for r in got:  # keyed records go where Kafka's default partitioner sends them
        if r["key"] is not None:
            assert r["partition"] == (murmur2(r["key"]) & 0x7FFFFFFF) % 3
    by_partition = {p: [r["offset"] for r in got if r["partition"] == p] for p in range(3)}
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())

    explicit = spark.createDataFrame([(b"v", 2)] * 5, "value binary, partition int")
    explicit.write.format("seglog").option("topic", "out").mode("append").save(str(path))
    assert (
        len([r for r in _read(spark, path, "out") if r["partition"] == 2])
        == len(by_partition[2]) + 5
    )
    assert not list((path / "__spark_sink").glob("job-*"))  # staging removed after commit

    routed = spark.createDataFrame(
        [("out", "to out"), ("fresh", "to a new topic")] * 3, "topic string, value string"
    )
    routed.write.format("seglog").option("path", str(path)).mode("append").save()
    assert [r["value"] for r in _read(spark, path, "fresh")] == [b"to a new topic"] * 3
    assert len(_read(spark, path, "out")) == len(got) + 5 + 3


def test_batch_write_adopts_a_large_staged_file(spark: Any, tmp_path: Path) -> None:
    """A real Spark job whose one task stages over ADOPT_MIN_BYTES (8 MiB): the commit
    moves the staged file into the log as a new segment (rolled after the record already
    there) instead of copying it into the active one; every row reads back in order."""
    path = tmp_path / "data"
    with DataDir(path) as data_dir:
        data_dir.create_topic("big", 1)
        data_dir.log("big", 0).publish([Message(key=None, value=b"first")])
    df = spark.range(100_000).selectExpr("lpad(CAST(id AS STRING), 100, 'x') AS value")
    df.coalesce(1).write.format("seglog").option("topic", "big").mode("append").save(str(path))
    log_dir = path / "big-0"
    assert sorted(int(p.stem) for p in log_dir.glob("*.log")) == [0, 1]
    assert (log_dir / f"{1:020d}.log").stat().st_size > 8 << 20
    with DataDir(path, read_only=True) as data_dir:
        log = data_dir.log("big", 0)
        assert log.log_end_offset == 100_001
        _, first = log.consume(0, 2)
        assert [m.value for m in first] == [b"first", b"x" * 99 + b"0"]
        _, last = log.consume(100_000, 1)
        assert last[0].value == b"x" * 95 + b"99999"


def _arrow(values: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"value": pa.array(values, pa.binary())})


def test_stream_commit_is_idempotent_per_batch_id(tmp_path: Path) -> None:
    path = tmp_path / "data"
    raw = {"path": str(path), "topic": "t", "checkpointlocation": str(tmp_path / "ck")}
    writer = SeglogStreamArrowWriter(WriteOptions.parse(raw), raw)

    def end_offset() -> int:
        with DataDir(path, read_only=True) as data_dir:
            return data_dir.log("t", 0).log_end_offset

    first = writer.write(iter([_arrow([b"a", b"b"])]))
    writer.commit([first], 0)
    assert end_offset() == 2
    replay = writer.write(iter([_arrow([b"a", b"b"])]))  # Spark re-running batch 0
    writer.commit([replay], 0)
    assert end_offset() == 2
    writer.commit([writer.write(iter([_arrow([b"c"])]))], 1)
    assert end_offset() == 3
    aborted = writer.write(iter([_arrow([b"lost"])]))
    writer.abort([aborted], 2)
    assert end_offset() == 3
    assert not any(Path(writer.directory, "staged").glob("*"))


def test_stream_commit_finishes_an_interrupted_append(tmp_path: Path) -> None:
    """The driver died after appending to partition 0 of 2: the replay appends the rest."""
    path = tmp_path / "data"
    raw = {"path": str(path), "topic": "t", "partitions": "2", "sinkId": "s"}
    writer = SeglogStreamArrowWriter(WriteOptions.parse(raw), raw)
    batch = pa.RecordBatch.from_pydict(
        {"value": pa.array([b"x"] * 6), "partition": pa.array([0, 1, 0, 1, 0, 1], pa.int32())}
    )
    message = writer.write(iter([batch]))
    with DataDir(path) as data_dir:  # steps 2 and 3 of the commit, cut after partition 0
        plan = _plan(data_dir, list(message.files), 2)
        _write_json(
            Path(writer.directory, "commit.json"), {"batch": 7, "done": False, "plan": plan}
        )
        item = next(i for i in plan if i["partition"] == 0)
        log = data_dir.log("t", 0)
        log.append(b"".join(Path(writer.directory, n).read_bytes() for n in item["files"]))
        log.sync()
    rerun = writer.write(iter([batch]))  # the replayed batch stages new files
    assert commit_stream(str(path), writer.directory, [rerun], 7, 2)
    with DataDir(path, read_only=True) as data_dir:
        assert [data_dir.log("t", p).log_end_offset for p in (0, 1)] == [3, 3]
    state = json.loads(Path(writer.directory, "commit.json").read_text())
    assert state == {"batch": 7, "done": True}


def test_stream_commit_adopts_large_staged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staged files over ADOPT_MIN_BYTES become segments (moved, not copied), in task
    order; smaller ones are copied."""
    monkeypatch.setattr(_stage, "ADOPT_MIN_BYTES", 200)
    path = tmp_path / "data"
    raw = {"path": str(path), "topic": "t", "sinkId": "s"}
    writer = SeglogStreamArrowWriter(WriteOptions.parse(raw), raw)
    big_a = [b"a%03d" % i for i in range(40)]
    small = [b"b"]
    big_c = [b"c%03d" % i for i in range(40)]
    messages = [writer.write(iter([_arrow(v)])) for v in (big_a, small, big_c)]
    staged = [Path(writer.directory, m.files[0].name) for m in messages]
    inodes = [os.stat(p).st_ino for p in staged]
    assert commit_stream(str(path), writer.directory, messages, 0, 1)
    with DataDir(path, read_only=True) as data_dir:
        log = data_dir.log("t", 0)
        _, got = log.consume(0, 1000)
        assert [m.value for m in got] == big_a + small + big_c
        assert [m.offset for m in got] == list(range(81))
        bases = sorted(int(p.stem) for p in log.directory.glob("*.log"))
        # a's file became segment 0 (the empty one replaced), b was copied into it, c's
        # file became segment 41
        assert bases == [0, 41]
        assert os.stat(log.directory / f"{0:020d}.log").st_ino == inodes[0]
        assert os.stat(log.directory / f"{41:020d}.log").st_ino == inodes[2]
    assert not any(Path(writer.directory, "staged").glob("*"))


def test_stream_commit_replay_skips_files_already_adopted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver died after adopting the first of two staged files of a partition (it is
    gone from the staging directory): the replay appends only the second."""
    monkeypatch.setattr(_stage, "ADOPT_MIN_BYTES", 1)
    path = tmp_path / "data"
    raw = {"path": str(path), "topic": "t", "sinkId": "s"}
    writer = SeglogStreamArrowWriter(WriteOptions.parse(raw), raw)
    first, second = [b"x%d" % i for i in range(5)], [b"y%d" % i for i in range(7)]
    messages = [writer.write(iter([_arrow(v)])) for v in (first, second)]
    files = [f for m in messages for f in m.files]
    with DataDir(path) as data_dir:  # steps 2 and 3 of the commit, cut after one file
        plan = _plan(data_dir, files, 1)
        _write_json(
            Path(writer.directory, "commit.json"), {"batch": 3, "done": False, "plan": plan}
        )
        log = data_dir.log("t", 0)
        log.adopt(Path(writer.directory, files[0].name))
        log.sync()
    assert not Path(writer.directory, files[0].name).exists()
    assert commit_stream(str(path), writer.directory, [], 3, 1)
    with DataDir(path, read_only=True) as data_dir:
        assert [m.value for m in data_dir.log("t", 0).consume(0, 100)[1]] == first + second


def test_streaming_query_exactly_once_across_replay(spark: Any, tmp_path: Path) -> None:
    path, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    with DataDir(path) as data_dir:
        data_dir.create_topic("in", 1)
        data_dir.log("in", 0).publish([Message(value=f"a{i}".encode()) for i in range(12)])

    def run() -> Any:
        query = (
            spark.readStream.format("seglog")
            .option("subscribe", "in")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "5")
            .load(str(path))
            .selectExpr("key", "value")
            .writeStream.format("seglog")
            .option("path", str(path))
            .option("topic", "copy")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        assert query.exception() is None
        return query

    first = run()
    last_batch = max(p["batchId"] for p in first.recentProgress)
    assert [r["value"] for r in _read(spark, path, "copy")] == [f"a{i}".encode() for i in range(12)]
    # Forget that the last micro-batch committed: Spark replays it on restart, with the same
    # batchId, and the sink must not append it again.
    commits = sorted(pathlib.Path(checkpoint, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    with DataDir(path) as data_dir:
        data_dir.log("in", 0).publish([Message(value=f"b{i}".encode()) for i in range(3)])
    second = run()
    assert second.recentProgress[0]["batchId"] == last_batch  # the replayed micro-batch
    assert second.recentProgress[0]["numInputRows"] > 0
    expected = [f"a{i}".encode() for i in range(12)] + [f"b{i}".encode() for i in range(3)]
    assert [r["value"] for r in _read(spark, path, "copy")] == expected


def test_write_through_broker(spark: Any, tmp_path: Path) -> None:
    with start_broker(tmp_path / "data", extra_args=["--num-partitions", "2"]) as broker:
        rows = [(f"k{i}", f"v{i}", i % 2) for i in range(30)]
        df = spark.createDataFrame(rows, "key string, value string, partition int")
        with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):
            df.write.format("seglog").option("topic", "b").mode("append").save(
                str(tmp_path / "data")
            )
        with DataDir(tmp_path / "data", read_only=True) as data_dir:
            assert "b" not in data_dir.topics()
        (
            df.write.format("seglog")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "wire")
            .mode("append")
            .save()
        )
        got = _read(spark, tmp_path / "data", "wire")  # read-only, beside the live broker
        wire = (
            spark.read.format("seglog")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "wire")
            .option("includeHeaders", "true")
            .load()
        )
        over_wire = [
            (bytes(r["key"]), bytes(r["value"]), r["partition"], r["offset"])
            for r in wire.orderBy("partition", "offset").collect()
        ]
        stream = SeglogStreamReader(
            ReadOptions.parse(
                {
                    "kafka.bootstrap.servers": broker.bootstrap,
                    "subscribe": "wire",
                    "startingOffsets": "earliest",
                },
                streaming=True,
            )
        )
        start = stream.initialOffset()
        end = stream.latestOffset(start, ReadMaxRows(10))
        assert start == {"wire": {"0": 0, "1": 0}}
        assert end == {"wire": {"0": 5, "1": 5}}
        streamed = [
            (r["partition"], r["offset"], r["value"])
            for part in stream.partitions(start, end)
            for batch in stream.read(part)
            for r in batch.to_pylist()
        ]
    assert over_wire == [(r["key"], r["value"], r["partition"], r["offset"]) for r in got]
    assert streamed == [(r["partition"], r["offset"], r["value"]) for r in got if r["offset"] < 5]
    assert sorted((r["key"], r["value"], r["partition"]) for r in got) == sorted(
        (k.encode(), v.encode(), p) for k, v, p in rows
    )


def test_router_partitions_as_kafka_with_its_hash_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's default partitioner (murmur2 of the key), remembered per key, also across
    the cache being emptied when full."""
    from seglog.spark import _encode  # noqa: PLC0415

    monkeypatch.setattr(_encode, "_HASH_CACHE", 7)
    router = _encode.Router(lambda topic: 5)
    keys = [f"key-{i % 13}".encode() for i in range(100)]
    got = [router.partition("t", _encode.Record(None, -1, k, b"v", [])) for k in keys]
    assert got == [(murmur2(k) & 0x7FFFFFFF) % 5 for k in keys]
    assert len(router._hashes) <= 7


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=6)), max_size=60),
    count=st.integers(1, 7),
    start=st.integers(0, 6),
)
def test_router_partitions_a_column_as_one_call_per_record(
    keys: list[bytes | None], count: int, start: int
) -> None:
    """The column-wise router (murmur2 once per distinct key, nulls round robin in row
    order) answers what one ``partition`` call per record answers, and keeps the turn."""
    from seglog.spark import _encode  # noqa: PLC0415

    by_column, by_record = _encode.Router(lambda t: count), _encode.Router(lambda t: count)
    by_column._next["t"] = by_record._next["t"] = start
    column = by_column.partitions("t", pa.array(keys, pa.binary())).tolist()
    rows = [by_record.partition("t", _encode.Record(None, -1, k, b"v", [])) for k in keys]
    assert column == rows
    if count > 1:
        assert by_column._next["t"] == by_record._next["t"]
    for k, p in zip(keys, column, strict=True):
        if k is not None:
            assert p == (murmur2(k) & 0x7FFFFFFF) % count


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.integers(0, 4), max_size=50))
def test_split_by_partition_keeps_each_partitions_row_order(parts: list[int]) -> None:
    from seglog.spark._encode import split_by_partition  # noqa: PLC0415

    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(len(parts))]
    values = [b"v%d" % i for i in range(len(parts))]
    got = {
        p: list(zip(k, v, strict=True))
        for p, k, v in split_by_partition(
            pa.array(keys, pa.binary()), pa.array(values, pa.binary()), np.array(parts, np.int64)
        )
    }
    want: dict[int, list[tuple[bytes | None, bytes]]] = {}
    for p, k, v in zip(parts, keys, values, strict=True):
        want.setdefault(p, []).append((k, v))
    assert got == want


def test_key_and_value_columns_as_string_or_binary_only() -> None:
    from seglog.spark._encode import key_columns  # noqa: PLC0415

    batch = pa.RecordBatch.from_pydict({"key": ["é", None], "value": [b"1", b"2"]})
    keys, values = key_columns(batch)  # type: ignore[misc]
    assert keys.to_pylist() == ["é".encode(), None]
    assert values.to_pylist() == [b"1", b"2"]
    only_values = key_columns(pa.RecordBatch.from_pydict({"value": ["x"]}))
    assert only_values is not None
    assert only_values[0].to_pylist() == [None]
    with pytest.raises(TypeError, match="column value must be binary or string"):
        key_columns(pa.RecordBatch.from_pydict({"value": [1, 2]}))


def test_staged_batches_keep_headers_aligned_across_input_batches(tmp_path: Path) -> None:
    """A partition's records from batches with and without a headers column, staged and
    decoded back: every record keeps its own key, value and headers, in order."""
    import pyarrow as pa  # noqa: PLC0415
    from kafka.record.memory_records import MemoryRecords  # noqa: PLC0415

    from seglog.spark._encode import Router  # noqa: PLC0415
    from seglog.spark._stage import stage  # noqa: PLC0415

    plain = pa.RecordBatch.from_pydict({"key": [b"a", b"b"], "value": [b"1", b"2"]})
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    with_headers = pa.RecordBatch.from_arrays(
        [
            pa.array([b"c", b"d"]),
            pa.array([b"3", b"4"]),
            pa.array([[{"key": "h", "value": b"x"}], []], headers_type),
        ],
        names=["key", "value", "headers"],
    )
    for codec in ("none", "gzip"):
        directory = tmp_path / codec
        staged = stage(
            iter([plain, with_headers, plain, with_headers]),
            str(directory),
            "t",
            Router(lambda t: 1),
            codec,
        )
        (file,) = staged.files
        records = MemoryRecords((directory / file.name).read_bytes())
        got = []
        while (batch := records.next_batch()) is not None:
            got += [(r.key, r.value, list(r.headers)) for r in batch]
        assert got == [
            (b"a", b"1", []),
            (b"b", b"2", []),
            (b"c", b"3", [("h", b"x")]),
            (b"d", b"4", []),
            (b"a", b"1", []),
            (b"b", b"2", []),
            (b"c", b"3", [("h", b"x")]),
            (b"d", b"4", []),
        ], codec


def test_pending_extend_keeps_headers_aligned() -> None:
    """Rows gathered across input batches (the raw wire sink) keep their own headers."""
    from seglog.spark._encode import Pending, Record  # noqa: PLC0415

    def rows(specs: list[tuple[bytes, list[tuple[str, bytes | None]]]]) -> Pending:
        pending = Pending()
        for value, headers in specs:
            pending.add(Record(None, -1, None, value, headers))
        return pending

    gathered = rows([(b"a", [("h", b"1")]), (b"b", []), (b"c", [])])
    gathered.extend(rows([(b"d", []), (b"e", [])]))
    gathered.extend(rows([(b"f", []), (b"g", [("h", b"2")])]))
    plain = Pending([None], [b"x"])
    plain.extend(rows([(b"y", [("h", b"3")])]))
    for pending, want in (
        (gathered, {0: [("h", b"1")], 6: [("h", b"2")]}),
        (plain, {1: [("h", b"3")]}),
    ):
        padded = [*pending.headers, *([] for _ in range(len(pending) - len(pending.headers)))]
        assert len(padded) == len(pending)
        assert {i: h for i, h in enumerate(padded) if h} == want


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=30)), st.binary(max_size=60)),
        min_size=1,
        max_size=200,
    ),
    st.integers(0, 3),
    st.booleans(),
)
def test_encode_columns_equals_the_list_encoder(
    rows: list[tuple[bytes | None, bytes]], cut: int, large: bool
) -> None:
    """Arrow's buffers encoded directly (sliced arrays, large_binary, nulls) give the
    bytes the list encoder gives for the same rows."""
    from seglog.spark._encode import BATCH_BYTES, encode_columns  # noqa: PLC0415
    from seglog.storage import encode_records  # noqa: PLC0415

    kind = pa.large_binary() if large else pa.binary()
    keys = pa.array([b"pad", *(k for k, _ in rows)], kind).slice(1)
    values = pa.array([b"pad", *(v for _, v in rows)], kind).slice(1)
    keys, values = keys.slice(min(cut, len(rows) - 1)), values.slice(min(cut, len(rows) - 1))
    got = encode_columns(keys, values, 1_700_000_000_000)
    expected = encode_records(
        values.to_pylist(), keys.to_pylist(), 1_700_000_000_000, None, BATCH_BYTES
    )
    assert bytes(got) == expected


def test_encode_columns_ignores_bytes_under_a_null_slot() -> None:
    """Arrow lets a null entry's offsets span bytes: they are not a key."""
    from seglog.spark._encode import BATCH_BYTES, encode_columns  # noqa: PLC0415
    from seglog.storage import encode_records  # noqa: PLC0415

    offsets = pa.array([0, 2, 5, 7], pa.int32())
    validity = pa.array([True, False, True]).buffers()[1]
    data = pa.py_buffer(b"aaXXXcc")
    keys = pa.Array.from_buffers(pa.binary(), 3, [validity, offsets.buffers()[1], data])
    assert keys.to_pylist() == [b"aa", None, b"cc"]
    values = pa.array([b"1", b"2", b"3"])
    got = encode_columns(keys, values, 5)
    assert bytes(got) == encode_records(
        [b"1", b"2", b"3"], [b"aa", None, b"cc"], 5, None, BATCH_BYTES
    )


def test_negative_partition_column_is_refused_not_routed() -> None:
    """A partition column of -3 fails (Kafka's producer: invalid partition) instead of
    being taken for null and the record sent wherever the partitioner puts it."""
    from seglog.spark._encode import records_of  # noqa: PLC0415

    batch = pa.RecordBatch.from_pydict(
        {"value": [b"a", b"b"], "partition": pa.array([None, -3], pa.int32())}
    )
    with pytest.raises(ValueError, match="partition -3"):
        list(records_of(batch))
    ok = pa.RecordBatch.from_pydict({"value": [b"a"], "partition": pa.array([None], pa.int32())})
    assert [r.partition for r in records_of(ok)] == [-1]
