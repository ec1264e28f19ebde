"""confluent-kafka (librdkafka) against a real ``seglog serve``: produce/consume round
trips in assign mode, every compression codec, keys, headers, null values, committed
offsets with a group.id, watermarks and offsets by time."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from tests._wait import wait_until


def produce(bootstrap: str, topic: str, messages: list[dict[str, Any]], **conf: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for m in messages:
        producer.produce(topic, on_delivery=on_delivery, **m)
    assert producer.flush(30) == 0
    assert errors == []


def consume(bootstrap: str, topic: str, count: int, *, offset: int = 0, **conf: Any) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": conf.pop("group_id", "seglog-tests"),
            "enable.auto.commit": False,
            **conf,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        out: list[Any] = []

        def poll_once() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(msg)
            return len(out) >= count

        wait_until(poll_once, interval=0, message=lambda: f"{len(out)} of {count} messages")
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_each_codec(broker: str, topic: str, codec: str) -> None:
    messages: list[dict[str, Any]] = [
        {
            "key": f"key-{i}".encode(),
            "value": (f"value {i} " * 20).encode(),
            "headers": [("h", f"{i}".encode()), ("empty", b"")],
        }
        for i in range(200)
    ]
    messages.append({"key": b"tombstone", "value": None})
    messages.append({"value": b"no key"})
    produce(broker, topic, messages, **{"compression.type": codec})
    got = consume(broker, topic, len(messages))
    assert [m.offset() for m in got] == list(range(len(messages)))
    assert [m.key() for m in got[:200]] == [f"key-{i}".encode() for i in range(200)]
    assert [m.value() for m in got[:200]] == [(f"value {i} " * 20).encode() for i in range(200)]
    assert got[5].headers() == [("h", b"5"), ("empty", b"")]
    assert (got[200].key(), got[200].value()) == (b"tombstone", None)
    assert (got[201].key(), got[201].value()) == (None, b"no key")


def test_consume_from_middle_and_watermarks(broker: str, topic: str) -> None:
    produce(broker, topic, [{"value": str(i).encode()} for i in range(50)])
    got = consume(broker, topic, 20, offset=30)
    assert [m.offset() for m in got] == list(range(30, 50))
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "wm"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 50)
    finally:
        consumer.close()


def test_offsets_for_times(broker: str, topic: str) -> None:
    base = int(time.time() * 1000) - 100_000
    produce(
        broker,
        topic,
        [{"value": str(i).encode(), "timestamp": base + i * 1000} for i in range(10)],
        **{"linger.ms": 0, "batch.num.messages": 1},
    )
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "times"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
        assert found[0].error is None
        assert found[0].offset == 5
        after = consumer.offsets_for_times([TopicPartition(topic, 0, base + 10**9)], timeout=10)
        assert after[0].offset == -1  # no message at or after that time
    finally:
        consumer.close()


def test_group_commit_in_assign_mode(broker: str, topic: str) -> None:
    produce(broker, topic, [{"value": str(i).encode()} for i in range(10)])
    conf = {
        "bootstrap.servers": broker,
        "group.id": f"g-{topic}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(conf)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.committed([tp], timeout=10)[0].offset == -1001  # OFFSET_INVALID
        consumer.assign([tp])  # from the committed offset, reset to earliest
        seen = []

        def poll_once() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.offset())
            return len(seen) >= 4

        wait_until(poll_once, timeout=20, interval=0, message=lambda: f"seen {seen}")
        assert seen == [0, 1, 2, 3]
        consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    finally:
        consumer.close()
    second = Consumer(conf)
    try:
        assert second.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 4
        second.assign([TopicPartition(topic, 0)])  # resumes at the committed offset
        msg = wait_until(lambda: second.poll(0.5), timeout=20, interval=0, message="no message")
        assert msg is not None
        assert msg.error() is None
        assert msg.offset() == 4
    finally:
        second.close()


def test_consume_past_end_resets(broker: str, topic: str) -> None:
    """A fetch beyond the log end gets OFFSET_OUT_OF_RANGE; librdkafka then resets."""
    produce(broker, topic, [{"value": b"x"}])
    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": "oor",
            "auto.offset.reset": "error",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 100)])

        def poll_error() -> Any:
            msg = consumer.poll(0.5)
            return None if msg is None else msg.error()

        err = wait_until(poll_error, timeout=20, interval=0, message="no error polled")
        assert err is not None
        assert err.code() == KafkaError._AUTO_OFFSET_RESET
    finally:
        consumer.close()
