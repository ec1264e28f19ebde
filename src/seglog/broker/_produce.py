"""Produce (API 0): append each partition's record batches as received (compression
included; validation is ``Log.append``'s job), then answer after the durability policy.

Appends happen synchronously, in request order, on the event loop; only the wait for the
group-commit fsync (``Log.sync_future`` wrapped with ``asyncio.wrap_future``) is
asynchronous, so pipelined and concurrent produce requests share fsyncs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Coroutine
from typing import Any, NamedTuple

from kafka.protocol.producer import ProduceResponse

from seglog.broker import _errors
from seglog.broker._context import BrokerContext
from seglog.broker._producers import batch_identity
from seglog.errors import ProtocolError, SeglogError, UnknownTopicError
from seglog.storage import Log, validate_topic_name

__all__ = ["handle_produce"]

log = logging.getLogger(__name__)

_MAGIC_AT = 16  # same byte in message sets v0/v1 and record batches v2
_Topic = ProduceResponse.TopicProduceResponse
_Partition = _Topic.PartitionProduceResponse


class _Result(NamedTuple):
    partition: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    log: Log | None = None  # to wait for: durable end offset >= end_offset
    end_offset: int = -1


def _append(ctx: BrokerContext, topic: str, partition: int, records: Any) -> _Result:
    try:
        validate_topic_name(topic)
        if ctx.topics.get(topic) is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        plog = ctx.topics.log(topic, partition)
        if not isinstance(records, bytes | bytearray | memoryview) or not records:
            return _Result(partition, _errors.INVALID_RECORD)
        if len(records) > _MAGIC_AT and records[_MAGIC_AT] in (0, 1):
            # message set v0/v1 (Produce v0-2 from clients pinned to old versions): its
            # messages are shorter than a v2 header, so storage would call it corrupt
            return _Result(partition, _errors.INVALID_RECORD)
        ident = batch_identity(bytes(records[:61]))
        if ident is not None:
            code, dup_base, dup_last = ctx.producers.check(topic, partition, ident)
            if code != _errors.NONE:
                return _Result(partition, code)
            if dup_base >= 0:
                log.debug("duplicate batch from producer %d on %s-%d", ident[0], topic, partition)
                return _Result(
                    partition, 0, dup_base, -1, plog.log_start_offset, plog, dup_last + 1
                )
        info = plog.append(records)
        if ident is not None:
            ctx.producers.record(topic, partition, ident, info.base_offset, info.last_offset)
        return _Result(
            partition,
            0,
            info.base_offset,
            info.log_append_time_ms,
            plog.log_start_offset,
            plog,
            info.last_offset + 1,
        )
    except (SeglogError, OSError) as exc:
        return _Result(partition, _errors.error_code(exc))


def _response(version: int, results: list[tuple[str, list[_Result]]]) -> Any:
    topics = [
        _Topic(
            name=name,
            partition_responses=[
                _Partition(
                    index=r.partition,
                    error_code=r.error_code,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.log_append_time_ms,
                    log_start_offset=r.log_start_offset,
                    record_errors=[],
                    error_message=None,
                )
                for r in parts
            ],
        )
        for name, parts in results
    ]
    return ProduceResponse[version](responses=topics, throttle_time_ms=0)


def handle_produce(
    ctx: BrokerContext, req: Any, version: int
) -> Any | Coroutine[Any, Any, Any] | None:
    """Append, then: acks=0 → no response; acks=1/-1 → response after the fsync of every
    appended partition under the default policy (at once under flush.messages/flush.ms).
    Per-partition errors: 3 unknown topic/partition, 17 illegal topic name, 2 corrupt
    batch, 87 invalid record (magic < 2, empty), 10 batch too large, 45 out-of-order
    sequence, 47 fenced epoch, 21 acks not in (0, 1, -1)."""
    acks = req.acks
    results: list[tuple[str, list[_Result]]] = []
    for topic in req.topic_data:
        parts = []
        for p in topic.partition_data:
            if acks not in (0, 1, -1):
                parts.append(_Result(p.index, _errors.INVALID_REQUIRED_ACKS))
            else:
                parts.append(_append(ctx, topic.name, p.index, p.records))
        results.append((topic.name, parts))
    if acks == 0:
        failed = [r.error_code for _n, parts in results for r in parts if r.error_code]
        if failed:
            # Kafka closes the connection: the producer gets no response to learn from
            raise ProtocolError(f"acks=0 produce failed with error code(s) {sorted(set(failed))}")
        return None
    if not ctx.sync_before_ack:
        return _response(version, results)
    targets: dict[int, tuple[Log, int]] = {}
    for _name, parts in results:
        for r in parts:
            if r.log is not None and r.log.high_watermark < r.end_offset:
                prev = targets.get(id(r.log))
                if prev is None or prev[1] < r.end_offset:
                    targets[id(r.log)] = (r.log, r.end_offset)
    if not targets:
        return _response(version, results)
    return _await_sync(version, results, list(targets.values()))


def _durable(
    loop: asyncio.AbstractEventLoop, sync: concurrent.futures.Future[int]
) -> asyncio.Future[int]:
    """``asyncio.wrap_future`` without cancel propagation: when a client disconnects, the
    waiting task is cancelled, but the storage's group-commit future must stay untouched
    (its sync thread completes it with ``set_result``, which a cancelled future refuses)."""
    fut: asyncio.Future[int] = loop.create_future()

    def settle(done: concurrent.futures.Future[int]) -> None:
        exc = done.exception()
        if exc is None:
            loop.call_soon_threadsafe(_settle, fut, done.result(), None)
        else:
            loop.call_soon_threadsafe(_settle, fut, -1, exc)

    sync.add_done_callback(settle)
    return fut


def _settle(fut: asyncio.Future[int], result: int, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(result)
    else:
        fut.set_exception(exc)


async def _await_sync(
    version: int, results: list[tuple[str, list[_Result]]], targets: list[tuple[Log, int]]
) -> Any:
    loop = asyncio.get_running_loop()
    outcomes = await asyncio.gather(
        *(_durable(loop, plog.sync_future(end)) for plog, end in targets),
        return_exceptions=True,
    )
    failed = {
        id(plog): outcome
        for (plog, _end), outcome in zip(targets, outcomes, strict=True)
        if isinstance(outcome, BaseException)
    }
    if failed:
        for exc in failed.values():
            log.error("fsync failed: %s", exc)
        results = [
            (
                name,
                [
                    r._replace(error_code=_errors.error_code(failed[id(r.log)]), base_offset=-1)
                    if r.log is not None and id(r.log) in failed
                    else r
                    for r in parts
                ],
            )
            for name, parts in results
        ]
    return _response(version, results)
