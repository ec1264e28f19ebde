"""Load the flights into a topic through a real Kafka client (confluent-kafka).

The producer runs with ``acks=all`` (seglog answers after an fsync) and throughput
settings for a bulk load: lz4-compressed record batches of up to ~1 MB per partition,
lingering up to 20 ms. Every delivery report is counted; the load fails unless every
row was acknowledged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # where it is defined (and typed)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from examples.flights.data import FLIGHT_AVRO_SCHEMA
from seglog.columnar import discover_registry

__all__ = [
    "LoadError",
    "LoadResult",
    "create_topic",
    "load_records",
    "register_flight_schema",
    "schema_registry_url",
]

PRODUCER_CONFIG: dict[str, str | int | float] = {
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 20,
    "batch.size": 1_000_000,  # bytes per partition batch (broker limit: 1,048,588)
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 256 * 1024,
    "message.timeout.ms": 120_000,
}
"""librdkafka settings of the bulk load (names from librdkafka's CONFIGURATION.md)."""


class LoadError(RuntimeError):
    """Raised when the load could not deliver every record (first error in the message)."""


@dataclass(frozen=True)
class LoadResult:
    """Outcome of :func:`load_records`."""

    delivered: int  # records acknowledged by the broker
    bytes: int  # value bytes produced (uncompressed)
    elapsed_s: float  # from the first produce() to the end of flush()


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout_s: float = 30.0,
    config: dict[str, str] | None = None,
) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication factor 1) and topic
    ``config`` (Kafka's names, e.g. ``{"cleanup.policy": "compact"}``).

    An existing topic is accepted as is. Raises LoadError on any other failure or when
    the broker does not answer within ``timeout_s`` seconds.
    """
    # log_level 4: librdkafka warnings and errors only, not its info lines at teardown
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=timeout_s,
    )
    try:
        futures[topic].result(timeout=timeout_s)
    except TimeoutError as exc:
        raise LoadError(f"no answer to CreateTopics {topic!r} within {timeout_s:.0f} s") from exc
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise LoadError(f"cannot create topic {topic!r}: {error}") from exc


def schema_registry_url(bootstrap: str, timeout_s: float = 30.0) -> str:
    """The URL of the broker's schema registry (its ``schema.registry.listen`` config,
    read through DescribeConfigs), waiting up to ``timeout_s`` for it to listen."""
    deadline = time.monotonic() + timeout_s
    while True:
        url = discover_registry({"bootstrap.servers": bootstrap, "log_level": "4"})
        if url is not None:
            return url
        if time.monotonic() > deadline:
            raise LoadError("the broker serves no schema registry (--schema-registry-listen)")
        time.sleep(0.1)


def register_flight_schema(registry_url: str) -> int:
    """Register :data:`~examples.flights.data.FLIGHT_AVRO_SCHEMA` as subject
    ``flights-value`` (Confluent's TopicNameStrategy); its global id."""
    client = SchemaRegistryClient({"url": registry_url})
    schema = Schema(json.dumps(FLIGHT_AVRO_SCHEMA), "AVRO")
    return int(client.register_schema("flights-value", schema))


def load_records(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes, bytes | None]],
    *,
    expected: int,
    on_progress: Callable[[int], None] | None = None,
    progress_every: int = 5_000,
) -> LoadResult:
    """Produce every ``(key, value)`` of ``records`` to ``topic`` and wait for all acks
    (a None value is a tombstone).

    on_progress(delivered) is called about every ``progress_every`` acknowledged records
    and once at the end. Raises LoadError if any record failed or if the number delivered
    differs from ``expected``.
    """
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG})
    delivered = 0
    errors: list[str] = []
    last_reported = 0

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(errors) < 10:
            errors.append(str(err))

    start = time.perf_counter()
    produced_bytes = 0
    for count, (key, value) in enumerate(records, start=1):
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.05)
        produced_bytes += len(value or b"")
        if count % 1000 == 0:
            producer.poll(0)
            if on_progress is not None and delivered - last_reported >= progress_every:
                last_reported = delivered
                on_progress(delivered)
    while (remaining := producer.flush(0.2)) > 0:
        if on_progress is not None:
            on_progress(delivered)
        if time.perf_counter() - start > 600:
            raise LoadError(f"flush timed out with {remaining} records undelivered")
    elapsed = time.perf_counter() - start
    if on_progress is not None:
        on_progress(delivered)
    if errors:
        raise LoadError(f"{len(errors)}+ records failed, first: {errors[0]}")
    if delivered != expected:
        raise LoadError(f"delivered {delivered:,} records, expected {expected:,}")
    return LoadResult(delivered=delivered, bytes=produced_bytes, elapsed_s=elapsed)
