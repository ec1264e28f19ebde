"""Kafka's ``group.consumer.migration.policy`` (KIP-848 ``ConsumerGroupMigrationPolicy``):
which conversions between a classic group and a KIP-848 consumer group of one id are
allowed, and the conversions themselves (Kafka 4.x's ``GroupMetadataManager``).

- ``disabled``: no online conversion; ``upgrade``: classic -> consumer; ``downgrade``:
  consumer -> classic; ``bidirectional`` (Kafka 4.x's default): both.
- An **empty** group of either type always gives way to the other, whatever the policy
  (Kafka's ``maybeDeleteEmptyClassicGroup`` / empty consumer group taken over by a
  JoinGroup); committed offsets stay, they belong to the group id.
- **Upgrade** (``upgrade`` / ``bidirectional``): a ConsumerGroupHeartbeat for a classic
  group with members whose protocol type is "consumer" and whose size fits
  ``group.consumer.max.size`` (Kafka's ``validateOnlineUpgrade``) converts it
  (:func:`to_consumer_group`, Kafka's ``ConsumerGroup.fromClassicGroup``): every member
  becomes a consumer-group member that keeps using the classic protocol
  (``coordinator.classic_members``), at epoch = the classic generation, with its current
  classic assignment as current and target assignment; JoinGroup/SyncGroup requests
  waiting in the classic group are answered 27 REBALANCE_IN_PROGRESS. The heartbeating
  member then joins and the group epoch moves on, so the classic members rejoin.
  Otherwise the heartbeat is 69 GROUP_ID_NOT_FOUND "Group G is not a consumer group."
- **Downgrade** (``downgrade`` / ``bidirectional``): when a member leaves or is removed
  (session or rebalance timeout) and every member left uses the classic protocol, the
  group becomes a classic group again (:func:`to_classic_group`, Kafka's
  ``ClassicGroup.fromConsumerGroup``) with those members and their assignments, at
  generation = their member epoch, and a rebalance starts (Kafka's
  ``convertToClassicGroup``).
- A classic member joins a consumer group with members under any policy but ``disabled``
  (Kafka 4.x takes it whatever the policy); under ``disabled`` the JoinGroup is refused
  with 23 INCONSISTENT_GROUP_PROTOCOL and a broker WARNING that says why.
"""

from __future__ import annotations

import logging

from seglog.broker.coordinator.consumer_group_model import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
)
from seglog.broker.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from seglog.broker.coordinator.group_model import Group, GroupState, Member

__all__ = [
    "MIGRATION_POLICIES",
    "downgrade_enabled",
    "join_refusal_warning",
    "to_classic_group",
    "to_consumer_group",
    "upgrade_enabled",
    "upgrade_refusal",
]

log = logging.getLogger(__name__)

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
"""The values of ``group.consumer.migration.policy`` (Kafka's, lower case)."""


def upgrade_enabled(policy: str) -> bool:
    """Whether ``policy`` allows classic -> consumer (Kafka's ``isUpgradeEnabled``)."""
    return policy in ("upgrade", "bidirectional")


def downgrade_enabled(policy: str) -> bool:
    """Whether ``policy`` allows consumer -> classic (Kafka's ``isDowngradeEnabled``)."""
    return policy in ("downgrade", "bidirectional")


def upgrade_refusal(group: Group, policy: str, max_size: int) -> str | None:
    """None when the classic ``group`` may be converted to a consumer group (Kafka's
    ``validateOnlineUpgrade``); else the error message of the ConsumerGroupHeartbeat's 69
    GROUP_ID_NOT_FOUND (Kafka's "Group G is not a consumer group."), with the reason
    logged at INFO as Kafka does."""
    reason = None
    if not upgrade_enabled(policy):
        reason = f"the online upgrade is disabled (group.consumer.migration.policy={policy})"
    elif group.members and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        reason = "the group does not use the consumer embedded protocol"
    elif len(group.members) > max_size:
        reason = "the group size exceeds the consumer group maximum size"
    if reason is None:
        return None
    log.info("cannot upgrade classic group %r to a consumer group: %s", group.group_id, reason)
    return f"Group {group.group_id} is not a consumer group."


def join_refusal_warning(group_id: str, policy: str) -> None:
    """Log why a JoinGroup for a consumer group with members is refused under
    ``disabled`` (23 INCONSISTENT_GROUP_PROTOCOL: JoinGroup has no error message)."""
    log.warning(
        "JoinGroup for consumer group %r refused with 23 INCONSISTENT_GROUP_PROTOCOL: it has "
        "members using group.protocol=consumer and group.consumer.migration.policy=%s takes "
        "no classic members into a consumer group; once they leave, the empty group becomes "
        "a classic group, committed offsets kept",
        group_id,
        policy,
    )


def to_consumer_group(classic: Group) -> ConsumerGroup:
    """The consumer group a classic group becomes (Kafka's ``ConsumerGroup.fromClassicGroup``):
    group and assignment epoch = the classic generation; each member keeps its id, instance
    id, client, timeouts and protocols (as classic metadata), subscribes to the topics of
    its subscription and has its classic assignment as current and target assignment
    (nothing while the classic group rebalances). Subscription metadata is left to the
    caller. Raises ValueError when a member's subscription or assignment is malformed."""
    epoch = classic.generation
    group = ConsumerGroup(classic.group_id, group_epoch=epoch, assignment_epoch=epoch)
    for m in classic.members.values():
        if not m.protocols:
            raise ValueError(f"member {m.member_id} has no protocols")
        metadata = m.metadata(classic.protocol_name) or m.protocols[0][1]
        subscription = decode_subscription(metadata)
        assigned = decode_assignment(m.assignment)
        member = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_names=subscription.topics,
            member_epoch=epoch,
            previous_epoch=epoch,
            assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        group.target[member.member_id] = assigned
    return group


def to_classic_group(group: ConsumerGroup) -> Group:
    """The classic group a consumer group whose members all use the classic protocol
    becomes (Kafka's ``ClassicGroup.fromConsumerGroup``): Stable, protocol type "consumer",
    generation = the highest member epoch (the one the members heartbeat with), the
    members in join order (the first is the leader) with their current assignment encoded
    as ``ConsumerProtocolAssignment`` of their subscription's version. The caller starts
    the rebalance. Raises ValueError when a member does not use the classic protocol or
    the members share no protocol."""
    classic = Group(
        group.group_id,
        state=GroupState.STABLE,
        generation=max((m.member_epoch for m in group.members.values()), default=0),
        protocol_type=CONSUMER_PROTOCOL_TYPE,
    )
    for m in group.members.values():
        if m.classic is None:
            raise ValueError(f"member {m.member_id} uses the consumer protocol")
        try:
            version = decode_subscription(m.classic.protocols[0][1]).version
        except ValueError:
            version = 0
        classic.members[m.member_id] = Member(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            m.classic.session_timeout_ms,
            m.rebalance_timeout_ms,
            CONSUMER_PROTOCOL_TYPE,
            list(m.classic.protocols),
            assignment=encode_assignment(m.assigned, version),
        )
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = m.member_id
    if not classic.members or not classic.common_protocols():
        raise ValueError("the members share no protocol")
    classic.protocol_name = classic.select_protocol()
    classic.leader = next(iter(classic.members))
    return classic
