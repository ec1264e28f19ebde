"""Write through a Kafka-compatible broker (``kafka.bootstrap.servers``) with confluent-kafka.

At-least-once, like Spark's own Kafka sink: each task produces with ``acks=all`` and flushes
before it returns; a delivery error fails the task, and Spark's retry of a task or a
replayed micro-batch produces its records again. ``kafka.*`` options pass through to
librdkafka (prefix removed; security options in Java or kafka-python names translated by
``_security``, so TLS and SASL work as for reads). Keyed records use
``partitioner=murmur2_random`` (the Java client's default) unless the ``partition`` column
says otherwise. A refused login or TLS handshake fails the task within about a second
(librdkafka alone would retry until ``message.timeout.ms``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer

from seglog.spark._encode import records_of
from seglog.spark._fetch import raw_fetch_applies
from seglog.spark._produce_raw import produce_raw
from seglog.spark._security import ClientErrors

__all__ = ["produce"]

FLUSH_TIMEOUT_S = 120.0
"""How long a task waits for its records' delivery reports."""


def produce(batches: Iterator[pa.RecordBatch], config: dict[str, str], default_topic: str | None
            ) -> int:  # fmt: skip
    """Produce every row of ``batches``; returns the record count. Raises RuntimeError with
    the first delivery error (after flushing), ValueError for a row without a topic.

    Options the raw client knows (``_fetch.RAW_OPTIONS``: PLAINTEXT, SSL, SASL PLAIN and
    SCRAM; no compression): record batches encoded column-wise and sent whole
    (``_produce_raw``, raising ``kafka.errors`` classes); otherwise confluent-kafka."""
    if raw_fetch_applies(config):
        return produce_raw(batches, config, default_topic)
    failures = ClientErrors()
    where = f"seglog sink: broker {config.get('bootstrap.servers')}"
    producer = Producer(failures.settings(config, acks="all", partitioner="murmur2_random"))
    errors: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    count = 0
    for batch in batches:
        for record in records_of(batch):
            topic = record.topic or default_topic
            if not topic:
                raise ValueError("no topic: set option topic or give the DataFrame a topic column")
            kwargs: dict[str, Any] = {"value": record.value, "key": record.key,
                                      "on_delivery": delivered}  # fmt: skip
            if record.headers:
                kwargs["headers"] = record.headers
            if record.partition >= 0:
                kwargs["partition"] = record.partition
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:  # local queue full: serve delivery reports, retry
                    producer.poll(0.1)
                    failures.check(where)
            producer.poll(0)
            count += 1
        failures.check(where)
    deadline = time.monotonic() + FLUSH_TIMEOUT_S
    remaining = producer.flush(0.5)
    while remaining and time.monotonic() < deadline:
        failures.check(where)
        remaining = producer.flush(0.5)
    failures.check(where)
    if remaining:
        errors.append(f"{remaining} records not delivered within {FLUSH_TIMEOUT_S:.0f} s")
    if errors:
        raise RuntimeError(f"seglog sink: delivery failed: {'; '.join(errors)}")
    return count
