"""Group membership APIs over ``coordinator.groups.GroupCoordinator``: JoinGroup (11), Heartbeat
(12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16).

Requests and responses are kafka-python's schema classes (Kafka's JSON message schemas).
Members are described with the client id and host of their latest JoinGroup. JoinGroup,
Heartbeat, LeaveGroup and SyncGroup need READ on the group (30 GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.protocol.admin import DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from seglog.broker.apis.group_types import CLASSIC, CONSUMER, SHARE, is_share_group
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.group_migration import join_refusal_warning
from seglog.broker.coordinator.group_model import GroupState, JoinResult
from seglog.broker.protocol.errors import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_AUTHORIZATION_FAILED,
    GROUP_ID_NOT_FOUND,
    INCONSISTENT_GROUP_PROTOCOL,
    NONE,
)
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = [
    "handle_describe_groups",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_list_groups",
    "handle_sync_group",
]

log = logging.getLogger(__name__)


def _denied(rctx: RequestContext, req: Any, response: Any) -> Any:
    """30 GROUP_AUTHORIZATION_FAILED unless the principal may READ the group (membership
    APIs, as Kafka's ``GroupCoordinator`` checks them); None when allowed."""
    if rctx.allowed(Op.READ, Res.GROUP, req.group_id):
        return None
    return response[rctx.api_version](error_code=GROUP_AUTHORIZATION_FAILED)


async def handle_join_group(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """JoinGroup: waits until the group's rebalance completes (or answers at once with
    79 MEMBER_ID_REQUIRED for a v4+ join without a member id, 23 for protocols the group
    does not share, 26 for a session timeout outside the broker's range, 25 for an
    unknown member id). The id of a KIP-848 consumer group with members takes the member
    in as a classic-protocol member, answered at once (``coordinator.classic_members``;
    23 under ``group.consumer.migration.policy=disabled``); the id of a share group is 23
    (Kafka's ``classicGroupJoin``, see ``group_types``)."""
    version = rctx.api_version
    if (denied := _denied(rctx, req, JoinGroupResponse)) is not None:
        return denied
    share = is_share_group(ctx, req.group_id)
    if share or ctx.consumer_groups.has_members(req.group_id):
        if share or ctx.consumer_groups.migration_policy == "disabled":
            if not share:
                join_refusal_warning(req.group_id, ctx.consumer_groups.migration_policy)
            return _join_response(version, JoinResult(INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        return await _join_consumer_group(ctx, rctx, req)
    ctx.consumer_groups.delete(req.group_id)  # an empty consumer group becomes classic
    result = await ctx.groups.join(req.group_id, req.member_id, **_join_args(rctx, req))
    return _join_response(version, result)


def _join_args(rctx: RequestContext, req: Any) -> dict[str, Any]:
    """A JoinGroup's member settings by version, for either coordinator's ``join``."""
    version = rctx.api_version
    return {
        "group_instance_id": req.group_instance_id if version >= 5 else None,
        "client_id": rctx.client_id,
        "client_host": rctx.client_host,
        "session_timeout_ms": req.session_timeout_ms,
        "rebalance_timeout_ms": req.rebalance_timeout_ms if version >= 1 else -1,
        "protocol_type": req.protocol_type,
        "protocols": [(p.name, bytes(p.metadata)) for p in req.protocols],
        "require_known_member_id": version >= 4,
    }


async def _join_consumer_group(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """A classic member joins a consumer group: answered once the group's snapshot is
    durable (15 COORDINATOR_NOT_AVAILABLE, retriable, when it cannot be written)."""
    version = rctx.api_version
    try:
        result, durable = ctx.consumer_groups.classic_join(
            req.group_id, req.member_id, **_join_args(rctx, req)
        )
        if durable is not None:
            await asyncio.wrap_future(durable)
    except (SeglogError, OSError, ValueError) as exc:
        log.error("consumer group %r: cannot store its state: %s", req.group_id, exc)
        result = JoinResult(COORDINATOR_NOT_AVAILABLE, req.member_id)
    return _join_response(version, result)


def _join_response(version: int, result: JoinResult) -> Any:
    member_cls = JoinGroupResponse.JoinGroupResponseMember
    members = [
        member_cls(member_id=mid, group_instance_id=instance, metadata=meta)
        for mid, instance, meta in result.members
    ]
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JoinGroupResponse[version](
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=False,
        member_id=result.member_id,
        members=members,
    )


async def handle_sync_group(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """SyncGroup: the leader's assignments complete the rebalance; followers wait for
    them. 25 unknown member, 22 wrong generation, 27 while the group rebalances."""
    version = rctx.api_version
    if (denied := _denied(rctx, req, SyncGroupResponse)) is not None:
        return denied
    instance = req.group_instance_id if version >= 3 else None
    if req.group_id in ctx.consumer_groups.groups:  # a classic member of a consumer group
        result = ctx.consumer_groups.classic_sync(
            req.group_id,
            req.generation_id,
            req.member_id,
            instance_id=instance,
            protocol_type=req.protocol_type if version >= 5 else None,
            protocol_name=req.protocol_name if version >= 5 else None,
        )
        return SyncGroupResponse[version](
            throttle_time_ms=0,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )
    if ctx.groups.fenced(req.group_id, req.member_id, instance):
        return SyncGroupResponse[version](
            throttle_time_ms=0, error_code=FENCED_INSTANCE_ID, assignment=b""
        )
    result = await ctx.groups.sync(
        req.group_id,
        req.generation_id,
        req.member_id,
        protocol_type=req.protocol_type if version >= 5 else None,
        protocol_name=req.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return SyncGroupResponse[version](
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def handle_heartbeat(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Heartbeat: 0, or 27 REBALANCE_IN_PROGRESS (rejoin), 25, 22."""
    version = rctx.api_version
    if (denied := _denied(rctx, req, HeartbeatResponse)) is not None:
        return denied
    instance = req.group_instance_id if version >= 3 else None
    if req.group_id in ctx.consumer_groups.groups:  # a classic member of a consumer group
        code = ctx.consumer_groups.classic_heartbeat(
            req.group_id, req.generation_id, req.member_id, instance
        )
        return HeartbeatResponse[version](throttle_time_ms=0, error_code=code)
    if ctx.groups.fenced(req.group_id, req.member_id, instance):
        return HeartbeatResponse[version](throttle_time_ms=0, error_code=FENCED_INSTANCE_ID)
    code = ctx.groups.heartbeat(req.group_id, req.generation_id, req.member_id)
    return HeartbeatResponse[version](throttle_time_ms=0, error_code=code)


def handle_leave_group(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """LeaveGroup: v0-2 one member (its error is the top-level error), v3+ a batch of
    members with one error each (25 for an unknown member)."""
    version = rctx.api_version
    if (denied := _denied(rctx, req, LeaveGroupResponse)) is not None:
        return denied
    if req.group_id in ctx.consumer_groups.groups:  # classic members of a consumer group
        return _leave_consumer_group(ctx, version, req)
    if version < 3:
        (code,) = ctx.groups.leave(req.group_id, [req.member_id])
        return LeaveGroupResponse[version](throttle_time_ms=0, error_code=code)
    # v3+: a static member may leave by its group.instance.id (empty member id)
    group = ctx.groups.groups.get(req.group_id)
    static = {} if group is None else group.static_members
    ids = [
        static.get(m.group_instance_id, m.member_id)
        if m.group_instance_id is not None and not m.member_id
        else m.member_id
        for m in req.members
    ]
    codes = [
        FENCED_INSTANCE_ID if ctx.groups.fenced(req.group_id, mid, m.group_instance_id) else None
        for mid, m in zip(ids, req.members, strict=True)
    ]
    left = iter(
        ctx.groups.leave(req.group_id, [i for i, c in zip(ids, codes, strict=True) if c is None])
    )
    codes = [c if c is not None else next(left) for c in codes]
    members = [
        LeaveGroupResponse.MemberResponse(
            member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
        )
        for m, code in zip(req.members, codes, strict=True)
    ]
    return LeaveGroupResponse[version](throttle_time_ms=0, error_code=NONE, members=members)


def _leave_consumer_group(ctx: BrokerContext, version: int, req: Any) -> Any:
    """LeaveGroup for a consumer group: its classic members leave (the snapshot is written
    without the answer waiting for it, as for a classic group's LeaveGroup)."""
    if version < 3:
        (code,), _ = ctx.consumer_groups.classic_leave(req.group_id, [(req.member_id, None)])
        return LeaveGroupResponse[version](throttle_time_ms=0, error_code=code)
    codes, _ = ctx.consumer_groups.classic_leave(
        req.group_id, [(m.member_id, m.group_instance_id) for m in req.members]
    )
    members = [
        LeaveGroupResponse.MemberResponse(
            member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code
        )
        for m, code in zip(req.members, codes, strict=True)
    ]
    return LeaveGroupResponse[version](throttle_time_ms=0, error_code=NONE, members=members)


def _not_found(group_id: str) -> str:
    """Kafka's message for a group that does not exist (DescribeGroups v6+)."""
    return f"Group {group_id} not found."


def _describe(ctx: BrokerContext, rctx: RequestContext, group_id: str) -> Any:
    described = DescribeGroupsResponse.DescribedGroup
    member_cls = described.DescribedGroupMember
    if not rctx.allowed(Op.DESCRIBE, Res.GROUP, group_id):
        return described(
            error_code=GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
            protocol_type="", protocol_data="", members=[],
        )  # fmt: skip
    group = ctx.groups.groups.get(group_id)
    if group is None:
        # a group known only by its committed offsets is Empty; any other does not exist
        # as a classic group: Dead, with 69 GROUP_ID_NOT_FOUND from v6 (Kafka 4.x's
        # GroupMetadataManager; a KIP-848 consumer group or a share group is "not a
        # classic group")
        other = group_id in ctx.consumer_groups.groups or is_share_group(ctx, group_id)
        if ctx.committed.partitions(group_id) and not other:
            state, code, message = GroupState.EMPTY, NONE, None
        elif rctx.api_version >= 6:
            message = f"Group {group_id} is not a classic group." if other else None
            state, code = GroupState.DEAD, GROUP_ID_NOT_FOUND
            message = message or _not_found(group_id)
        else:
            state, code, message = GroupState.DEAD, NONE, None
        return described(
            error_code=code,
            error_message=message,
            group_id=group_id,
            group_state=state.value,
            protocol_type="",
            protocol_data="",
            members=[],
        )
    stable = group.state is GroupState.STABLE
    members = [
        member_cls(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata(group.protocol_name) if stable else b"",
            member_assignment=m.assignment if stable else b"",
        )
        for m in group.members.values()
    ]
    return described(
        error_code=NONE,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def handle_describe_groups(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """DescribeGroups v0-6: state, protocol and members (metadata and assignment only while
    Stable, as Kafka). A group that does not exist as a classic group (unknown, a KIP-848
    consumer group, described by ConsumerGroupDescribe, or a share group, described by
    ShareGroupDescribe) is described as Dead: with no
    error up to v5, with 69 GROUP_ID_NOT_FOUND and an ``error_message`` from v6 (KIP-1043,
    Kafka 4.x's ``GroupMetadataManager.describeGroups``: "Group G not found." / "Group G
    is not a classic group."); a group known only by committed offsets is Empty. 30
    GROUP_AUTHORIZATION_FAILED (no message) without DESCRIBE on the group."""
    version = rctx.api_version
    groups = [_describe(ctx, rctx, g) for g in req.groups]
    return DescribeGroupsResponse[version](throttle_time_ms=0, groups=groups)


def handle_list_groups(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ListGroups: groups with members, plus groups known only by committed offsets
    (Empty, protocol type ""), KIP-848 consumer groups (protocol type "consumer", group
    type "consumer", Kafka's ``ConsumerGroupState`` names) and share groups (protocol
    type "share", group type "share", state Empty or Stable: Kafka's ``ShareGroupState``;
    a deleted one is gone, never listed Dead); every version lists all three kinds, as
    Kafka 4.x does; v4 filters by state, v5 by type ("classic", "consumer" or "share"),
    both case-insensitive."""
    version = rctx.api_version
    empty = ("", GroupState.EMPTY.value, CLASSIC)
    rows: dict[str, tuple[str, str, str]] = dict.fromkeys(ctx.committed.groups(), empty)
    for g in ctx.groups.groups.values():
        rows[g.group_id] = (g.protocol_type or "", g.state.value, CLASSIC)
    for cg in ctx.consumer_groups.groups.values():
        rows[cg.group_id] = (CONSUMER, cg.state().value, CONSUMER)
    for gid in ctx.share_groups.group_ids():
        share = ctx.share_groups.group(gid)
        if share is not None:
            rows[gid] = (SHARE, share.state, SHARE)
    states = {s.lower() for s in req.states_filter} if version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if version >= 5 else set()
    listed = ListGroupsResponse.ListedGroup
    groups = [
        listed(group_id=gid, protocol_type=ptype, group_state=state, group_type=gtype)
        for gid, (ptype, state, gtype) in sorted(rows.items())
        if (not states or state.lower() in states)
        and (not types or gtype in types)
        and rctx.allowed(Op.DESCRIBE, Res.GROUP, gid)  # the others are hidden
    ]
    return ListGroupsResponse[version](throttle_time_ms=0, error_code=NONE, groups=groups)
