"""Data of KIP-848 consumer groups (``coordinator.consumer_groups``): members, groups, their
states, and the snapshot of a group that ``__consumer_offsets`` keeps.

Kafka's model (``ConsumerGroup``, ``ConsumerGroupMember``): the group epoch counts changes
of membership, subscriptions and subscribed topics' metadata; the target assignment is
computed for one group epoch (the assignment epoch); each member converges to its target
through its own epoch: a member whose partitions go to another first gets an assignment
without them (state ``unrevoked_partitions``, epoch unchanged), acknowledges by
heartbeating the partitions it still owns, and only then moves to the target epoch; a
partition still owned (or being revoked) by another member is withheld until released
(``unreleased_partitions``).

Partitions are named by topic name here; the wire carries topic ids (the handlers map
them with the broker's topic manager).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from seglog.broker.coordinator.assignors import TP

__all__ = [
    "TP",
    "ClassicMemberMetadata",
    "ConsumerGroup",
    "ConsumerMember",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberState",
]


class MemberState(enum.Enum):
    """Kafka's ``MemberState`` of a consumer-group member."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class GroupState(enum.Enum):
    """Kafka's ``ConsumerGroupState`` (the names ListGroups and ConsumerGroupDescribe
    report)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


LEAVE_EPOCH = -1
"""Member epoch of a leaving member (KIP-848)."""
STATIC_LEAVE_EPOCH = -2
"""Member epoch of a static member that left for now, keeping its assignment until its
session times out."""


@dataclasses.dataclass(frozen=True)
class ClassicMemberMetadata:
    """What a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside
    a consumer group keeps: its session timeout (ms) and its JoinGroup protocols (name,
    ConsumerProtocolSubscription bytes) in its order of preference. Kafka's
    ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup/SyncGroup answers name: its most preferred one."""
        return self.protocols[0][0]

    def to_record(self) -> dict[str, Any]:
        """The persisted fields (JSON-able; metadata as hex)."""
        return {
            "session_timeout_ms": self.session_timeout_ms,
            "protocols": [[name, data.hex()] for name, data in self.protocols],
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ClassicMemberMetadata:
        """Inverse of :meth:`to_record`. Raises KeyError, ValueError, TypeError."""
        protocols = tuple((str(n), bytes.fromhex(d)) for n, d in data["protocols"])
        if not protocols:
            raise ValueError("a classic member without protocols")
        return cls(int(data["session_timeout_ms"]), protocols)


@dataclasses.dataclass
class ConsumerMember:
    """One member. ``assigned``: the partitions it may use now; ``revoking``: those it must
    give up before its epoch moves on. Timeouts in ms."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TP] = frozenset()
    revoking: frozenset[TP] = frozenset()
    regex_topics: frozenset[str] = frozenset()
    """Existing topics its regex matches (and it may DESCRIBE), as last resolved."""
    classic: ClassicMemberMetadata | None = None
    """Set for a member that uses the classic protocol (``coordinator.classic_members``)."""
    # soft state (not persisted)
    regex_version: int = -1
    """The topic-manager change count ``regex_topics`` was resolved at (-1: never)."""
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    unreleased_since: float | None = None
    """Event-loop time (s) its heartbeats started finding it in ``unreleased_partitions``
    (None: not waiting); bounds how long it gets the shorter heartbeat interval."""

    def subscribed_topics(self) -> frozenset[str]:
        """Names subscribed to plus the topics the regex resolved to."""
        return frozenset(self.subscribed_names) | self.regex_topics

    def cancel_timers(self) -> None:
        """Cancel the session and revocation timers."""
        for timer in (self.session_timer, self.rebalance_timer):
            if timer is not None:
                timer.cancel()
        self.session_timer = self.rebalance_timer = None

    def to_record(self) -> dict[str, Any]:
        """The persisted fields (JSON-able)."""
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "subscribed_names": list(self.subscribed_names),
            "subscribed_regex": self.subscribed_regex,
            "server_assignor": self.server_assignor,
            "member_epoch": self.member_epoch,
            "previous_epoch": self.previous_epoch,
            "state": self.state.value,
            "assigned": _tps_out(self.assigned),
            "revoking": _tps_out(self.revoking),
            "regex_topics": sorted(self.regex_topics),
            "classic": None if self.classic is None else self.classic.to_record(),
        }

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ConsumerMember:
        """Inverse of :meth:`to_record`. Raises KeyError, ValueError, TypeError."""
        return cls(
            member_id=str(data["member_id"]),
            instance_id=data["instance_id"],
            rack_id=data["rack_id"],
            client_id=str(data["client_id"]),
            client_host=str(data["client_host"]),
            rebalance_timeout_ms=int(data["rebalance_timeout_ms"]),
            subscribed_names=tuple(str(n) for n in data["subscribed_names"]),
            subscribed_regex=data["subscribed_regex"],
            server_assignor=data["server_assignor"],
            member_epoch=int(data["member_epoch"]),
            previous_epoch=int(data["previous_epoch"]),
            state=MemberState(data["state"]),
            assigned=_tps_in(data["assigned"]),
            revoking=_tps_in(data["revoking"]),
            regex_topics=frozenset(str(t) for t in data["regex_topics"]),
            classic=(
                None
                if data.get("classic") is None
                else ClassicMemberMetadata.from_record(data["classic"])
            ),
        )


def _tps_out(tps: frozenset[TP]) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(tps)]


def _tps_in(rows: list[list[Any]]) -> frozenset[TP]:
    return frozenset((str(t), int(p)) for t, p in rows)


@dataclasses.dataclass
class ConsumerGroup:
    """One consumer group: its epochs, members (join order), static members
    (instance id -> member id), the target assignment of ``assignment_epoch`` and the
    subscribed topics' partition counts it was computed from."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: dict[str, ConsumerMember] = dataclasses.field(default_factory=dict)
    static_members: dict[str, str] = dataclasses.field(default_factory=dict)
    target: dict[str, frozenset[TP]] = dataclasses.field(default_factory=dict)
    subscription_metadata: dict[str, int] = dataclasses.field(default_factory=dict)
    persisted: bytes | None = None
    """The snapshot last written to ``__consumer_offsets`` (None: none yet)."""

    def state(self) -> GroupState:
        """Kafka's ``ConsumerGroup.maybeUpdateGroupState``."""
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def owners(self, excluding: str | None = None) -> dict[TP, str]:
        """Partition -> the member that has it or is revoking it."""
        out: dict[TP, str] = {}
        for m in self.members.values():
            if m.member_id != excluding:
                for tp in m.assigned | m.revoking:
                    out[tp] = m.member_id
        return out

    def subscribed_topics(self) -> set[str]:
        """Every topic a member subscribes to (by name or regex)."""
        out: set[str] = set()
        for m in self.members.values():
            out |= m.subscribed_topics()
        return out

    def snapshot(self) -> bytes:
        """The persisted state as JSON (UTF-8): epochs, assignor, members, target."""
        doc = {
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignor": self.assignor,
            "members": [m.to_record() for m in self.members.values()],
            "target": {mid: _tps_out(tps) for mid, tps in sorted(self.target.items())},
            "subscription_metadata": dict(sorted(self.subscription_metadata.items())),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_snapshot(cls, group_id: str, data: bytes) -> ConsumerGroup:
        """Inverse of :meth:`snapshot`. Raises ValueError (bad JSON or fields)."""
        try:
            doc = json.loads(data)
            group = cls(
                group_id,
                group_epoch=int(doc["group_epoch"]),
                assignment_epoch=int(doc["assignment_epoch"]),
                assignor=str(doc["assignor"]),
                target={str(k): _tps_in(v) for k, v in doc["target"].items()},
                subscription_metadata={
                    str(k): int(v) for k, v in doc["subscription_metadata"].items()
                },
            )
            for row in doc["members"]:
                member = ConsumerMember.from_record(row)
                group.members[member.member_id] = member
                if member.instance_id is not None:
                    group.static_members[member.instance_id] = member.member_id
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"bad consumer group snapshot: {exc!r}") from None
        group.persisted = data
        return group


@dataclasses.dataclass(frozen=True)
class HeartbeatRequest:
    """One ConsumerGroupHeartbeat's fields (None: not sent / unchanged, as on the wire),
    with the request's client and version. ``owned``: (topic id, partitions) pairs.
    ``may_describe(topic)``: whether the request's principal may DESCRIBE a topic (regex
    resolution)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    may_describe: Callable[[str], bool] = lambda _topic: True


@dataclasses.dataclass(frozen=True)
class HeartbeatResult:
    """A ConsumerGroupHeartbeat answer. ``assignment`` None: not sent (unchanged);
    ``durable``: completes once the group's new state is on disk (None: nothing to wait
    for); ``heartbeat_interval_ms``: the member's next interval (None: the configured
    ``group.consumer.heartbeat.interval.ms``)."""

    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: frozenset[TP] | None = None
    durable: Future[int] | None = None
    heartbeat_interval_ms: int | None = None
