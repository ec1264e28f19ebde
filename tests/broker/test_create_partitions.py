"""CreatePartitions (API 37) through confluent-kafka's and kafka-python's admin clients:
partitions only grow, existing data stays, the new count survives a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions

from seglog.broker import BrokerProcess


def _code(future: object) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(10)  # type: ignore[attr-defined]
    return int(info.value.args[0].code())


def test_grow_a_topic_and_use_the_new_partitions(broker: str, topic: str, data_dir: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker})
    producer.produce(topic, value=b"before", partition=0)
    assert producer.flush(10) == 0

    # validate_only changes nothing
    admin.create_partitions([NewPartitions(topic, 3)], validate_only=True)[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 1
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    assert sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions) == [0, 1, 2]
    assert (data_dir / f"{topic}-2").is_dir()

    producer = Producer({"bootstrap.servers": broker, "topic.metadata.refresh.interval.ms": 100})
    producer.produce(topic, value=b"new", partition=2)
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"{topic}-g"})
    try:
        for partition, value in ((0, b"before"), (2, b"new")):
            consumer.assign([TopicPartition(topic, partition, 0)])
            message = consumer.poll(10)
            assert message is not None
            assert message.error() is None
            assert message.value() == value
    finally:
        consumer.close()


def test_errors_as_kafka_answers_them(broker: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(10)
    assert _code(admin.create_partitions([NewPartitions(topic, 2)])[topic]) == 37  # not higher
    assert _code(admin.create_partitions([NewPartitions(topic, 1)])[topic]) == 37
    assert _code(admin.create_partitions([NewPartitions(f"{topic}-nope", 4)])[f"{topic}-nope"]) == 3
    wrong = NewPartitions(topic, 3, replica_assignment=[[7]])  # broker 7 does not exist
    assert _code(admin.create_partitions([wrong])[topic]) == 39
    right = NewPartitions(topic, 3, replica_assignment=[[0]])
    admin.create_partitions([right])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3


def test_kafka_python_admin_and_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    creator = AdminClient({"bootstrap.servers": proc.bootstrap})
    creator.create_topics([NewTopic("grown", num_partitions=1)])["grown"].result(10)
    admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
    try:
        admin.create_partitions({"grown": KpNewPartitions(total_count=4)})
    finally:
        admin.close()
    assert proc.stop() == 0
    again = broker_factory(data=proc.data_dir)
    meta = AdminClient({"bootstrap.servers": again.bootstrap}).list_topics("grown", timeout=10)
    assert sorted(meta.topics["grown"].partitions) == [0, 1, 2, 3]
