"""Share-group membership and administration (KIP-932): ShareGroupHeartbeat (76) v1,
ShareGroupDescribe (77) v1, DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91)
and DeleteShareGroupOffsets (92) v0.

ACLs (Kafka's): heartbeat needs READ on the group (30 GROUP_AUTHORIZATION_FAILED);
describe DESCRIBE on the group; describe-offsets DESCRIBE on the group and, per topic, on
the topic (29); alter-offsets READ on the group and the topics; delete-offsets DELETE on
the group and READ on the topics. Errors: 69 GROUP_ID_NOT_FOUND for a group with neither
members nor stored state (describe, describe-offsets, delete-offsets: "Group G not found.")
and, in all five APIs, for the id of a KIP-848 consumer group or of a classic group with
members or committed offsets ("Group G is not a share group.", Kafka's
``GroupMetadataManager``; see ``group_types``), 68 NON_EMPTY_GROUP when
altering or deleting the offsets of a group with members, 3 UNKNOWN_TOPIC_OR_PARTITION,
1 OFFSET_OUT_OF_RANGE for a start offset outside [log start, log end]; the heartbeat's
are listed in ``coordinator/share_groups.py``. A share-partition start offset of -1 means
the group has no state for the partition (it never fetched from it).
"""

from __future__ import annotations

import uuid
from typing import Any

from seglog.broker.apis.group_types import held_by_non_share
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.messages.share_group import (
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
)
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = [
    "handle_alter_share_group_offsets",
    "handle_delete_share_group_offsets",
    "handle_describe_share_group_offsets",
    "handle_share_group_describe",
    "handle_share_group_heartbeat",
]

_ZERO = uuid.UUID(int=0)
_HbAssignment = ShareGroupHeartbeatResponse.Assignment
_Group = ShareGroupDescribeResponse.DescribedGroup
_Member = _Group.Member
_DoGroup = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
_DoTopic = _DoGroup.DescribeShareGroupOffsetsResponseTopic
_DoPart = _DoTopic.DescribeShareGroupOffsetsResponsePartition
_AlTopic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
_AlPart = _AlTopic.AlterShareGroupOffsetsResponsePartition
_DelTopic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


def _topic_id(ctx: BrokerContext, name: str) -> uuid.UUID:
    info = ctx.topics.get(name)
    return _ZERO if info is None else info.topic_id


def handle_share_group_heartbeat(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ShareGroupHeartbeat v1: join (epoch 0), heartbeat, leave (-1); the assignment comes
    with the answer when it changed (topic ids and partitions). The id of a classic group
    with members or committed offsets, or of a KIP-848 consumer group, is 69
    GROUP_ID_NOT_FOUND "Group G is not a share group." (Kafka's
    ``getOrMaybeCreateShareGroup``; see ``group_types``)."""
    resp = ShareGroupHeartbeatResponse[rctx.api_version]
    interval = ctx.share_groups.heartbeat_interval_ms
    if not rctx.allowed(Op.READ, Res.GROUP, req.group_id):
        return resp(
            throttle_time_ms=0, error_code=_errors.GROUP_AUTHORIZATION_FAILED,
            member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None,
        )  # fmt: skip
    if ctx.share_groups.group(req.group_id) is None:
        if held_by_non_share(ctx, req.group_id):
            return resp(
                throttle_time_ms=0, error_code=_errors.GROUP_ID_NOT_FOUND,
                error_message=f"Group {req.group_id} is not a share group.",
                member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None,
            )  # fmt: skip
        if req.member_epoch == 0:
            ctx.groups.groups.pop(req.group_id, None)  # an empty classic group gives way
    res = ctx.share_groups.heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        rack_id=req.rack_id,
        topics=None if req.subscribed_topic_names is None else list(req.subscribed_topic_names),
        client_id=rctx.client_id,
        client_host=rctx.client_host,
    )
    assignment = None
    if res.assignment is not None:
        assignment = _HbAssignment(
            topic_partitions=[
                _HbAssignment.TopicPartitions(topic_id=_topic_id(ctx, t), partitions=sorted(ps))
                for t, ps in sorted(res.assignment.items())
            ]
        )
    return resp(
        throttle_time_ms=0,
        error_code=res.error_code,
        error_message=res.message,
        member_id=res.member_id,
        member_epoch=res.epoch,
        heartbeat_interval_ms=interval if res.error_code == _errors.NONE else 0,
        assignment=assignment,
    )


def handle_share_group_describe(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ShareGroupDescribe v1: state, epochs, assignor ``simple`` and members with their
    subscriptions and assignments; 69 GROUP_ID_NOT_FOUND "Group G not found." or, for a
    classic or consumer group, "Group G is not a share group." (Kafka's messages)."""
    groups = []
    for gid in req.group_ids:
        base = {"group_id": gid, "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                "assignor_name": "", "members": []}  # fmt: skip
        if not rctx.allowed(Op.DESCRIBE, Res.GROUP, gid):
            groups.append(_Group(error_code=_errors.GROUP_AUTHORIZATION_FAILED, **base))
            continue
        group = ctx.share_groups.group(gid)
        if group is None:
            other = held_by_non_share(ctx, gid) or gid in ctx.groups.groups
            message = f"Group {gid} is not a share group." if other else f"Group {gid} not found."
            groups.append(
                _Group(error_code=_errors.GROUP_ID_NOT_FOUND, error_message=message, **base)
            )
            continue
        members = [
            _Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.topics),
                assignment=_Member.Assignment(
                    topic_partitions=[
                        _Member.Assignment.TopicPartitions(
                            topic_id=_topic_id(ctx, t), topic_name=t, partitions=sorted(ps)
                        )
                        for t, ps in sorted(m.assignment.items())
                    ]
                ),
            )
            for m in group.members.values()
        ]
        groups.append(
            _Group(
                error_code=_errors.NONE,
                group_id=gid,
                group_state=group.state,
                group_epoch=group.epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name="simple",
                members=members,
            )
        )
    return ShareGroupDescribeResponse[rctx.api_version](throttle_time_ms=0, groups=groups)


def _start_offset(ctx: BrokerContext, group: str, topic: str, partition: int) -> int:
    if not ctx.share_groups.has_state(group, topic, partition):
        return -1
    return ctx.share_groups.share_partition(group, topic, partition).start_offset()


def handle_describe_share_group_offsets(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """DescribeShareGroupOffsets v0: each partition's share-partition start offset (-1:
    no state); null topics: every partition of every topic the group has state in."""
    out = []
    for g in req.groups:
        gid = g.group_id
        code, message = _errors.NONE, None
        topics: list[Any] = []
        if not rctx.allowed(Op.DESCRIBE, Res.GROUP, gid):
            code = _errors.GROUP_AUTHORIZATION_FAILED
        elif ctx.share_groups.group(gid) is None:
            code = _errors.GROUP_ID_NOT_FOUND
            message = _missing(ctx, gid)
        else:
            wanted = (
                [(t.topic_name, list(t.partitions)) for t in g.topics]
                if g.topics is not None
                else _with_state(ctx, gid)
            )
            for name, partitions in wanted:
                parts = []
                for p in partitions:
                    perr, start = _errors.NONE, -1
                    if not rctx.allowed(Op.DESCRIBE, Res.TOPIC, name):
                        perr = _errors.TOPIC_AUTHORIZATION_FAILED
                    else:
                        try:
                            start = _start_offset(ctx, gid, name, p)
                        except (SeglogError, OSError) as exc:
                            perr = _errors.error_code(exc)
                    parts.append(
                        _DoPart(partition_index=p, start_offset=start, leader_epoch=0,
                                error_code=perr, error_message=None)
                    )  # fmt: skip
                topics.append(
                    _DoTopic(topic_name=name, topic_id=_topic_id(ctx, name), partitions=parts)
                )
        out.append(_DoGroup(group_id=gid, topics=topics, error_code=code, error_message=message))
    return DescribeShareGroupOffsetsResponse[rctx.api_version](throttle_time_ms=0, groups=out)


def _with_state(ctx: BrokerContext, group: str) -> list[tuple[str, list[int]]]:
    out = []
    for name, info in sorted(ctx.topics.all().items()):
        parts = [p for p in range(info.partitions) if ctx.share_groups.has_state(group, name, p)]
        if parts:
            out.append((name, parts))
    return out


def _missing(ctx: BrokerContext, gid: str) -> str:
    """Kafka's message for 69 GROUP_ID_NOT_FOUND."""
    if held_by_non_share(ctx, gid):
        return f"Group {gid} is not a share group."
    return f"Group {gid} not found."


def _group_error(ctx: BrokerContext, rctx: RequestContext, gid: str, op: int) -> int:
    if not rctx.allowed(op, Res.GROUP, gid):
        return _errors.GROUP_AUTHORIZATION_FAILED
    group = ctx.share_groups.group(gid)
    if group is None and held_by_non_share(ctx, gid):
        return _errors.GROUP_ID_NOT_FOUND  # a classic or consumer group
    if group is not None and group.members:
        return _errors.NON_EMPTY_GROUP
    return _errors.NONE


def handle_alter_share_group_offsets(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """AlterShareGroupOffsets v0: each partition's share state starts afresh at the given
    offset (its in-flight records forgotten). The group must be empty."""
    code = _group_error(ctx, rctx, req.group_id, Op.READ)
    topics = []
    if code == _errors.NONE:
        for t in req.topics:
            parts = []
            for p in t.partitions:
                perr = _errors.NONE
                if not rctx.allowed(Op.READ, Res.TOPIC, t.topic_name):
                    perr = _errors.TOPIC_AUTHORIZATION_FAILED
                else:
                    try:
                        ctx.share_groups.reset_partition(
                            req.group_id, t.topic_name, p.partition_index, p.start_offset
                        )
                    except (SeglogError, OSError) as exc:
                        perr = _errors.error_code(exc)
                parts.append(
                    _AlPart(partition_index=p.partition_index, error_code=perr, error_message=None)
                )
            topics.append(
                _AlTopic(
                    topic_name=t.topic_name, topic_id=_topic_id(ctx, t.topic_name), partitions=parts
                )
            )
    return AlterShareGroupOffsetsResponse[rctx.api_version](
        throttle_time_ms=0,
        error_code=code,
        responses=topics,
        error_message=_missing(ctx, req.group_id) if code == _errors.GROUP_ID_NOT_FOUND else None,
    )


def handle_delete_share_group_offsets(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """DeleteShareGroupOffsets v0: the group's share state of every partition of each
    topic is removed (the next fetch starts per ``share.auto.offset.reset``). The group
    must be empty and known."""
    code = _group_error(ctx, rctx, req.group_id, Op.DELETE)
    if code == _errors.NONE and ctx.share_groups.group(req.group_id) is None:
        code = _errors.GROUP_ID_NOT_FOUND
    topics = []
    if code == _errors.NONE:
        for t in req.topics:
            terr = _errors.NONE
            info = ctx.topics.get(t.topic_name)
            if not rctx.allowed(Op.READ, Res.TOPIC, t.topic_name):
                terr = _errors.TOPIC_AUTHORIZATION_FAILED
            elif info is None:
                terr = _errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    for p in range(info.partitions):
                        ctx.share_groups.reset_partition(req.group_id, t.topic_name, p, None)
                except (SeglogError, OSError) as exc:
                    terr = _errors.error_code(exc)
            topics.append(
                _DelTopic(topic_name=t.topic_name, topic_id=_topic_id(ctx, t.topic_name),
                          error_code=terr, error_message=None)
            )  # fmt: skip
    return DeleteShareGroupOffsetsResponse[rctx.api_version](
        throttle_time_ms=0,
        error_code=code,
        responses=topics,
        error_message=_missing(ctx, req.group_id) if code == _errors.GROUP_ID_NOT_FOUND else None,
    )
