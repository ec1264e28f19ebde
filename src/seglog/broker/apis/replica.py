"""The partition-leadership and replica APIs, answered as a one-node cluster answers them:
every partition has one replica (this broker), its leader, at leader epoch 0.

- OffsetForLeaderEpoch (23, v2-4): for any epoch >= 0 the only epoch is 0, ending at the
  log end offset; 3 for an unknown topic or partition.
- DescribeProducers (61): the idempotent producers the broker tracks per partition
  (producer id, epoch, last sequence); no transactions (coordinator epoch and
  transaction start -1).
- DescribeTopicPartitions (75): topics with their partitions, at most
  ``response_partition_limit`` partitions per answer, continued by Kafka's cursor.
- ElectLeaders (43): 84 ELECTION_NOT_NEEDED (the only replica leads already).
- AlterPartitionReassignments (45, v0-1): replicas [this broker] complete at once; any
  other replica set is 39 INVALID_REPLICA_ASSIGNMENT; cancelling is 85
  NO_REASSIGNMENT_IN_PROGRESS. v1's ``allow_replication_factor_change`` (KIP-860) is
  echoed in the answer; refusing it changes nothing here, as the only valid replica set
  keeps the replication factor 1 (Kafka checks the assignment, 39, before the factor,
  38). ListPartitionReassignments (46): none in progress.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsResponse,
    DescribeProducersResponse,
    DescribeTopicPartitionsResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.consumer import OffsetForLeaderEpochResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.log.internal_topics import INTERNAL_TOPICS
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.errors import ELECTION_NOT_NEEDED, NO_REASSIGNMENT_IN_PROGRESS
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res

__all__ = [
    "handle_alter_partition_reassignments",
    "handle_describe_producers",
    "handle_describe_topic_partitions",
    "handle_elect_leaders",
    "handle_list_partition_reassignments",
    "handle_offset_for_leader_epoch",
]

UNKNOWN = _errors.UNKNOWN_TOPIC_OR_PARTITION


def _exists(ctx: BrokerContext, topic: str, partition: int) -> bool:
    info = ctx.topics.get(topic)
    return info is not None and 0 <= partition < info.partitions


def handle_offset_for_leader_epoch(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """End offset of the asked leader epoch (always epoch 0 here)."""
    version = rctx.api_version
    resp = OffsetForLeaderEpochResponse[version]
    topic_cls = resp.OffsetForLeaderTopicResult
    part_cls = topic_cls.EpochEndOffset
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, epoch, end = UNKNOWN, -1, -1
            if not rctx.allowed(Op.DESCRIBE, Res.TOPIC, t.topic):
                code = _errors.TOPIC_AUTHORIZATION_FAILED
            elif _exists(ctx, t.topic, p.partition):
                code, epoch = _errors.NONE, 0
                end = ctx.topics.log(t.topic, p.partition).log_end_offset
            parts.append(
                part_cls(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end)
            )
        topics.append(topic_cls(topic=t.topic, partitions=parts))
    return resp(throttle_time_ms=0, topics=topics)


def handle_describe_producers(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Active idempotent producers per partition, with the first offset of each one's
    ongoing transaction there (``current_txn_start_offset``, -1 when none)."""
    version = rctx.api_version
    resp = DescribeProducersResponse[version]
    topic_cls = resp.TopicResponse
    part_cls = topic_cls.PartitionResponse
    state_cls = part_cls.ProducerState
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            if not rctx.allowed(Op.READ, Res.TOPIC, t.name):
                parts.append(
                    part_cls(
                        partition_index=p,
                        error_code=_errors.TOPIC_AUTHORIZATION_FAILED,
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            if not _exists(ctx, t.name, p):
                parts.append(
                    part_cls(
                        partition_index=p,
                        error_code=UNKNOWN,
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            ongoing = ctx.topics.log(t.name, p).ongoing_transactions()
            active = [
                state_cls(
                    producer_id=pid,
                    producer_epoch=epoch,
                    last_sequence=seq,
                    last_timestamp=-1,
                    coordinator_epoch=-1,
                    current_txn_start_offset=ongoing.get(pid, -1),
                )
                for pid, epoch, seq in ctx.producers.active(t.name, p)
            ]
            parts.append(
                part_cls(
                    partition_index=p, error_code=0, error_message=None, active_producers=active
                )
            )
        topics.append(topic_cls(name=t.name, partitions=parts))
    return resp(throttle_time_ms=0, topics=topics)


def handle_describe_topic_partitions(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Topics (all the principal may describe when none is named), partitions in order
    of (topic, partition), cut at ``response_partition_limit`` with a next cursor."""
    version = rctx.api_version
    resp = DescribeTopicPartitionsResponse[version]
    topic_cls = resp.DescribeTopicPartitionsResponseTopic
    part_cls = topic_cls.DescribeTopicPartitionsResponsePartition
    everything = ctx.topics.all()
    names = sorted(t.name for t in req.topics) if req.topics else sorted(everything)
    limit = max(1, min(req.response_partition_limit, 2000))
    start_topic, start_partition = (
        (req.cursor.topic_name, req.cursor.partition_index) if req.cursor is not None else ("", 0)
    )
    node = ctx.config.node_id
    topics, budget, next_cursor = [], limit, None
    for name in names:
        if name < start_topic:
            continue
        info = everything.get(name)
        if info is None or not rctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
            if req.topics:  # named: answer why; listing all: hidden
                code = UNKNOWN if info is None else _errors.TOPIC_AUTHORIZATION_FAILED
                topics.append(
                    topic_cls(error_code=code, name=name, is_internal=False, partitions=[])
                )
            continue
        first = start_partition if name == start_topic else 0
        parts = []
        for p in range(first, info.partitions):
            if budget == 0:
                next_cursor = resp.Cursor(topic_name=name, partition_index=p)
                break
            parts.append(
                part_cls(
                    error_code=0,
                    partition_index=p,
                    leader_id=node,
                    leader_epoch=0,
                    replica_nodes=[node],
                    isr_nodes=[node],
                    offline_replicas=[],
                )
            )
            budget -= 1
        topics.append(
            topic_cls(
                error_code=0,
                name=name,
                topic_id=info.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=parts,
            )
        )
        if next_cursor is not None:
            break
    return resp(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


def handle_elect_leaders(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """84 for every partition: its only replica is its leader."""
    version = rctx.api_version
    resp = ElectLeadersResponse[version]
    result_cls = resp.ReplicaElectionResult
    part_cls = result_cls.PartitionResult
    if not rctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0,
            error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            replica_election_results=[],
        )
    wanted = (
        [(t.topic, list(t.partitions)) for t in req.topic_partitions]
        if req.topic_partitions is not None
        else [(n, list(range(i.partitions))) for n, i in sorted(ctx.topics.all().items())]
    )
    results = []
    for topic, partitions in wanted:
        parts = [
            part_cls(
                partition_id=p,
                error_code=ELECTION_NOT_NEEDED if _exists(ctx, topic, p) else UNKNOWN,
                error_message=None,
            )
            for p in partitions
        ]
        results.append(result_cls(topic=topic, partition_result=parts))
    return resp(throttle_time_ms=0, error_code=0, replica_election_results=results)


def handle_alter_partition_reassignments(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Replicas [this broker]: done at once; others 39; cancelling 85; 31 without ALTER on
    the cluster. v1 echoes ``allow_replication_factor_change``."""
    version = rctx.api_version
    resp = AlterPartitionReassignmentsResponse[version]
    topic_cls = resp.ReassignableTopicResponse
    part_cls = topic_cls.ReassignablePartitionResponse
    allow_rf_change = bool(req.allow_replication_factor_change) if version >= 1 else True
    if not rctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0,
            allow_replication_factor_change=allow_rf_change,
            error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            responses=[],
        )
    node = ctx.config.node_id
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if not _exists(ctx, t.name, p.partition_index):
                code, message = UNKNOWN, None
            elif p.replicas is None:
                code, message = NO_REASSIGNMENT_IN_PROGRESS, "no reassignment in progress"
            elif list(p.replicas) != [node]:
                code, message = _errors.INVALID_REPLICA_ASSIGNMENT, f"the only broker is {node}"
            else:
                code, message = 0, None
            parts.append(
                part_cls(partition_index=p.partition_index, error_code=code, error_message=message)
            )
        responses.append(topic_cls(name=t.name, partitions=parts))
    return resp(
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=0,
        error_message=None,
        responses=responses,
    )


def handle_list_partition_reassignments(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """No reassignment is ever in progress on one node."""
    version = rctx.api_version
    resp = ListPartitionReassignmentsResponse[version]
    if not rctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0,
            error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            topics=[],
        )
    return resp(throttle_time_ms=0, error_code=0, error_message=None, topics=[])
