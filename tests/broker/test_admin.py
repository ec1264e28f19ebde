"""CreateTopics / DeleteTopics / Metadata via confluent-kafka's AdminClient and raw
requests: partition counts, topic ids, illegal names, auto-creation on and off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import errors as ke
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from seglog.broker import BrokerProcess

from ._wire import Wire


def test_create_list_delete(broker: str, topic: str, data_dir: Path) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    futures = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    futures[topic].result(10)
    meta = admin.list_topics(timeout=10)
    assert topic in meta.topics
    assert sorted(meta.topics[topic].partitions) == [0, 1, 2]
    assert meta.topics[topic].partitions[2].leader == 0
    assert (data_dir / f"{topic}-2").is_dir()

    again = admin.create_topics([NewTopic(topic, num_partitions=1)])
    with pytest.raises(KafkaException) as info:
        again[topic].result(10)
    assert info.value.args[0].code() == 36  # TOPIC_ALREADY_EXISTS

    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics
    assert not (data_dir / f"{topic}-0").exists()
    gone = admin.delete_topics([topic])
    with pytest.raises(KafkaException) as info:
        gone[topic].result(10)
    assert info.value.args[0].code() == 3  # UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("name", ["..", ".", "a/b", "../escape", "x" * 250, "bad name", "é"])
def test_create_illegal_names(broker: str, data_dir: Path, name: str) -> None:
    before = sorted(p.name for p in data_dir.rglob("*"))
    admin = AdminClient({"bootstrap.servers": broker})
    futures = admin.create_topics([NewTopic(name, num_partitions=1)])
    with pytest.raises(KafkaException) as info:
        futures[name].result(10)
    assert info.value.args[0].code() == 17  # INVALID_TOPIC_EXCEPTION
    assert sorted(p.name for p in data_dir.rglob("*")) == before
    assert not (data_dir.parent / "escape-0").exists()


def test_metadata_illegal_name_and_unknown(broker: str, data_dir: Path) -> None:
    before = sorted(p.name for p in data_dir.rglob("*"))
    with Wire(broker) as w:
        req = MetadataRequest[12](
            topics=[
                MetadataRequest.MetadataRequestTopic(name="../x"),
                MetadataRequest.MetadataRequestTopic(name="no-auto-create"),
            ],
            allow_auto_topic_creation=False,
        )
        resp = w.call(req)
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {"../x": 17, "no-auto-create": 3}
    assert sorted(p.name for p in data_dir.rglob("*")) == before


def test_auto_create_disabled(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory(["--no-auto-create-topics-enable", "--num-partitions", "2"])
    with Wire(proc.bootstrap) as w:
        req = MetadataRequest[9](
            topics=[MetadataRequest.MetadataRequestTopic(name="t1")],
            allow_auto_topic_creation=True,
        )
        assert w.call(req).topics[0].error_code == 3
    admin = AdminClient({"bootstrap.servers": proc.bootstrap})
    admin.create_topics([NewTopic("t2", num_partitions=-1)])["t2"].result(10)
    assert len(admin.list_topics(timeout=10).topics["t2"].partitions) == 2  # --num-partitions


def test_topic_ids_stable_across_restart(broker_factory: Callable[..., BrokerProcess]) -> None:
    def ids(bootstrap: str) -> dict[str, object]:
        with Wire(bootstrap) as w:
            resp = w.call(MetadataRequest[12](topics=None))
        internal = {t.name for t in resp.topics if t.is_internal}
        assert internal == {"__consumer_offsets"}  # listed as internal, as in Kafka
        return {t.name: t.topic_id for t in resp.topics}

    first = broker_factory()
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    for f in admin.create_topics([NewTopic(n, num_partitions=1) for n in ("a", "b")]).values():
        f.result(10)
    before = ids(first.bootstrap)
    assert set(before) == {"a", "b", "__consumer_offsets"}
    assert all(i.int != 0 for i in before.values())  # type: ignore[attr-defined]
    assert before["a"] != before["b"]
    assert first.stop() == 0
    second = broker_factory()
    assert ids(second.bootstrap) == before


def test_create_with_a_bad_replica_assignment(broker: str, topic: str, data_dir: Path) -> None:
    """Kafka's ReplicationControlManager.createTopic: a manual assignment needs
    num_partitions and replication_factor -1 (42 INVALID_REQUEST); each replica list must
    name registered brokers, each once, not be empty, and the partitions must be 0..n-1
    (39 INVALID_REPLICA_ASSIGNMENT). Nothing is created."""
    admin = AdminClient({"bootstrap.servers": broker})
    for i, assignment in enumerate([[[7]], [[0, 0]], [[0, 1]], [[0], [0, 7]]]):
        name = f"{topic}.{i}"
        futures = admin.create_topics(
            [NewTopic(name, len(assignment), replica_assignment=assignment)]
        )
        with pytest.raises(KafkaException) as info:
            futures[name].result(10)
        assert info.value.args[0].code() == 39, assignment  # INVALID_REPLICA_ASSIGNMENT

    ct = CreateTopicsRequest[5]
    assign = ct.CreatableTopic.CreatableReplicaAssignment
    cases = [  # (num_partitions, replication_factor, [(partition, brokers)], code)
        (-1, 1, [(0, [0])], 42),
        (1, -1, [(0, [0])], 42),
        (-1, -1, [(0, [0]), (2, [0])], 39),
        (-1, -1, [(0, [0]), (0, [0])], 39),
        (-1, -1, [(0, [])], 39),
    ]
    with Wire(broker) as w:
        for i, (partitions, factor, assignment, code) in enumerate(cases):
            name = f"{topic}.raw{i}"
            resp = w.call(
                ct(
                    topics=[
                        ct.CreatableTopic(
                            name=name,
                            num_partitions=partitions,
                            replication_factor=factor,
                            assignments=[
                                assign(partition_index=p, broker_ids=b) for p, b in assignment
                            ],
                            configs=[],
                        )
                    ],
                    timeout_ms=1000,
                    validate_only=False,
                )
            )
            assert resp.topics[0].error_code == code, (partitions, factor, assignment)
    created = set(admin.list_topics(timeout=10).topics)
    assert not {n for n in created if n.startswith(f"{topic}.")}
    assert not list(data_dir.glob(f"{topic}.*"))

    ok = f"{topic}.ok"
    admin.create_topics([NewTopic(ok, 2, replica_assignment=[[0], [0]])])[ok].result(10)
    assert sorted(admin.list_topics(ok, timeout=10).topics[ok].partitions) == [0, 1]


def test_partition_count_over_the_limit(broker: str, topic: str, data_dir: Path) -> None:
    """More partitions than the data directory holds (100000) is 37 INVALID_PARTITIONS,
    as Kafka answers a partition count it refuses, for CreateTopics and CreatePartitions,
    with ``validate_only`` too (it answered 40 INVALID_CONFIG, and 0 when validating).
    kafka-python's admin: librdkafka refuses such counts itself."""
    admin = KafkaAdminClient(bootstrap_servers=broker)
    try:
        for validate_only in (True, False):
            with pytest.raises(ke.InvalidPartitionsError):
                admin.create_topics([KpNewTopic(topic, 100_001, 1)], validate_only=validate_only)
        assert not list(data_dir.glob(f"{topic}-*"))

        admin.create_topics([KpNewTopic(topic, 1, 1)])
        for validate_only in (True, False):
            with pytest.raises(ke.InvalidPartitionsError):
                admin.create_partitions(
                    {topic: KpNewPartitions(total_count=100_001)}, validate_only=validate_only
                )
    finally:
        admin.close()
    meta = AdminClient({"bootstrap.servers": broker}).list_topics(topic, timeout=10)
    assert sorted(meta.topics[topic].partitions) == [0]
