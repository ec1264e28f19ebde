"""DeleteGroups (API 42) and OffsetDelete (API 47): removing groups and committed offsets.

Kafka's rules: a group with members (classic, KIP-848 or share) is 68 NON_EMPTY_GROUP
(DeleteGroups); a group with neither members nor committed offsets nor share-group state
is 69 GROUP_ID_NOT_FOUND. Deleting an empty share group removes its share-partition state
in every partition and its ``__share_group_state`` record (``ShareGroupCoordinator
.delete``: as Kafka's group coordinator, which has the share coordinator delete the
group's share-partition state before it writes the group's tombstones), so a share group
of that id starts afresh; it is answered once that is durable (15
COORDINATOR_NOT_AVAILABLE when it cannot be written).

OffsetDelete follows Kafka's ``GroupCoordinator.handleDeleteOffsets``
(``ClassicGroup.validateOffsetDelete``): an Empty group (or one known by its committed
offsets only) has the named offsets deleted; a group with members (PreparingRebalance,
CompletingRebalance, Stable) whose protocol type is "consumer" (or a KIP-848 consumer
group with members) refuses, per partition, those of a topic its live members subscribe to
with 86 GROUP_SUBSCRIBED_TO_TOPIC and deletes the others (the subscription is read from
each member's consumer-protocol metadata, Kafka's ``ConsumerProtocolSubscription``); a
group with members and any other protocol type (a Connect group, say) answers the whole
request with 68 NON_EMPTY_GROUP, no partitions listed, and deletes nothing.

That metadata is client-supplied bytes, read with the broker's bounded ``WireReader`` as
Kafka's coordinator reads it: the version, then version 0's fields (topics, user data),
which every later version starts with. Metadata that does not read so (truncated, a length
past the end, a null array or topic, non-UTF-8) leaves the subscription unknown, and then,
as in Kafka (``GroupMetadata.isSubscribedToTopic``), every topic counts as subscribed: the
request gets 86 for each partition and no committed offset is deleted.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse
from kafka.protocol.consumer import OffsetDeleteResponse

from seglog.broker.apis.group_types import is_share_group
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.group_model import Group, GroupState
from seglog.broker.protocol.errors import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_AUTHORIZATION_FAILED,
    GROUP_ID_NOT_FOUND,
    GROUP_SUBSCRIBED_TO_TOPIC,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
)
from seglog.broker.protocol.reader import WireReader
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import ProtocolError, SeglogError

__all__ = ["handle_delete_groups", "handle_offset_delete"]

log = logging.getLogger(__name__)


def _known(ctx: BrokerContext, group_id: str) -> bool:
    return (
        group_id in ctx.groups.groups
        or group_id in ctx.consumer_groups.groups
        or bool(ctx.committed.partitions(group_id))
    )


def handle_delete_groups(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Delete empty groups: their committed offsets, and a share group's state."""
    version = rctx.api_version
    results = []
    for group_id in req.groups_names:
        group = ctx.groups.groups.get(group_id)
        if not group_id:
            code = INVALID_GROUP_ID
        elif not rctx.allowed(Op.DELETE, Res.GROUP, group_id):
            code = GROUP_AUTHORIZATION_FAILED
        elif (
            (group is not None and (group.members or group.pending))
            or ctx.consumer_groups.has_members(group_id)
            or _share_members(ctx, group_id)
        ):
            code = NON_EMPTY_GROUP
        elif not _known(ctx, group_id) and not is_share_group(ctx, group_id):
            code = GROUP_ID_NOT_FOUND
        else:
            code = 0
            if is_share_group(ctx, group_id):
                try:
                    removed = ctx.share_groups.delete(group_id)
                except (SeglogError, OSError) as exc:
                    log.error("share group %r: cannot delete its state: %s", group_id, exc)
                    code = COORDINATOR_NOT_AVAILABLE
                else:
                    ctx.share_sessions.forget_group(group_id)
                    log.info("share group %r deleted (%d share partition(s))", group_id, removed)
            if code == 0:
                ctx.groups.groups.pop(group_id, None)
                ctx.consumer_groups.delete(group_id)
                ctx.committed.delete_group(group_id)
        results.append(
            DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code)
        )
    return DeleteGroupsResponse[version](throttle_time_ms=0, results=results)


def _share_members(ctx: BrokerContext, group_id: str) -> bool:
    group = ctx.share_groups.group(group_id)
    return group is not None and bool(group.members)


def _subscription(data: bytes) -> set[str]:
    """The topics of a ConsumerProtocolSubscription: version int16 (>= 0), topics
    (int32 count, int16-length strings, neither null), user data (nullable bytes); later
    versions' fields after these are not read. Raises ProtocolError."""
    r = WireReader(memoryview(data), 0, False, "consumer protocol subscription")
    version = r.int16()
    if version < 0:
        raise ProtocolError(f"consumer protocol subscription version {version}")
    topics: set[str] = set()  # a set: repeated names take no room
    for _ in range(r.count(2, nullable=False)):
        topic = r.string()
        if topic is None:
            raise ProtocolError("null topic in the consumer protocol subscription")
        topics.add(topic)
    r.skip_bytes()  # user data
    return topics


def _subscribed_topics(group: Group | None) -> set[str] | None:
    """Topics named in the members' subscriptions; None (every topic counts as subscribed)
    when one member's cannot be read."""
    topics: set[str] = set()
    if group is None or group.protocol_type != "consumer":
        return topics
    for member in group.members.values():
        try:
            topics.update(_subscription(member.metadata(group.protocol_name)))
        except ProtocolError as exc:
            log.warning(
                "group %r: unreadable subscription of member %r (%s); OffsetDelete treats "
                "every topic as subscribed",
                group.group_id,
                member.member_id,
                exc,
            )
            return None
    return topics


def _non_empty_other_protocol(group: Group | None) -> bool:
    """The group has members (it is not Empty) and its protocol type is not "consumer".
    The type is the group's, or while its first generation is being formed (the group
    has none yet) the first member's, as Kafka's group takes its first member's type."""
    if group is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
        return False
    protocol_type = group.protocol_type
    if protocol_type is None and group.members:
        protocol_type = next(iter(group.members.values())).protocol_type
    return protocol_type != "consumer"


def handle_offset_delete(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """Delete a group's committed offsets of the named partitions."""
    version = rctx.api_version
    resp = OffsetDeleteResponse[version]
    topic_cls = resp.OffsetDeleteResponseTopic
    part_cls = topic_cls.OffsetDeleteResponsePartition
    if not req.group_id:
        return resp(error_code=INVALID_GROUP_ID, throttle_time_ms=0, topics=[])
    if not rctx.allowed(Op.DELETE, Res.GROUP, req.group_id):
        return resp(error_code=GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    if not _known(ctx, req.group_id):
        return resp(error_code=GROUP_ID_NOT_FOUND, throttle_time_ms=0, topics=[])
    group = ctx.groups.groups.get(req.group_id)
    if _non_empty_other_protocol(group):
        return resp(error_code=NON_EMPTY_GROUP, throttle_time_ms=0, topics=[])
    subscribed = _subscribed_topics(group)
    consumer_group = ctx.consumer_groups.groups.get(req.group_id)
    if subscribed is not None and consumer_group is not None:
        subscribed |= consumer_group.subscribed_topics()
    deletable: list[tuple[str, int]] = []
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if subscribed is None or t.name in subscribed:
                code = GROUP_SUBSCRIBED_TO_TOPIC
            else:
                code = 0
                deletable.append((t.name, p.partition_index))
            parts.append(part_cls(partition_index=p.partition_index, error_code=code))
        topics.append(topic_cls(name=t.name, partitions=parts))
    if deletable:
        ctx.committed.delete_offsets(req.group_id, deletable)
    return resp(error_code=0, throttle_time_ms=0, topics=topics)
