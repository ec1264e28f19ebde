"""Produce (API 0): append each partition's record batches as received (compression
included; validation is ``Log.append``'s job), then answer after the durability policy.

Hot path (v3+): the body is parsed from the receive buffer by ``parse_produce`` and each
partition's records reach ``Log.append`` as a memoryview slice of it (no copy in the
broker). Appends happen synchronously, in request order, on the event loop; the wait for
the group-commit fsync is a callback from :class:`DurabilityWaiters` (one cross-thread
wake-up per fsync round), so pipelined and concurrent produces share fsyncs and the
loop never blocks. v0-2 (message sets v0/v1 from clients pinned to old versions) are
decoded by kafka-python and answered with 87 INVALID_RECORD.

Transactional batches (attributes bit 4) are answered once appended, without waiting for
their fsync (requested at once all the same; only the ``__transaction_state`` record
that put the partition in the transaction is waited for, usually durable already:
:meth:`TransactionCoordinator.ongoing_barrier`): their records become durable before the
transaction commits (EndTxn waits for it before PrepareCommit,
:meth:`TransactionCoordinator.end_txn`), a crash before the commit aborts the transaction
(:meth:`TransactionCoordinator.recover`), and no reader sees them earlier, since the high
watermark (and the last stable offset below it) moves only with the durable end.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from kafka.protocol.producer import ProduceResponse

from seglog.broker.context import BrokerContext, RequestContext
from seglog.broker.log.internal_topics import INTERNAL_TOPICS
from seglog.broker.log.producers import BatchIdentity, batch_identity
from seglog.broker.log.schema_validation import invalid_records
from seglog.broker.protocol import errors as _errors
from seglog.broker.protocol.framing import encode_response
from seglog.broker.protocol.produce_wire import encode_produce_response, parse_produce
from seglog.broker.security.authorizer import Op, Res
from seglog.errors import ProtocolError, SeglogError, UnknownTopicError
from seglog.storage import Log, validate_topic_name

__all__ = ["MAX_RECORDS_PER_BATCH", "handle_produce"]

log = logging.getLogger(__name__)

_MAGIC_AT = 16  # same byte in message sets v0/v1 and record batches v2
_ATTRIBUTES_LOW = 22  # low byte of the batch attributes (int16 at 21)
_TRANSACTIONAL = 0x10
_HEADER_BYTES = 61  # record batch v2 header
_DELTA_AND_COUNT = struct.Struct(">i")
MAX_RECORDS_PER_BATCH = 1_000_000
"""Largest recordCount accepted in one record batch (librdkafka's batch.num.messages
maximum): a compressed batch claiming more is 87 INVALID_RECORD before anything is stored,
so a tiny batch cannot take a billion offsets."""

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
    record_errors: tuple[tuple[int, str], ...] = ()  # (batch index, why): KIP-467, v8+
    error_message: str | None = None
    transactional: bool = False  # every batch transactional: answered before the fsync
    barrier: tuple[Log, int] | None = None  # ... but after its transaction's Ongoing record


Records = bytes | bytearray | memoryview
TopicData = Sequence[tuple[str, Sequence[tuple[int, Any]]]]


def _check_headers(records: Records) -> tuple[bool, bool]:
    """One walk of the batch headers: (every batch's recordCount is 1..MAX_RECORDS_PER_BATCH
    and matches lastOffsetDelta, every batch's attributes have bit 4 — transactional —
    set). Headers only; storage validates lengths and CRCs (a bad length stops the walk:
    counts ok, reported by storage as CORRUPT_MESSAGE; not all transactional)."""
    pos, end = 0, len(records)
    transactional = True
    while end - pos >= _HEADER_BYTES:
        (size,) = _DELTA_AND_COUNT.unpack_from(records, pos + 8)
        (delta,) = _DELTA_AND_COUNT.unpack_from(records, pos + 23)
        (count,) = _DELTA_AND_COUNT.unpack_from(records, pos + 57)
        if not 0 < count <= MAX_RECORDS_PER_BATCH or delta != count - 1:
            return False, False
        if size <= 0:
            return True, False
        transactional = transactional and bool(records[pos + _ATTRIBUTES_LOW] & _TRANSACTIONAL)
        pos += 12 + size
    return True, transactional and pos > 0


def _transactional_code(
    ctx: BrokerContext, topic: str, partition: int, ident: BatchIdentity | None
) -> int:
    """A transactional batch (attributes bit 4) must come from an idempotent producer
    (87 INVALID_RECORD otherwise) whose ongoing transaction holds the partition
    (:meth:`TransactionCoordinator.check_produce`: 47 for a fenced epoch, 48 otherwise)."""
    if ident is None:
        return _errors.INVALID_RECORD
    return ctx.transactions.check_produce(ident.producer_id, ident.producer_epoch, topic, partition)


def _append(
    ctx: BrokerContext, rctx: RequestContext, topic: str, partition: int, records: Any
) -> _Result:
    if not rctx.allowed(Op.WRITE, Res.TOPIC, topic):  # before revealing whether it exists
        return _Result(partition, _errors.TOPIC_AUTHORIZATION_FAILED)
    try:
        plog = ctx.topics.cached_log(topic, partition)
        if plog is None:
            validate_topic_name(topic)
            if ctx.topics.get(topic) is None:
                raise UnknownTopicError(f"unknown topic {topic!r}")
            plog = ctx.topics.log(topic, partition)
        if topic in INTERNAL_TOPICS:  # written by the group coordinators only
            return _Result(partition, _errors.INVALID_TOPIC_EXCEPTION)
        if not isinstance(records, bytes | bytearray | memoryview) or not records:
            return _Result(partition, _errors.INVALID_RECORD)
        if len(records) > _MAGIC_AT and records[_MAGIC_AT] in (0, 1):
            # message set v0/v1 (Produce v0-2 from clients pinned to old versions): its
            # messages are shorter than a v2 header, so storage would call it corrupt
            return _Result(partition, _errors.INVALID_RECORD)
        counts_ok, all_transactional = _check_headers(records)
        if not counts_ok:
            return _Result(partition, _errors.INVALID_RECORD)
        check = ctx.schema_validation.get(topic) if ctx.schema_validation else None
        if check is not None:
            refused = invalid_records(ctx.schemas, topic, records, check)
            if refused:
                message = f"{len(refused)} record(s) failed schema validation: {refused[0][1]}"
                return _Result(partition, _errors.INVALID_RECORD, record_errors=tuple(refused),
                               error_message=message)  # fmt: skip
        ident = batch_identity(records)
        transactional = False
        barrier = None
        if records[_ATTRIBUTES_LOW] & _TRANSACTIONAL:
            code = _transactional_code(ctx, topic, partition, ident)
            if code != _errors.NONE:
                return _Result(partition, code)
            transactional = all_transactional
            if ident is not None:
                barrier = ctx.transactions.ongoing_barrier(ident.producer_id)
        if ident is not None:
            code, dup_base, dup_last = ctx.producers.check(topic, partition, ident)
            if code != _errors.NONE:
                return _Result(partition, code)
            if dup_base >= 0:
                log.debug("duplicate batch from producer %d on %s-%d", ident[0], topic, partition)
                return _Result(
                    partition, 0, dup_base, -1, plog.log_start_offset, plog, dup_last + 1,
                    transactional=transactional, barrier=barrier,
                )  # fmt: skip
        info = plog.append(records)
        ctx.metrics.produced(topic, partition, info.record_count, len(records))
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
            transactional=transactional,
            barrier=barrier,
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
                    record_errors=[(i, m) for i, m in r.record_errors],
                    error_message=r.error_message,
                )
                for r in parts
            ],
        )
        for name, parts in results
    ]
    return ProduceResponse[version](responses=topics, throttle_time_ms=0)


def _append_all(
    ctx: BrokerContext, rctx: RequestContext, acks: int, topic_data: TopicData
) -> list[tuple[str, list[_Result]]]:
    results: list[tuple[str, list[_Result]]] = []
    for name, partitions in topic_data:
        parts = []
        for index, records in partitions:
            if acks not in (0, 1, -1):
                parts.append(_Result(index, _errors.INVALID_REQUIRED_ACKS))
            else:
                parts.append(_append(ctx, rctx, name, index, records))
        results.append((name, parts))
    return results


def _check_acks_0(results: list[tuple[str, list[_Result]]]) -> None:
    failed = [r.error_code for _n, parts in results for r in parts if r.error_code]
    if failed:
        # Kafka closes the connection: the producer gets no response to learn from
        raise ProtocolError(f"acks=0 produce failed with error code(s) {sorted(set(failed))}")


def handle_produce(
    ctx: BrokerContext, rctx: RequestContext, req: Any
) -> bytearray | asyncio.Future[bytearray] | None:
    """Produce v3+ gets the request frame undecoded (:func:`_produce_frame`); v0-2 is
    decoded by kafka-python and its message sets v0/v1 get 87 INVALID_RECORD (closing
    would make such clients reconnect forever); acks=0 closes. Returns the encoded
    response (registered with ``encoded``)."""
    version = rctx.api_version
    if isinstance(req, memoryview):
        return _produce_frame(ctx, rctx, req)
    topic_data = [
        (t.name, [(p.index, p.records) for p in t.partition_data]) for t in req.topic_data
    ]
    results = _append_all(ctx, rctx, req.acks, topic_data)
    if req.acks == 0:
        _check_acks_0(results)
        return None
    return encode_response(_response(version, results), rctx.header.correlation_id)


def _produce_frame(
    ctx: BrokerContext, rctx: RequestContext, frame: memoryview
) -> bytearray | asyncio.Future[bytearray] | None:
    """Produce v3+ straight from the request frame: append, then acks=0 → no response;
    acks=1/-1 → the encoded response at once (relaxed flush policy, nothing to wait
    for, or only transactional batches) or a future of it completed after the fsync of
    every partition appended to with batches that are not all transactional.
    Per-partition errors: 3 unknown topic/partition, 17 illegal topic name, 2 corrupt
    batch, 87 invalid record (magic < 2, empty, record count out of range; a record
    failing the topic's schema validation, with its index in ``record_errors``:
    ``log.schema_validation``), 10 batch too
    large, 45 out-of-order sequence, 47 fenced epoch, 21 acks not in (0, 1, -1), 48 a
    transactional batch outside its producer's transaction, 53 (every partition) a
    transactional id without WRITE.
    Raises ProtocolError (connection closed) for a malformed body or a failed acks=0.

    producer_byte_rate: the request's bytes (frame included) are recorded after the append
    (Kafka's ``ClientQuotaManager``); over the quota, the response carries the throttle
    in ``throttle_time_ms`` and the connection is muted for it (acks=0: muted only)."""
    header = rctx.header
    version, correlation_id = header.api_version, header.correlation_id
    body = parse_produce(frame, header.body_offset, version)
    acks = body.acks
    txn_id = body.transactional_id
    if txn_id is not None and not rctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, txn_id):
        results = [  # Kafka: the whole request, before any topic is looked at
            (name, [_Result(index, _errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                    for index, _records in partitions])
            for name, partitions in body.topics
        ]  # fmt: skip
    else:
        results = _append_all(ctx, rctx, acks, body.topics)
    throttle = 0
    if ctx.quotas is not None:
        throttle = ctx.quotas.record_produce(rctx.user, rctx.client_id, len(frame) + 4)
        rctx.mute(throttle)
    if acks == 0:
        _check_acks_0(results)
        return None
    targets: dict[int, tuple[Log, int]] = {}
    if ctx.sync_before_ack:
        for _name, parts in results:
            for r in parts:
                wait = (r.log, r.end_offset)
                if r.transactional:  # durable before its commit: TransactionCoordinator
                    if r.barrier is None:
                        continue
                    wait = r.barrier  # its transaction's Ongoing record
                plog, end = wait
                if plog is not None and plog.high_watermark < end:
                    prev = targets.get(id(plog))
                    if prev is None or prev[1] < end:
                        targets[id(plog)] = (plog, end)
    if not targets:
        return encode_produce_response(version, correlation_id, results, throttle)
    return _after_fsync(ctx, (version, correlation_id, throttle), results, list(targets.values()))


def _after_fsync(
    ctx: BrokerContext,
    answer: tuple[int, int, int],
    results: list[tuple[str, list[_Result]]],
    targets: list[tuple[Log, int]],
) -> asyncio.Future[bytearray]:
    response: asyncio.Future[bytearray] = asyncio.get_running_loop().create_future()
    remaining = len(targets)
    failed: dict[int, BaseException] = {}

    def finish() -> None:
        nonlocal results
        if response.done():  # the connection went away meanwhile
            return
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
        version, correlation_id, throttle = answer
        response.set_result(encode_produce_response(version, correlation_id, results, throttle))

    for plog, end in targets:

        def durable(exc: BaseException | None, plog: Log = plog) -> None:
            nonlocal remaining
            if exc is not None:
                failed[id(plog)] = exc
            remaining -= 1
            if remaining == 0:
                finish()

        ctx.durability.wait(plog, end, durable)
    return response
