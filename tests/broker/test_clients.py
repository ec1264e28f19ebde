"""kafka-python (default idempotent producer), aiokafka and kcat against ``seglog serve``."""

from __future__ import annotations

import subprocess

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as ATopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from tests._wait import async_wait_until


def test_kafka_python_idempotent_producer_and_consumer(broker: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker, linger_ms=5)  # idempotent by default
    try:
        futures = [
            producer.send(
                topic,
                key=f"k{i}".encode(),
                value=None if i == 7 else f"v{i}".encode(),
                headers=[("n", str(i).encode())],
            )
            for i in range(100)
        ]
        producer.flush(30)
        offsets = [f.get(10).offset for f in futures]
    finally:
        producer.close(10)
    assert offsets == list(range(100))

    consumer = KafkaConsumer(
        bootstrap_servers=broker,
        group_id=f"g-{topic}",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        for msg in consumer:
            got.append(msg)
            if len(got) == 100:
                break
        consumer.commit({tp: _offset_and_metadata(100)})
        assert consumer.committed(tp) == 100
    finally:
        consumer.close()
    assert [m.offset for m in got] == list(range(100))
    assert got[7].value is None
    assert got[8].value == b"v8"
    assert got[3].key == b"k3"
    assert got[3].headers == [("n", b"3")]


def _offset_and_metadata(offset: int) -> object:
    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:
        return OffsetAndMetadata(offset, "")


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_kafka_python_compressed(broker: str, topic: str, codec: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker, compression_type=codec, linger_ms=20)
    try:
        for i in range(50):
            producer.send(topic, value=(f"m{i}-" * 30).encode())
        producer.flush(30)
    finally:
        producer.close(10)
    consumer = KafkaConsumer(bootstrap_servers=broker, consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = [m.value for _, m in zip(range(50), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [(f"m{i}-" * 30).encode() for i in range(50)]


async def test_aiokafka_produce_consume(broker: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=broker, compression_type="gzip")
    await producer.start()
    try:
        for i in range(20):
            await producer.send(topic, key=b"k", value=f"a{i}".encode(), headers=[("x", b"y")])
        await producer.send_and_wait(topic, value=None, key=b"gone")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=broker, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tp = ATopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got = []

        async def fetched_21() -> bool:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            got.extend(batch.get(tp, []))
            return len(got) >= 21

        await async_wait_until(fetched_21, timeout=20, interval=0, message=lambda: f"got {got}")
    finally:
        await consumer.stop()
    assert [m.offset for m in got] == list(range(21))
    assert [m.value for m in got[:20]] == [f"a{i}".encode() for i in range(20)]
    assert got[0].headers == (("x", b"y"),)
    assert (got[20].key, got[20].value) == (b"gone", None)


def test_kcat_produce_and_consume(broker: str, topic: str) -> None:
    lines = "".join(f"key{i}:value {i}\n" for i in range(30))
    subprocess.run(
        ["kcat", "-b", broker, "-P", "-t", topic, "-K", ":", "-z", "lz4"],
        input=lines.encode(),
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        [
            "kcat",
            "-b",
            broker,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %k %s\n",
        ],
        capture_output=True,
        check=True,
        timeout=30,
    )
    rows = out.stdout.decode().splitlines()
    assert rows == [f"{i} key{i} value {i}" for i in range(30)]
    listing = subprocess.run(
        ["kcat", "-b", broker, "-L", "-t", topic], capture_output=True, check=True, timeout=30
    )
    assert f'topic "{topic}" with 1 partitions' in listing.stdout.decode()


def test_kafka_python_pinned_to_old_version_gets_error(broker: str, topic: str) -> None:
    """api_version (0,10,1) sends Produce v2 with magic-1 message sets: the client gets
    INVALID_RECORD (87) back instead of a connection closed in a reconnect loop."""
    producer = KafkaProducer(bootstrap_servers=broker, api_version=(0, 10, 1), retries=0)
    try:
        future = producer.send(topic, b"old format")
        with pytest.raises(KafkaError) as info:
            future.get(15)
    finally:
        producer.close(5)
    assert info.value.errno == 87
