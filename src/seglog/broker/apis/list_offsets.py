"""ListOffsets (API 2): the offset of a timestamp, the log start, the log end (high
watermark) or the batch with the largest timestamp of each partition."""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.consumer import ListOffsetsResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = ["handle_list_offsets"]

log = logging.getLogger(__name__)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5

log = logging.getLogger(__name__)

_LOTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_LOPartition = _LOTopic.ListOffsetsPartitionResponse


def _list_offset(  # noqa: PLR0917 (one partition's question)
    ctx: BrokerContext,
    rctx: RequestContext,
    topic: str,
    partition: int,
    timestamp: int,
    read_committed: bool,
) -> Any:
    if not rctx.allowed(Op.DESCRIBE, Res.TOPIC, topic):
        return _LOPartition(
            partition_index=partition,
            error_code=_errors.TOPIC_AUTHORIZATION_FAILED,
            timestamp=-1,
            offset=-1,
            leader_epoch=-1,
        )
    try:
        plog = ctx.topics.log(topic, partition)
        offset, ts = -1, -1
        upper = plog.high_watermark
        if read_committed:
            upper = min(plog.last_stable_offset, upper)
        if timestamp == LATEST:
            offset = upper
        elif timestamp == EARLIEST:  # on a tiered log: the remote log start (KIP-405)
            offset = plog.log_start_offset
        elif timestamp == EARLIEST_LOCAL:  # KIP-1005: the first offset on local disk
            offset = plog.local_log_start_offset
        elif timestamp == LATEST_TIERED:  # KIP-1005: the last offset in remote storage
            tier = plog.remote_tier
            end = tier.manifest.end_offset if tier is not None else 0
            offset = end - 1 if tier is not None and tier.manifest.segments else -1
        elif timestamp >= 0:
            found = plog.offset_for_time(timestamp)
            if found is not None and found[0] < upper:
                offset, ts = found
        # MAX_TIMESTAMP and other sentinels: no answer (-1, -1), as for a time past the end
        return _LOPartition(
            partition_index=partition, error_code=0, timestamp=ts, offset=offset, leader_epoch=0
        )
    except SeglogError as exc:
        return _LOPartition(
            partition_index=partition,
            error_code=_errors.error_code(exc),
            timestamp=-1,
            offset=-1,
            leader_epoch=-1,
        )


def handle_list_offsets(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Offsets by time: -2 earliest (log start offset; the remote one when tiered), -4
    earliest local and -5 latest tiered (KIP-1005: the first offset on local disk, the
    last one in remote storage, -1 when none), -1 latest (the high watermark, or with
    isolation level 1, READ_COMMITTED, the last stable offset), t >= 0 the first batch
    below that bound whose max timestamp >= t (offset, timestamp) or (-1, -1) when none;
    -3 max timestamp is not tracked and answers (-1, -1). Unknown topic or partition: 3."""
    version = rctx.api_version
    read_committed = version >= 2 and req.isolation_level == 1
    topics = [
        _LOTopic(
            name=t.name,
            partitions=[
                _list_offset(ctx, rctx, t.name, p.partition_index, p.timestamp, read_committed)
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    return ListOffsetsResponse[version](throttle_time_ms=0, topics=topics)
