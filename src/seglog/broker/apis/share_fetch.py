"""ShareFetch (API 78) and ShareAcknowledge (API 79), v1 (KIP-932).

ShareFetch, in order (Kafka's ``KafkaApis.handleShareFetchRequest``): READ on the group
(else 30 GROUP_AUTHORIZATION_FAILED for the whole request); the share session (see
``coordinator/share_sessions.py``: 42, 122, 123, 133 for the whole request); the
piggy-backed acknowledgements, per partition (``AcknowledgeErrorCode``: 0, 42, 121
INVALID_RECORD_STATE, 29 TOPIC_AUTHORIZATION_FAILED, 100 UNKNOWN_TOPIC_ID...); then up to
``MaxRecords`` records acquired for the member across the session's partitions (taken in
turn, the first partition moving to the back each time), each partition answering the
record batches that hold its acquired records (whole stored batches, as Kafka's: the
client keeps the offsets of ``AcquiredRecords``) with their delivery counts. Nothing
available: the request waits up to ``MaxWaitMs`` for new records, a release, an
acknowledgement freeing room, or a lock expiring (no polling: the subscriptions' wake-up
futures). ``AcquisitionLockTimeoutMs`` is ``group.share.record.lock.duration.ms``.
``MaxBytes``/``MinBytes`` are not applied (the record count bounds the response).

ShareAcknowledge: the same session and acknowledgement rules without acquiring (epoch 0
is 123: it cannot open a session). Epoch -1 on either closes the session after its
acknowledgements and releases what the member still holds.

Partitions named in the request get an entry; the session's other partitions only when
they have records. A partition is checked for READ on its topic when it joins the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.share_partition import AckBatch, Acquired
from seglog.broker.coordinator.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.messages.share_group import (
    ShareAcknowledgeResponse,
    ShareFetchResponse,
)
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = ["handle_share_acknowledge", "handle_share_fetch"]

_FTopic = ShareFetchResponse.ShareFetchableTopicResponse
_FPart = _FTopic.PartitionData
_ATopic = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
_APart = _ATopic.PartitionData


class _Entry:
    """One partition of the response."""

    __slots__ = ("ack_error", "data", "error", "partition", "ranges", "topic", "topic_id")

    def __init__(self, topic_id: uuid.UUID, topic: str | None, partition: int) -> None:
        self.topic_id = topic_id
        self.topic = topic
        self.partition = partition
        self.error = _errors.NONE
        self.ack_error = _errors.NONE
        self.ranges: list[Acquired] = []
        self.data = b""


Entries = dict[tuple[uuid.UUID, int], _Entry]


def _entry(entries: Entries, topic_id: uuid.UUID, topic: str | None, partition: int) -> _Entry:
    e = entries.get((topic_id, partition))
    if e is None:
        e = entries[(topic_id, partition)] = _Entry(topic_id, topic, partition)
    return e


def _acknowledge(
    ctx: BrokerContext, group: str, member: str, *, topic: str, partition: int, batches: Any
) -> int:
    """Apply one partition's acknowledgement batches; its error code."""
    try:
        sp = ctx.share_groups.share_partition(group, topic, partition)
        acks = [AckBatch(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches]
        return sp.acknowledge(member, acks)
    except (SeglogError, OSError) as exc:
        return _errors.error_code(exc)


def _partitions(
    ctx: BrokerContext,
    rctx: RequestContext,
    group: str,
    member: str,
    *,
    topics: Any,
    session: ShareSession | None,
    entries: Entries,
) -> None:
    """Resolve the request's partitions into ``entries`` (errors, acknowledgements) and
    add the fetchable ones to ``session`` (None: acknowledge only)."""
    for t in topics:
        info = ctx.topics.by_id(t.topic_id)
        name = None if info is None else info.name
        for p in t.partitions:
            e = _entry(entries, t.topic_id, name, p.partition_index)
            batches = p.acknowledgement_batches
            if info is None or name is None:
                e.error = _errors.UNKNOWN_TOPIC_ID
            elif not rctx.allowed(Op.READ, Res.TOPIC, name):
                e.error = _errors.TOPIC_AUTHORIZATION_FAILED
            elif not 0 <= p.partition_index < info.partitions:
                e.error = _errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                if session is not None:
                    session.partitions[(name, p.partition_index)] = None
                if batches:
                    e.ack_error = _acknowledge(
                        ctx, group, member, topic=name, partition=p.partition_index, batches=batches
                    )
                continue
            if batches:
                e.ack_error = e.error


def _acquire(
    ctx: BrokerContext,
    group: str,
    member: str,
    session: ShareSession,
    *,
    max_records: int,
    entries: Entries,
) -> int:
    """Acquire up to ``max_records`` across the session's partitions; how many."""
    got = 0
    keys = list(session.partitions)
    if len(keys) > 1:  # the next fetch starts one partition further (fairness)
        first = keys[0]
        del session.partitions[first]
        session.partitions[first] = None
    for topic, partition in keys:
        if got >= max_records:
            break
        info = ctx.topics.get(topic)
        if info is None:
            session.partitions.pop((topic, partition), None)
            continue
        try:
            sp = ctx.share_groups.share_partition(group, topic, partition)
            ranges, data = sp.acquire(member, max_records - got)
        except (SeglogError, OSError) as exc:
            _entry(entries, info.topic_id, topic, partition).error = _errors.error_code(exc)
            continue
        if ranges:
            e = _entry(entries, info.topic_id, topic, partition)
            e.ranges, e.data = ranges, data
            got += sum(r.last_offset - r.first_offset + 1 for r in ranges)
    return got


def _fetch_response(ctx: BrokerContext, version: int, entries: Entries, code: int = 0) -> Any:
    topics: dict[uuid.UUID, Any] = {}
    for e in entries.values():
        topic = topics.get(e.topic_id)
        if topic is None:
            topic = topics[e.topic_id] = _FTopic(topic_id=e.topic_id, partitions=[])
        leader = ctx.config.node_id if e.error == _errors.NONE else -1
        topic.partitions.append(
            _FPart(
                partition_index=e.partition,
                error_code=e.error,
                error_message=None,
                acknowledge_error_code=e.ack_error,
                acknowledge_error_message=None,
                current_leader=_FPart.LeaderIdAndEpoch(leader_id=leader, leader_epoch=0),
                records=e.data,
                acquired_records=[
                    _FPart.AcquiredRecords(
                        first_offset=r.first_offset,
                        last_offset=r.last_offset,
                        delivery_count=r.delivery_count,
                    )
                    for r in e.ranges
                ],
            )
        )
    return ShareFetchResponse[version](
        throttle_time_ms=0,
        error_code=code,
        error_message=None,
        acquisition_lock_timeout_ms=ctx.share_groups.lock_ms,
        responses=list(topics.values()),
        node_endpoints=[],
    )


def _has_acks(topics: Any) -> bool:
    return any(p.acknowledgement_batches for t in topics for p in t.partitions)


def _close(ctx: BrokerContext, group: str, member: str) -> None:
    """Close the member's share session (if any) and release what it holds."""
    ctx.share_sessions.close(group, member)
    ctx.share_groups.release_member(group, member)


def handle_share_fetch(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> Any | Coroutine[Any, Any, Any]:
    """ShareFetch v1 (see the module docstring): the response at once when records were
    acquired, a partition has an error, or ``MaxWaitMs`` <= 0; else a coroutine waiting
    for records (acknowledgement results, already applied, wait with it, as Kafka's)."""
    version = rctx.api_version
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    entries: Entries = {}
    if not group or not member:
        return _fetch_response(ctx, version, entries, _errors.INVALID_REQUEST)
    if not rctx.allowed(Op.READ, Res.GROUP, group):
        return _fetch_response(ctx, version, entries, _errors.GROUP_AUTHORIZATION_FAILED)
    sessions = ctx.share_sessions
    if epoch == INITIAL_EPOCH:
        if _has_acks(req.topics):
            return _fetch_response(ctx, version, entries, _errors.INVALID_REQUEST)
        _close(ctx, group, member)
        code, session = sessions.open(group, member)
    else:
        code, session = sessions.check(group, member, epoch)
    if session is None:
        return _fetch_response(ctx, version, entries, code)
    _partitions(ctx, rctx, group, member, topics=req.topics, session=session, entries=entries)
    for ft in req.forgotten_topics_data:
        info = ctx.topics.by_id(ft.topic_id)
        if info is not None:
            for p in ft.partitions:
                session.partitions.pop((info.name, p), None)
    if epoch == FINAL_EPOCH:
        _close(ctx, group, member)
        return _fetch_response(ctx, version, entries)
    if epoch != INITIAL_EPOCH:
        session.advance()  # a new session already expects epoch 1
    if req.max_records <= 0:
        return _fetch_response(ctx, version, entries)
    got = _acquire(ctx, group, member, session, max_records=req.max_records, entries=entries)
    if got:
        session.last_served = time.monotonic()
    erred = any(e.error for e in entries.values())
    if got or erred or req.max_wait_ms <= 0 or ctx.shutting_down or not session.partitions:
        return _fetch_response(ctx, version, entries)
    return _long_poll(ctx, version, group, member, session=session, req=req, entries=entries)


async def _long_poll(
    ctx: BrokerContext,
    version: int,
    group: str,
    member: str,
    *,
    session: ShareSession,
    req: Any,
    entries: Entries,
) -> Any:
    """Wait for something to acquire: new records, a release or an acknowledgement
    (the subscriptions' wake futures), a lock expiring (the timeout), or shutdown."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    keys = list(session.partitions)
    session.waiting = True
    try:
        return await _wait_for_records(
            ctx, version, group, member, session=session, req=req, entries=entries,
            deadline=deadline, keys=keys,
        )  # fmt: skip
    finally:
        session.waiting = False


async def _wait_for_records(
    ctx: BrokerContext,
    version: int,
    group: str,
    member: str,
    *,
    session: ShareSession,
    req: Any,
    entries: Entries,
    deadline: float,
    keys: list[tuple[str, int]],
) -> Any:
    loop = asyncio.get_running_loop()
    while True:
        waits: list[asyncio.Future[Any]] = [ctx.topics.waiter(keys)]
        expiry: float | None = None
        for topic, partition in keys:
            with contextlib.suppress(SeglogError, OSError):
                sp = ctx.share_groups.share_partition(group, topic, partition)
                waits.append(asyncio.wrap_future(sp.subscription.wake_future()))
                due = sp.next_lock_expiry_s()
                if due is not None:
                    expiry = due if expiry is None else min(expiry, due)
        try:
            for _ in range(ctx.share_sessions.turn(session)):
                await asyncio.sleep(0)  # those served less recently take theirs first
            got = _acquire(
                ctx, group, member, session, max_records=req.max_records, entries=entries
            )
            if got:
                session.last_served = time.monotonic()
            timeout = deadline - loop.time()
            if expiry is not None:
                timeout = min(timeout, expiry + 0.001)
            if got or deadline <= loop.time() or ctx.shutting_down:
                return _fetch_response(ctx, version, entries)
            await asyncio.wait(waits, timeout=max(timeout, 0.0), return_when="FIRST_COMPLETED")
        finally:
            ctx.topics.discard(waits[0], keys)
            for fut in waits:
                fut.cancel()
            for fut in waits[1:]:  # a LogClosedError seen by no one is not "never retrieved"
                if fut.done() and not fut.cancelled():
                    fut.exception()


def handle_share_acknowledge(ctx: BrokerContext, rctx: RequestContext, req: Any) -> Any:
    """ShareAcknowledge v1 (see the module docstring)."""
    version = rctx.api_version
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    entries: Entries = {}
    code = _errors.NONE
    if not group or not member:
        code = _errors.INVALID_REQUEST
    elif not rctx.allowed(Op.READ, Res.GROUP, group):
        code = _errors.GROUP_AUTHORIZATION_FAILED
    elif epoch == INITIAL_EPOCH:
        code = _errors.INVALID_SHARE_SESSION_EPOCH
    else:
        code, session = ctx.share_sessions.check(group, member, epoch)
        if session is not None:
            _partitions(ctx, rctx, group, member, topics=req.topics, session=None, entries=entries)
            if epoch == FINAL_EPOCH:
                _close(ctx, group, member)
            else:
                session.advance()
    topics: dict[uuid.UUID, Any] = {}
    for e in entries.values():
        topic = topics.get(e.topic_id)
        if topic is None:
            topic = topics[e.topic_id] = _ATopic(topic_id=e.topic_id, partitions=[])
        error = e.error or e.ack_error
        leader = ctx.config.node_id if e.error == _errors.NONE else -1
        topic.partitions.append(
            _APart(
                partition_index=e.partition,
                error_code=error,
                error_message=None,
                current_leader=_APart.LeaderIdAndEpoch(leader_id=leader, leader_epoch=0),
            )
        )
    return ShareAcknowledgeResponse[version](
        throttle_time_ms=0,
        error_code=code,
        error_message=None,
        responses=list(topics.values()),
        node_endpoints=[],
    )
