"""Kafka-client measurements: confluent-kafka produce (through seglog or librdkafka's mock
cluster) and fetch (confluent-kafka, kafka-python).

The client-only reference runs the very same producer loop with ``test.mock.num.brokers: 1``:
librdkafka then starts an in-process mock broker (memory only, no disk) on loopback and
ignores ``bootstrap.servers``, so the rate it reaches is what the client can push with no
broker bottleneck. Both runs use :data:`PRODUCER_SETTINGS` and send every message to
partition 0. Deliveries are counted the cheap way librdkafka offers: only failed deliveries
raise a report (``delivery.report.only.error``), and ``flush()`` returns how many messages
are still queued, so delivered = sent - failed - still queued.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

__all__ = [
    "CONSUMER_SETTINGS",
    "PRODUCER_SETTINGS",
    "BenchError",
    "Rate",
    "create_topic",
    "fetch_confluent",
    "fetch_kafka_python",
    "produce",
]

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 1 << 20,  # bytes per record batch (MessageSet), framing included
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1 << 20,  # 1 GiB of queued messages
    "compression.type": "none",
    "enable.idempotence": False,
    "delivery.report.only.error": True,
    "log_level": 4,  # warnings and worse (hides the mock cluster's notice)
}
"""The producer configuration of every produce measurement (broker and client-only)."""

CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "seglog-bench",  # required by librdkafka; assign mode joins no group
    "enable.auto.commit": False,
    "fetch.max.bytes": 64 << 20,
    "max.partition.fetch.bytes": 4 << 20,
    "log_level": 4,
}
"""The confluent-kafka consumer configuration of the fetch measurement."""


class BenchError(RuntimeError):
    """A measurement could not be completed (delivery errors, missing messages, timeout)."""


@dataclass(frozen=True)
class Rate:
    """Messages and value bytes moved in ``seconds`` of wall-clock time."""

    messages: int
    value_bytes: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        """Messages per second."""
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        """Value bytes per second, in MB (10^6 bytes)."""
        return self.value_bytes / self.seconds / 1e6


def produce(
    target: dict[str, Any], topic: str, value_size: int, count: int, timeout_s: float = 120.0
) -> Rate:
    """Produce ``count`` messages of ``value_size`` random bytes (no key) to partition 0 of
    ``topic`` with confluent-kafka and :data:`PRODUCER_SETTINGS`, wait for every delivery.

    ``target`` is ``{"bootstrap.servers": "host:port"}`` or ``{"test.mock.num.brokers": 1}``.
    The clock runs from the first ``produce()`` to the end of ``flush()``; metadata and the
    connection are set up before it starts. Raises BenchError if a delivery failed or did not
    finish within ``timeout_s`` seconds.
    """
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer({**PRODUCER_SETTINGS, **target, "on_delivery": on_delivery})
    producer.list_topics(topic, timeout=30)
    value = os.urandom(value_size)
    send = producer.produce
    start = time.perf_counter()
    for _ in range(count):
        try:
            send(topic, value, partition=0)
        except BufferError:  # local queue full: serve events, then retry once
            producer.poll(0.05)
            send(topic, value, partition=0)
    remaining = producer.flush(timeout_s)
    elapsed = time.perf_counter() - start
    delivered = count - len(failures) - remaining
    if failures or remaining:
        first = failures[0] if failures else "timeout"
        raise BenchError(
            f"{delivered}/{count} delivered, {len(failures)} failed, {remaining} still queued "
            f"after {timeout_s:.0f} s (first error: {first})"
        )
    return Rate(delivered, delivered * value_size, elapsed)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """CreateTopics through the broker (confluent-kafka AdminClient); raises its KafkaException."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=30
    )
    for future in futures.values():
        future.result(timeout=60)


def fetch_confluent(bootstrap: str, topic: str, expected: int, stall_s: float = 30.0) -> Rate:
    """Read partition 0 of ``topic`` from the log start offset with a confluent-kafka
    Consumer in assign mode (:data:`CONSUMER_SETTINGS`) until ``expected`` messages arrived;
    metadata is fetched before the clock starts. Raises BenchError on a consumer error or
    when no message arrives for ``stall_s`` seconds."""
    consumer = Consumer({**CONSUMER_SETTINGS, "bootstrap.servers": bootstrap})
    count = size = 0
    try:
        consumer.list_topics(topic, timeout=30)
        start = last = time.perf_counter()
        consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
        while count < expected:
            # never ask for more than is left: consume() waits for a full batch or the timeout
            batch = consumer.consume(min(10_000, expected - count), 1.0)
            now = time.perf_counter()
            if batch:
                last = now
            elif now - last > stall_s:
                raise BenchError(f"fetch stalled at {count}/{expected} messages")
            for message in batch:
                error = message.error()
                if error is not None:
                    raise BenchError(f"consumer error after {count} messages: {error}")
                count += 1
                size += len(message.value() or b"")
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return Rate(count, size, elapsed)


def fetch_kafka_python(bootstrap: str, topic: str, expected: int, stall_s: float = 30.0) -> Rate:
    """As :func:`fetch_confluent`, with kafka-python's KafkaConsumer (assign, seek to the
    beginning, ``poll(max_records=10000)``); same fetch sizes."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_bytes=CONSUMER_SETTINGS["fetch.max.bytes"],
        max_partition_fetch_bytes=CONSUMER_SETTINGS["max.partition.fetch.bytes"],
    )
    count = size = 0
    try:
        consumer.partitions_for_topic(topic)
        start = last = time.perf_counter()
        partition = KafkaTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        while count < expected:
            records = consumer.poll(timeout_ms=1000, max_records=10_000)
            now = time.perf_counter()
            if records:
                last = now
            elif now - last > stall_s:
                raise BenchError(f"fetch stalled at {count}/{expected} messages")
            for messages in records.values():
                count += len(messages)
                size += sum(len(m.value) for m in messages)
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return Rate(count, size, elapsed)
