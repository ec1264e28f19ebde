"""DescribeCluster (API 60), DescribeLogDirs (API 35), AlterReplicaLogDirs (API 34) and
DescribeQuorum (API 55), answered as a one-node cluster with one log directory answers
them.

AlterReplicaLogDirs (v1-2) can only "move" a replica to the directory it is in: as
Kafka's ``ReplicaManager.alterReplicaLogDirs``, a path that is not a log directory of this
broker (the data directory's absolute path) is 57 LOG_DIR_NOT_FOUND for each of its
partitions, checked first; the current directory is a no-op answered 0; a partition that
does not exist is 3 UNKNOWN_TOPIC_OR_PARTITION; without ALTER on the cluster every
partition is 31 CLUSTER_AUTHORIZATION_FAILED. A partition named twice takes its last
directory (Kafka reads the request into a map).

DescribeLogDirs reports each partition's size in bytes (its segment files) and the
directory's total and usable bytes (``statvfs``); offset lag is 0 (no future replica).
Tiered partitions (KIP-405) are listed a second time under a second result whose
``log_dir`` is the remote store's URL, with the bytes of their remote segments (total and
usable bytes -1: unknown for an object store).
DescribeCluster lists this broker as the only broker and controller; asking for
controllers (endpoint type 2) is 115 UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker.
Without an authorizer every cluster operation is allowed: the authorized-operations
bitfield names them all (Kafka's AclOperation codes).

DescribeQuorum describes ``__cluster_metadata`` partition 0 as a one-node KRaft cluster
(a single combined broker and controller, static voters) does: this node is the only
voter and the leader, no observers. Its leader epoch and high watermark are
:class:`BrokerState`'s ``quorum_epoch`` (one election per start) and
``metadata_end_offset`` (seglog keeps no metadata log; it counts the records one would
hold: a leader change per start, one per topic creation, deletion, partition growth or
config change). The voter's directory id is the zero UUID (static quorum, as Kafka
reports it without KIP-853); its fetch and caught-up timestamps are now (the leader's
own); ``nodes`` (v2) gives the listener asked.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from kafka.protocol.admin import (
    AlterReplicaLogDirsResponse,
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeQuorumResponse,
)

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import CLUSTER_NAME, Op, Res
from seglog.errors import SeglogError

__all__ = [
    "METADATA_TOPIC",
    "handle_alter_replica_log_dirs",
    "handle_describe_cluster",
    "handle_describe_log_dirs",
    "handle_describe_quorum",
]

METADATA_TOPIC = "__cluster_metadata"  # KRaft's metadata log: partition 0

# CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12: the operations a cluster resource has in Kafka (kafka-python encodes
# the set as the bitfield; left out, the field keeps Kafka's "not requested" default)
_CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}


def handle_describe_cluster(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """This broker as the cluster's only broker and its controller."""
    version = rctx.api_version
    resp = DescribeClusterResponse[version]
    if not rctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0, error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None, cluster_id=ctx.state.cluster_id, controller_id=-1, brokers=[],
        )  # fmt: skip
    endpoint_type = getattr(req, "endpoint_type", 1) if version >= 1 else 1
    if endpoint_type != 1:
        return resp(
            throttle_time_ms=0,
            error_code=_errors.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="this listener serves brokers, not controllers",
            endpoint_type=endpoint_type,
            cluster_id=ctx.state.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    broker = DescribeClusterResponse.DescribeClusterBroker(
        broker_id=ctx.config.node_id, host=rctx.host, port=rctx.port, rack=None, is_fenced=False
    )
    extra: dict[str, Any] = {}
    if req.include_cluster_authorized_operations:
        extra["authorized_operations"] = set(_CLUSTER_OPERATIONS)
    return resp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.state.cluster_id,
        controller_id=ctx.config.node_id,
        brokers=[broker],
        **extra,
    )


def handle_describe_log_dirs(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """The data directory with the size of each asked partition (all when ``topics`` is
    null); unknown topics and partitions are left out, as Kafka does."""
    version = rctx.api_version
    result_cls = DescribeLogDirsResponse.DescribeLogDirsResult
    topic_cls = result_cls.DescribeLogDirsTopic
    part_cls = topic_cls.DescribeLogDirsPartition
    if not rctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return DescribeLogDirsResponse[version](
            throttle_time_ms=0, error_code=_errors.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    all_topics = ctx.topics.all()
    if req.topics is None:
        wanted = [(name, list(range(info.partitions))) for name, info in sorted(all_topics.items())]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in req.topics]
    topics = []
    remote_topics = []
    for name, partitions in wanted:
        info = all_topics.get(name)
        if info is None:
            continue
        parts = []
        remote_parts = []
        for p in partitions:
            if not 0 <= p < info.partitions:
                continue
            try:
                stat = ctx.topics.log(name, p).stat()
            except SeglogError:
                continue
            parts.append(
                part_cls(
                    partition_index=p, partition_size=stat["bytes"], offset_lag=0,
                    is_future_key=False,
                )
            )  # fmt: skip
            if "remote_bytes" in stat:
                remote_parts.append(
                    part_cls(
                        partition_index=p, partition_size=stat["remote_bytes"], offset_lag=0,
                        is_future_key=False,
                    )
                )  # fmt: skip
        topics.append(topic_cls(name=name, partitions=parts))
        if remote_parts:
            remote_topics.append(topic_cls(name=name, partitions=remote_parts))
    total = usable = -1
    try:
        fs = os.statvfs(ctx.config.data_dir)
        total, usable = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
    except OSError:
        pass
    result = result_cls(
        error_code=_errors.NONE,
        log_dir=str(ctx.config.data_dir.resolve()),
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )
    results = [result]
    remote = ctx.config.remote_storage_url
    if remote_topics and remote:
        results.append(
            result_cls(
                error_code=_errors.NONE,
                log_dir=remote,
                topics=remote_topics,
                total_bytes=-1,
                usable_bytes=-1,
                is_cordoned=False,
            )
        )
    return DescribeLogDirsResponse[version](throttle_time_ms=0, error_code=0, results=results)


def handle_describe_quorum(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """The metadata quorum: ``__cluster_metadata``-0 led by this node, its only voter.

    Errors (top level, no topics), as Kafka's: 31 CLUSTER_AUTHORIZATION_FAILED without
    DESCRIBE on the cluster; 42 INVALID_REQUEST unless the request names exactly that
    topic and partition."""
    version = rctx.api_version
    resp = DescribeQuorumResponse[version]
    if not rctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            topics=[],
            nodes=[],
        )
    topics = req.topics or []
    if not (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and [p.partition_index for p in topics[0].partitions] == [0]
    ):
        return resp(
            error_code=_errors.INVALID_REQUEST,
            error_message=f"only {METADATA_TOPIC} partition 0 has a quorum",
            topics=[],
            nodes=[],
        )
    node = ctx.config.node_id
    end = ctx.state.metadata_end_offset
    now_ms = int(time.time() * 1000)
    partition_cls = DescribeQuorumResponse.TopicData.PartitionData
    voter = partition_cls.ReplicaState(
        replica_id=node,
        replica_directory_id=uuid.UUID(int=0),
        log_end_offset=end,
        last_fetch_timestamp=now_ms,
        last_caught_up_timestamp=now_ms,
    )
    partition = partition_cls(
        partition_index=0,
        error_code=_errors.NONE,
        error_message=None,
        leader_id=node,
        leader_epoch=ctx.state.quorum_epoch,
        high_watermark=end,
        current_voters=[voter],
        observers=[],
    )
    listener = DescribeQuorumResponse.Node.Listener(
        name=rctx.listener, host=rctx.host, port=rctx.port
    )
    return resp(
        error_code=_errors.NONE,
        error_message=None,
        topics=[
            DescribeQuorumResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])
        ],
        nodes=[DescribeQuorumResponse.Node(node_id=node, listeners=[listener])],
    )


def _log_dirs(ctx: BrokerContext) -> set[str]:
    """This broker's one log directory, as its absolute path (as configured, and resolved:
    DescribeLogDirs reports the resolved one)."""
    data_dir = ctx.config.data_dir
    return {str(data_dir.absolute()), str(data_dir.resolve())}


def handle_alter_replica_log_dirs(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Per partition: 0 when the path is this broker's data directory (its replica is
    there already), 57 for any other path, 3 for an unknown partition, 31 without ALTER
    on the cluster. Results are grouped by topic, in the order the request names them."""
    version = rctx.api_version
    resp = AlterReplicaLogDirsResponse[version]
    topic_cls = resp.AlterReplicaLogDirTopicResult
    part_cls = topic_cls.AlterReplicaLogDirPartitionResult
    destinations: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                destinations[(t.name, p)] = d.path  # the last directory named wins
    allowed = rctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME)
    log_dirs = _log_dirs(ctx)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), path in destinations.items():
        info = ctx.topics.get(topic)
        if not allowed:
            code = _errors.CLUSTER_AUTHORIZATION_FAILED
        elif path not in log_dirs:
            code = _errors.LOG_DIR_NOT_FOUND
        elif info is None or not 0 <= partition < info.partitions:
            code = _errors.UNKNOWN_TOPIC_OR_PARTITION
        else:
            code = _errors.NONE
        by_topic.setdefault(topic, []).append(part_cls(partition_index=partition, error_code=code))
    results = [topic_cls(topic_name=name, partitions=parts) for name, parts in by_topic.items()]
    return resp(throttle_time_ms=0, results=results)
