"""Kafka's rules for one ConsumerGroupHeartbeat, as functions of the group's data
(``consumer_group_model``), without timers or I/O: request validation
(``throwIfConsumerGroupHeartbeatRequestIsInvalid``), the choice of assignor and the target
assignment of a group epoch, a member's reconciliation towards its target
(``CurrentAssignmentBuilder``: revoke first, then take what others released), and the
heartbeat interval a member is given. KIP-848."""

from __future__ import annotations

import logging
import re

from seglog.broker.coordinator.assignors import ASSIGNORS, TP
from seglog.broker.coordinator.committed import MAX_RECORD_STRING_BYTES
from seglog.broker.coordinator.consumer_group_model import (
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
)
from seglog.broker.protocol.errors import (
    INVALID_REGULAR_EXPRESSION,
    INVALID_REQUEST,
    UNSUPPORTED_ASSIGNOR,
)

__all__ = [
    "choose_assignor",
    "compute_target",
    "heartbeat_interval",
    "invalid_heartbeat",
    "reconcile",
]

log = logging.getLogger(__name__)


def invalid_heartbeat(req: HeartbeatRequest, assignors: tuple[str, ...]) -> HeartbeatResult | None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``: the error for a request
    whose fields do not fit its epoch (42 INVALID_REQUEST), a malformed regex (128) or an
    assignor not in ``assignors`` (112 UNSUPPORTED_ASSIGNOR); None when it is valid."""
    if not req.group_id:
        return HeartbeatResult(INVALID_REQUEST, "GroupId can't be empty.")
    if len(req.group_id.encode()) > MAX_RECORD_STRING_BYTES:
        return HeartbeatResult(INVALID_REQUEST, "GroupId is too long.")
    if req.instance_id == "":
        return HeartbeatResult(INVALID_REQUEST, "InstanceId can't be empty.")
    if req.member_epoch != 0 and not req.member_id:
        return HeartbeatResult(INVALID_REQUEST, "MemberId can't be empty.")
    if req.version >= 1 and not req.member_id:
        return HeartbeatResult(INVALID_REQUEST, "MemberId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return HeartbeatResult(
                INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
            )
        if req.owned is None or any(parts for _, parts in req.owned):
            return HeartbeatResult(
                INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
            )
        if req.subscribed_names is None and req.subscribed_regex is None:
            return HeartbeatResult(
                INVALID_REQUEST,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
    elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
        return HeartbeatResult(INVALID_REQUEST, "InstanceId can't be null when MemberEpoch is -2.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        return HeartbeatResult(INVALID_REQUEST, f"MemberEpoch {req.member_epoch} is invalid.")
    if req.subscribed_regex:
        try:
            re.compile(req.subscribed_regex)
        except re.error as exc:
            return HeartbeatResult(
                INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{req.subscribed_regex}` is not a valid regular "
                f"expression: {exc}.",
            )
    if req.server_assignor is not None and req.server_assignor not in assignors:
        return HeartbeatResult(
            UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(assignors)}.",
        )
    return None


def choose_assignor(group: ConsumerGroup, assignors: tuple[str, ...]) -> str:
    """The assignor most members ask for (ties: the configured order), else the
    default (the first of ``group.consumer.assignors``)."""
    votes: dict[str, int] = {}
    for m in group.members.values():
        if m.server_assignor in assignors:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if not votes:
        return assignors[0]
    return max(assignors, key=lambda name: (votes.get(name, 0), -assignors.index(name)))


def compute_target(group: ConsumerGroup, assignors: tuple[str, ...]) -> None:
    """Compute the target assignment of the current group epoch with the group's assignor."""
    group.assignor = choose_assignor(group, assignors)
    subscriptions = {
        mid: {t for t in m.subscribed_topics() if t in group.subscription_metadata}
        for mid, m in group.members.items()
    }
    target = ASSIGNORS[group.assignor](subscriptions, group.subscription_metadata, group.target)
    group.target = {mid: frozenset(tps) for mid, tps in target.items()}
    group.assignment_epoch = group.group_epoch
    log.info(
        "consumer group %r: target assignment of epoch %d (%s, %d members)",
        group.group_id, group.assignment_epoch, group.assignor, len(group.members),
    )  # fmt: skip


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: frozenset[TP] | None) -> bool:
    """Kafka's ``CurrentAssignmentBuilder``: move ``member`` towards its target, given the
    partitions its heartbeat says it owns (None: not sent). Returns True when the member
    now has partitions to revoke (the caller arms its rebalance timeout)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or owned & member.revoking:
            return False  # still revoking
        member.revoking = frozenset()
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
    elif member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch:
        return False
    target = group.target.get(member.member_id, frozenset())
    revoke = member.assigned - target
    if revoke:
        member.assigned &= target
        member.revoking = revoke
        member.state = MemberState.UNREVOKED_PARTITIONS
        return True
    owners = group.owners(excluding=member.member_id)
    pending = target - member.assigned
    free = frozenset(tp for tp in pending if tp not in owners)
    if member.member_epoch != group.assignment_epoch:
        member.previous_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
    member.assigned |= free
    member.state = MemberState.UNRELEASED_PARTITIONS if pending - free else MemberState.STABLE
    return False


def heartbeat_interval(
    member: ConsumerMember, now: float, interval_ms: int, unreleased_ms: int
) -> int:
    """The ``HeartbeatIntervalMs`` to answer ``member`` with (after :func:`reconcile`), at
    event-loop time ``now`` (s): ``interval_ms`` (``group.consumer.heartbeat.interval.ms``),
    or the shorter ``unreleased_ms`` (seglog's
    ``seglog.group.consumer.unreleased.heartbeat.interval.ms``; 0: never) while the member
    waits for partitions that others still have to release (``unreleased_partitions``), for
    at most its rebalance timeout from the first such answer.

    Why: a partition moves in two heartbeats, the owner's (it learns it must revoke, then
    acknowledges at once) and the new owner's, which may come a whole interval after the
    release; clients (librdkafka, the Java consumer) take each response's interval for
    their next heartbeat, so a waiting member asks again soon. Only waiting members heartbeat
    faster, and not longer than owners have to revoke (then they are removed) -- Kafka's
    coordinator always answers ``interval_ms``."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS or unreleased_ms <= 0:
        member.unreleased_since = None
        return interval_ms
    if member.unreleased_since is None:
        member.unreleased_since = now
    if (now - member.unreleased_since) * 1000 >= member.rebalance_timeout_ms:
        return interval_ms
    return min(interval_ms, unreleased_ms)
