"""DescribeCluster (API 60) and DescribeLogDirs (API 35), answered as a one-node cluster
with one log directory answers them.

DescribeLogDirs reports each partition's size in bytes (its segment files) and the
directory's total and usable bytes (``statvfs``); offset lag is 0 (no future replica).
DescribeCluster lists this broker as the only broker and controller; asking for
controllers (endpoint type 2) is 119 UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker.
Without an authorizer every cluster operation is allowed: the authorized-operations
bitfield names them all (Kafka's AclOperation codes).
"""

from __future__ import annotations

import os
from typing import Any

from kafka.protocol.admin import DescribeClusterResponse, DescribeLogDirsResponse

from seglog.broker import _errors
from seglog.broker._authorizer import CLUSTER_NAME, Op, Res
from seglog.broker._context import BrokerContext
from seglog.errors import SeglogError

__all__ = ["handle_describe_cluster", "handle_describe_log_dirs"]

UNSUPPORTED_ENDPOINT_TYPE = 119
# CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12: the operations a cluster resource has in Kafka (kafka-python encodes
# the set as the bitfield; left out, the field keeps Kafka's "not requested" default)
_CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}


def handle_describe_cluster(ctx: BrokerContext, req: Any, version: int) -> Any:
    """This broker as the cluster's only broker and its controller."""
    resp = DescribeClusterResponse[version]
    if not ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return resp(
            throttle_time_ms=0, error_code=_errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None, cluster_id=ctx.state.cluster_id, controller_id=-1, brokers=[],
        )  # fmt: skip
    endpoint_type = getattr(req, "endpoint_type", 1) if version >= 1 else 1
    if endpoint_type != 1:
        return resp(
            throttle_time_ms=0,
            error_code=UNSUPPORTED_ENDPOINT_TYPE,
            error_message="this listener serves brokers, not controllers",
            endpoint_type=endpoint_type,
            cluster_id=ctx.state.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    broker = DescribeClusterResponse.DescribeClusterBroker(
        broker_id=ctx.config.node_id, host=ctx.host, port=ctx.port, rack=None, is_fenced=False
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


def handle_describe_log_dirs(ctx: BrokerContext, req: Any, version: int) -> Any:
    """The data directory with the size of each asked partition (all when ``topics`` is
    null); unknown topics and partitions are left out, as Kafka does."""
    result_cls = DescribeLogDirsResponse.DescribeLogDirsResult
    topic_cls = result_cls.DescribeLogDirsTopic
    part_cls = topic_cls.DescribeLogDirsPartition
    if not ctx.allowed(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return DescribeLogDirsResponse[version](
            throttle_time_ms=0, error_code=_errors.CLUSTER_AUTHORIZATION_FAILED, results=[]
        )
    all_topics = ctx.topics.all()
    if req.topics is None:
        wanted = [(name, list(range(info.partitions))) for name, info in sorted(all_topics.items())]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in req.topics]
    topics = []
    for name, partitions in wanted:
        info = all_topics.get(name)
        if info is None:
            continue
        parts = []
        for p in partitions:
            if not 0 <= p < info.partitions:
                continue
            try:
                size = ctx.topics.log(name, p).stat()["bytes"]
            except SeglogError:
                continue
            parts.append(
                part_cls(partition_index=p, partition_size=size, offset_lag=0, is_future_key=False)
            )
        topics.append(topic_cls(name=name, partitions=parts))
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
    return DescribeLogDirsResponse[version](throttle_time_ms=0, error_code=0, results=[result])
