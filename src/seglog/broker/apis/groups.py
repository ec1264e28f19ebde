"""Group membership APIs over ``_groups.GroupCoordinator``: JoinGroup (11), Heartbeat
(12), LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16).

Requests and responses are kafka-python's schema classes (Kafka's JSON message schemas).
Each handler takes ``(ctx, request, version, client_id, client_host)``: members are
described with the client id and host of their latest JoinGroup.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from seglog.broker.context import BrokerContext
from seglog.broker.coordinator.group_model import GroupState
from seglog.broker.protocol.errors import FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED, NONE
from seglog.broker.security.authorizer import Op, Res

__all__ = [
    "GROUP_HANDLERS",
    "handle_describe_groups",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_list_groups",
    "handle_sync_group",
]

CLASSIC = "classic"


async def handle_join_group(
    ctx: BrokerContext, req: Any, version: int, client_id: str, client_host: str
) -> Any:
    """JoinGroup: waits until the group's rebalance completes (or answers at once with
    79 MEMBER_ID_REQUIRED for a v4+ join without a member id, 23 for protocols the group
    does not share, 26 for a session timeout outside the broker's range, 25 for an
    unknown member id)."""
    result = await ctx.groups.join(
        req.group_id,
        req.member_id,
        group_instance_id=req.group_instance_id if version >= 5 else None,
        client_id=client_id,
        client_host=client_host,
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else -1,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=version >= 4,
    )
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


async def handle_sync_group(
    ctx: BrokerContext, req: Any, version: int, client_id: str, client_host: str
) -> Any:
    """SyncGroup: the leader's assignments complete the rebalance; followers wait for
    them. 25 unknown member, 22 wrong generation, 27 while the group rebalances."""
    del client_id, client_host
    instance = req.group_instance_id if version >= 3 else None
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


def handle_heartbeat(
    ctx: BrokerContext, req: Any, version: int, client_id: str, client_host: str
) -> Any:
    """Heartbeat: 0, or 27 REBALANCE_IN_PROGRESS (rejoin), 25, 22."""
    del client_id, client_host
    instance = req.group_instance_id if version >= 3 else None
    if ctx.groups.fenced(req.group_id, req.member_id, instance):
        return HeartbeatResponse[version](throttle_time_ms=0, error_code=FENCED_INSTANCE_ID)
    code = ctx.groups.heartbeat(req.group_id, req.generation_id, req.member_id)
    return HeartbeatResponse[version](throttle_time_ms=0, error_code=code)


def handle_leave_group(
    ctx: BrokerContext, req: Any, version: int, client_id: str, client_host: str
) -> Any:
    """LeaveGroup: v0-2 one member (its error is the top-level error), v3+ a batch of
    members with one error each (25 for an unknown member)."""
    del client_id, client_host
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


def _describe(ctx: BrokerContext, group_id: str) -> Any:
    described = DescribeGroupsResponse.DescribedGroup
    member_cls = described.DescribedGroupMember
    if not ctx.allowed(Op.DESCRIBE, Res.GROUP, group_id):
        return described(
            error_code=GROUP_AUTHORIZATION_FAILED, group_id=group_id, group_state="",
            protocol_type="", protocol_data="", members=[],
        )  # fmt: skip
    group = ctx.groups.groups.get(group_id)
    if group is None:
        # a group known only by its committed offsets is Empty, any other is Dead
        state = GroupState.EMPTY if ctx.committed.partitions(group_id) else GroupState.DEAD
        return described(
            error_code=NONE,
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


def handle_describe_groups(
    ctx: BrokerContext, req: Any, version: int, client_id: str, client_host: str
) -> Any:
    """DescribeGroups: state, protocol and members (metadata and assignment only while
    Stable, as Kafka); an unknown group is described as Dead with no error."""
    del client_id, client_host
    groups = [_describe(ctx, g) for g in req.groups]
    return DescribeGroupsResponse[version](throttle_time_ms=0, groups=groups)


def handle_list_groups(
    ctx: BrokerContext, req: Any, version: int, client_id: str, client_host: str
) -> Any:
    """ListGroups: groups with members, plus groups known only by committed offsets
    (Empty, protocol type ""); v4 filters by state, v5 by type (all groups are
    "classic"), both case-insensitive."""
    del client_id, client_host
    empty = ("", GroupState.EMPTY.value)
    rows: dict[str, tuple[str, str]] = dict.fromkeys(ctx.committed.groups(), empty)
    for g in ctx.groups.groups.values():
        rows[g.group_id] = (g.protocol_type or "", g.state.value)
    states = {s.lower() for s in req.states_filter} if version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if version >= 5 else set()
    listed = ListGroupsResponse.ListedGroup
    groups = [
        listed(group_id=gid, protocol_type=ptype, group_state=state, group_type=CLASSIC)
        for gid, (ptype, state) in sorted(rows.items())
        if (not states or state.lower() in states)
        and (not types or CLASSIC in types)
        and ctx.allowed(Op.DESCRIBE, Res.GROUP, gid)  # the others are hidden
    ]
    return ListGroupsResponse[version](throttle_time_ms=0, error_code=NONE, groups=groups)


GROUP_HANDLERS = {
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
}
"""API key → handler ``(ctx, request, version, client_id, client_host)``."""
