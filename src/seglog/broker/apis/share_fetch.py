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
``MaxBytes`` bounds the bytes of newly acquired batches (at least one batch, KIP-74;
redelivered ranges are not counted against it); ``MinBytes``: a fetch that acquired fewer
bytes keeps what it holds and waits for more, up to ``MaxWaitMs``.

ShareAcknowledge: the same session and acknowledgement rules without acquiring (epoch 0
is 123: it cannot open a session). Epoch -1 on either closes the session after its
acknowledgements and releases what the member still holds; so does the connection that
opened the session closing (the records are available again at once, not only when
their locks expire).

Partitions named in the request get an entry; the session's other partitions only when
they have records. A partition is checked for READ on its topic when it joins the session.
Session and ACL checks happen when the request arrives (on the event loop); the journal
work, in a worker thread (``share_entries.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any

from seglog.broker.apis.share_entries import (
    AckJob,
    Entries,
    acknowledge_response,
    acquire,
    acquired,
    fetch_response,
    resolve,
    run_acks,
)
from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.coordinator.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from seglog.broker.protocol import errors as _errors
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = ["handle_share_acknowledge", "handle_share_fetch"]


def _has_acks(topics: Any) -> bool:
    return any(p.acknowledgement_batches for t in topics for p in t.partitions)


def handle_share_fetch(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> Any | Coroutine[Any, Any, Any]:
    """ShareFetch v1 (see the module docstring): a request-level error at once; else a
    coroutine answering once records were acquired, a partition has an error, or
    ``MaxWaitMs`` passed (acknowledgement results, applied first, wait with it, as
    Kafka's)."""
    version = rctx.api_version
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    entries: Entries = {}
    if not group or not member:
        return fetch_response(ctx, version, entries, _errors.INVALID_REQUEST)
    if not rctx.allowed(Op.READ, Res.GROUP, group):
        return fetch_response(ctx, version, entries, _errors.GROUP_AUTHORIZATION_FAILED)
    sessions = ctx.share_sessions
    if epoch == INITIAL_EPOCH:
        if _has_acks(req.topics):
            return fetch_response(ctx, version, entries, _errors.INVALID_REQUEST)
        if sessions.close(group, member) is not None:  # a new session replaces the old one
            ctx.share_groups.release_member(group, member)
        code, session = sessions.open(group, member)
        if session is not None:
            opened = session
            rctx.on_connection_close(lambda: _disconnected(ctx, opened))
    else:
        code, session = sessions.check(group, member, epoch)
    if session is None:
        return fetch_response(ctx, version, entries, code)
    jobs = resolve(ctx, rctx, group, topics=req.topics, session=session, entries=entries)
    for ft in req.forgotten_topics_data:
        info = ctx.topics.by_id(ft.topic_id)
        if info is not None:
            for p in ft.partitions:
                session.partitions.pop((info.name, p), None)
    if epoch == FINAL_EPOCH:
        sessions.close(group, member)
    elif epoch != INITIAL_EPOCH:
        session.advance()  # a new session already expects epoch 1
    return _fetch(ctx, version, member, session=session, req=req, entries=entries, jobs=jobs)


def _disconnected(ctx: BrokerContext, session: ShareSession) -> None:
    """The connection that opened ``session`` closed: the session goes, and the records
    the member holds are released (Kafka's share session cache closes a session with its
    connection and releases its acquired records), unless a newer session replaced it."""
    group, member = session.group_id, session.member_id
    if ctx.share_sessions.get(group, member) is session:
        ctx.share_sessions.close(group, member)
        ctx.share_groups.release_member(group, member)


async def _fetch(
    ctx: BrokerContext,
    version: int,
    member: str,
    *,
    session: ShareSession,
    req: Any,
    entries: Entries,
    jobs: list[AckJob],
) -> Any:
    group = session.group_id
    if req.share_session_epoch == FINAL_EPOCH or req.max_records <= 0:
        await run_acks(member, jobs)
        if req.share_session_epoch == FINAL_EPOCH:
            ctx.share_groups.release_member(group, member)  # what the acknowledgements left
        return fetch_response(ctx, version, entries)
    got = await acquire(
        ctx, group, member, session, max_records=req.max_records, max_bytes=req.max_bytes,
        entries=entries, jobs=jobs,
    )  # fmt: skip
    if got:
        session.last_served = time.monotonic()
    erred = any(e.error for e in entries.values())
    if _enough(req, entries) or erred or req.max_wait_ms <= 0 or ctx.shutting_down:
        return fetch_response(ctx, version, entries)
    if not session.partitions:
        return fetch_response(ctx, version, entries)
    session.waiting = True
    try:
        return await _long_poll(ctx, version, member, session=session, req=req, entries=entries)
    finally:
        session.waiting = False


async def _long_poll(
    ctx: BrokerContext,
    version: int,
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
    group, keys = session.group_id, list(session.partitions)
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
            records, size = acquired(entries)
            got = await acquire(
                ctx, group, member, session, max_records=req.max_records - records,
                max_bytes=req.max_bytes - size, entries=entries,
            )  # fmt: skip
            if got:
                session.last_served = time.monotonic()
            timeout = deadline - loop.time()
            if expiry is not None:
                timeout = min(timeout, expiry + 0.001)
            if _enough(req, entries) or deadline <= loop.time() or ctx.shutting_down:
                return fetch_response(ctx, version, entries)
            await asyncio.wait(waits, timeout=max(timeout, 0.0), return_when="FIRST_COMPLETED")
        finally:
            ctx.topics.discard(waits[0], keys)
            for fut in waits:
                fut.cancel()
            for fut in waits[1:]:  # a LogClosedError seen by no one is not "never retrieved"
                if fut.done() and not fut.cancelled():
                    fut.exception()


def _enough(req: Any, entries: Entries) -> bool:
    """Whether the records acquired so far answer the fetch: some, and ``MinBytes`` of
    batches, or as many records or bytes as it allows (nothing more can come)."""
    records, size = acquired(entries)
    if not records:
        return False
    min_bytes, max_records, max_bytes = int(req.min_bytes), int(req.max_records), int(req.max_bytes)
    return size >= min_bytes or records >= max_records or size >= max_bytes


def handle_share_acknowledge(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> Any | Coroutine[Any, Any, Any]:
    """ShareAcknowledge v1 (see the module docstring): a request-level error at once,
    else a coroutine answering once the acknowledgements are applied (durable)."""
    version = rctx.api_version
    group, member, epoch = req.group_id, req.member_id, req.share_session_epoch
    entries: Entries = {}
    if not group or not member:
        return acknowledge_response(ctx, version, entries, _errors.INVALID_REQUEST)
    if not rctx.allowed(Op.READ, Res.GROUP, group):
        return acknowledge_response(ctx, version, entries, _errors.GROUP_AUTHORIZATION_FAILED)
    if epoch == INITIAL_EPOCH:
        return acknowledge_response(ctx, version, entries, _errors.INVALID_SHARE_SESSION_EPOCH)
    code, session = ctx.share_sessions.check(group, member, epoch)
    if session is None:
        return acknowledge_response(ctx, version, entries, code)
    jobs = resolve(ctx, rctx, group, topics=req.topics, session=None, entries=entries)
    if epoch == FINAL_EPOCH:
        ctx.share_sessions.close(group, member)
    else:
        session.advance()
    return _acknowledge(ctx, version, group, member, final=epoch == FINAL_EPOCH, jobs=jobs,
                        entries=entries)  # fmt: skip


async def _acknowledge(
    ctx: BrokerContext,
    version: int,
    group: str,
    member: str,
    *,
    final: bool,
    jobs: list[AckJob],
    entries: Entries,
) -> Any:
    await run_acks(member, jobs)
    if final:
        ctx.share_groups.release_member(group, member)  # what the acknowledgements left
    return acknowledge_response(ctx, version, entries, _errors.NONE)
