"""Committed offsets live in the internal compacted log ``__consumer_offsets``: each commit
is one fsynced append answered after its fsync, rebuilt on start, never going back across
a kill -9; the topic is internal (listed as such, refused to producers and deletes)."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.broker._committed import decode_key, decode_value
from seglog.broker._testing import BrokerProcess
from seglog.storage import OFFSET_OLDEST, open_log


def _committed(bootstrap: str, group: str, topic: str, partitions: int = 1) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in consumer.committed(tps, timeout=10)]
    finally:
        consumer.close()


def test_each_commit_is_a_record_rebuilt_on_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("orders", 2)])["orders"].result(10)
    consumer = Consumer(
        {"bootstrap.servers": proc.bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    for offset in (3, 7):
        consumer.commit(
            offsets=[TopicPartition("orders", 0, offset), TopicPartition("orders", 1, offset * 2)],
            asynchronous=False,
        )
    consumer.close()
    assert proc.stop() == 0

    # what the log holds: Kafka's OffsetCommitKey/Value records, one batch per commit
    with open_log(proc.data_dir / "__consumer_offsets-0", read_only=True) as plog:
        _next, messages = plog.consume(OFFSET_OLDEST, 100)
    decoded = [(decode_key(m.key or b""), decode_value(m.value or b"")[0]) for m in messages]
    assert decoded == [
        (("g", "orders", 0), 3),
        (("g", "orders", 1), 6),
        (("g", "orders", 0), 7),
        (("g", "orders", 1), 14),
    ]
    again = broker_factory(data=proc.data_dir)
    assert _committed(again.bootstrap, "g", "orders", 2) == [7, 14]


def test_commits_never_go_back_across_kill_9(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("k9", 1)])["k9"].result(10)
    acknowledged = [0]
    stop = threading.Event()

    def committer() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": proc.bootstrap,
                "group.id": "k9g",
                "enable.auto.commit": False,
                "socket.timeout.ms": 2000,  # a commit to the killed broker fails fast
                "log_level": 0,
            }
        )
        offset = 0
        try:
            while not stop.is_set():
                offset += 1
                try:
                    consumer.commit(offsets=[TopicPartition("k9", 0, offset)], asynchronous=False)
                except KafkaException:
                    return  # the broker died mid-commit: not acknowledged
                acknowledged[0] = offset
        finally:
            consumer.close()

    # a daemon: after the kill its last commit may block in librdkafka's retries; what it
    # acknowledged before the kill is all the test reads
    thread = threading.Thread(target=committer, daemon=True)
    thread.start()
    try:
        # let some commits through, then kill the broker without warning
        deadline_ok = threading.Event()
        for _ in range(200):
            if acknowledged[0] >= 50:
                deadline_ok.set()
                break
            stop.wait(0.05)
        assert deadline_ok.is_set(), "commits did not get through"
        proc.process.send_signal(signal.SIGKILL)
        proc.process.wait(10)
    finally:
        stop.set()
        thread.join(5)
    proc.returncode = 0  # killed on purpose: the fixture must not fail on it
    last = acknowledged[0]
    again = broker_factory(data=proc.data_dir)
    restored = _committed(again.bootstrap, "k9g", "k9")[0]
    assert restored >= last, (restored, last)


def test_legacy_json_offsets_move_into_the_log(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("old", 1)])["old"].result(10)
    assert proc.stop() == 0
    legacy = proc.data_dir / "consumer-offsets.json"
    legacy.write_text(json.dumps({"oldgroup": {"old": {"0": [42, "meta"]}}}))
    again = broker_factory(data=proc.data_dir)
    assert not legacy.exists()
    assert _committed(again.bootstrap, "oldgroup", "old") == [42]


def test_the_offsets_topic_is_internal(broker: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    meta = admin.list_topics(timeout=10)
    assert "__consumer_offsets" in meta.topics
    producer = Producer({"bootstrap.servers": broker, "message.send.max.retries": 0})
    errors: list[object] = []
    producer.produce(
        "__consumer_offsets", value=b"forged", on_delivery=lambda e, _m: errors.append(e)
    )
    producer.flush(10)
    assert errors
    assert errors[0] is not None
    assert errors[0].code() == 17  # type: ignore[attr-defined]
    with pytest.raises(KafkaException) as info:
        admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(10)
    assert info.value.args[0].code() == 17
