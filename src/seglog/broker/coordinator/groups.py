"""Kafka's classic group coordinator for one node: group membership state machine.

States (Kafka's ``GroupState`` names): Empty → PreparingRebalance (a member joins or
leaves) → CompletingRebalance (every known member rejoined or the rebalance timeout
passed; a generation, protocol and leader are chosen and JoinGroup is answered) → Stable
(the leader's SyncGroup assignments are handed out) → PreparingRebalance ... A group
whose last member is gone goes back to Empty and is then forgotten (Dead): membership
lives in memory only (a restarted broker makes every member rejoin); committed offsets
are kept by ``coordinator.committed.CommittedOffsets``.

Every timer (session timeouts, the rebalance deadline, ``group.initial.rebalance.delay.ms``)
is a ``loop.call_later`` handle on the broker's event loop; JoinGroup and SyncGroup
requests that must wait park on futures resolved by the state machine. Group ids are data
(dictionary keys), never file names.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TypeVar

from seglog.broker.coordinator.group_model import (
    Group,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from seglog.broker.protocol.errors import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)

__all__ = ["GroupCoordinator", "GroupState", "JoinResult", "SyncResult"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def _resolve(fut: asyncio.Future[_T] | None, value: _T) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


class GroupCoordinator:
    """Every group of this broker (the single node coordinates all of them).

    ``initial_rebalance_delay_ms`` is Kafka's ``group.initial.rebalance.delay.ms``: how
    long a rebalance that starts from an Empty group waits for more members (extended by
    the same delay while new members keep joining, up to the rebalance timeout).
    Session timeouts outside ``min_session_timeout_ms``..``max_session_timeout_ms``
    (``group.min/max.session.timeout.ms``) are refused with 26 INVALID_SESSION_TIMEOUT."""

    def __init__(
        self,
        *,
        initial_rebalance_delay_ms: int = 100,
        min_session_timeout_ms: int = 6000,
        max_session_timeout_ms: int = 1_800_000,
    ) -> None:
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.groups: dict[str, Group] = {}
        self._closed = False

    # -- JoinGroup ----------------------------------------------------------------------

    async def join(
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
    ) -> JoinResult:
        """Handle one JoinGroup (Kafka's ``doJoinGroup``); waits while the group
        rebalances. ``require_known_member_id`` (JoinGroup v4+): a join with an empty
        member id gets 79 MEMBER_ID_REQUIRED and the id to rejoin with."""
        if self._closed:
            return JoinResult(NOT_COORDINATOR, member_id)
        if not group_id:
            return JoinResult(INVALID_GROUP_ID, member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(INVALID_SESSION_TIMEOUT, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(UNKNOWN_MEMBER_ID, member_id)
            group = Group(group_id)
        names = [name for name, _ in protocols]
        if not group.supports(protocol_type, names):
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id)
        self.groups[group_id] = group
        member = Member(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms,
            protocol_type,
            protocols,
        )
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if member_id and known is not None and member_id != known:
                return JoinResult(FENCED_INSTANCE_ID, member_id)
            if not member_id and known is not None and known in group.members:
                return await self._replace_static(group, group.members[known], member)
        if not member_id:
            member.member_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id and group_instance_id is None:  # static: no round trip
                loop = asyncio.get_running_loop()
                group.pending[member.member_id] = loop.call_later(
                    session_timeout_ms / 1000, self._expire_pending, group, member.member_id
                )
                return JoinResult(MEMBER_ID_REQUIRED, member.member_id)
            return await self._add_and_rebalance(group, member)
        if member_id in group.pending:
            group.pending.pop(member_id).cancel()
            return await self._add_and_rebalance(group, member)
        current = group.members.get(member_id)
        if current is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(UNKNOWN_MEMBER_ID, member_id)
        return await self._current_member_join(group, current, member)

    async def _replace_static(self, group: Group, old: Member, new: Member) -> JoinResult:
        """A static member rejoining with a new member id (KIP-345): it takes the old
        member's place, assignment and leadership; the old id is fenced (82). A Stable
        group with the same protocols answers at once, without a rebalance; otherwise the
        new member joins the rebalance in progress."""
        new.member_id = f"{new.client_id}-{uuid.uuid4()}"
        new.assignment = old.assignment
        if old.expiry is not None:
            old.expiry.cancel()
            old.expiry = None
        _resolve(old.join_future, JoinResult(FENCED_INSTANCE_ID, old.member_id))
        _resolve(old.sync_future, SyncResult(FENCED_INSTANCE_ID))
        old.join_future = old.sync_future = None
        # keep the member order (the leader choice and the leader's member list)
        group.members = {
            (new.member_id if mid == old.member_id else mid): (new if mid == old.member_id else m)
            for mid, m in group.members.items()
        }
        if group.leader == old.member_id:
            group.leader = new.member_id
        assert new.group_instance_id is not None
        group.static_members[new.group_instance_id] = new.member_id
        log.info(
            "group %r: static member %s rejoined as %s (was %s)",
            group.group_id, new.group_instance_id, new.member_id, old.member_id,
        )  # fmt: skip
        self._heartbeat(group, new)
        if group.state is GroupState.STABLE and old.protocols == new.protocols:
            return self._join_result(group, new)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        new.join_future = fut
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)
        return await asyncio.shield(fut)

    def has_members(self, group_id: str) -> bool:
        """Whether a classic group of that id has members (or member ids pending)."""
        group = self.groups.get(group_id)
        return group is not None and bool(group.members or group.pending)

    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        """Whether a request naming ``group_instance_id`` comes from a member id that
        another member of that instance replaced (answer 82 FENCED_INSTANCE_ID)."""
        if group_instance_id is None:
            return False
        group = self.groups.get(group_id)
        known = None if group is None else group.static_members.get(group_instance_id)
        return known is not None and known != member_id

    async def _add_and_rebalance(self, group: Group, member: Member) -> JoinResult:
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        if not group.members:  # Kafka's add: the first member gives the group its type
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        if group.leader is None:
            group.leader = member.member_id
        group.new_member_added = True
        self._heartbeat(group, member)
        log.info("group %r: member %s joined", group.group_id, member.member_id)
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)
        return await asyncio.shield(fut)

    async def _current_member_join(self, group: Group, current: Member, new: Member) -> JoinResult:
        same = current.protocols == new.protocols
        if group.state is GroupState.COMPLETING_REBALANCE and same:
            self._heartbeat(group, current)
            return self._join_result(group, current)
        if group.state is GroupState.STABLE and same and group.leader != current.member_id:
            self._heartbeat(group, current)
            return self._join_result(group, current)
        current.protocols = new.protocols
        current.protocol_type = new.protocol_type
        current.session_timeout_ms = new.session_timeout_ms
        current.rebalance_timeout_ms = new.rebalance_timeout_ms
        current.client_id, current.client_host = new.client_id, new.client_host
        _resolve(current.join_future, JoinResult(REBALANCE_IN_PROGRESS, current.member_id))
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        current.join_future = fut
        self._heartbeat(group, current)
        self._maybe_prepare_rebalance(group)
        self._try_complete_join(group)
        return await asyncio.shield(fut)

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if member.member_id == group.leader:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader or "",
            members,
        )

    # -- rebalance ----------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.state in (
            GroupState.EMPTY,
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
        ):
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        """Enter PreparingRebalance: fail waiting SyncGroups with 27 and arm the join
        deadline (the initial delay when the group was Empty)."""
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                _resolve(m.sync_future, SyncResult(REBALANCE_IN_PROGRESS))
                m.sync_future = None
        loop = asyncio.get_running_loop()
        if group.join_timer is not None:
            group.join_timer.cancel()
        timeout_ms = group.rebalance_timeout_ms()
        if group.state is GroupState.EMPTY:
            delay = min(self.initial_rebalance_delay_ms, timeout_ms)
            group.initial_join = True
            group.new_member_added = False
            group.initial_remaining_ms = max(timeout_ms - delay, 0)
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_over, group)
        else:
            group.initial_join = False
            group.join_timer = loop.call_later(timeout_ms / 1000, self._complete_join, group)
        log.info(
            "group %r: preparing rebalance (generation %d, %d members)",
            group.group_id,
            group.generation,
            len(group.members),
        )
        group.state = GroupState.PREPARING_REBALANCE

    def _initial_delay_over(self, group: Group) -> None:
        group.join_timer = None
        if group.new_member_added and group.initial_remaining_ms > 0:
            delay = min(self.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.new_member_added = False
            group.initial_remaining_ms -= delay
            loop = asyncio.get_running_loop()
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_over, group)
            return
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.initial_join
            and group.all_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's ``onCompleteJoin``: drop members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets the members)."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_join = False
        for m in [m for m in group.members.values() if m.join_future is None]:
            log.info("group %r: member %s did not rejoin in time", group.group_id, m.member_id)
            self._drop(group, m)
        group.generation += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_type = group.protocol_name = group.leader = None
            self._forget_if_unused(group)
            return
        group.protocol_type = next(iter(group.members.values())).protocol_type
        group.protocol_name = group.select_protocol()
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        log.info(
            "group %r: generation %d, protocol %s, leader %s, %d members",
            group.group_id,
            group.generation,
            group.protocol_name,
            group.leader,
            len(group.members),
        )
        for m in group.members.values():
            fut, m.join_future = m.join_future, None
            _resolve(fut, self._join_result(group, m))
            self._heartbeat(group, m)

    # -- SyncGroup / Heartbeat / LeaveGroup ---------------------------------------------

    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        *,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        """Handle one SyncGroup (Kafka's ``doSyncGroup``): the leader's ``assignments``
        (member id → bytes) complete the rebalance; followers wait for them."""
        group = self.groups.get(group_id)
        if self._closed:
            return SyncResult(NOT_COORDINATOR)
        if group is None or member_id not in group.members:
            return SyncResult(UNKNOWN_MEMBER_ID)
        if generation != group.generation:
            return SyncResult(ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(REBALANCE_IN_PROGRESS)
        self._heartbeat(group, member)
        if group.state is GroupState.STABLE:
            return SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return SyncResult(UNKNOWN_MEMBER_ID)
        _resolve(member.sync_future, SyncResult(REBALANCE_IN_PROGRESS))
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        if member_id == group.leader:
            group.state = GroupState.STABLE
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
                sync_fut, m.sync_future = m.sync_future, None
                _resolve(
                    sync_fut,
                    SyncResult(NONE, group.protocol_type, group.protocol_name, m.assignment),
                )
            log.info("group %r: stable at generation %d", group.group_id, group.generation)
        return await asyncio.shield(fut)

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> int:
        """Handle one Heartbeat (Kafka's ``doHeartbeat``): an error code, 27 while the
        group rebalances (the member must rejoin)."""
        group = self.groups.get(group_id)
        if self._closed:
            return NOT_COORDINATOR
        if group is None or member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return UNKNOWN_MEMBER_ID
        self._heartbeat(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    def leave(self, group_id: str, member_ids: list[str]) -> list[int]:
        """Handle LeaveGroup: one error code per member id (25 for an unknown one); the
        group rebalances without them."""
        group = self.groups.get(group_id)
        if group is None:
            return [UNKNOWN_MEMBER_ID] * len(member_ids)
        codes = []
        for member_id in member_ids:
            if member_id in group.pending:
                group.pending.pop(member_id).cancel()
                self._try_complete_join(group)
                codes.append(NONE)
            elif member_id in group.members:
                log.info("group %r: member %s left", group.group_id, member_id)
                self._remove_and_update(group, group.members[member_id])
                codes.append(NONE)
            else:
                codes.append(UNKNOWN_MEMBER_ID)
        self._forget_if_unused(group)
        return codes

    def validate_commit(self, group_id: str, generation: int, member_id: str) -> int:
        """OffsetCommit rules of Kafka's ``validateOffsetCommit``: generation < 0 commits
        to an Empty (or unknown) group are simple commits; otherwise the member must be
        known (25) with the current generation (22), and not while the group waits for
        its SyncGroup (27). A valid member commit counts as a heartbeat."""
        group = self.groups.get(group_id)
        if group is None:
            return NONE if generation < 0 else ILLEGAL_GENERATION
        if generation < 0 and group.state is GroupState.EMPTY:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        self._heartbeat(group, member)
        return NONE

    # -- session timeouts and removal ---------------------------------------------------

    def _heartbeat(self, group: Group, member: Member) -> None:
        if member.expiry is not None:
            member.expiry.cancel()
        loop = asyncio.get_running_loop()
        member.expiry = loop.call_later(
            member.session_timeout_ms / 1000, self._expire, group, member
        )

    def _expire(self, group: Group, member: Member) -> None:
        member.expiry = None
        if group.members.get(member.member_id) is not member:
            return
        if member.join_future is not None or member.sync_future is not None:
            self._heartbeat(group, member)  # waiting in JoinGroup/SyncGroup keeps it alive
            return
        log.info(
            "group %r: member %s expired (no heartbeat for %d ms)",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._remove_and_update(group, member)
        self._forget_if_unused(group)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending.pop(member_id, None) is not None:
            self._try_complete_join(group)
            self._forget_if_unused(group)

    def _drop(self, group: Group, member: Member) -> None:
        if member.expiry is not None:
            member.expiry.cancel()
            member.expiry = None
        _resolve(member.join_future, JoinResult(UNKNOWN_MEMBER_ID, member.member_id))
        _resolve(member.sync_future, SyncResult(UNKNOWN_MEMBER_ID))
        member.join_future = member.sync_future = None
        del group.members[member.member_id]
        instance = member.group_instance_id
        if instance is not None and group.static_members.get(instance) == member.member_id:
            del group.static_members[instance]
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)

    def _remove_and_update(self, group: Group, member: Member) -> None:
        self._drop(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        self._try_complete_join(group)

    def _forget_if_unused(self, group: Group) -> None:
        if (
            group.state is GroupState.EMPTY
            and not group.members
            and not group.pending
            and self.groups.get(group.group_id) is group
        ):
            group.state = GroupState.DEAD
            del self.groups[group.group_id]

    # -- online migration (``group_migration``) -----------------------------------------

    def take(self, group_id: str) -> Group | None:
        """Remove a group that becomes a KIP-848 consumer group (Kafka's
        ``convertToConsumerGroup``): JoinGroup and SyncGroup requests waiting in it are
        answered 27 REBALANCE_IN_PROGRESS (their members rejoin the consumer group) and
        its timers are cancelled. None when there is no such group."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return None
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for timer in group.pending.values():
            timer.cancel()
        group.pending.clear()
        for m in group.members.values():
            if m.expiry is not None:
                m.expiry.cancel()
                m.expiry = None
            _resolve(m.join_future, JoinResult(REBALANCE_IN_PROGRESS, m.member_id))
            _resolve(m.sync_future, SyncResult(REBALANCE_IN_PROGRESS))
            m.join_future = m.sync_future = None
        group.state = GroupState.DEAD
        return group

    def adopt(self, group: Group) -> None:
        """Take in a group converted from a consumer group (Kafka's
        ``convertToClassicGroup``): each member's session timeout starts and a rebalance
        is prepared, so every member rejoins (27 on its next Heartbeat)."""
        self.groups[group.group_id] = group
        for m in group.members.values():
            self._heartbeat(group, m)
        self._prepare_rebalance(group)

    def shutdown(self) -> None:
        """Broker shutdown: answer waiting JoinGroup/SyncGroup with 16 NOT_COORDINATOR
        (clients look for the coordinator again) and cancel every timer."""
        self._closed = True
        for group in self.groups.values():
            if group.join_timer is not None:
                group.join_timer.cancel()
            for timer in group.pending.values():
                timer.cancel()
            for m in group.members.values():
                if m.expiry is not None:
                    m.expiry.cancel()
                _resolve(m.join_future, JoinResult(NOT_COORDINATOR, m.member_id))
                _resolve(m.sync_future, SyncResult(NOT_COORDINATOR))
        self.groups.clear()
