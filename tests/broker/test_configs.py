"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DeleteGroups (42)
and OffsetDelete (47) through confluent-kafka's and kafka-python's admin clients."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import kafka.errors as ke
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import TopicPartitionReplica
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import ListConfigResourcesRequest

from seglog.broker import BrokerProcess
from seglog.storage import open_log

from ._wire import Wire

BROKER_ARGS = ("--log-retention-ms", "3600000")


def _code(future: object) -> int:
    with pytest.raises(KafkaException) as info:
        future.result(10)  # type: ignore[attr-defined]
    return int(info.value.args[0].code())


def _describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries: dict[str, ConfigEntry] = admin.describe_configs([res])[res].result(10)
    return entries


def test_describe_topic_configs_with_sources(broker: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    config = {"cleanup.policy": "compact", "segment.bytes": "1048576"}
    admin.create_topics([NewTopic(topic, 1, config=config)])[topic].result(10)
    entries = _describe(admin, topic)
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["segment.bytes"].value == "1048576"
    # the broker flag is a static broker config; Kafka's own default is DEFAULT_CONFIG
    assert entries["retention.ms"].value == "3600000"
    assert entries["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["retention.bytes"].value == "-1"
    assert entries["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    synonyms = entries["retention.ms"].synonyms
    assert synonyms["log.retention.ms"].value == "3600000"


def test_incremental_alter_is_live_and_persists(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"x" * 200)
    assert producer.flush(10) == 0

    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    entries = _describe(admin, topic)
    assert entries["segment.bytes"].value == "1024"
    assert entries["cleanup.policy"].value == "delete,compact"

    # live: the open log rolls at the new segment.bytes without a restart
    for _ in range(20):
        producer.produce(topic, value=b"y" * 200)
        assert producer.flush(10) == 0
    assert len(list((proc.data_dir / f"{topic}-0").glob("*.log"))) > 1

    delete = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    admin.incremental_alter_configs([delete])[delete].result(10)
    assert proc.stop() == 0
    again = broker_factory(data=proc.data_dir)
    entries = _describe(AdminClient({"bootstrap.servers": again.bootstrap}), topic)
    assert entries["segment.bytes"].value == "1024"  # persisted
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # deleted
    with open_log(again.data_dir / f"{topic}-0", read_only=True) as plog:
        assert plog.next_offset() == 21  # every record kept


def test_segment_messages_topic_config(
    broker_factory: Callable[..., BrokerProcess], topic: str
) -> None:
    proc = broker_factory()
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    config = {"seglog.segment.messages": "3"}
    admin.create_topics([NewTopic(topic, 1, config=config)])[topic].result(10)
    entries = _describe(admin, topic)
    assert entries["seglog.segment.messages"].value == "3"
    assert entries["seglog.segment.messages"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    producer = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 0})
    for _ in range(7):
        producer.produce(topic, value=b"x")
        assert producer.flush(10) == 0  # one record per batch
    logs = sorted(p.name for p in (proc.data_dir / f"{topic}-0").glob("*.log"))
    assert logs == [f"{base:020d}.log" for base in (0, 3, 6)]

    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("seglog.segment.messages", "0", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert _code(admin.incremental_alter_configs([res])[res]) == 40
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "seglog.segment.messages", None, incremental_operation=AlterConfigOpType.DELETE
            )
        ],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    assert _describe(admin, topic)["seglog.segment.messages"].value is None  # no limit
    for _ in range(5):  # live: no more rolls
        producer.produce(topic, value=b"y")
        assert producer.flush(10) == 0
    assert len(list((proc.data_dir / f"{topic}-0").glob("*.log"))) == 3


def test_bad_configs_are_invalid_config(broker: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    assert _code(admin.create_topics([NewTopic(topic, 1, config={"no.such": "1"})])[topic]) == 40
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    for name, value in (
        ("segment.bytes", "ten"),
        ("segment.bytes", "10"),
        ("cleanup.policy", "forever"),
        ("message.timestamp.type", "Now"),
        ("nope", "1"),
    ):
        res = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        assert _code(admin.incremental_alter_configs([res])[res]) == 40, (name, value)
    assert (
        _describe(admin, topic)["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    )
    missing = ConfigResource(ConfigResource.Type.TOPIC, f"{topic}-missing")
    assert _code(admin.describe_configs([missing])[missing]) == 3
    # validate_only changes nothing
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([res], validate_only=True)[res].result(10)
    assert _describe(admin, topic)["retention.ms"].value == "3600000"


def test_broker_configs_described_read_only(broker: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([res])[res].result(10)
    assert entries["log.retention.ms"].value == "3600000"
    assert entries["log.retention.ms"].is_read_only
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    alter = ConfigResource(
        ConfigResource.Type.BROKER,
        "0",
        incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert _code(admin.incremental_alter_configs([alter])[alter]) == 42


def test_kafka_python_describe_and_alter(broker: str, topic: str) -> None:
    creator = AdminClient({"bootstrap.servers": broker})
    creator.create_topics([NewTopic(topic, 1)])[topic].result(10)
    admin = KafkaAdminClient(bootstrap_servers=broker)
    try:
        admin.alter_configs(
            [KpConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "1000"})]
        )
        result = admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    text = str(result)
    assert "retention.ms" in text
    entries = _describe(creator, topic)
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def _commit(broker: str, group: str, topic: str, offset: int) -> Consumer:
    consumer = Consumer(
        {"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    return consumer


def test_delete_groups_and_offsets(broker: str, topic: str, data_dir: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    group = f"{topic}-g"
    _commit(broker, group, topic, 5).close()
    assert _code(admin.delete_consumer_groups([f"{topic}-nobody"])[f"{topic}-nobody"]) == 69

    # a group with a live member is not deleted
    member = Consumer({"bootstrap.servers": broker, "group.id": f"{topic}-live"})
    member.subscribe([topic])
    try:
        for _ in range(100):
            member.poll(0.2)
            if member.assignment():
                break
        assert member.assignment()
        assert _code(admin.delete_consumer_groups([f"{topic}-live"])[f"{topic}-live"]) == 68
    finally:
        member.close()

    admin.delete_consumer_groups([group])[group].result(10)
    again = Consumer({"bootstrap.servers": broker, "group.id": group})
    try:
        committed = again.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset < 0  # nothing committed any more
    finally:
        again.close()


def test_offset_delete_with_kafka_python(broker: str, topic: str) -> None:
    creator = AdminClient({"bootstrap.servers": broker})
    creator.create_topics([NewTopic(topic, 2)])[topic].result(10)
    group = f"{topic}-g"
    consumer = Consumer(
        {"bootstrap.servers": broker, "group.id": group, "enable.auto.commit": False}
    )
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)], asynchronous=False
    )
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=broker)
    try:
        from kafka.structs import TopicPartition as KpTopicPartition  # noqa: PLC0415

        admin.delete_group_offsets(group, [KpTopicPartition(topic, 0)])
    finally:
        admin.close()
    check = Consumer({"bootstrap.servers": broker, "group.id": group})
    try:
        committed = check.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10
        )
    finally:
        check.close()
    assert [tp.offset for tp in committed][1] == 4
    assert committed[0].offset < 0  # deleted


def test_describe_cluster_and_log_dirs(broker: str, topic: str, data_dir: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker})
    for i in range(10):
        producer.produce(topic, value=b"x" * 100, partition=i % 2)
    assert producer.flush(10) == 0
    kp = KafkaAdminClient(bootstrap_servers=broker)
    try:
        cluster = kp.describe_cluster()  # DescribeCluster (API 60)
        dirs = kp.describe_log_dirs()
    finally:
        kp.close()
    assert [b["broker_id"] for b in cluster["brokers"]] == [0]
    assert cluster["controller_id"] == 0
    assert cluster["cluster_id"]
    # no authorizer: every cluster operation is allowed
    assert "IDEMPOTENT_WRITE" in str(cluster["authorized_operations"])
    sizes = {
        p: sum(f.stat().st_size for f in (data_dir / f"{topic}-{p}").glob("*.log")) for p in (0, 1)
    }
    assert all(size > 500 for size in sizes.values())
    [log_dir] = dirs[0]["log_dirs"]
    assert log_dir["log_dir"] == str(data_dir.resolve())
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    reported = {
        p["partition_index"]: p["partition_size"]
        for t in log_dir["topics"]
        if t["name"] == topic
        for p in t["partitions"]
    }
    assert reported == sizes  # the segment files' real sizes


def test_alter_replica_log_dirs_one_dir(broker: str, topic: str, data_dir: Path) -> None:
    """AlterReplicaLogDirs on a one-directory broker, as Kafka answers it: the current
    directory is a no-op (0), any other path 57 LOG_DIR_NOT_FOUND (checked before the
    partition), an unknown partition in the current directory 3."""
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 2)])[topic].result(10)
    current = str(data_dir.resolve())
    other = str(data_dir.parent / "elsewhere")
    kp = KafkaAdminClient(bootstrap_servers=broker)
    try:
        moved = kp.alter_replica_log_dirs(
            {
                TopicPartitionReplica(topic, 0, 0): current,
                TopicPartitionReplica(topic, 1, 0): other,
                TopicPartitionReplica(topic, 7, 0): current,
                TopicPartitionReplica("no-such-topic", 0, 0): other,
            }
        )
        dirs = kp.describe_log_dirs()
    finally:
        kp.close()
    assert moved == {
        TopicPartitionReplica(topic, 0, 0): ke.NoError,
        TopicPartitionReplica(topic, 1, 0): ke.LogDirNotFoundError,
        TopicPartitionReplica(topic, 7, 0): ke.UnknownTopicOrPartitionError,
        TopicPartitionReplica("no-such-topic", 0, 0): ke.LogDirNotFoundError,
    }
    [log_dir] = dirs[0]["log_dirs"]
    assert log_dir["log_dir"] == current  # nothing moved
    assert {
        p["partition_index"]
        for t in log_dir["topics"]
        if t["name"] == topic
        for p in t["partitions"]
    } == {0, 1}


def test_list_config_resources(broker: str, topic: str) -> None:
    """ListConfigResources (KIP-1142): v1 lists this broker and every topic, in Kafka's
    type order, filtered by the types asked for; a type Kafka does not list fails the
    request with 35; v0 (client metrics only) lists nothing here."""
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    kp = KafkaAdminClient(bootstrap_servers=broker)
    try:
        everything = kp.list_config_resources()
        topics_only = kp.list_config_resources(["TOPIC"])
    finally:
        kp.close()
    assert list(everything) == ["broker", "topic"]  # BROKER (4) before TOPIC (2), as Kafka
    assert everything["broker"] == ["0"]
    assert topic in everything["topic"]
    assert "__consumer_offsets" in everything["topic"]
    assert everything["topic"] == sorted(everything["topic"])
    assert topics_only == {"topic": everything["topic"]}
    req = ListConfigResourcesRequest
    with Wire(broker) as w:
        none_here = w.call(req[1](resource_types=[8, 16, 32]))
        unsupported = w.call(req[1](resource_types=[2, 64]))
        v0 = w.call(req[0]())
    assert (none_here.error_code, none_here.config_resources) == (0, [])
    assert (unsupported.error_code, unsupported.config_resources) == (35, [])
    assert (v0.error_code, v0.config_resources) == (0, [])
