"""Classic-protocol members inside KIP-848 consumer groups, and the online migration
between the two group types (Kafka 4.x's ``GroupMetadataManager``: ``classicGroupJoin``/
``Sync``/``Heartbeat``/``LeaveToConsumerGroup``, ``convertToConsumerGroup``,
``convertToClassicGroup``; the rules of the conversions are in ``group_migration``).

A classic consumer (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) of a consumer group is a
consumer-group member with classic metadata (its session timeout and protocols): the
broker's assignor, not a leader, computes its target assignment, and it converges to it
through the classic round trips:

- JoinGroup (protocol type "consumer", a protocol every classic member supports, else 23
  INCONSISTENT_GROUP_PROTOCOL; 79 MEMBER_ID_REQUIRED first for a v4+ dynamic member; 81
  GROUP_MAX_SIZE_REACHED) updates its subscription from its ``ConsumerProtocolSubscription``
  and reconciles it with the partitions that subscription says it owns: partitions moving
  to another member are withheld (the answer keeps its old epoch), partitions still owned
  by another are left out until released. The answer comes at once: generation = its
  member epoch, protocol = its most preferred one, no leader (it never assigns).
- SyncGroup (22 ILLEGAL_GENERATION unless at its member epoch, 23 for another protocol,
  27 when the group epoch moved past it) hands out its current assignment as a
  ``ConsumerProtocolAssignment``.
- Heartbeat answers 27 REBALANCE_IN_PROGRESS (rejoin) when the group epoch moved past its
  epoch, when it has partitions to revoke, or when partitions it waits for were released.
- LeaveGroup and its session timeout (its own, from JoinGroup) remove it; the others
  rebalance without it, and when only classic members are left the group may become a
  classic group again (downgrade).

A classic member told to rejoin (27) must rejoin, and one answered by JoinGroup must send
its SyncGroup, within its rebalance timeout, or it is removed (Kafka's join and sync
timeouts): a client that heartbeats from a background thread but stopped polling does not
hold its partitions forever.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Future
from typing import Any

from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.consumer_group_model import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatResult,
    MemberState,
)
from seglog.broker.coordinator.consumer_group_rules import compute_target, reconcile
from seglog.broker.coordinator.consumer_groups import ConsumerGroupCoordinator
from seglog.broker.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_subscription,
    encode_assignment,
)
from seglog.broker.coordinator.group_migration import (
    downgrade_enabled,
    to_classic_group,
    to_consumer_group,
    upgrade_refusal,
)
from seglog.broker.coordinator.group_model import JoinResult, SyncResult
from seglog.broker.coordinator.groups import GroupCoordinator
from seglog.broker.log.topics import TopicManager
from seglog.broker.protocol.errors import (
    FENCED_INSTANCE_ID,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

__all__ = ["MEMBER_TYPE_CLASSIC", "MEMBER_TYPE_CONSUMER", "ClassicMemberCoordinator"]

log = logging.getLogger(__name__)

MEMBER_TYPE_CLASSIC = 0
"""ConsumerGroupDescribe v1's ``MemberType`` of a classic-protocol member (KIP-1099)."""
MEMBER_TYPE_CONSUMER = 1
"""ConsumerGroupDescribe v1's ``MemberType`` of a ConsumerGroupHeartbeat member."""


class ClassicMemberCoordinator(ConsumerGroupCoordinator):
    """The consumer-group coordinator that also serves classic members and converts groups
    online (``group.consumer.migration.policy``). ``classic`` is the broker's classic
    group coordinator: groups move between the two."""

    def __init__(
        self,
        committed: CommittedOffsets,
        topics: TopicManager,
        *,
        classic: GroupCoordinator,
        **settings: Any,
    ) -> None:
        super().__init__(committed, topics, **settings)
        self.classic = classic

    @staticmethod
    def member_type(member: ConsumerMember) -> int:
        """KIP-1099's member type: 0 classic, 1 consumer."""
        return MEMBER_TYPE_CONSUMER if member.classic is None else MEMBER_TYPE_CLASSIC

    # -- conversions ----------------------------------------------------------------------

    def _upgrade(self, group_id: str) -> ConsumerGroup | HeartbeatResult:
        """Kafka's ``convertToConsumerGroup`` when a first ConsumerGroupHeartbeat names a
        classic group with members (see ``group_migration``); 69 when refused."""
        old = self.classic.groups.get(group_id)
        if old is None or not self.classic.has_members(group_id):
            return ConsumerGroup(group_id)
        refusal = upgrade_refusal(old, self.migration_policy, self.max_size)
        if refusal is not None:
            return HeartbeatResult(GROUP_ID_NOT_FOUND, refusal)
        try:
            group = to_consumer_group(old)
        except ValueError as exc:
            log.warning("cannot upgrade classic group %r: %s", group_id, exc)
            return HeartbeatResult(
                GROUP_ID_NOT_FOUND,
                f"Cannot upgrade the classic group {group_id} to consumer group because the "
                "embedded consumer protocol is malformed.",
            )
        self.classic.take(group_id)
        group.subscription_metadata = self._metadata(group)
        self.groups[group_id] = group
        for member in group.members.values():
            self._touch(group, member)
        log.info(
            "classic group %r upgraded to a consumer group: %d classic member(s), epoch %d",
            group_id, len(group.members), group.group_epoch,
        )  # fmt: skip
        self._persist_later(group)
        return group

    def _after_removal(self, group: ConsumerGroup) -> None:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers`` + ``convertToClassicGroup``:
        once every member left uses the classic protocol (and the policy allows it), the
        group becomes a classic group that rebalances at once; its consumer-group snapshot
        is deleted from ``__consumer_offsets``."""
        if (
            not downgrade_enabled(self.migration_policy)
            or not group.members
            or any(m.classic is None for m in group.members.values())
            or self.groups.get(group.group_id) is not group
        ):
            return
        try:
            classic = to_classic_group(group)
        except ValueError as exc:
            log.warning("cannot downgrade consumer group %r: %s", group.group_id, exc)
            return
        for member in group.members.values():
            member.cancel_timers()
        del self.groups[group.group_id]
        try:
            self.committed.write_group_snapshot(group.group_id, None)
        except (OSError, ValueError) as exc:
            log.error("cannot delete consumer group %r's snapshot: %s", group.group_id, exc)
        self.classic.adopt(classic)
        log.info(
            "consumer group %r downgraded to a classic group: %d member(s), generation %d",
            group.group_id, len(classic.members), classic.generation,
        )  # fmt: skip

    # -- JoinGroup --------------------------------------------------------------------------

    def classic_join(
        self,
        group_id: str,
        member_id: str,
        *,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> tuple[JoinResult, Future[int] | None]:
        """A JoinGroup for a consumer group with members (Kafka's
        ``classicGroupJoinToConsumerGroup``): the answer and the future of the group's
        snapshot write (None: nothing to wait for). Errors in the module docstring, and 16
        NOT_COORDINATOR after shutdown, 26 INVALID_SESSION_TIMEOUT, 82 FENCED_INSTANCE_ID,
        25 UNKNOWN_MEMBER_ID when the group is gone."""
        instance_id = group_instance_id
        group = self.groups.get(group_id)
        if self._closed:
            return JoinResult(NOT_COORDINATOR, member_id), None
        if group is None:
            return JoinResult(UNKNOWN_MEMBER_ID, member_id), None
        low, high = self.classic.min_session_timeout_ms, self.classic.max_session_timeout_ms
        if not low <= session_timeout_ms <= high:
            return JoinResult(INVALID_SESSION_TIMEOUT, member_id), None
        if not self._supports(group, member_id, protocol_type, [n for n, _ in protocols]):
            log.info(
                "consumer group %r: JoinGroup of %r refused (23): protocol type %r, protocols "
                "%s are not supported", group_id, member_id, protocol_type,
                [n for n, _ in protocols],
            )  # fmt: skip
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id), None
        known_static = None if instance_id is None else group.static_members.get(instance_id)
        if known_static is not None and member_id and member_id != known_static:
            return JoinResult(FENCED_INSTANCE_ID, member_id), None
        member = group.members.get(member_id) if member_id else None
        if member is None and len(group.members) >= self.max_size:
            return JoinResult(GROUP_MAX_SIZE_REACHED, member_id), None
        if not member_id and require_known_member_id and instance_id is None:
            return JoinResult(MEMBER_ID_REQUIRED, str(uuid.uuid4())), None
        try:
            subscription = decode_subscription(protocols[0][1])
        except ValueError as exc:
            log.info("consumer group %r: JoinGroup refused (23): %s", group_id, exc)
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id), None
        if member is not None:
            self._cancel_rebalance_timer(member)  # it rejoined (Kafka's join timeout)
        if member is None and known_static is not None and known_static in group.members:
            # a static member rejoining with a new member id replaces its old one
            self._remove(group, group.members[known_static], f"replaced (instance {instance_id})")
        is_new = member is None
        if member is None:
            member = ConsumerMember(member_id or str(uuid.uuid4()), instance_id)
        changed = member.subscribed_names != subscription.topics or bool(member.subscribed_regex)
        member.subscribed_names = subscription.topics
        member.subscribed_regex, member.regex_topics = None, frozenset()
        member.server_assignor = None
        member.rack_id = subscription.rack_id
        if rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        member.classic = ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
        group.members[member.member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member.member_id
        metadata = self._metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            changed = True
        if changed or is_new:
            group.group_epoch += 1
            log.info("consumer group %r: epoch %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            compute_target(group, self.assignors)
        owned = subscription.owned
        if reconcile(group, member, owned):
            if owned & member.revoking:
                self._arm_revocation(group, member)
            else:  # it no longer owns them (an eager member revoked everything)
                reconcile(group, member, owned)
        self._touch(group, member)
        self._arm_rebalance_timer(group, member, "send its SyncGroup")  # Kafka's sync timeout
        result = JoinResult(
            NONE,
            member.member_id,
            member.member_epoch,
            CONSUMER_PROTOCOL_TYPE,
            member.classic.protocol_name,
            "",  # no leader: the broker assigns
        )
        return result, self._persist(group)

    def _supports(
        self, group: ConsumerGroup, member_id: str, protocol_type: str, names: list[str]
    ) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: protocol type "consumer" and
        one protocol every other classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        others = [
            {n for n, _ in m.classic.protocols}
            for m in group.members.values()
            if m.classic is not None and m.member_id != member_id
        ]
        return any(all(name in o for o in others) for name in names)

    # -- SyncGroup / Heartbeat / LeaveGroup -------------------------------------------------

    def _classic_member(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> tuple[ConsumerGroup, ConsumerMember] | int:
        """The classic member a SyncGroup/Heartbeat names, or its error: 25 unknown (or a
        consumer-protocol member), 82 fenced instance, 22 another generation."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if self._closed:
            return NOT_COORDINATOR
        if group is None or member is None or member.classic is None:
            return UNKNOWN_MEMBER_ID
        if instance_id is not None and group.static_members.get(instance_id) != member_id:
            return FENCED_INSTANCE_ID
        if generation != member.member_epoch:
            return ILLEGAL_GENERATION
        return group, member

    def classic_sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        *,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        """A SyncGroup of a classic member (Kafka's ``classicGroupSyncToConsumerGroup``):
        its current assignment, encoded in its subscription's version."""
        found = self._classic_member(group_id, member_id, instance_id, generation)
        if isinstance(found, int):
            return SyncResult(found)
        group, member = found
        assert member.classic is not None
        name = member.classic.protocol_name
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name
        ):
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and (
            member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._arm_rebalance_timer(group, member, "rejoin")
            return SyncResult(REBALANCE_IN_PROGRESS)
        self._touch(group, member)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:  # else: its revocation timer
            self._cancel_rebalance_timer(member)
        try:
            version = decode_subscription(member.classic.protocols[0][1]).version
        except ValueError:
            version = 0
        assignment = encode_assignment(member.assigned, version)
        return SyncResult(NONE, CONSUMER_PROTOCOL_TYPE, name, assignment)

    def classic_heartbeat(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> int:
        """A Heartbeat of a classic member (Kafka's ``classicGroupHeartbeatToConsumerGroup``):
        restarts its session timeout; 27 when it must rejoin (module docstring)."""
        found = self._classic_member(group_id, member_id, instance_id, generation)
        if isinstance(found, int):
            return found
        group, member = found
        self._touch(group, member)
        rejoin = member.member_epoch < group.group_epoch or (
            member.state is MemberState.UNREVOKED_PARTITIONS
        )
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            owners = group.owners(excluding=member.member_id)
            pending = group.target.get(member.member_id, frozenset()) - member.assigned
            rejoin = not any(tp in owners for tp in pending)  # what it waited for is free
        if not rejoin:
            return NONE
        self._arm_rebalance_timer(group, member, "rejoin")
        return REBALANCE_IN_PROGRESS

    # -- join and sync timeouts -------------------------------------------------------------

    def _arm_rebalance_timer(self, group: ConsumerGroup, member: ConsumerMember, what: str) -> None:
        """Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent`` / ``...SyncTimeout``: unless a
        timer runs already (a revocation's, or an earlier one), remove the member if it does
        not ``what`` within its rebalance timeout."""
        if member.rebalance_timer is None:
            member.rebalance_timer = asyncio.get_running_loop().call_later(
                member.rebalance_timeout_ms / 1000, self._rebalance_expired, group, member, what
            )

    @staticmethod
    def _cancel_rebalance_timer(member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None

    def _rebalance_expired(self, group: ConsumerGroup, member: ConsumerMember, what: str) -> None:
        member.rebalance_timer = None
        if (
            self.groups.get(group.group_id) is not group
            or group.members.get(member.member_id) is not member
        ):
            return
        self._remove(group, member, f"did not {what} within {member.rebalance_timeout_ms} ms")
        self._after_change(group)
        self._persist_later(group)

    def classic_leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[list[int], Future[int] | None]:
        """LeaveGroup of classic members (member id, instance id) of a consumer group
        (Kafka's ``classicGroupLeaveToConsumerGroup``): one code each (25 unknown or not a
        classic member, 82 a fenced instance) and the snapshot write's future."""
        group = self.groups.get(group_id)
        codes: list[int] = []
        removed = False
        for named_id, instance_id in members:
            member_id = named_id
            if group is not None and instance_id is not None and not named_id:
                member_id = group.static_members.get(instance_id, "")
            member = None if group is None else group.members.get(member_id)
            if group is None or member is None or member.classic is None:
                codes.append(UNKNOWN_MEMBER_ID)
            elif instance_id is not None and group.static_members.get(instance_id) != member_id:
                codes.append(FENCED_INSTANCE_ID)
            else:
                self._remove(group, member, "left the group (LeaveGroup)")
                removed = True
                codes.append(NONE)
        if group is None or not removed:
            return codes, None
        self._after_change(group)
        return codes, self._persist(group)
