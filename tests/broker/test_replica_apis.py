"""The leadership and replica APIs as a one-node cluster answers them, through raw
requests (kafka-python's schemas) and confluent-kafka's admin client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    DescribeProducersRequest,
    DescribeQuorumRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer import OffsetForLeaderEpochRequest
from kafka.protocol.producer import InitProducerIdRequest

from seglog.broker import BrokerProcess

from ._wire import Wire, ensure_topic, make_batch, produce_request


def test_offset_for_leader_epoch_and_producers(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        init = w.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=1))
        batch = make_batch(
            [b"a", b"b", b"c"], producer_id=init.producer_id, producer_epoch=0, base_sequence=0
        )
        w.call(produce_request(topic, batch))
        req = OffsetForLeaderEpochRequest[4]
        epochs = w.call(
            req(
                replica_id=-1,
                topics=[
                    req.OffsetForLeaderTopic(
                        topic=topic,
                        partitions=[
                            req.OffsetForLeaderTopic.OffsetForLeaderPartition(
                                partition=0, current_leader_epoch=-1, leader_epoch=0
                            ),
                            req.OffsetForLeaderTopic.OffsetForLeaderPartition(
                                partition=9, current_leader_epoch=-1, leader_epoch=0
                            ),
                        ],
                    )
                ],
            )
        )
        parts = epochs.topics[0].partitions
        assert (parts[0].error_code, parts[0].leader_epoch, parts[0].end_offset) == (0, 0, 3)
        assert parts[1].error_code == 3
        dp = DescribeProducersRequest[0]
        producers = w.call(dp(topics=[dp.TopicRequest(name=topic, partition_indexes=[0])]))
        [state] = producers.topics[0].partitions[0].active_producers
        assert (state.producer_id, state.producer_epoch, state.last_sequence) == (
            init.producer_id,
            0,
            2,
        )


def test_describe_topic_partitions_with_cursor(broker: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, 5)])[topic].result(15)
    with Wire(broker) as w:
        dtp = DescribeTopicPartitionsRequest[0]
        first = w.call(
            dtp(topics=[dtp.TopicRequest(name=topic)], response_partition_limit=3, cursor=None)
        )
        assert [p.partition_index for p in first.topics[0].partitions] == [0, 1, 2]
        assert first.next_cursor.partition_index == 3
        rest = w.call(
            dtp(
                topics=[dtp.TopicRequest(name=topic)],
                response_partition_limit=3,
                cursor=dtp.Cursor(topic_name=topic, partition_index=3),
            )
        )
        assert [p.partition_index for p in rest.topics[0].partitions] == [3, 4]
        assert rest.next_cursor is None
        assert rest.topics[0].partitions[0].replica_nodes == [0]


def test_leaders_and_reassignments(broker: str, topic: str) -> None:
    with Wire(broker) as w:
        ensure_topic(w, topic)
        el = ElectLeadersRequest[2]
        elected = w.call(
            el(
                election_type=0,
                topic_partitions=[el.TopicPartitions(topic=topic, partitions=[0])],
                timeout_ms=1000,
            )
        )
        assert elected.replica_election_results[0].partition_result[0].error_code == 84
        ap = AlterPartitionReassignmentsRequest[0]
        topics = [
            ap.ReassignableTopic(
                name=topic,
                partitions=[
                    ap.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[0])
                ],
            )
        ]
        assert w.call(ap(timeout_ms=1000, topics=topics)).responses[0].partitions[0].error_code == 0
        topics = [
            ap.ReassignableTopic(
                name=topic,
                partitions=[
                    ap.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[0, 1])
                ],
            )
        ]
        assert (
            w.call(ap(timeout_ms=1000, topics=topics)).responses[0].partitions[0].error_code == 39
        )
        topics = [
            ap.ReassignableTopic(
                name=topic,
                partitions=[
                    ap.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=None)
                ],
            )
        ]
        assert (
            w.call(ap(timeout_ms=1000, topics=topics)).responses[0].partitions[0].error_code == 85
        )
        listed = w.call(ListPartitionReassignmentsRequest[0](timeout_ms=1000, topics=None))
        assert (listed.error_code, listed.topics) == (0, [])


def test_alter_partition_reassignments_v1(broker: str, topic: str) -> None:
    """v1 (KIP-860) echoes ``allow_replication_factor_change``; with it false the only
    valid replica set still succeeds (the factor stays 1), another is 39 as at v0."""
    ap = AlterPartitionReassignmentsRequest[1]

    def reassign(w: Wire, replicas: list[int], allow: bool) -> tuple[bool, int]:
        part = ap.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=replicas)
        resp = w.call(
            ap(
                timeout_ms=1000,
                allow_replication_factor_change=allow,
                topics=[ap.ReassignableTopic(name=topic, partitions=[part])],
            )
        )
        assert (resp.error_code, resp.error_message) == (0, None)
        return resp.allow_replication_factor_change, resp.responses[0].partitions[0].error_code

    with Wire(broker) as w:
        ensure_topic(w, topic)
        assert reassign(w, [0], allow=False) == (False, 0)
        assert reassign(w, [0], allow=True) == (True, 0)
        assert reassign(w, [0, 0], allow=False) == (False, 39)
        assert reassign(w, [0, 1], allow=True) == (True, 39)
    admin = KafkaAdminClient(bootstrap_servers=broker)  # sends v1 to a broker serving it
    try:
        assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [0]}) == {
            TopicPartition(topic, 0): None
        }
    finally:
        admin.close()


def _describe_quorum(w: Wire, version: int, topic: str = "__cluster_metadata") -> Any:
    dq = DescribeQuorumRequest[version]
    part = dq.TopicData.PartitionData(partition_index=0)
    return w.call(dq(topics=[dq.TopicData(topic_name=topic, partitions=[part])]))


def test_describe_quorum_one_voter(broker_factory: Callable[..., BrokerProcess]) -> None:
    proc = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
    try:
        quorum = admin.describe_metadata_quorum()  # kafka-python's client
    finally:
        admin.close()
    [metadata] = quorum["topics"]
    [part] = metadata["partitions"]
    assert metadata["topic_name"] == "__cluster_metadata"
    assert (part["partition_index"], part["error"], part["leader_id"]) == (0, None, 0)
    assert part["leader_epoch"] == 1  # the first start's election
    assert [v["replica_id"] for v in part["current_voters"]] == [0]
    assert part["current_voters"][0]["log_end_offset"] == part["high_watermark"]
    assert part["observers"] == []
    port = int(proc.bootstrap.rsplit(":", 1)[1])
    assert quorum["nodes"] == [
        {"node_id": 0, "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": port}]}
    ]
    start_end = part["high_watermark"]
    creator = AdminClient({"bootstrap.servers": proc.bootstrap})
    creator.create_topics([NewTopic("quorum-t", 1, 1)])["quorum-t"].result(15)
    with Wire(proc.bootstrap) as w:
        for version in range(3):  # every advertised version decodes
            resp = _describe_quorum(w, version)
            p = resp.topics[0].partitions[0]
            assert (resp.error_code, p.leader_id, p.leader_epoch) == (0, 0, 1)
            assert p.high_watermark == start_end + 1  # the topic creation's record
        assert _describe_quorum(w, 2, topic="other").error_code == 42  # INVALID_REQUEST
    proc.stop()
    restarted = broker_factory()  # the same data directory: a new election, persisted state
    with Wire(restarted.bootstrap) as w:
        p = _describe_quorum(w, 1).topics[0].partitions[0]
    assert (p.leader_epoch, p.high_watermark) == (2, start_end + 2)
