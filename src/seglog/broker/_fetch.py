"""Fetch (API 1): stored record batches returned unchanged, with long poll.

Limits follow KIP-74: ``max_bytes`` for the response and ``partition_max_bytes`` per
partition, except that the first batch of the first non-empty partition is returned even
when larger. Long poll: when fewer than ``min_bytes`` are available, wait up to
``max_wait_ms``, woken by ``Log.on_append`` (no polling). No fetch sessions (KIP-227):
every response has ``session_id`` 0, so clients send full fetch requests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, NamedTuple

from kafka.protocol.consumer import FetchResponse

from seglog.broker import _errors
from seglog.broker._context import BrokerContext
from seglog.errors import SeglogError

__all__ = ["handle_fetch"]

_FETCH_SESSION_ID_NOT_FOUND = 70
_Topic = FetchResponse.FetchableTopicResponse
_Partition = _Topic.PartitionData


class _Wanted(NamedTuple):
    topic: str | None  # None: unknown topic id
    topic_id: uuid.UUID | None
    partition: int
    fetch_offset: int
    max_bytes: int


def _plan(ctx: BrokerContext, req: Any, version: int) -> list[_Wanted]:
    wanted = []
    for t in req.topics:
        if version >= 13:
            info = ctx.topics.by_id(t.topic_id)
            name, topic_id = (None if info is None else info.name), t.topic_id
        else:
            name, topic_id = t.topic, None
        for p in t.partitions:
            wanted.append(
                _Wanted(name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes)
            )
    return wanted


def _read(ctx: BrokerContext, wanted: list[_Wanted], max_bytes: int) -> tuple[list[Any], int, bool]:
    """Per-partition response entries, total record bytes, whether any partition erred."""
    out = []
    total = 0
    erred = False
    remaining = max_bytes
    for w in wanted:
        code, hw, start, data = _errors.NONE, -1, -1, b""
        if w.topic is None:
            code = _errors.UNKNOWN_TOPIC_ID
        else:
            try:
                plog = ctx.topics.log(w.topic, w.partition)
                hw, start = plog.high_watermark, plog.log_start_offset
                if w.fetch_offset < start or w.fetch_offset > plog.log_end_offset:
                    code = _errors.OFFSET_OUT_OF_RANGE
                elif w.fetch_offset < hw and remaining > 0:
                    limit = min(w.max_bytes, remaining)
                    data = plog.read(w.fetch_offset, max(limit, 1), upper=hw)
                    if len(data) > limit and total > 0:
                        data = b""  # only the first non-empty partition may overshoot
            except SeglogError as exc:
                code = _errors.error_code(exc)
        erred = erred or code != _errors.NONE
        total += len(data)
        remaining -= len(data)
        out.append((w, code, hw, start, data))
    return out, total, erred


def _response(version: int, entries: list[Any], error_code: int = 0) -> Any:
    topics: list[Any] = []
    index: dict[tuple[str | None, uuid.UUID | None], Any] = {}
    for w, code, hw, start, data in entries:
        key = (w.topic, w.topic_id)
        topic = index.get(key)
        if topic is None:
            if version >= 13:
                topic = _Topic(topic_id=w.topic_id, partitions=[])
            else:
                topic = _Topic(topic=w.topic, partitions=[])
            index[key] = topic
            topics.append(topic)
        topic.partitions.append(
            _Partition(
                partition_index=w.partition,
                error_code=code,
                high_watermark=hw,
                last_stable_offset=hw,
                log_start_offset=start,
                aborted_transactions=[],
                preferred_read_replica=-1,
                records=data,
            )
        )
    return FetchResponse[version](
        throttle_time_ms=0, error_code=error_code, session_id=0, responses=topics, node_endpoints=[]
    )


def handle_fetch(ctx: BrokerContext, req: Any, version: int) -> Any | Coroutine[Any, Any, Any]:
    """Answer at once when ``min_bytes`` are available, a partition has an error (1
    OFFSET_OUT_OF_RANGE, 3 UNKNOWN_TOPIC_OR_PARTITION, 100 UNKNOWN_TOPIC_ID) or
    ``max_wait_ms`` <= 0; else long-poll. A fetch session id other than 0 gets 70."""
    if version >= 7 and req.session_id != 0:
        return _response(version, [], _FETCH_SESSION_ID_NOT_FOUND)
    wanted = _plan(ctx, req, version)
    max_bytes = req.max_bytes if version >= 3 else 0x7FFFFFFF
    entries, total, erred = _read(ctx, wanted, max_bytes)
    if total >= req.min_bytes or erred or req.max_wait_ms <= 0 or ctx.shutting_down:
        return _response(version, entries)
    return _long_poll(
        ctx,
        version,
        wanted=wanted,
        max_bytes=max_bytes,
        min_bytes=req.min_bytes,
        max_wait_ms=req.max_wait_ms,
    )


async def _long_poll(
    ctx: BrokerContext,
    version: int,
    *,
    wanted: list[_Wanted],
    max_bytes: int,
    min_bytes: int,
    max_wait_ms: int,
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_ms / 1000
    keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    while True:
        fut = ctx.topics.waiter(keys)  # registered before reading: no lost wake-up
        try:
            entries, total, erred = _read(ctx, wanted, max_bytes)
            timeout = deadline - loop.time()
            if total >= min_bytes or erred or timeout <= 0 or ctx.shutting_down:
                return _response(version, entries)
            await asyncio.wait((fut,), timeout=timeout)
        finally:
            ctx.topics.discard(fut, keys)
            fut.cancel()
