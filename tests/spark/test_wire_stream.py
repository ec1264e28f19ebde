"""Wire mode as users run it: real ``readStream`` queries through ``seglog serve``.

``kafka.bootstrap.servers`` instead of a path: planning asks the broker for offsets and the
executors fetch (raw Fetch, or confluent-kafka for other librdkafka options). TLS and SASL:
test_wire_security.py. availableNow with a rate limit, restart from the
checkpoint exactly once, a processingTime query that picks up records produced while it
runs (and a partition added while it runs), and minPartitions splitting a partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from tests._wait import wait_until

from seglog.broker import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("wire") / "data")
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions)])
    futures[topic].result(30)


def _produce(bootstrap: str, topic: str, keys: range, partitions: int) -> set[tuple[int, str]]:
    """Produce ``k<i>`` to partition ``i % partitions``; returns {(partition, key)}."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in keys:
        producer.produce(
            topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions
        )
    assert producer.flush(30) == 0
    return {(i % partitions, f"k{i}") for i in keys}


def _stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().selectExpr("partition", "offset", "CAST(key AS STRING) AS key")


def _parquet_rows(out: Path) -> list[tuple[int, int, str]]:
    table = pq.read_table(out)
    return sorted(
        zip(*(table.column(c).to_pylist() for c in ("partition", "offset", "key")), strict=True)
    )


def test_available_now_restart_exactly_once(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = "wire-available-now"
    _create(broker.bootstrap, topic, 2)
    sent = _produce(broker.bootstrap, topic, range(40), 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> Any:
        query = (
            _stream(spark, broker.bootstrap, topic, maxOffsetsPerTrigger="9")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None
        return query

    first = run()
    rows = _parquet_rows(out)
    assert {(p, k) for p, _, k in rows} == sent
    assert len(rows) == len(sent)
    assert len(first.recentProgress) >= 40 // 9  # the rate limit split the backlog
    sent |= _produce(broker.bootstrap, topic, range(40, 55), 2)
    run()  # the restart reads only what came after the checkpoint
    rows = _parquet_rows(out)
    assert {(p, k) for p, _, k in rows} == sent
    assert len(rows) == len(sent) == 55
    assert len({(p, o) for p, o, _ in rows}) == 55  # no offset twice


def test_processing_time_query_follows_new_records_topics_and_partitions(
    spark: Any, broker: BrokerProcess, tmp_path: Path
) -> None:
    first, second = "wire-live-a", "wire-live-b"
    _create(broker.bootstrap, first, 1)
    sent = {(first, *r) for r in _produce(broker.bootstrap, first, range(10), 1)}
    query = (
        spark.readStream.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribePattern", "wire-live-.*")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key")
        .writeStream.format("memory")
        .queryName("wire_live")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:

        def seen() -> set[tuple[str, int, str]]:
            rows = spark.sql("SELECT topic, partition, key FROM wire_live").collect()
            return {(r["topic"], r["partition"], r["key"]) for r in rows}

        wait_until(lambda: seen() == sent, 120, interval=0.2, message="the first 10 records")
        sent |= {(first, *r) for r in _produce(broker.bootstrap, first, range(10, 30), 1)}
        wait_until(
            lambda: seen() == sent,
            120,
            interval=0.2,
            message="records produced while the query runs",
        )
        # a topic matching the pattern, created while the query runs, is read from its start
        _create(broker.bootstrap, second, 2)
        sent |= {(second, *r) for r in _produce(broker.bootstrap, second, range(30, 40), 2)}
        wait_until(lambda: seen() == sent, 120, interval=0.2, message="records of the new topic")
        # a partition added to a topic while the query runs, read from its start too
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(first, 2)])[first].result(30)
        sent |= {(first, *r) for r in _produce(broker.bootstrap, first, range(40, 50), 2)}
        wait_until(
            lambda: seen() == sent, 120, interval=0.2, message="records of the new partition"
        )
        assert (first, 1, "k41") in sent
        assert query.exception() is None
        count = spark.sql("SELECT count(*) AS n FROM wire_live").collect()[0]["n"]
        assert count == len(sent) == 50  # exactly once: nothing read twice
    finally:
        query.stop()


def test_min_partitions_splits_a_partition_in_wire_mode(spark: Any, broker: BrokerProcess) -> None:
    topic = "wire-min-partitions"
    _create(broker.bootstrap, topic, 1)
    sent = _produce(broker.bootstrap, topic, range(100), 1)
    df = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", "4")
        .load()
        .selectExpr("partition", "offset", "CAST(key AS STRING) AS key")
    )
    assert df.rdd.getNumPartitions() == 4
    rows = df.collect()
    assert {(r["partition"], r["key"]) for r in rows} == sent
    assert sorted(r["offset"] for r in rows) == list(range(100))


def test_raw_fetch_and_confluent_consumer_read_the_same_rows(
    spark: Any, broker: BrokerProcess
) -> None:
    """Both wire readers: raw Fetch + numpy decoder (PLAINTEXT options only) and the
    confluent-kafka consumer (any other librdkafka option) give identical rows, with
    compressed batches, null keys and values, and headers."""
    topic = "wire-both-readers"
    _create(broker.bootstrap, topic, 2)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5}
    )
    for i in range(3000):
        producer.produce(
            topic,
            key=None if i % 7 == 0 else f"k{i}".encode(),
            value=None if i % 11 == 0 else bytes([i % 256]) * (i % 300),
            headers=[("h", f"{i}".encode())] if i % 3 == 0 else None,
            partition=i % 2,
        )
    assert producer.flush(30) == 0

    def rows(**extra: str) -> list[tuple[Any, ...]]:
        reader = (
            spark.read.format("seglog")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
        )
        for name, value in extra.items():
            reader = reader.option(name, value)
        return sorted(
            (r["partition"], r["offset"], r["key"], r["value"], str(r["headers"]), r["timestamp"])
            for r in reader.load().collect()
        )

    raw = rows()
    assert len(raw) == 3000
    assert rows(**{"kafka.fetch.wait.max.ms": "100"}) == raw  # confluent-kafka consumer


def test_whole_batches_stop_at_a_partial_batch() -> None:
    from tests.columnar._data import record_batch  # noqa: PLC0415

    from seglog.spark._fetch import raw_fetch_applies, whole_batches  # noqa: PLC0415

    chunks = []
    for base in (0, 5):
        batch = bytearray(record_batch([(None, b"x%d" % i, []) for i in range(5)]))
        batch[0:8] = base.to_bytes(8, "big")  # baseOffset is outside the CRC
        chunks.append(bytes(batch))
    data = b"".join(chunks)
    batches, after = whole_batches(data)
    assert [len(b) for b in batches] == [len(c) for c in chunks]
    assert after == 10
    batches, after = whole_batches(data[:-3])  # the second batch cut at the byte limit
    assert len(batches) == 1
    assert after == 5
    assert whole_batches(data[:10]) == ([], -1)
    assert raw_fetch_applies({"bootstrap.servers": "h:1"})
    assert raw_fetch_applies({"bootstrap.servers": "h:1", "security.protocol": "plaintext"})
    assert raw_fetch_applies({"bootstrap.servers": "h:1", "security.protocol": "SSL"})
    assert not raw_fetch_applies({"bootstrap.servers": "h:1", "fetch.wait.max.ms": "100"})
    sasl = {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}
    assert raw_fetch_applies({**sasl, "sasl.mechanism": "SCRAM-SHA-512"})
    assert not raw_fetch_applies({**sasl, "sasl.mechanism": "OAUTHBEARER"})


def test_raw_fetch_of_an_unknown_partition_is_a_kafka_error(broker: BrokerProcess) -> None:
    from kafka.errors import UnknownTopicOrPartitionError  # noqa: PLC0415

    from seglog.spark._fetch import read_raw_range  # noqa: PLC0415

    _create(broker.bootstrap, "wire-one-partition", 1)
    kafka = {"bootstrap.servers": broker.bootstrap}
    for topic, partition in (("wire-one-partition", 5), ("wire-no-such-topic", 0)):
        with pytest.raises(UnknownTopicOrPartitionError):
            list(read_raw_range(kafka, topic, partition, 0, 1, include_headers=False))


def test_raw_fetch_checks_crcs_unless_told_not_to(tmp_path: Path) -> None:
    """A bit flipped in a stored batch (below what a reopen rescans) reaches the raw Fetch
    reader unchanged: it fails with CorruptRecordError naming the offset (checkCrcs,
    default true), and reads the flipped value with check_crcs=False."""
    from seglog.errors import CorruptRecordError  # noqa: PLC0415
    from seglog.spark._fetch import read_raw_range  # noqa: PLC0415
    from seglog.storage import DataDir, Message  # noqa: PLC0415

    data = tmp_path / "data"
    with DataDir(data) as data_dir:
        data_dir.create_topic("crc", 1, {"segment.bytes": "1024"})
        log = data_dir.log("crc", 0)
        for i in range(0, 60, 5):
            log.publish([Message(value=b"value-%04d" % j) for j in range(i, i + 5)])
    seg = data / "crc-0" / f"{0:020d}.log"
    raw = bytearray(seg.read_bytes())
    first = int.from_bytes(raw[8:12], "big") + 12
    raw[first + int.from_bytes(raw[first + 8 : first + 12], "big") + 12 - 2] ^= 0x01
    seg.write_bytes(bytes(raw))  # the second batch's last value byte (offsets 5-9)
    proc = start_broker(data)
    try:
        kafka = {"bootstrap.servers": proc.bootstrap}
        with pytest.raises(CorruptRecordError, match="offset 5: CRC-32C"):
            list(read_raw_range(kafka, "crc", 0, 0, 60, include_headers=False, timeout_s=30))
        rows = list(
            read_raw_range(
                kafka, "crc", 0, 0, 60, include_headers=False, timeout_s=30, check_crcs=False
            )
        )
        values = [v for batch in rows for v in batch.column("value").to_pylist()]
        assert len(values) == 60
        assert values[9] == b"value-0008"  # "9" with its low bit flipped
    finally:
        assert proc.stop() == 0, proc.log_text()
