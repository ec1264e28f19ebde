"""What the exactly-once sink tests share: topics, a UDF that fails a task, and readers of
what a topic holds under each isolation level (confluent-kafka and the Spark wire source)."""

from __future__ import annotations

import collections
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark import TaskContext
from pyspark.sql.functions import udf
from tests._wait import wait_until

VALUE_BYTES = 2048
"""Row value size: a task's first ~1000 rows fill the sink's per-partition gather (2 MiB)
and are produced before the UDF fails, so an aborted attempt leaves records in the log."""


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)


def consumed(
    bootstrap: str, topic: str, partitions: int, isolation: str
) -> collections.Counter[str]:
    """Row ids (values' first field) in ``topic`` read by a confluent-kafka consumer with
    ``isolation.level`` = ``isolation``, up to the end it reports (the LSO under
    read_committed, the high watermark otherwise)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{isolation}",
        "isolation.level": isolation, "enable.auto.commit": False,
    })  # fmt: skip
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}  # fmt: skip
        consumer.assign(tps)
        seen: collections.Counter[str] = collections.Counter()

        def done() -> bool:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                seen[message.value().split(b"|", 1)[0].decode()] += 1
            positions = consumer.position(tps)
            return all(tp.offset >= ends[tp.partition] for tp in positions)

        wait_until(done, 60, interval=0, message=lambda: f"{isolation} read of {topic}: {ends}")
        return seen
    finally:
        consumer.close()


def spark_read(spark: Any, bootstrap: str, topic: str, isolation: str) -> collections.Counter[str]:
    """Row ids in ``topic`` read by the Spark wire source with ``kafka.isolation.level``."""
    rows = (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", isolation)
        .load()
        .selectExpr("substring_index(CAST(value AS STRING), '|', 1) AS id")
        .collect()
    )
    return collections.Counter(r["id"] for r in rows)


def failing_rows(spark: Any, rows: int, fail_at: set[int], *, first_attempt_only: bool) -> Any:
    """``rows`` rows in 2 partitions, ``value`` = ``"<id>|"`` + padding to VALUE_BYTES made
    by a Python UDF that raises at the ids of ``fail_at`` (on the task's first attempt
    only, or always)."""

    def value(i: int) -> str:
        context = TaskContext.get()
        if i in fail_at and (not first_attempt_only or context.attemptNumber() == 0):
            raise RuntimeError(f"UDF fails at row {i} (attempt {context.attemptNumber()})")
        return f"{i}|".ljust(VALUE_BYTES, "x")

    make = udf(value, "string", useArrow=False)
    return spark.range(0, rows, numPartitions=2).select(make("id").alias("value"))
