"""Read topic ``flight-delays`` back as a table: the latest record of each key.

The topic is a changelog (see :mod:`examples.flights.pipeline`): every micro-batch
republishes each group's current row, keyed ``"origin|carrier|hour"``. Reading it the way
Kafka users read an aggregate topic means keeping, per key, the record with the highest
offset (a key always maps to one partition). Read here through the broker with a
confluent-kafka consumer, independently of Spark.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pandas as pd
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from examples.flights.data import RESULT_COLUMNS, delays_key

__all__ = ["ChangelogError", "ChangelogRecord", "consume_topic", "latest_per_key"]


class ChangelogError(RuntimeError):
    """The topic could not be read back completely (message says why)."""


class ChangelogRecord(NamedTuple):
    """One record of the topic."""

    key: str  # "origin|carrier|hour"
    value: bytes  # the row as a UTF-8 JSON object
    partition: int
    offset: int


def consume_topic(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[ChangelogRecord]:
    """Every record of ``topic``, read through the broker up to each partition's high
    watermark at the time of the call (assign mode, no offsets committed).

    Raises ChangelogError if a record is missing its key or value, if the consumer reports
    an error, or if no record arrives within ``timeout_s`` seconds while some are due.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "flights-demo-reader",  # required by librdkafka; nothing committed
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=timeout_s).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[ChangelogRecord] = []
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < len(ends):
            message = consumer.poll(timeout_s)
            if message is None:
                raise ChangelogError(f"no record of {topic!r} within {timeout_s:.0f} s")
            if message.error() is not None:
                raise ChangelogError(f"reading {topic!r}: {message.error()}")
            key, value = message.key(), message.value()
            partition, offset = message.partition(), message.offset()
            if key is None or value is None or partition is None or offset is None:
                raise ChangelogError(f"record without key or value in {topic!r}: {message}")
            records.append(ChangelogRecord(key.decode(), value, partition, offset))
            if offset + 1 >= ends[partition]:
                done.add(partition)
        return records
    finally:
        consumer.close()


def latest_per_key(records: list[ChangelogRecord]) -> pd.DataFrame:
    """The current table: per key, the value of the record with the highest offset.

    Returns columns :data:`RESULT_COLUMNS` (JSON null → NaN), unsorted. Raises ValueError
    if a key does not match its value's (origin, carrier, hour).
    """
    latest: dict[str, ChangelogRecord] = {}
    for record in records:
        seen = latest.get(record.key)
        if seen is None or (record.partition, record.offset) > (seen.partition, seen.offset):
            latest[record.key] = record
    rows = []
    for key, record in latest.items():
        row = json.loads(record.value)
        if key != delays_key(row["origin"], row["carrier"], row["hour"]):
            raise ValueError(f"key {key!r} does not match its value {row}")
        rows.append(row)
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
