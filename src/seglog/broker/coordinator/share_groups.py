"""Share groups (KIP-932): membership through ShareGroupHeartbeat, the simple assignor, and
the group's share partitions.

Membership follows Kafka's ``GroupMetadataManager.shareGroupHeartbeat``: a member joins
with epoch 0 and its own member id (KIP-1082: the client generates it; an empty id is
42 INVALID_REQUEST), and must name its subscription then (42 otherwise); it leaves with
epoch -1; any other epoch must be the one it was last given (110 FENCED_MEMBER_EPOCH), by a
member the group knows (25 UNKNOWN_MEMBER_ID). Past ``group.share.max.size`` members a
join gets 81 GROUP_MAX_SIZE_REACHED. A member silent for
``group.share.session.timeout.ms`` is removed (:meth:`ShareGroupCoordinator.expire`).

The group epoch goes up with every membership, subscription or partition-count change;
the assignment is then recomputed at once (share groups revoke nothing: several members
may read one partition) and each member takes the new epoch and assignment with its next
heartbeat. Kafka's simple assignor, for each subscribed topic with P partitions and the
M members subscribed to it (by member id): M <= P gives partition j to member j mod M;
M > P gives member i partition i mod P, so every member reads and partitions are shared.

A member that expires releases the records it holds in every share partition of the group
(they are delivered again at once) and loses its share sessions; one that leaves with a
heartbeat keeps them until its final acknowledgement (epoch -1) closes its session, which
releases what is still unsettled. Share partitions are opened on first use
(ShareFetch) from the partition log's durable subscription, starting per the group config
``share.auto.offset.reset`` when the group has no state there yet (see ``share_state``).
DeleteGroups removes an empty group with its share-partition state and its record
(:meth:`ShareGroupCoordinator.delete`); a share group's id is not free for classic or
consumer groups while it exists (``apis/group_types.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from seglog.broker.coordinator.share_partition import SharePartition
from seglog.broker.coordinator.share_state import ShareGroupState, subscription_name
from seglog.broker.log.topics import TopicManager
from seglog.broker.protocol import errors as _errors
from seglog.errors import InvalidOffsetError
from seglog.storage import OFFSET_NEWEST, OFFSET_OLDEST

__all__ = ["HeartbeatResult", "ShareGroup", "ShareGroupCoordinator", "ShareMember"]

log = logging.getLogger(__name__)

Assignment = dict[str, list[int]]
"""topic name -> partition indexes."""


@dataclasses.dataclass
class ShareMember:
    """One member of a share group."""

    member_id: str
    epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    topics: list[str]
    assignment: Assignment = dataclasses.field(default_factory=dict)
    deadline: float = 0.0
    """``time.monotonic()`` seconds after which the member is removed."""


@dataclasses.dataclass
class ShareGroup:
    """A share group's membership (in memory) and epoch (persisted, ``share_state``)."""

    group_id: str
    epoch: int
    members: dict[str, ShareMember] = dataclasses.field(default_factory=dict)
    assignment_epoch: int = 0
    partition_counts: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ShareGroupState name: Empty or Stable."""
        return "Stable" if self.members else "Empty"

    def subscribed(self) -> list[str]:
        """Every topic a member subscribes to, sorted."""
        return sorted({t for m in self.members.values() for t in m.topics})


@dataclasses.dataclass(frozen=True)
class HeartbeatResult:
    """A heartbeat's answer: error, member id and epoch, the assignment when the member
    must be told (None otherwise)."""

    error_code: int
    member_id: str | None = None
    epoch: int = -1
    assignment: Assignment | None = None
    message: str | None = None


class ShareGroupCoordinator:
    """Every share group of the broker, their members and share partitions. Runs on the
    event loop."""

    def __init__(
        self,
        state: ShareGroupState,
        topics: TopicManager,
        *,
        lock_ms: int,
        delivery_count_limit: int,
        max_record_locks: int,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_size: int,
    ) -> None:
        self.state = state
        self.topics = topics
        self.lock_ms = lock_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self._groups: dict[str, ShareGroup] = {}
        self._partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.on_member_gone: Callable[[str, str], object] | None = None
        """Called with (group, member id) when a member leaves or expires (the share
        session cache drops its sessions)."""

    # -- groups ----------------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        """The group if it has members now or a stored record, else None."""
        group = self._groups.get(group_id)
        if group is None and group_id in self.state.groups():
            group = self._groups[group_id] = ShareGroup(group_id, self.state.epoch(group_id))
        return group

    def group_ids(self) -> list[str]:
        """Every known share group."""
        return sorted(set(self._groups) | set(self.state.groups()))

    def _bump(self, group: ShareGroup) -> None:
        """A new group epoch and the simple assignor's assignment for it."""
        group.epoch += 1
        group.partition_counts = self._counts(group.subscribed())
        for m in group.members.values():
            m.assignment = {}
        for topic, count in group.partition_counts.items():
            members = sorted(mid for mid, m in group.members.items() if topic in m.topics)
            if not members or count == 0:
                continue
            if len(members) <= count:
                for p in range(count):
                    group.members[members[p % len(members)]].assignment.setdefault(
                        topic, []
                    ).append(p)
            else:
                for i, mid in enumerate(members):
                    group.members[mid].assignment[topic] = [i % count]
        group.assignment_epoch = group.epoch
        self.state.save(
            group.group_id, group.epoch, self.state.configs(group.group_id), durable=False
        )

    def _counts(self, topics: list[str]) -> dict[str, int]:
        out = {}
        for t in topics:
            info = self.topics.get(t)
            if info is not None:
                out[t] = info.partitions
        return out

    # -- heartbeat -------------------------------------------------------------------------

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        *,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        """One ShareGroupHeartbeat (see the module docstring for the rules)."""
        if not group_id:
            return HeartbeatResult(_errors.INVALID_GROUP_ID, message="empty group id")
        if not member_id:
            return HeartbeatResult(_errors.INVALID_REQUEST, message="MemberId can't be empty.")
        group = self.group(group_id)
        member = None if group is None else group.members.get(member_id)
        if member_epoch == -1:
            if group is not None and member is not None:
                self._remove(group, member_id, release=False)
            return HeartbeatResult(_errors.NONE, member_id, -1)
        if member_epoch < -1:
            return HeartbeatResult(_errors.INVALID_REQUEST, message="invalid MemberEpoch")
        now = time.monotonic()
        if member_epoch == 0:
            if topics is None and member is None:
                return HeartbeatResult(
                    _errors.INVALID_REQUEST,
                    message="SubscribedTopicNames must be set in first request.",
                )
            if group is None:
                group = self._groups[group_id] = ShareGroup(group_id, self.state.epoch(group_id))
            if member is None:
                if len(group.members) >= self.max_size:
                    return HeartbeatResult(
                        _errors.GROUP_MAX_SIZE_REACHED,
                        message=f"the share group has {self.max_size} members",
                    )
                member = group.members[member_id] = ShareMember(
                    member_id, 0, client_id, client_host, rack_id, list(topics or [])
                )
                self._bump(group)
        elif member is None or group is None:
            return HeartbeatResult(
                _errors.UNKNOWN_MEMBER_ID, message=f"member {member_id} is not in the group"
            )
        elif member_epoch != member.epoch:
            return HeartbeatResult(
                _errors.FENCED_MEMBER_EPOCH,
                message=f"member epoch {member_epoch}, expected {member.epoch}",
            )
        member.deadline = now + self.session_timeout_ms / 1000
        if rack_id is not None:
            member.rack_id = rack_id
        if topics is not None and sorted(set(topics)) != sorted(set(member.topics)):
            member.topics = list(dict.fromkeys(topics))
            self._bump(group)
        elif self._counts(group.subscribed()) != group.partition_counts:
            self._bump(group)  # a subscribed topic was created, deleted or grew
        tell = member_epoch == 0 or topics is not None or member.epoch != group.assignment_epoch
        member.epoch = group.assignment_epoch
        return HeartbeatResult(
            _errors.NONE, member_id, member.epoch, dict(member.assignment) if tell else None
        )

    def _remove(self, group: ShareGroup, member_id: str, *, release: bool) -> None:
        """Remove a member; ``release``: also release its records and close its share
        sessions (it expired). A member leaving with a heartbeat keeps both: its client
        sends its last acknowledgements next (ShareAcknowledge with epoch -1, which
        closes the session and releases the rest), as librdkafka's close does."""
        del group.members[member_id]
        self._bump(group)
        if release:
            self.release_member(group.group_id, member_id)
            if self.on_member_gone is not None:
                self.on_member_gone(group.group_id, member_id)

    def expire(self) -> list[tuple[str, str]]:
        """Remove members past their session timeout, and forget expired acquisition
        locks; (group, member id) of each member removed."""
        for sp in self._partitions.values():
            sp.expire_locks()
        now = time.monotonic()
        gone = []
        for group in list(self._groups.values()):
            for mid, m in list(group.members.items()):
                if m.deadline <= now:
                    log.info("share group %s: member %s expired", group.group_id, mid)
                    self._remove(group, mid, release=True)
                    gone.append((group.group_id, mid))
        return gone

    def is_member(self, group_id: str, member_id: str) -> bool:
        """Whether ``member_id`` is a member of ``group_id`` now."""
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    # -- share partitions -----------------------------------------------------------------

    def share_partition(self, group_id: str, topic: str, partition: int) -> SharePartition:
        """The group's share partition of ``topic``-``partition``, opened (and its state
        created per ``share.auto.offset.reset``) on first use. Raises UnknownTopicError and
        what ``Log.subscribe`` raises."""
        key = (group_id, topic, partition)
        plog = self.topics.log(topic, partition)
        sp = self._partitions.get(key)
        if sp is not None and sp.log is plog and not sp.subscription.closed:
            return sp
        reset = self.state.config(group_id, "share.auto.offset.reset")
        sub = plog.subscribe(
            subscription_name(group_id),
            ack_wait_ms=self.lock_ms,
            max_in_flight=self.max_record_locks,
            start=OFFSET_OLDEST if reset == "earliest" else OFFSET_NEWEST,
            max_deliveries=self.delivery_count_limit,
        )
        sp = self._partitions[key] = SharePartition(
            group_id, topic, partition, log=plog, subscription=sub, lock_ms=self.lock_ms
        )
        return sp

    def has_state(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether the group has share-partition state there (fetched from it once).
        Raises UnknownTopicError."""
        if (group_id, topic, partition) in self._partitions:
            return True
        return subscription_name(group_id) in self.topics.log(topic, partition).subscriptions()

    def reset_partition(self, group_id: str, topic: str, partition: int, start: int | None) -> None:
        """Replace the group's share-partition state: start afresh at offset ``start``
        (AlterShareGroupOffsets), or remove it (None: DeleteShareGroupOffsets; the next
        fetch starts per ``share.auto.offset.reset``). The group must have no members
        (the caller checks). Raises UnknownTopicError, InvalidOffsetError (``start``
        outside [log start, log end])."""
        plog = self.topics.log(topic, partition)
        if start is not None and not plog.log_start_offset <= start <= plog.log_end_offset:
            raise InvalidOffsetError(
                f"start offset {start} outside [{plog.log_start_offset}, {plog.log_end_offset}]"
            )
        self.forget_partition(group_id, topic, partition)
        name = subscription_name(group_id)
        if name in plog.subscriptions():
            plog.unsubscribe(name)
        if start is not None:
            plog.subscribe(name, start=start).close()

    def all_partitions(self) -> list[SharePartition]:
        """Every share partition opened so far, of every group (metrics)."""
        return list(self._partitions.values())

    def open_partitions(self, group_id: str) -> list[SharePartition]:
        """The group's share partitions opened so far."""
        return [sp for (g, _, _), sp in self._partitions.items() if g == group_id]

    def forget_partition(self, group_id: str, topic: str, partition: int) -> None:
        """Close and drop an open share partition (its state stays on disk)."""
        sp = self._partitions.pop((group_id, topic, partition), None)
        if sp is not None and not sp.subscription.closed:
            sp.subscription.close()

    def release_member(self, group_id: str, member_id: str) -> int:
        """Release what ``member_id`` holds in the group's share partitions; how many."""
        released = 0
        for sp in self.open_partitions(group_id):
            if not sp.subscription.closed:
                released += sp.release_member(member_id)
        return released

    def delete(self, group_id: str) -> int:
        """Delete an empty share group (DeleteGroups; the caller checks it has no members):
        its share-partition state in every partition of every topic (the durable
        subscriptions, as Kafka's share coordinator deletes the group's
        ``__share_group_state`` records) and its own record (a tombstone, see
        ``ShareGroupState.delete``), so a group of that id starts afresh: epoch 1, each
        partition per ``share.auto.offset.reset``. Returns how many share partitions had
        state. Raises what ``Log.unsubscribe``, ``Log.append`` and ``Log.sync`` raise."""
        removed = 0
        for topic, info in sorted(self.topics.all().items()):
            for partition in range(info.partitions):
                if self.has_state(group_id, topic, partition):
                    self.reset_partition(group_id, topic, partition, None)
                    removed += 1
        for key in [k for k in self._partitions if k[0] == group_id]:
            self.forget_partition(*key)  # opened on a topic since deleted
        self._groups.pop(group_id, None)
        self.state.delete(group_id)
        return removed

    def set_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace the group's config overrides, durably (an fsync under the default
        policy) before returning."""
        group = self._groups.get(group_id)
        epoch = self.state.epoch(group_id) if group is None else group.epoch
        self.state.save(group_id, epoch, configs, durable=True)

    def shutdown(self) -> None:
        """Close every open share partition's subscription (a clean journal snapshot)."""
        for key in list(self._partitions):
            self.forget_partition(*key)
