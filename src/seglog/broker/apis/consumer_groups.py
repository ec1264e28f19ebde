"""KIP-848 consumer group APIs over ``coordinator.consumer_groups``: ConsumerGroupHeartbeat
(68, v0-1) and ConsumerGroupDescribe (69, v0-1; v1 adds each member's type, KIP-1099).

ACLs as Kafka's ``KafkaApis``: the heartbeat needs READ on the group (30
GROUP_AUTHORIZATION_FAILED) and a regex subscription matches only topics the principal
may DESCRIBE; ConsumerGroupDescribe needs DESCRIBE on each group. Partitions travel by
topic id (the topic manager maps them to names). A heartbeat that changed the group is
answered once the group's snapshot in ``__consumer_offsets`` is durable (15
COORDINATOR_NOT_AVAILABLE, retriable, when it cannot be written).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any

from seglog.broker.apis.group_types import is_share_group
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.consumer_group_model import (
    TP,
    ConsumerGroup,
    HeartbeatRequest,
    HeartbeatResult,
)
from seglog.broker.protocol.errors import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_AUTHORIZATION_FAILED,
    GROUP_ID_NOT_FOUND,
    NONE,
)
from seglog.broker.protocol.messages.consumer_group import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import LogClosedError, SeglogError

__all__ = ["handle_consumer_group_describe", "handle_consumer_group_heartbeat"]

log = logging.getLogger(__name__)

_HBResponse: Any = ConsumerGroupHeartbeatResponse  # indexed by version: [v]
_DescribeResponse: Any = ConsumerGroupDescribeResponse
_HBTopic = _HBResponse.Assignment.TopicPartitions
_Described = _DescribeResponse.DescribedGroup
_DMember = _Described.Member
_DAssignment = _DMember.Assignment
_DTopic = _DAssignment.TopicPartitions


def _by_topic(ctx: BrokerContext, tps: frozenset[TP]) -> list[tuple[Any, str, list[int]]]:
    """(topic id, name, sorted partitions) per topic that still exists."""
    topics: dict[str, list[int]] = {}
    for topic, partition in tps:
        topics.setdefault(topic, []).append(partition)
    out = []
    for name, parts in sorted(topics.items()):
        info = ctx.topics.get(name)
        if info is not None:
            out.append((info.topic_id, name, sorted(parts)))
    return out


def _heartbeat_body(ctx: BrokerContext, version: int, result: HeartbeatResult) -> Any:
    assignment = None
    if result.error == NONE and result.assignment is not None:
        assignment = _HBResponse.Assignment(
            topic_partitions=[
                _HBTopic(topic_id=tid, partitions=parts)
                for tid, _name, parts in _by_topic(ctx, result.assignment)
            ]
        )
    return _HBResponse[version](
        throttle_time_ms=0,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=(
            ctx.consumer_groups.heartbeat_interval_ms
            if result.heartbeat_interval_ms is None
            else result.heartbeat_interval_ms
        ),
        assignment=assignment,
    )


def handle_consumer_group_heartbeat(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ConsumerGroupHeartbeat: join (epoch 0), heartbeat, leave (-1, static -2); the
    error codes are the coordinator's (``ConsumerGroupCoordinator.heartbeat``), and 69
    GROUP_ID_NOT_FOUND "Group G is not a consumer group." for the id of a share group
    (Kafka's ``getOrMaybeCreateConsumerGroup``; see ``group_types``)."""
    version = rctx.api_version
    if not rctx.allowed(Op.READ, Res.GROUP, req.group_id):
        return _heartbeat_body(ctx, version, HeartbeatResult(GROUP_AUTHORIZATION_FAILED))
    if req.group_id not in ctx.consumer_groups.groups and is_share_group(ctx, req.group_id):
        not_consumer = f"Group {req.group_id} is not a consumer group."
        return _heartbeat_body(ctx, version, HeartbeatResult(GROUP_ID_NOT_FOUND, not_consumer))
    owned = None
    if req.topic_partitions is not None:
        owned = tuple((tp.topic_id, tuple(tp.partitions)) for tp in req.topic_partitions)
    names = req.subscribed_topic_names
    request = HeartbeatRequest(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_names=None if names is None else tuple(names),
        subscribed_regex=req.subscribed_topic_regex if version >= 1 else None,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=rctx.client_id,
        client_host=rctx.client_host,
        version=version,
        may_describe=lambda topic: rctx.allowed(Op.DESCRIBE, Res.TOPIC, topic),
    )
    try:
        result = ctx.consumer_groups.heartbeat(request)
    except (SeglogError, OSError, ValueError) as exc:
        log.error("consumer group %r: cannot store its state: %s", req.group_id, exc)
        return _heartbeat_body(ctx, version, HeartbeatResult(COORDINATOR_NOT_AVAILABLE))
    if result.durable is None:
        return _heartbeat_body(ctx, version, result)
    return _when_durable(ctx, version, result, result.durable)


async def _when_durable(
    ctx: BrokerContext, version: int, result: HeartbeatResult, durable: Future[int]
) -> Any:
    try:
        await asyncio.wrap_future(durable)
    except LogClosedError as exc:
        log.error("consumer group state not durable: %s", exc)
        return _heartbeat_body(ctx, version, HeartbeatResult(COORDINATOR_NOT_AVAILABLE))
    return _heartbeat_body(ctx, version, result)


def _assignment(ctx: BrokerContext, tps: frozenset[TP]) -> Any:
    return _DAssignment(
        topic_partitions=[
            _DTopic(topic_id=tid, topic_name=name, partitions=parts)
            for tid, name, parts in _by_topic(ctx, tps)
        ]
    )


def _described(ctx: BrokerContext, group: ConsumerGroup) -> Any:
    members = [
        _DMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_names),
            subscribed_topic_regex=m.subscribed_regex,
            assignment=_assignment(ctx, m.assigned),
            target_assignment=_assignment(ctx, group.target.get(m.member_id, frozenset())),
            member_type=ctx.consumer_groups.member_type(m),  # v1+ (KIP-1099)
        )
        for m in group.members.values()
    ]
    return _Described(
        error_code=NONE,
        group_id=group.group_id,
        group_state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor or ctx.consumer_groups.assignors[0],
        members=members,
    )


def _error(group_id: str, code: int, message: str | None) -> Any:
    return _Described(
        error_code=code,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=[],
    )


def handle_consumer_group_describe(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ConsumerGroupDescribe: each group's state, epochs, assignor and members with their
    current and target assignments, from v1 each member's type (KIP-1099: 0 classic, 1
    consumer). 30 without DESCRIBE on the group;
    69 GROUP_ID_NOT_FOUND for an unknown group or one that is not a consumer group (a
    classic one: clients then ask DescribeGroups; a share group), as Kafka."""
    groups = []
    for group_id in req.group_ids:
        group = ctx.consumer_groups.groups.get(group_id)
        if not rctx.allowed(Op.DESCRIBE, Res.GROUP, group_id):
            groups.append(_error(group_id, GROUP_AUTHORIZATION_FAILED, None))
        elif group is not None:
            groups.append(_described(ctx, group))
        elif (
            group_id in ctx.groups.groups
            or ctx.committed.partitions(group_id)
            or is_share_group(ctx, group_id)
        ):
            groups.append(
                _error(group_id, GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            )
        else:
            groups.append(_error(group_id, GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
    return _DescribeResponse[rctx.api_version](throttle_time_ms=0, groups=groups)
