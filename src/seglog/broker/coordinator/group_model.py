"""Data of the classic group coordinator (``coordinator.groups``): Kafka's group error codes, the
group states, members, groups, and the answers JoinGroup / SyncGroup wait for."""

from __future__ import annotations

import asyncio
import dataclasses
import enum

__all__ = [
    "Group",
    "GroupState",
    "JoinResult",
    "Member",
    "SyncResult",
]


class GroupState(enum.Enum):
    """Classic group states; the value is the name DescribeGroups / ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclasses.dataclass(frozen=True)
class JoinResult:
    """A JoinGroup answer. ``members`` (member id, group instance id, metadata of the
    chosen protocol) is filled for the leader only."""

    error: int
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclasses.dataclass(frozen=True)
class SyncResult:
    """A SyncGroup answer: the member's assignment (opaque bytes from the leader)."""

    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclasses.dataclass
class Member:
    """One group member. Timeouts in ms; ``protocols`` is (name, metadata) in the
    member's order of preference."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    expiry: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str | None) -> bytes:
        """This member's metadata for ``protocol`` (b"" when it has none)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""


@dataclasses.dataclass
class Group:
    """One consumer group. ``members`` keeps join order (the first is the default leader);
    ``pending`` holds member ids handed out with 79 MEMBER_ID_REQUIRED that have not
    rejoined yet, with their expiry timers."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = dataclasses.field(default_factory=dict)
    pending: dict[str, asyncio.TimerHandle] = dataclasses.field(default_factory=dict)
    static_members: dict[str, str] = dataclasses.field(default_factory=dict)
    """group.instance.id → member id of static members (KIP-345)."""
    join_timer: asyncio.TimerHandle | None = None
    initial_join: bool = False  # the rebalance started from Empty (initial delay applies)
    new_member_added: bool = False
    initial_remaining_ms: int = 0

    def supports(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any non-empty type and
        protocol list; otherwise the type must match and one protocol must be supported
        by every member."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(set(names) & self.common_protocols())

    def common_protocols(self) -> set[str]:
        """Protocol names every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins
        (ties: the first member's preference)."""
        common = self.common_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in common)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(self.members.values()))
        order = [name for name, _ in first.protocols if name in votes]
        return max(order, key=lambda name: votes[name])

    def all_joined(self) -> bool:
        """Every known member is waiting in JoinGroup and no member id is pending."""
        return not self.pending and all(m.join_future is not None for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (0 without members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
