"""The partition-level work of ShareFetch and ShareAcknowledge (``share_fetch.py``): the
response's per-partition entries, acknowledgements and acquisitions.

What touches the subscriptions' journals (acknowledging, acquiring: a write each)
runs in a worker thread (``asyncio.to_thread``), never on the event loop, as
``seglog.aio`` does. Acknowledgements are durable before the answer (under the default
policy: one ``Subscription.sync`` per share partition, i.e. an fsync shared by the
fetches that journaled meanwhile, group commit), and a ShareFetch runs that fsync while
it acquires. Acquisitions are journaled but not fsynced for the answer, as Kafka
persists a share partition's state on acknowledgement and not on acquisition: a kill -9
keeps them (page cache), a power loss may lose the last ones, whose records are then
delivered again with a delivery count one lower (at-least-once holds; the next
acknowledgement's fsync covers every earlier line); resolving topics, ACLs and share partitions,
and building the responses, stay on the loop. A request cancelled while its work is in
that thread does not stop it: records it acquired are delivered again once their lock
expires (at-least-once), acknowledgements it applied stay applied.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.share_partition import AckBatch, Acquired, SharePartition
from seglog.broker.coordinator.share_sessions import ShareSession
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.messages.share_group import (
    ShareAcknowledgeResponse,
    ShareFetchResponse,
)
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = [
    "AckJob",
    "Entries",
    "acknowledge_response",
    "acquire",
    "acquired",
    "fetch_response",
    "resolve",
    "run_acks",
]

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
"""(topic id, partition) -> its entry, in the order first met."""
AckJob = tuple[_Entry, SharePartition, list[AckBatch]]
"""One partition's acknowledgements, resolved on the loop, applied in a worker thread."""


def _entry(entries: Entries, topic_id: uuid.UUID, topic: str | None, partition: int) -> _Entry:
    e = entries.get((topic_id, partition))
    if e is None:
        e = entries[(topic_id, partition)] = _Entry(topic_id, topic, partition)
    return e


def resolve(
    ctx: BrokerContext,
    rctx: RequestContext,
    group: str,
    *,
    topics: Any,
    session: ShareSession | None,
    entries: Entries,
) -> list[AckJob]:
    """Resolve the request's partitions into ``entries`` (errors: 100 UNKNOWN_TOPIC_ID,
    29 TOPIC_AUTHORIZATION_FAILED, 3 UNKNOWN_TOPIC_OR_PARTITION), add the good ones to
    ``session`` (None: acknowledge only) and return their acknowledgements to apply."""
    jobs: list[AckJob] = []
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
                    try:
                        sp = ctx.share_groups.share_partition(group, name, p.partition_index)
                    except (SeglogError, OSError) as exc:
                        e.ack_error = _errors.error_code(exc)
                        continue
                    acks = [
                        AckBatch(b.first_offset, b.last_offset, list(b.acknowledge_types))
                        for b in batches
                    ]
                    jobs.append((e, sp, acks))
                continue
            if batches:
                e.ack_error = e.error
    return jobs


def _apply(member: str, jobs: list[AckJob], *, durable: bool) -> None:
    """Worker thread: apply each partition's acknowledgements, setting its error code;
    ``durable``: then fsync each partition's journal once (:func:`_sync`)."""
    for e, sp, acks in jobs:
        try:
            e.ack_error = sp.acknowledge(member, acks, durable=False)
        except (SeglogError, OSError) as exc:
            e.ack_error = _errors.error_code(exc)
    if durable:
        _sync(jobs)


def _sync(jobs: list[AckJob]) -> None:
    """Worker thread: make the journaled acknowledgements of ``jobs`` durable, one
    ``Subscription.sync`` per share partition (group commit: concurrent fetches share
    fsyncs); where it fails, the partition's acknowledgements get its error code."""
    failed: dict[int, int] = {}
    for sp in {id(sp): sp for _e, sp, _acks in jobs}.values():
        try:
            sp.subscription.sync()
        except (SeglogError, OSError) as exc:
            failed[id(sp)] = _errors.error_code(exc)
    for e, sp, _acks in jobs:
        if id(sp) in failed and e.ack_error == _errors.NONE:
            e.ack_error = failed[id(sp)]


async def run_acks(member: str, jobs: list[AckJob]) -> None:
    """Apply ``jobs`` (from :func:`resolve`) off the loop, durably; results land in the
    entries."""
    if jobs:
        await asyncio.to_thread(_apply, member, jobs, durable=True)


Target = tuple[uuid.UUID, str, int, SharePartition]
Outcome = tuple[list[Acquired], bytes] | int


def _acquire_from(
    member: str, targets: list[Target], max_records: int, max_bytes: int
) -> list[Outcome]:
    """Worker thread: acquire up to ``max_records`` records and ``max_bytes`` bytes of
    new batches (at least one batch) across ``targets`` in order; per target its (ranges,
    batches) or an error code."""
    out: list[Outcome] = []
    got = 0
    for *_key, sp in targets:
        if got >= max_records or max_bytes <= 0:
            out.append(([], b""))
            continue
        try:
            ranges, data = sp.acquire(member, max_records - got, durable=False, max_bytes=max_bytes)
        except (SeglogError, OSError) as exc:
            out.append(_errors.error_code(exc))
            continue
        got += sum(r.last_offset - r.first_offset + 1 for r in ranges)
        max_bytes -= len(data)
        out.append((ranges, data))
    return out


def acquired(entries: Entries) -> tuple[int, int]:
    """(records, bytes) acquired into ``entries`` so far."""
    records = sum(r.last_offset - r.first_offset + 1 for e in entries.values() for r in e.ranges)
    return records, sum(len(e.data) for e in entries.values())


async def acquire(
    ctx: BrokerContext,
    group: str,
    member: str,
    session: ShareSession,
    *,
    max_records: int,
    max_bytes: int,
    entries: Entries,
    jobs: list[AckJob] | None = None,
) -> int:
    """Apply the acknowledgements ``jobs`` (None: none) and then acquire up to
    ``max_records`` records and ``max_bytes`` bytes (at least one batch) across the
    session's partitions (the first one moves to the back each time: fairness between
    partitions), added to what ``entries`` hold; how many records were. One acquisition
    of the group at a time (:meth:`ShareSessionCache.acquiring`); the acknowledgements are
    durable when it returns (their fsync runs while it acquires)."""
    jobs = jobs or []
    keys = list(session.partitions)
    if len(keys) > 1:
        del session.partitions[keys[0]]
        session.partitions[keys[0]] = None
    targets: list[Target] = []
    for topic, partition in keys:
        info = ctx.topics.get(topic)
        if info is None:  # deleted since it joined the session
            session.partitions.pop((topic, partition), None)
            continue
        try:
            sp = ctx.share_groups.share_partition(group, topic, partition)
        except (SeglogError, OSError) as exc:
            _entry(entries, info.topic_id, topic, partition).error = _errors.error_code(exc)
            continue
        targets.append((info.topic_id, topic, partition, sp))
    if not targets:
        await run_acks(member, jobs)
        return 0
    syncing: asyncio.Future[None] | None = None
    if jobs:  # journal them, then fsync while the acquisition runs
        await asyncio.to_thread(_apply, member, jobs, durable=False)
        syncing = asyncio.ensure_future(asyncio.to_thread(_sync, jobs))
    try:
        async with ctx.share_sessions.acquiring(group):
            outcomes = await asyncio.to_thread(
                _acquire_from, member, targets, max_records, max_bytes
            )
    finally:
        if syncing is not None:
            await syncing
    got = 0
    for (topic_id, topic, partition, _sp), outcome in zip(targets, outcomes, strict=True):
        if isinstance(outcome, int):
            _entry(entries, topic_id, topic, partition).error = outcome
        elif outcome[0]:
            e = _entry(entries, topic_id, topic, partition)
            e.ranges = [*e.ranges, *outcome[0]]
            e.data = e.data + outcome[1] if e.data else outcome[1]
            got += sum(r.last_offset - r.first_offset + 1 for r in outcome[0])
    return got


def fetch_response(ctx: BrokerContext, version: int, entries: Entries, code: int = 0) -> Any:
    """The ShareFetch response of ``entries`` (top-level error ``code``)."""
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


def acknowledge_response(ctx: BrokerContext, version: int, entries: Entries, code: int) -> Any:
    """The ShareAcknowledge response of ``entries`` (top-level error ``code``)."""
    topics: dict[uuid.UUID, Any] = {}
    for e in entries.values():
        topic = topics.get(e.topic_id)
        if topic is None:
            topic = topics[e.topic_id] = _ATopic(topic_id=e.topic_id, partitions=[])
        leader = ctx.config.node_id if e.error == _errors.NONE else -1
        topic.partitions.append(
            _APart(
                partition_index=e.partition,
                error_code=e.error or e.ack_error,
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
