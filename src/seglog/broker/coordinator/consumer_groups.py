"""KIP-848's consumer group coordinator for one node (``group.protocol=consumer``): the
ConsumerGroupHeartbeat state machine, Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``.

Each heartbeat (1) creates or updates the member and bumps the group epoch when the
membership, a subscription or the subscribed topics' partitions changed; (2) recomputes
the target assignment with the group's assignor (``coordinator.assignors``) when the
group epoch passed the assignment epoch; (3) moves the member towards its target
(incremental: partitions are revoked from their owner, who acknowledges by heartbeating
without them, before another member gets them; see ``consumer_group_model``). Members
that stop heartbeating for ``group.consumer.session.timeout.ms`` are removed, as are
members that do not revoke within their rebalance timeout; either way the others
rebalance without them.

Subscriptions are topic names and/or a regular expression (Kafka uses RE2/J; here Python
``re``, matched with ``fullmatch`` against every non-internal topic the member may
DESCRIBE; a malformed one is 128 INVALID_REGULAR_EXPRESSION). Regexes are resolved again
at a member's heartbeat after the broker's topics changed, so new matching topics join
the assignment.

Every change of a group's persisted state is written to ``__consumer_offsets`` as one
snapshot record (``CommittedOffsets.write_group_snapshot``) before the heartbeat is
answered (under the default fsync policy), and the groups are rebuilt from those records
on start: after a crash members keep their ids, epochs and assignments, and each gets a
fresh session timeout to come back in.

Classic and consumer groups share the group id space: here a heartbeat for the id of a
classic group with members is 69 GROUP_ID_NOT_FOUND; the broker runs the subclass
``classic_members.ClassicMemberCoordinator``, which converts such groups online under
``group.consumer.migration.policy`` (``group_migration``) and serves classic members inside
consumer groups. An empty group of either type gives way to the other.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from seglog.broker.coordinator.assignors import TP
from seglog.broker.coordinator.committed import CommittedOffsets
from seglog.broker.coordinator.consumer_group_model import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    GroupState,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)
from seglog.broker.coordinator.consumer_group_rules import (
    compute_target,
    heartbeat_interval,
    invalid_heartbeat,
    reconcile,
)
from seglog.broker.coordinator.group_migration import MIGRATION_POLICIES
from seglog.broker.log.internal_topics import OFFSETS_TOPIC
from seglog.broker.log.topics import TopicManager
from seglog.broker.protocol.errors import (
    FENCED_INSTANCE_ID,
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    NONE,
    NOT_COORDINATOR,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_VERSION,
)

__all__ = ["ConsumerGroupCoordinator", "HeartbeatRequest", "HeartbeatResult"]

log = logging.getLogger(__name__)


class ConsumerGroupCoordinator:
    """Every KIP-848 consumer group of this broker, persisted through ``committed``.

    ``session_timeout_ms`` / ``heartbeat_interval_ms`` are Kafka's
    ``group.consumer.session.timeout.ms`` / ``group.consumer.heartbeat.interval.ms``;
    ``unreleased_heartbeat_interval_ms`` is seglog's shorter interval for members waiting
    for partitions others still own (``consumer_group_rules.heartbeat_interval``; 0: off);
    ``assignors`` is ``group.consumer.assignors`` (the first is the default);
    ``max_size`` is ``group.consumer.max.size``;
    ``migration_policy`` is ``group.consumer.migration.policy`` (``group_migration``)."""

    def __init__(
        self,
        committed: CommittedOffsets,
        topics: TopicManager,
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 5000,
        unreleased_heartbeat_interval_ms: int = 50,
        assignors: Sequence[str] = ("uniform", "range"),
        max_size: int = 2**31 - 1,
        migration_policy: str = "bidirectional",
    ) -> None:
        if migration_policy not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy={migration_policy!r}")
        self.committed = committed
        self.topics = topics
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.unreleased_heartbeat_interval_ms = unreleased_heartbeat_interval_ms
        self.assignors = tuple(assignors)
        self.max_size = max_size
        self.migration_policy = migration_policy
        self.groups: dict[str, ConsumerGroup] = {}
        self._topics_version = 0
        self._closed = False

    # -- start, topics, shutdown ------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the groups from ``__consumer_offsets`` (on the event loop, before
        serving); every member gets a fresh session timeout."""
        for group_id, data in self.committed.group_snapshots().items():
            try:
                group = ConsumerGroup.from_snapshot(group_id, data)
            except ValueError as exc:
                log.warning("skipping the snapshot of consumer group %r: %s", group_id, exc)
                continue
            self.groups[group_id] = group
            for member in group.members.values():
                self._touch(group, member)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._arm_revocation(group, member)
        if self.groups:
            log.info("loaded %d consumer group(s) from %s", len(self.groups), OFFSETS_TOPIC)

    def topics_changed(self) -> None:
        """A topic was created, deleted or grown: regexes and partition counts are looked
        at again at each member's next heartbeat."""
        self._topics_version += 1

    def shutdown(self) -> None:
        """Cancel every timer; later heartbeats get 16 NOT_COORDINATOR."""
        self._closed = True
        for group in self.groups.values():
            for member in group.members.values():
                member.cancel_timers()

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        """Handle one ConsumerGroupHeartbeat (see the module docstring). Errors: 42
        INVALID_REQUEST (a field missing or wrong for the epoch), 128 a malformed regex,
        112 UNSUPPORTED_ASSIGNOR, 69 GROUP_ID_NOT_FOUND (no such consumer group, or a
        classic group with members), 81 GROUP_MAX_SIZE_REACHED, 25 UNKNOWN_MEMBER_ID, 110
        FENCED_MEMBER_EPOCH (the member is removed and must rejoin with epoch 0), 111
        UNRELEASED_INSTANCE_ID, 82 FENCED_INSTANCE_ID."""
        if self._closed:
            return HeartbeatResult(NOT_COORDINATOR)
        invalid = invalid_heartbeat(req, self.assignors)
        if invalid is not None:
            return invalid
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(req)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_epoch != 0:
                return HeartbeatResult(
                    GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found."
                )
            upgraded = self._upgrade(req.group_id)
            if isinstance(upgraded, HeartbeatResult):
                return upgraded
            group = upgraded
        found = self._member(group, req)
        if isinstance(found, HeartbeatResult):
            return found
        member, is_new = found
        before = member.assigned
        bump = self._update(group, member, req) or is_new or group.group_epoch == 0
        if req.subscribed_regex is not None or member.regex_version != self._topics_version:
            self._resolve_regex(member, req.may_describe)
        self.groups[group.group_id] = group
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        metadata = self._metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            log.info("consumer group %r: epoch %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            compute_target(group, self.assignors)
        if reconcile(group, member, self._owned(req)):
            self._arm_revocation(group, member)
        self._touch(group, member)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_names is not None
            and req.owned is not None
        )
        return HeartbeatResult(
            NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            assignment=member.assigned if full or member.assigned != before else None,
            durable=self._persist(group),
            heartbeat_interval_ms=heartbeat_interval(
                member,
                asyncio.get_running_loop().time(),
                self.heartbeat_interval_ms,
                self.unreleased_heartbeat_interval_ms,
            ),
        )

    def _upgrade(self, group_id: str) -> ConsumerGroup | HeartbeatResult:
        """The new consumer group for a first heartbeat (a hook:
        ``classic_members.ClassicMemberCoordinator`` converts a classic group of that id
        with members, or refuses with 69)."""
        return ConsumerGroup(group_id)

    def _member(
        self, group: ConsumerGroup, req: HeartbeatRequest
    ) -> tuple[ConsumerMember, bool] | HeartbeatResult:
        """The member the heartbeat is for and whether it is new, or the error."""
        full = len(group.members) >= self.max_size
        if req.instance_id is not None:
            return self._static_member(group, req, full)
        member = group.members.get(req.member_id)
        if req.member_epoch == 0:
            if member is not None:  # a known member rejoins: it starts over
                self._remove(group, member, "rejoined with epoch 0")
            elif full:
                return self._full()
            return ConsumerMember(req.member_id or str(uuid.uuid4())), True
        if member is None:
            return HeartbeatResult(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not known.")
        fenced = self._check_epoch(group, member, req)
        return (member, False) if fenced is None else fenced

    def _static_member(
        self, group: ConsumerGroup, req: HeartbeatRequest, full: bool
    ) -> tuple[ConsumerMember, bool] | HeartbeatResult:
        """Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``."""
        assert req.instance_id is not None
        known_id = group.static_members.get(req.instance_id)
        known = None if known_id is None else group.members.get(known_id)
        if req.member_epoch != 0:
            if known is None:
                return HeartbeatResult(
                    UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if known.member_id != req.member_id:
                return HeartbeatResult(
                    FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {known.member_id}.",
                )
            fenced = self._check_epoch(group, known, req)
            return (known, False) if fenced is None else fenced
        if known is None:
            if full:
                return self._full()
            return ConsumerMember(req.member_id or str(uuid.uuid4()), req.instance_id), True
        if known.member_epoch != STATIC_LEAVE_EPOCH:
            return HeartbeatResult(
                UNRELEASED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} cannot join "
                f"the group because the instance id is owned by {known.member_id} member.",
            )
        # the instance comes back: the new member id takes over its assignment and epoch
        new_id = req.member_id or str(uuid.uuid4())
        known.cancel_timers()
        del group.members[known.member_id]
        target = group.target.pop(known.member_id, None)
        if target is not None:
            group.target[new_id] = target
        replacement = ConsumerMember(
            new_id,
            req.instance_id,
            rebalance_timeout_ms=known.rebalance_timeout_ms,
            subscribed_names=known.subscribed_names,
            subscribed_regex=known.subscribed_regex,
            server_assignor=known.server_assignor,
            member_epoch=known.previous_epoch,
            previous_epoch=known.previous_epoch,
            state=known.state,
            assigned=known.assigned,
            revoking=known.revoking,
            regex_topics=known.regex_topics,
            regex_version=known.regex_version,
        )
        log.info(
            "consumer group %r: static member %s (instance %s) replaces %s",
            group.group_id, new_id, req.instance_id, known.member_id,
        )  # fmt: skip
        return replacement, False

    def _full(self) -> HeartbeatResult:
        return HeartbeatResult(
            GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {self.max_size} members.",
        )

    def _check_epoch(
        self, group: ConsumerGroup, member: ConsumerMember, req: HeartbeatRequest
    ) -> HeartbeatResult | None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a greater epoch, or a
        smaller one other than the previous epoch with owned partitions within the current
        assignment (a lost response), fences the member (removed: it rejoins)."""
        epoch = req.member_epoch
        if epoch == member.member_epoch:
            return None
        if epoch < member.member_epoch and epoch == member.previous_epoch:
            owned = self._owned(req)
            if owned is not None and owned <= member.assigned:
                return None
        self._remove(group, member, f"fenced: epoch {epoch}, expected {member.member_epoch}")
        self._after_change(group)
        which = "greater" if epoch > member.member_epoch else "smaller"
        return HeartbeatResult(
            FENCED_MEMBER_EPOCH,
            f"The consumer group member has a {which} member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            "abandon all its partitions and rejoin.",
            durable=self._persist(group),
        )

    def _update(self, group: ConsumerGroup, member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply the request's fields; True when the subscription (names, regex, assignor)
        changed, which bumps the group epoch."""
        del group
        changed = False
        if req.subscribed_names is not None:
            names = tuple(sorted(set(req.subscribed_names)))
            changed |= names != member.subscribed_names
            member.subscribed_names = names
        if req.subscribed_regex is not None:
            regex = req.subscribed_regex or None  # "" unsubscribes the regex
            changed |= regex != member.subscribed_regex
            member.subscribed_regex = regex
        if req.server_assignor is not None:
            changed |= req.server_assignor != member.server_assignor
            member.server_assignor = req.server_assignor
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        return changed

    def _resolve_regex(self, member: ConsumerMember, may_describe: Callable[[str], bool]) -> None:
        member.regex_version = self._topics_version
        if not member.subscribed_regex:
            member.regex_topics = frozenset()
            return
        pattern = re.compile(member.subscribed_regex)
        member.regex_topics = frozenset(
            name
            for name in self.topics.all()
            if name != OFFSETS_TOPIC and pattern.fullmatch(name) and may_describe(name)
        )

    def _metadata(self, group: ConsumerGroup) -> dict[str, int]:
        """Subscribed topic -> partition count, for the subscribed topics that exist."""
        out = {}
        for name in group.subscribed_topics():
            info = self.topics.get(name)
            if info is not None:
                out[name] = info.partitions
        return out

    def _owned(self, req: HeartbeatRequest) -> frozenset[TP] | None:
        """The request's owned partitions by topic name (unknown topic ids left out)."""
        if req.owned is None:
            return None
        out: set[TP] = set()
        for topic_id, partitions in req.owned:
            info = self.topics.by_id(topic_id)
            if info is not None:
                out.update((info.name, p) for p in partitions)
        return frozenset(out)

    # -- leaving, timeouts, removal -----------------------------------------------------

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        """Epoch -1 (leave) or -2 (a static member leaves for now, keeping its assignment
        until its session times out)."""
        group = self.groups.get(req.group_id)
        if group is None:
            return HeartbeatResult(GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        if req.instance_id is not None:
            known_id = group.static_members.get(req.instance_id)
            if known_id is None:
                return HeartbeatResult(
                    UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if known_id != req.member_id:
                return HeartbeatResult(FENCED_INSTANCE_ID, f"Member {req.member_id} was fenced.")
        member = group.members.get(req.member_id)
        if member is None:
            return HeartbeatResult(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not known.")
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self._touch(group, member)  # its session timeout removes it
            log.info(
                "consumer group %r: static member %s left for now", group.group_id, member.member_id
            )
        else:
            self._remove(group, member, "left the group")
            self._after_change(group)
        return HeartbeatResult(
            NONE,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            durable=self._persist(group),
        )

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        """Drop a member (its partitions become free) and bump the group epoch."""
        member.cancel_timers()
        if group.members.get(member.member_id) is member:
            del group.members[member.member_id]
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        group.target.pop(member.member_id, None)
        group.group_epoch += 1
        log.info(
            "consumer group %r: member %s %s (group epoch %d)",
            group.group_id, member.member_id, why, group.group_epoch,
        )  # fmt: skip

    def _after_change(self, group: ConsumerGroup) -> None:
        """After a removal: new metadata and target assignment for the members left."""
        group.subscription_metadata = self._metadata(group)
        if group.members:
            compute_target(group, self.assignors)
        self._after_removal(group)

    def _after_removal(self, group: ConsumerGroup) -> None:
        """Hook after a member was removed (``classic_members``: the downgrade)."""

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            self._session_timeout_ms(member) / 1000, self._expire, group, member
        )

    def _session_timeout_ms(self, member: ConsumerMember) -> int:
        """``group.consumer.session.timeout.ms``, or a classic member's own (JoinGroup)."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.session_timeout_ms

    def _arm_revocation(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            member.rebalance_timeout_ms / 1000, self._revocation_expired, group, member
        )

    def _expire(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.session_timer = None
        if (
            self.groups.get(group.group_id) is not group
            or group.members.get(member.member_id) is not member
        ):
            return
        timeout = self._session_timeout_ms(member)
        self._remove(group, member, f"expired (no heartbeat for {timeout} ms)")
        self._after_change(group)
        self._persist_later(group)

    def _revocation_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.rebalance_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            self._remove(group, member, f"did not revoke within {member.rebalance_timeout_ms} ms")
            self._after_change(group)
            self._persist_later(group)

    # -- persistence --------------------------------------------------------------------

    def _persist(self, group: ConsumerGroup) -> Future[int] | None:
        """Write the group's snapshot if it changed; the future completes once durable
        (None: nothing written, or the relaxed fsync policy)."""
        if self.groups.get(group.group_id) is not group:
            return None
        data = group.snapshot()
        if data == group.persisted:
            return None
        group.persisted = data
        return self.committed.write_group_snapshot(group.group_id, data)

    def _persist_later(self, group: ConsumerGroup) -> None:
        """Persist after a timer fired (nobody waits for it)."""
        try:
            self._persist(group)
        except (OSError, ValueError) as exc:
            log.error("cannot persist consumer group %r: %s", group.group_id, exc)

    # -- other APIs ---------------------------------------------------------------------

    def delete(self, group_id: str) -> bool:
        """Delete an empty consumer group (DeleteGroups; a JoinGroup taking its id):
        False when it does not exist or has members."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return False
        del self.groups[group_id]
        self.committed.write_group_snapshot(group_id, None)
        log.info("consumer group %r deleted", group_id)
        return True

    def has_members(self, group_id: str) -> bool:
        """Whether a consumer group of that id has members."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def validate_commit(
        self, group_id: str, member_id: str, epoch: int, version: int
    ) -> int | None:
        """OffsetCommit rules of Kafka's ``ConsumerGroup.validateOffsetCommit``; None when
        ``group_id`` is not a consumer group. Epoch < 0 commits to a group without members
        are simple commits; otherwise 25 UNKNOWN_MEMBER_ID, 35 UNSUPPORTED_VERSION
        (OffsetCommit < v9 from a consumer-protocol member), 113 STALE_MEMBER_EPOCH."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member commits with its generation
            return NONE if epoch == member.member_epoch else ILLEGAL_GENERATION
        if version < 9:
            return UNSUPPORTED_VERSION
        return NONE if epoch == member.member_epoch else STALE_MEMBER_EPOCH

    def validate_fetch(self, group_id: str, member_id: str | None, epoch: int) -> int:
        """OffsetFetch v9+ rules of Kafka's ``ConsumerGroup.validateOffsetFetch``: without a
        member id and with epoch < 0 (admin clients) anything goes; else 25 or 113."""
        group = self.groups.get(group_id)
        if group is None or (member_id is None and epoch < 0):
            return NONE
        member = group.members.get(member_id or "")
        if member is None:
            return UNKNOWN_MEMBER_ID
        if epoch == member.member_epoch:
            return NONE
        return STALE_MEMBER_EPOCH if member.classic is None else ILLEGAL_GENERATION

    def state(self, group_id: str) -> GroupState:
        """The group's state (Dead when unknown)."""
        group = self.groups.get(group_id)
        return GroupState.DEAD if group is None else group.state()
