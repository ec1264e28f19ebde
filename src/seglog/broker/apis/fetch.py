"""Fetch (API 1): stored record batches returned unchanged, with long poll.

Limits follow KIP-74: ``max_bytes`` for the response and ``partition_max_bytes`` per
partition, except that the first batch of the first non-empty partition is returned even
when larger (even when a limit is 0, as Kafka reads with ``minOneMessage``). Long poll:
when fewer than ``min_bytes`` are available, wait up to ``max_wait_ms``, woken by
``Log.on_append`` (no polling). No fetch sessions (KIP-227): every response has
``session_id`` 0, so clients send full fetch requests.

Record bytes reach the socket without a copy in the broker: each partition's batches are
read with one ``os.pread`` (``Log.read``), the response is encoded by kafka-python with a
16-byte placeholder in each ``records`` field, and the frame goes out as pieces (the
encoded head, the records as read, the rest), with the size fields fixed up. Encoding the
records themselves cost ~210 us per MiB (kafka-python copies them into a growing buffer;
v12, CPU time on this machine: 307 us for a 1 MiB response against 88 us empty).

Tiered storage (KIP-405): a fetch offset in a remote segment the local cache lacks is
downloaded (and checked) in a thread first, never on the event loop (Kafka's remote log
reader threads); the read then serves the cached copy like a local segment.
"""

from __future__ import annotations

import asyncio
import functools
import os
import struct
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple

from kafka.protocol.consumer import FetchResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.framing import encode_response
from seglog.broker.protocol.reader import uvarint_bytes
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import SeglogError

__all__ = ["handle_fetch"]

_MARK_BYTES = 16
READ_COMMITTED = 1
"""Fetch/ListOffsets isolation level 1: only committed transactional records (KIP-98)."""
_I32 = struct.Struct(">i")
Pieces = list[bytes | bytearray | memoryview]
"""A response frame in pieces, written in order."""
_Topic = FetchResponse.FetchableTopicResponse
_Partition = _Topic.PartitionData
_Aborted = _Partition.AbortedTransaction


class _Wanted(NamedTuple):
    topic: str | None  # None: unknown topic id
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    max_bytes: int
    denied: bool = False  # no READ on the topic (29), decided when the request arrived


def _plan(ctx: BrokerContext, rctx: RequestContext, req: Any, version: int) -> list[_Wanted]:
    wanted = []
    for t in req.topics:
        if version >= 13:
            info = ctx.topics.by_id(t.topic_id)
            name, topic_id = (None if info is None else info.name), t.topic_id
        else:
            name, topic_id = t.topic, None
        for p in t.partitions:
            denied = name is not None and not rctx.allowed(Op.READ, Res.TOPIC, name)
            wanted.append(
                _Wanted(name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes, denied)
            )
    return wanted


class _Entry(NamedTuple):
    wanted: _Wanted
    code: int
    high_watermark: int
    log_start_offset: int
    data: bytes
    last_stable_offset: int = -1
    aborted: list[tuple[int, int]] | None = None  # read_committed only (else null)


def _read(
    ctx: BrokerContext, wanted: list[_Wanted], max_bytes: int, read_committed: bool = False
) -> tuple[list[_Entry], int, bool]:
    """Per-partition response entries, total record bytes, whether any partition erred.
    ``read_committed`` (isolation level 1): records below the last stable offset only,
    with the aborted transactions (producer id, first offset) from the fetch offset on
    (Kafka's ``FetchResponse.AbortedTransaction``, read from the ``.txnindex``)."""
    out = []
    total = 0
    erred = False
    remaining = max_bytes
    for w in wanted:
        code, hw, start, data = _errors.NONE, -1, -1, b""
        lso = -1
        aborted: list[tuple[int, int]] | None = [] if read_committed else None
        if w.topic is None:
            code = _errors.UNKNOWN_TOPIC_ID
        elif w.denied:
            code = _errors.TOPIC_AUTHORIZATION_FAILED
        else:
            try:
                plog = ctx.topics.log(w.topic, w.partition)
                hw, start = plog.high_watermark, plog.log_start_offset
                lso = min(plog.last_stable_offset, hw)
                upper = lso if read_committed else hw
                if w.fetch_offset < start or w.fetch_offset > plog.log_end_offset:
                    code = _errors.OFFSET_OUT_OF_RANGE
                elif w.fetch_offset < upper and (remaining > 0 or total == 0):
                    # total 0: the first batch comes back even with max_bytes 0 (KIP-74)
                    limit = min(w.max_bytes, remaining)
                    data = plog.read(w.fetch_offset, max(limit, 1), upper=upper)
                    if len(data) > limit and total > 0:
                        data = b""  # only the first non-empty partition may overshoot
                    if data and read_committed:
                        aborted = plog.aborted_transactions(w.fetch_offset, upper)
            except SeglogError as exc:
                code = _errors.error_code(exc)
        erred = erred or code != _errors.NONE
        total += len(data)
        remaining -= len(data)
        out.append(_Entry(w, code, hw, start, data, lso, aborted))
    return out, total, erred


def _response(
    version: int,
    entries: list[_Entry],
    marks: list[tuple[bytes, bytes]],
    error_code: int = 0,
    throttle_ms: int = 0,
) -> Any:
    """The response body; each non-empty ``records`` is a placeholder appended to
    ``marks`` as (placeholder, records)."""
    topics: list[Any] = []
    index: dict[tuple[str | None, uuid.UUID | None], Any] = {}
    for w, code, hw, start, data, lso, aborted in entries:
        key = (w.topic, w.topic_id)
        topic = index.get(key)
        if topic is None:
            if version >= 13:
                topic = _Topic(topic_id=w.topic_id, partitions=[])
            else:
                topic = _Topic(topic=w.topic, partitions=[])
            index[key] = topic
            topics.append(topic)
        records = data
        if data:
            records = os.urandom(_MARK_BYTES - 4) + _I32.pack(len(marks))
            marks.append((records, data))
        topic.partitions.append(
            _Partition(
                partition_index=w.partition,
                error_code=code,
                high_watermark=hw,
                last_stable_offset=lso,
                log_start_offset=start,
                aborted_transactions=None
                if aborted is None
                else [_Aborted(producer_id=pid, first_offset=first) for pid, first in aborted],
                preferred_read_replica=-1,
                records=records,
            )
        )
    return FetchResponse[version](
        throttle_time_ms=throttle_ms,
        error_code=error_code,
        session_id=0,
        responses=topics,
        node_endpoints=[],
    )


def _encode(
    version: int,
    correlation_id: int,
    entries: list[_Entry],
    error_code: int = 0,
    throttle_ms: int = 0,
) -> Pieces:
    """The framed response: kafka-python's encoding with each placeholder (and its length
    prefix: compact uvarint 17 in flexible versions, else int32 16) replaced by the real
    length and the records as read, as separate pieces."""
    marks: list[tuple[bytes, bytes]] = []
    encoded = encode_response(
        _response(version, entries, marks, error_code, throttle_ms), correlation_id
    )
    if not marks:
        return [encoded]
    flexible = bool(FetchResponse.flexible_version_q(version))
    prefix_bytes = 1 if flexible else 4
    found = sorted((encoded.find(mark), mark, data) for mark, data in marks)
    view = memoryview(encoded)
    pieces: Pieces = []
    pos = 0
    size = len(encoded) - 4
    for at, _mark, data in found:
        if at < pos:  # cannot happen: 16 random bytes do not occur elsewhere by chance
            raise RuntimeError("fetch records placeholder not found in the encoded response")
        length = uvarint_bytes(len(data) + 1) if flexible else _I32.pack(len(data))
        pieces += (view[pos : at - prefix_bytes], length, data)
        size += len(length) - prefix_bytes + len(data) - _MARK_BYTES
        pos = at + _MARK_BYTES
    pieces.append(view[pos:])
    head = bytearray(pieces[0])
    _I32.pack_into(head, 0, size)
    pieces[0] = head
    return pieces


def handle_fetch(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> Pieces | Coroutine[Any, Any, Pieces]:
    """The framed response (in pieces) at once when ``min_bytes`` are available, a
    partition has an error (1 OFFSET_OUT_OF_RANGE, 3 UNKNOWN_TOPIC_OR_PARTITION, 100
    UNKNOWN_TOPIC_ID) or ``max_wait_ms`` <= 0; else a coroutine long-polling for it. A
    fetch session id other than 0 gets 70."""
    version, correlation_id = rctx.api_version, rctx.header.correlation_id
    if version >= 7 and req.session_id != 0:
        return _encode(version, correlation_id, [], _errors.FETCH_SESSION_ID_NOT_FOUND)
    wanted = _plan(ctx, rctx, req, version)
    max_bytes = req.max_bytes if version >= 3 else 0x7FFFFFFF
    if ctx.quotas is not None:
        cap = ctx.quotas.fetch_cap(rctx.user, rctx.client_id)
        max_bytes = max_bytes if cap is None else min(max_bytes, cap)
    cold = _cold_remote(ctx, wanted)
    if cold:  # tiered history not in the local cache: downloaded off the event loop first
        return _after_download(ctx, rctx, req, wanted, max_bytes, cold)
    return _answer_or_wait(ctx, rctx, req, wanted, max_bytes)


def _answer_or_wait(
    ctx: BrokerContext, rctx: RequestContext, req: Any, wanted: list[_Wanted], max_bytes: int
) -> Pieces | Coroutine[Any, Any, Pieces]:
    """Read ``wanted`` now: the response when it holds ``min_bytes`` (or an error, or the
    request does not wait, or the broker is shutting down), else the long poll that
    answers when it does or ``max_wait_ms`` passes."""
    read_committed = req.isolation_level == READ_COMMITTED
    entries, total, erred = _read(ctx, wanted, max_bytes, read_committed)
    if total >= req.min_bytes or erred or req.max_wait_ms <= 0 or ctx.shutting_down:
        return _answer(ctx, rctx, entries, total)
    return _long_poll(
        ctx,
        rctx,
        wanted=wanted,
        max_bytes=max_bytes,
        min_bytes=req.min_bytes,
        max_wait_ms=req.max_wait_ms,
        read_committed=read_committed,
    )


def _cold_remote(ctx: BrokerContext, wanted: list[_Wanted]) -> list[Callable[[], None]]:
    """For each partition whose fetch offset lies in a tiered segment the remote cache
    lacks: the download to run in a thread (Kafka's remote log reader threads). A fetch
    in a tiered segment also starts the download of the next one in the background
    (read-ahead: a consumer reading history sequentially finds it cached)."""
    cold: list[Callable[[], None]] = []
    for w in wanted:
        if w.topic is None or w.denied:
            continue
        try:
            plog = ctx.topics.log(w.topic, w.partition)
        except SeglogError:
            continue
        tier = plog.remote_tier
        if tier is None:
            continue
        local = plog.local_log_start_offset
        if not plog.log_start_offset <= w.fetch_offset < local:
            continue
        interval = plog.config.index_interval_bytes
        if not tier.is_cached(w.fetch_offset, local):
            cold.append(functools.partial(tier.prefetch, w.fetch_offset, local, interval))
        ahead = tier.next_to_prefetch(w.fetch_offset, local)
        if ahead is not None and (tier, ahead) not in _READ_AHEAD:
            _READ_AHEAD.add((tier, ahead))
            task = asyncio.get_running_loop().run_in_executor(
                None, tier.prefetch, ahead, local, interval
            )
            task.add_done_callback(functools.partial(_read_ahead_done, (tier, ahead)))
    return cold


_READ_AHEAD: set[tuple[Any, int]] = set()
"""(tier, base offset) of the read-ahead downloads running."""


def _read_ahead_done(key: tuple[Any, int], fut: asyncio.Future[None]) -> None:
    _READ_AHEAD.discard(key)
    if not fut.cancelled():
        fut.exception()  # retrieved: a failed read-ahead shows when the segment is read


async def _after_download(  # noqa: PLR0917 (the fetch's pieces, passed on)
    ctx: BrokerContext,
    rctx: RequestContext,
    req: Any,
    wanted: list[_Wanted],
    max_bytes: int,
    cold: list[Callable[[], None]],
) -> Pieces:
    """Download the cold remote segments in threads, then answer as ``handle_fetch``
    does (a failed download shows as the partition's error when it is read)."""
    await asyncio.gather(*(asyncio.to_thread(fn) for fn in cold), return_exceptions=True)
    pieces = _answer_or_wait(ctx, rctx, req, wanted, max_bytes)
    return pieces if isinstance(pieces, list) else await pieces


async def _long_poll(
    ctx: BrokerContext,
    rctx: RequestContext,
    *,
    wanted: list[_Wanted],
    max_bytes: int,
    min_bytes: int,
    max_wait_ms: int,
    read_committed: bool,
) -> Pieces:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    ctx.metrics.fetches_waiting += 1
    try:
        while True:
            fut = ctx.topics.waiter(keys)  # registered before reading: no lost wake-up
            try:
                entries, total, erred = _read(ctx, wanted, max_bytes, read_committed)
                timeout = deadline - loop.time()
                if total >= min_bytes or erred or timeout <= 0 or ctx.shutting_down:
                    return _answer(ctx, rctx, entries, total)
                await asyncio.wait((fut,), timeout=timeout)
            finally:
                ctx.topics.discard(fut, keys)
                fut.cancel()
    finally:
        ctx.metrics.fetches_waiting -= 1


def _answer(ctx: BrokerContext, rctx: RequestContext, entries: list[_Entry], total: int) -> Pieces:
    """The response to send. consumer_byte_rate (Kafka's ``ClientQuotaManager``): its
    record bytes are recorded; when that puts the client over its quota they are taken
    back and the answer is an empty response with the throttle in ``throttle_time_ms``
    (no partitions: the client fetches the same offsets again), and the connection is
    muted for it (KIP-219), as Kafka's throttled fetch."""
    version, correlation_id = rctx.api_version, rctx.header.correlation_id
    if ctx.quotas is not None and total > 0:
        throttle = ctx.quotas.record_fetch(rctx.user, rctx.client_id, total)
        if throttle > 0:
            ctx.quotas.unrecord_fetch(rctx.user, rctx.client_id, total)
            rctx.mute(throttle)
            return _encode(version, correlation_id, [], throttle_ms=throttle)
    _count(ctx, entries)
    return _encode(version, correlation_id, entries)


def _count(ctx: BrokerContext, entries: list[_Entry]) -> None:
    """Bytes and records sent, per partition (metrics)."""
    for e in entries:
        if e.data and e.wanted.topic is not None:
            ctx.metrics.fetched(e.wanted.topic, e.wanted.partition, e.data)
