"""Read through a Kafka-compatible broker (``kafka.bootstrap.servers`` instead of ``path``).

Ranges are read by ``_fetch`` (Kafka Fetch into the numpy decoder; PLAINTEXT, SSL and SASL
PLAIN/SCRAM), else by confluent-kafka consumers in assign mode: no consumer group membership,
no offset commits (the streaming checkpoint holds the offsets, as in Spark's Kafka source).
``kafka.*`` options pass through to librdkafka with the prefix removed (security options in
Java or kafka-python names translated first, see ``_security``). Bounds come from the
broker's ListOffsets (``get_watermark_offsets``: log start offset, high watermark). A
refused login or TLS handshake fails planning within about a second
(``_security.ClientErrors``) instead of waiting out librdkafka's timeouts.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import InputPartition

from seglog.columnar import arrow_schema
from seglog.spark._fetch import raw_fetch_applies, read_raw_range
from seglog.spark._options import ReadOptions, TopicPartition
from seglog.spark._security import ClientErrors

__all__ = ["WireRangePartition", "read_wire_range", "wire_bounds", "wire_offsets_for_times"]

ROWS_PER_BATCH = 65536
"""Records per yielded Arrow batch."""
METADATA_TIMEOUT_S = 30.0
"""How long planning waits for the broker's metadata."""


@dataclass(frozen=True)
class WireRangePartition(InputPartition):
    """One Spark task: records ``start <= offset < end`` of a partition, fetched by a broker."""

    topic: str
    partition: int
    start: int
    end: int
    include_headers: bool
    kafka: dict[str, str] = field(default_factory=dict, repr=False)  # may hold a password
    check_crcs: bool = True
    """Verify each fetched batch's CRC-32C (option ``checkCrcs``; librdkafka's
    ``check.crcs`` on the consumer path unless ``kafka.check.crcs`` is given)."""
    isolation_level: str = "read_uncommitted"
    """``kafka.isolation.level``: read_committed drops aborted transactions' records."""


def _consumer(
    kafka: dict[str, str],
    errors: ClientErrors,
    *,
    check_crcs: bool = True,
    isolation_level: str = "read_uncommitted",
) -> Any:
    """A confluent-kafka consumer without group membership; ``isolation.level`` always
    given (librdkafka's own default is read_committed, Spark's read_uncommitted): it also
    decides what ``get_watermark_offsets`` answers (the last stable offset for
    read_committed)."""
    return Consumer(
        errors.settings(
            kafka,
            **{
                "group.id": f"seglog-spark-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "error",
                "check.crcs": check_crcs,
                "isolation.level": isolation_level,
            },
        )
    )


def _list_topics(consumer: Any, errors: ClientErrors, kafka: Mapping[str, str]) -> Any:
    """The cluster's metadata, asked in 1 s attempts for up to 30 s; between attempts
    ``poll(0)`` serves ``error_cb`` so that a refused login fails at once."""
    where = f"seglog source: broker {kafka.get('bootstrap.servers')}"
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            return consumer.list_topics(timeout=1)
        except KafkaException:
            consumer.poll(0)  # the consumer has no assignment: this only serves callbacks
            errors.check(where)
            if time.monotonic() > deadline:
                raise


def wire_bounds(options: ReadOptions) -> dict[TopicPartition, tuple[int, int]]:
    """``{(topic, partition): (log start offset, high watermark)}`` asked of the broker
    (read_committed: the last stable offset instead of the high watermark).
    SaslAuthenticationFailedError when the broker refuses the login."""
    errors = ClientErrors()
    consumer = _consumer(options.kafka, errors, isolation_level=options.isolation_level)
    try:
        metadata = _list_topics(consumer, errors, options.kafka)
        topics = {
            name: len(meta.partitions)
            for name, meta in metadata.topics.items()
            if meta.error is None and not name.startswith("__")
        }
        bounds = {}
        for topic, partition in options.select(topics):
            low, high = consumer.get_watermark_offsets(
                KafkaTopicPartition(topic, partition), timeout=30
            )
            bounds[(topic, partition)] = (int(low), int(high))
        return bounds
    finally:
        consumer.close()


def wire_offsets_for_times(
    options: ReadOptions, stamps: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int | None]:
    """Offsets of the first record at or after each timestamp (ms), asked of the broker with
    ListOffsets by timestamp (``offsets_for_times``); None where no record qualifies.
    Raises ``KafkaException`` on a partition error."""
    errors = ClientErrors()
    consumer = _consumer(options.kafka, errors, isolation_level=options.isolation_level)
    try:
        _list_topics(consumer, errors, options.kafka)  # fails fast on a refused login
        asked = [KafkaTopicPartition(t, p, ts) for (t, p), ts in stamps.items()]
        result: dict[TopicPartition, int | None] = {}
        for answer in consumer.offsets_for_times(asked, timeout=30):
            if answer.error is not None:
                raise KafkaException(answer.error)
            offset = int(answer.offset)
            result[(answer.topic, answer.partition)] = None if offset < 0 else offset
        return result
    finally:
        consumer.close()


def read_wire_range(part: WireRangePartition, timeout_s: float = 120.0) -> Iterator[pa.RecordBatch]:
    """Fetch the range's records and yield Arrow batches; RuntimeError if the broker does
    not deliver up to ``end`` within ``timeout_s`` seconds of silence.

    Options the raw reader knows (``_fetch.RAW_OPTIONS``: PLAINTEXT, SSL, SASL PLAIN and
    SCRAM): whole record batches through Kafka Fetch into the numpy decoder (``_fetch``,
    ~10x faster); otherwise a confluent-kafka consumer, which implements every librdkafka
    option."""
    if raw_fetch_applies(part.kafka):
        yield from read_raw_range(
            part.kafka, part.topic, part.partition, part.start, part.end,
            include_headers=part.include_headers, timeout_s=timeout_s,
            check_crcs=part.check_crcs,
            read_committed=part.isolation_level == "read_committed",
        )  # fmt: skip
        return
    errors = ClientErrors()
    consumer = _consumer(
        part.kafka, errors, check_crcs=part.check_crcs, isolation_level=part.isolation_level
    )
    where = f"seglog source: reading {part.topic}-{part.partition}"
    try:
        tp = KafkaTopicPartition(part.topic, part.partition, part.start)
        consumer.assign([tp])
        rows: list[Any] = []
        position = part.start
        quiet_since = time.monotonic()
        while position < part.end:
            messages = consumer.consume(num_messages=10000, timeout=1.0)
            errors.check(where)
            for message in messages:
                if message.error() is not None:
                    raise KafkaException(message.error())
                if message.offset() >= part.end:
                    position = part.end
                    break
                rows.append(message)
            if messages:
                quiet_since = time.monotonic()
                if position < part.end:
                    position = max(position, messages[-1].offset() + 1)
            else:
                # control records and compacted offsets are never delivered: ask the position
                position = max(position, consumer.position([tp])[0].offset)
                if time.monotonic() - quiet_since > timeout_s:
                    raise RuntimeError(
                        f"no records from {part.topic}-{part.partition} at offset {position} "
                        f"(reading up to {part.end}) for {timeout_s:.0f} s"
                    )
            if len(rows) >= ROWS_PER_BATCH:
                yield _to_arrow(rows, part)
                rows = []
        if rows:
            yield _to_arrow(rows, part)
    finally:
        consumer.close()


def _to_arrow(messages: list[Any], part: WireRangePartition) -> pa.RecordBatch:
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    columns: list[Any] = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(part.topic, pa.string()), n),
        pa.array([part.partition] * n, pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([ts * 1000 for _, ts in stamps], pa.timestamp("us", tz="UTC")),
        pa.array([int(kind == TIMESTAMP_LOG_APPEND_TIME) for kind, _ in stamps], pa.int32()),
    ]
    schema = arrow_schema(part.include_headers)
    if part.include_headers:
        headers = [[{"key": k, "value": v} for k, v in (m.headers() or [])] for m in messages]
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
